/* uid_peers.c - clients that run as other real uids; see uid_peers.h. */
#include "uid_peers.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vtassert.h"

static bool id_unused(unsigned id)
{
	return !getpwuid((uid_t)id) && !getgrgid((gid_t)id);
}

int vt_pick_unused_ids(unsigned first, unsigned *ids, size_t n)
{
	unsigned next = first;
	for (size_t i = 0; i < n; i++) {
		while (next < first + 1000 && !id_unused(next))
			next++;
		if (next >= first + 1000) {
			fprintf(stderr, "no unused ids from %u to %u\n", first, first + 999);
			return -1;
		}
		ids[i] = next++;
	}
	return 0;
}

void vt_peer_start(unsigned id, const gid_t *groups, size_t n_groups, vt_peer_fn fn, void *ctx,
		   struct vt_peer *p)
{
	int down[2], up[2];
	assert_int_equal(0, pipe2(down, O_CLOEXEC));
	assert_int_equal(0, pipe2(up, O_CLOEXEC));
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(down[1]);
		close(up[0]);
		VT_CHILD_CHECK(setgroups(n_groups, groups) == 0 && setresgid(id, id, id) == 0 &&
				   setresuid(id, id, id) == 0,
			       "cannot become uid and gid %u: %s", id, strerror(errno));
		fn(ctx, down[0], up[1]);
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	*p = (struct vt_peer){.pid = pid, .to = down[1], .from = up[0]};
}

const char *vt_peer_expect(struct vt_peer *p, const char *word, char *buf, size_t len)
{
	if (vt_pipe_recv(p->from, buf, len, VT_PEER_LINE_TIMEOUT) < 0)
		fail_msg("no \"%s\" from child %d (it failed: see its message above)", word,
			 (int)p->pid);
	size_t n = strlen(word);
	if (strncmp(buf, word, n) != 0)
		fail_msg("child %d said \"%s\", expected \"%s\"", (int)p->pid, buf, word);
	return buf[n] == ' ' ? buf + n + 1 : buf + n;
}

void vt_peer_send(struct vt_peer *p, const char *line)
{
	assert_int_equal(0, vt_pipe_send(p->to, line));
}

void vt_peer_finish(struct vt_peer *p, const char *what)
{
	close(p->to);
	int rc = vt_wait_child(p->pid, vt_timeout_ms(60000));
	close(p->from);
	if (rc != 0)
		fail_msg("the %s (child %d) exited with %d", what, (int)p->pid, rc);
}

void vt_child_send(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	VT_CHILD_CHECK(vt_pipe_send(fd, line) == 0, "cannot send \"%s\" to the test", line);
}

const char *vt_child_expect(int fd, const char *word, char *buf, size_t len)
{
	VT_CHILD_CHECK(vt_pipe_recv(fd, buf, len, VT_PEER_LINE_TIMEOUT) >= 0,
		       "no \"%s\" from the test", word);
	size_t n = strlen(word);
	VT_CHILD_CHECK(strncmp(buf, word, n) == 0, "got \"%s\", expected \"%s\"", buf, word);
	return buf[n] == ' ' ? buf + n + 1 : buf + n;
}

vad_client *vt_child_connect(const struct vt_daemon *d, const char *name)
{
	vad_client *c;
	int rc = vad_connect(d->socket_path, name, &c);
	VT_CHILD_CHECK(rc == 0, "vad_connect as uid %u: %s", (unsigned)getuid(),
		       vad_last_error(NULL));
	return c;
}
