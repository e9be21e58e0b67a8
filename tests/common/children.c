/* children.c - forked helper processes: waiting, line pipes, dropping privileges. */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

int vt_wait_child(pid_t pid, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int status;
	pid_t w;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0) {
		if (vt_now_ns() >= deadline) {
			fprintf(stderr, "harness: child %d still running after %d ms; killing it\n",
				(int)pid, timeout_ms);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		vt_sleep_ms(5);
	}
	if (w != pid) {
		fprintf(stderr, "harness: waitpid(%d): %s\n", (int)pid, strerror(errno));
		return -1;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

int vt_pipe_send(int fd, const char *line)
{
	size_t len = strlen(line);
	char *buf = malloc(len + 1);
	if (!buf)
		return -1;
	memcpy(buf, line, len);
	buf[len] = '\n';
	size_t off = 0;
	while (off < len + 1) {
		ssize_t w = write(fd, buf + off, len + 1 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "harness: pipe write: %s\n", strerror(errno));
			free(buf);
			return -1;
		}
		off += (size_t)w;
	}
	free(buf);
	return 0;
}

int vt_pipe_recv(int fd, char *buf, size_t len, int timeout_ms)
{
	/* Byte at a time so nothing past the newline is consumed. */
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	size_t n = 0;
	for (;;) {
		uint64_t now = vt_now_ns();
		if (now >= deadline) {
			fprintf(stderr, "harness: no line on pipe within %d ms\n", timeout_ms);
			return -1;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		char c;
		ssize_t got = read(fd, &c, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1; /* EOF: the other side died */
		if (c == '\n') {
			buf[n] = '\0';
			return (int)n;
		}
		if (n + 1 < len)
			buf[n++] = c;
	}
}

int vt_become_nobody(void)
{
	if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
		fprintf(stderr, "harness: cannot become nobody: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}
