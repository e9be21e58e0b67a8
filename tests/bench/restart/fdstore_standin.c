/* fdstore_standin.c - the restart benchmark's stand-in for systemd's fd store; see
 * fdstore_standin.h. */
#include "fdstore_standin.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

int standin_open(struct fdstore_standin *m, const char *path)
{
	memset(m, 0, sizeof(*m));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "restart_bench: notify socket path too long: %s\n", path);
		return -1;
	}
	snprintf(m->path, sizeof(m->path), "%s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	m->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (m->sock < 0 || bind(m->sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "restart_bench: cannot bind %s: %s\n", path, strerror(errno));
		if (m->sock >= 0)
			close(m->sock);
		return -1;
	}
	return 0;
}

void standin_close(struct fdstore_standin *m)
{
	for (unsigned i = 0; i < m->n; i++)
		close(m->stored[i].fd);
	m->n = 0;
	if (m->sock >= 0)
		close(m->sock);
	m->sock = -1;
	unlink(m->path);
}

/* The value of key= in a notify message (a copy into out), or false. */
static bool field(const char *msg, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);
	for (const char *line = msg; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == '=') {
			size_t v = len - klen - 1;
			if (v >= cap)
				v = cap - 1;
			memcpy(out, line + klen + 1, v);
			out[v] = 0;
			return true;
		}
		line = end ? end + 1 : NULL;
	}
	return false;
}

static void handle(struct fdstore_standin *m, const char *msg, const int *fds, size_t n_fds)
{
	char val[STUB_NAME_MAX + 1], name[STUB_NAME_MAX + 1] = "stored";
	bool stored = false;
	field(msg, "FDNAME", name, sizeof(name));
	if (field(msg, "FDSTORE", val, sizeof(val)) && strcmp(val, "1") == 0) {
		for (size_t i = 0; i < n_fds; i++) {
			if (m->n == STUB_FDS_MAX) {
				fprintf(stderr, "restart_bench: fd store full, closing %s\n", name);
				close(fds[i]);
				continue;
			}
			snprintf(m->stored[m->n].name, sizeof(m->stored[m->n].name), "%s", name);
			m->stored[m->n++].fd = fds[i];
		}
		stored = true;
	}
	if (field(msg, "FDSTOREREMOVE", val, sizeof(val)) && strcmp(val, "1") == 0) {
		unsigned k = 0;
		for (unsigned i = 0; i < m->n; i++) {
			if (strcmp(m->stored[i].name, name) == 0)
				close(m->stored[i].fd);
			else
				m->stored[k++] = m->stored[i];
		}
		m->n = k;
	}
	if (field(msg, "READY", val, sizeof(val)) && strcmp(val, "1") == 0 && !m->ready) {
		m->ready = true;
		m->ready_ns = vt_now_ns();
	}
	if (!stored) /* fds without FDSTORE=1: systemd closes them too */
		for (size_t i = 0; i < n_fds; i++)
			close(fds[i]);
}

void standin_pump(struct fdstore_standin *m, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000;
	for (;;) {
		uint64_t now = vt_now_ns();
		int wait = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
		struct pollfd p = {.fd = m->sock, .events = POLLIN};
		if (poll(&p, 1, wait) <= 0)
			return;
		char buf[4096];
		union {
			char b[CMSG_SPACE(STUB_FDS_MAX * sizeof(int))];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.b,
				    .msg_controllen = sizeof(ctl.b)};
		ssize_t len = recvmsg(m->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (len < 0)
			continue;
		buf[len] = 0;
		int fds[STUB_FDS_MAX];
		size_t n_fds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k && n_fds < STUB_FDS_MAX; i++)
				memcpy(&fds[n_fds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
		handle(m, buf, fds, n_fds);
	}
}

int standin_start(struct fdstore_standin *m, char *const argv[], const char *log_path)
{
	int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log < 0) {
		fprintf(stderr, "restart_bench: %s: %s\n", log_path, strerror(errno));
		return -1;
	}
	char names[STUB_FDS_MAX * (STUB_NAME_MAX + 1)] = "";
	for (unsigned i = 0; i < m->n; i++) {
		if (i)
			strcat(names, ":");
		strcat(names, m->stored[i].name);
	}
	m->ready = false;
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "restart_bench: fork: %s\n", strerror(errno));
		close(log);
		return -1;
	}
	if (pid == 0) {
		dup2(log, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		/* Out of the way first, then down to 3, 4, ... (no move clobbers another). */
		int high[STUB_FDS_MAX];
		for (unsigned i = 0; i < m->n; i++)
			high[i] = fcntl(m->stored[i].fd, F_DUPFD_CLOEXEC, 3 + STUB_FDS_MAX);
		for (unsigned i = 0; i < m->n; i++)
			if (high[i] < 0 || dup2(high[i], 3 + (int)i) < 0)
				_exit(127);
		char num[16], me[16];
		snprintf(num, sizeof(num), "%u", m->n);
		snprintf(me, sizeof(me), "%d", (int)getpid());
		setenv("NOTIFY_SOCKET", m->path, 1);
		if (m->n) {
			setenv("LISTEN_FDS", num, 1);
			setenv("LISTEN_FDNAMES", names, 1);
			setenv("LISTEN_PID", me, 1);
		} else {
			unsetenv("LISTEN_FDS");
			unsetenv("LISTEN_FDNAMES");
			unsetenv("LISTEN_PID");
		}
		if (m->hold_start)
			raise(SIGSTOP);
		execv(argv[0], argv);
		dprintf(STDERR_FILENO, "restart_bench: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(log);
	m->pid = pid;
	m->status = 0;
	return 0;
}

int standin_resume(struct fdstore_standin *m, void (*go)(void *ctx, pid_t pid), void *ctx)
{
	int st;
	if (waitpid(m->pid, &st, WUNTRACED) != m->pid || !WIFSTOPPED(st)) {
		fprintf(stderr, "restart_bench: the daemon did not stop before its exec\n");
		return -1;
	}
	go(ctx, m->pid);
	kill(m->pid, SIGCONT);
	return 0;
}

/* Has the daemon exited (reaped into m->status)? */
static bool exited(struct fdstore_standin *m)
{
	if (!m->pid)
		return true;
	int st;
	struct rusage ru;
	if (wait4(m->pid, &st, WNOHANG, &ru) != m->pid)
		return false;
	m->status = st;
	m->cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	m->pid = 0;
	return true;
}

int standin_wait_ready(struct fdstore_standin *m, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000;
	while (!m->ready && vt_now_ns() < deadline) {
		standin_pump(m, 2);
		if (!m->ready && exited(m)) {
			fprintf(stderr,
				"restart_bench: the daemon exited before READY (status 0x%x)\n",
				m->status);
			return -1;
		}
	}
	return m->ready ? 0 : -1;
}

int standin_wait_exit(struct fdstore_standin *m, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000;
	while (vt_now_ns() < deadline) {
		if (exited(m)) {
			standin_pump(m, 0); /* what it sent last */
			return 0;
		}
		standin_pump(m, 1);
	}
	fprintf(stderr, "restart_bench: the daemon did not exit within %d ms\n", timeout_ms);
	return -1;
}

int standin_fd_of(const struct fdstore_standin *m, const char *name)
{
	for (unsigned i = 0; i < m->n; i++)
		if (strcmp(m->stored[i].name, name) == 0)
			return m->stored[i].fd;
	return -1;
}

int standin_fd_prefixed(const struct fdstore_standin *m, const char *prefix)
{
	int fd = -1;
	for (unsigned i = 0; i < m->n; i++)
		if (strncmp(m->stored[i].name, prefix, strlen(prefix)) == 0)
			fd = m->stored[i].fd;
	return fd;
}
