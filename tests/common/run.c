/* run.c - run a program (vactl, vad --check-config) capturing its output and exit code. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

struct growbuf {
	char *data;
	size_t len, cap;
};

static char *growbuf_take(struct growbuf *b)
{
	if (!b->data)
		return strdup("");
	return b->data;
}

/* Feed stdin_text to fds[0] and collect fds[1] and fds[2] into *bo and *be until the program
 * closes its output or the deadline passes (false then); closes the three fds. */
static bool exchange(int fds[3], const char *stdin_text, uint64_t deadline, struct growbuf *bo,
		     struct growbuf *be)
{
	const char *to_write = stdin_text ? stdin_text : "";
	size_t write_left = strlen(to_write);
	int in_fd = fds[0];
	if (write_left == 0) {
		close(in_fd);
		in_fd = -1;
	} else {
		fcntl(in_fd, F_SETFL, O_NONBLOCK);
	}
	int out_fd = fds[1], err_fd = fds[2];
	bool in_time = true;
	while (out_fd >= 0 || err_fd >= 0) {
		uint64_t now = vt_now_ns();
		if (now >= deadline) {
			in_time = false;
			break;
		}
		struct pollfd p[3] = {{.fd = out_fd, .events = POLLIN},
				      {.fd = err_fd, .events = POLLIN},
				      {.fd = in_fd, .events = POLLOUT}};
		int n = poll(p, 3, (int)((deadline - now) / 1000000u) + 1);
		if (n < 0 && errno != EINTR)
			break;
		char chunk[4096];
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = read(p[i].fd, chunk, sizeof(chunk));
			if (r > 0) {
				struct growbuf *g = i == 0 ? bo : be;
				vt_buf_append(&g->data, &g->len, &g->cap, chunk, (size_t)r);
			} else if (r == 0 || errno != EINTR) {
				close(p[i].fd);
				if (i == 0)
					out_fd = -1;
				else
					err_fd = -1;
			}
		}
		if (in_fd >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(in_fd, to_write, write_left);
			if (w > 0) {
				to_write += w;
				write_left -= (size_t)w;
			}
			if (write_left == 0 || (w < 0 && errno != EAGAIN && errno != EINTR)) {
				close(in_fd);
				in_fd = -1;
			}
		}
	}
	if (in_fd >= 0)
		close(in_fd);
	if (out_fd >= 0)
		close(out_fd);
	if (err_fd >= 0)
		close(err_fd);
	return in_time;
}

static int run_impl(char *const argv[], const char *stdin_text, int timeout_ms, bool as_nobody,
		    struct vt_output *o)
{
	memset(o, 0, sizeof(*o));
	o->exit_code = -1;
	int fds[3];
	pid_t pid = vt_spawn(argv, as_nobody, fds);
	if (pid < 0)
		return -1;
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct growbuf bo = {0}, be = {0};
	bool in_time = exchange(fds, stdin_text, deadline, &bo, &be);
	o->out = growbuf_take(&bo);
	o->err = growbuf_take(&be);
	if (!in_time) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fprintf(stderr, "harness: %s timed out after %d ms\n", argv[0], timeout_ms);
		vt_output_print(argv[0], o);
		return -1;
	}
	/* The program closed its output; give it the rest of the deadline to exit. */
	uint64_t now = vt_now_ns();
	int left_ms = now < deadline ? (int)((deadline - now) / 1000000u) : 0;
	o->exit_code = vt_wait_child(pid, left_ms);
	if (o->exit_code < 0) {
		fprintf(stderr, "harness: %s did not exit after closing its output\n", argv[0]);
		return -1;
	}
	return 0;
}

int vt_run(char *const argv[], const char *stdin_text, int timeout_ms, struct vt_output *o)
{
	return run_impl(argv, stdin_text, timeout_ms, false, o);
}

int vt_run_as_nobody(char *const argv[], const char *stdin_text, int timeout_ms,
		     struct vt_output *o)
{
	return run_impl(argv, stdin_text, timeout_ms, true, o);
}

void vt_output_free(struct vt_output *o)
{
	free(o->out);
	free(o->err);
	o->out = o->err = NULL;
}

void vt_output_print(const char *what, const struct vt_output *o)
{
	fprintf(stderr, "---- %s: exit %d ----\n-- stdout:\n%s\n-- stderr:\n%s\n---- end ----\n",
		what, o->exit_code, o->out ? o->out : "", o->err ? o->err : "");
}

#define VACTL_MAX_ARGS 64

int vt_vactl_argv(char *const args[], const char *stdin_text, struct vt_output *o)
{
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
	char *argv[VACTL_MAX_ARGS + 2];
	int n = 0;
	argv[n++] = bin;
	for (int i = 0; args[i]; i++) {
		if (n >= VACTL_MAX_ARGS) {
			fprintf(stderr, "harness: too many vactl arguments\n");
			return -1;
		}
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return vt_run(argv, stdin_text, vt_timeout_ms(20000), o);
}

int vt_vactl(const char *socket, const char *stdin_text, struct vt_output *o, ...)
{
	char *args[VACTL_MAX_ARGS + 1];
	int n = 0;
	if (socket) {
		args[n++] = "--socket";
		args[n++] = (char *)socket;
	}
	va_list ap;
	va_start(ap, o);
	const char *a;
	while ((a = va_arg(ap, const char *))) {
		if (n >= VACTL_MAX_ARGS) {
			va_end(ap);
			fprintf(stderr, "harness: too many vactl arguments\n");
			return -1;
		}
		args[n++] = (char *)a;
	}
	va_end(ap);
	args[n] = NULL;
	return vt_vactl_argv(args, stdin_text, o);
}
