/* spawn.c - start a program with pipes on its standard streams (for vt_run and vt_proc),
 * and the growing buffer that collects what it writes. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>

#include "harness.h"

int vt_buf_append(char **buf, size_t *len, size_t *cap, const char *src, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 4096;
		while (c < *len + n + 1)
			c *= 2;
		char *b = realloc(*buf, c);
		if (!b)
			return -1;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, src, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

static void close_pair(int p[2])
{
	close(p[0]);
	close(p[1]);
}

pid_t vt_spawn(char *const argv[], bool as_nobody, int fds[3])
{
	int pipes[3][2];
	int made = 0;
	for (; made < 3; made++)
		if (pipe2(pipes[made], O_CLOEXEC) != 0)
			break;
	if (made < 3) {
		fprintf(stderr, "harness: pipe: %s\n", strerror(errno));
		while (made-- > 0)
			close_pair(pipes[made]);
		return -1;
	}
	const char *bin = as_nobody ? vt_nobody_path(argv[0]) : argv[0];
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "harness: fork: %s\n", strerror(errno));
		for (int i = 0; i < 3; i++)
			close_pair(pipes[i]);
		return -1;
	}
	if (pid == 0) {
		dup2(pipes[0][0], STDIN_FILENO);
		dup2(pipes[1][1], STDOUT_FILENO);
		dup2(pipes[2][1], STDERR_FILENO);
		/* The program under test finds its daemon through --socket, never the caller's. */
		unsetenv("VAD_SOCKET");
		if (as_nobody && vt_become_nobody() != 0)
			_exit(126);
		execv(bin, argv);
		dprintf(STDERR_FILENO, "harness: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	/* A program that exits before reading its stdin must not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	close(pipes[0][0]);
	close(pipes[1][1]);
	close(pipes[2][1]);
	fds[0] = pipes[0][1];
	fds[1] = pipes[1][0];
	fds[2] = pipes[2][0];
	return pid;
}
