/* fdstore.c - the service manager's fd store; see fdstore.h. */
#include "fdstore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

static bool ours(const char *name)
{
	return strncmp(name, "arena.", 6) == 0 || strncmp(name, "state.", 6) == 0;
}

static void free_names(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

int vad_fdstore_take(struct vad_stored *out, char *err, size_t err_len)
{
	memset(out, 0, sizeof(*out));
	char **names = NULL;
	int n = sd_listen_fds_with_names(0, &names);
	if (n < 0) {
		snprintf(err, err_len, "sd_listen_fds_with_names: %s", strerror(-n));
		return -1;
	}
	if (n == 0) {
		free_names(names);
		return 0;
	}
	int rc = 0;
	size_t others = 0;
	char *keep = calloc(1, 1);
	out->fds = calloc((size_t)n, sizeof(*out->fds));
	if (!out->fds || !keep) {
		snprintf(err, err_len, "out of memory taking the stored fds");
		rc = -1;
		goto done;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names && names[i] ? names[i] : "unknown";
		int fd = SD_LISTEN_FDS_START + i;
		if (!ours(name)) {
			if ((size_t)i != others) {
				snprintf(err, err_len,
					 "passed fd %d (%s) comes after vad's stored fds: a socket "
					 "must come first",
					 fd, name);
				rc = -1;
				goto done;
			}
			others++;
			size_t len = strlen(keep) + strlen(name) + 2;
			char *k = realloc(keep, len);
			if (!k) {
				rc = -1;
				snprintf(err, err_len, "out of memory taking the stored fds");
				goto done;
			}
			keep = k;
			if (keep[0])
				strcat(keep, ":");
			strcat(keep, name);
			continue;
		}
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		struct vad_stored_fd *s = &out->fds[out->n++];
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->fd = fd;
	}
	/* What is left is listen.c's: its sd_listen_fds sees only the sockets. */
	if (others) {
		char num[24];
		snprintf(num, sizeof(num), "%zu", others);
		setenv("LISTEN_FDS", num, 1);
		setenv("LISTEN_FDNAMES", keep, 1);
	} else {
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_FDNAMES");
		unsetenv("LISTEN_PID");
	}
done:
	free(keep);
	if (rc)
		vad_fdstore_free(out);
	free_names(names);
	return rc;
}

int vad_fdstore_claim(struct vad_stored *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->fds[i].fd >= 0 && strcmp(s->fds[i].name, name) == 0) {
			int fd = s->fds[i].fd;
			s->fds[i].fd = -1;
			return fd;
		}
	}
	return -1;
}

void vad_fdstore_free(struct vad_stored *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->fds[i].fd >= 0)
			close(s->fds[i].fd);
	free(s->fds);
	memset(s, 0, sizeof(*s));
}

bool vad_fdstore_available(void)
{
	const char *e = getenv("NOTIFY_SOCKET");
	return e && *e;
}

int vad_fdstore_put(int fd, const char *name, char *err, size_t err_len)
{
	char msg[VAD_FDNAME_MAX + 32];
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
	int rc = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
	if (rc > 0)
		return 0;
	snprintf(err, err_len, "cannot hand %s to the service manager's fd store: %s", name,
		 rc < 0 ? strerror(-rc) : "no $NOTIFY_SOCKET");
	return -1;
}

void vad_fdstore_remove(const char *name)
{
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", name);
}
