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

static int growbuf_append(struct growbuf *b, const char *src, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (!p)
			return -1;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, src, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static char *growbuf_take(struct growbuf *b)
{
	if (!b->data)
		return strdup("");
	return b->data;
}

static int run_impl(char *const argv[], const char *stdin_text, int timeout_ms, bool as_nobody,
		    struct vt_output *o)
{
	memset(o, 0, sizeof(*o));
	o->exit_code = -1;
	int in[2], out[2], err[2];
	if (pipe2(in, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) != 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	if (pipe2(err, O_CLOEXEC) != 0) {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return -1;
	}
	const char *bin = as_nobody ? vt_nobody_path(argv[0]) : argv[0];
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "harness: fork: %s\n", strerror(errno));
		for (int i = 0; i < 2; i++) {
			close(in[i]);
			close(out[i]);
			close(err[i]);
		}
		return -1;
	}
	if (pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		unsetenv("VAD_SOCKET");
		if (as_nobody && vt_become_nobody() != 0)
			_exit(126);
		execv(bin, argv);
		dprintf(STDERR_FILENO, "harness: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	signal(SIGPIPE, SIG_IGN);

	const char *to_write = stdin_text ? stdin_text : "";
	size_t write_left = strlen(to_write);
	int in_fd = in[1];
	if (write_left == 0) {
		close(in_fd);
		in_fd = -1;
	} else {
		fcntl(in_fd, F_SETFL, O_NONBLOCK);
	}
	struct growbuf bo = {0}, be = {0};
	int out_fd = out[0], err_fd = err[0];
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	bool timed_out = false;
	while (out_fd >= 0 || err_fd >= 0) {
		uint64_t now = vt_now_ns();
		if (now >= deadline) {
			timed_out = true;
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
				growbuf_append(i == 0 ? &bo : &be, chunk, (size_t)r);
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
	int status = 0;
	if (timed_out) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		o->out = growbuf_take(&bo);
		o->err = growbuf_take(&be);
		fprintf(stderr, "harness: %s timed out after %d ms\n", argv[0], timeout_ms);
		vt_output_print(argv[0], o);
		return -1;
	}
	/* The program closed its output; give it the rest of the deadline to exit. */
	pid_t w;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && vt_now_ns() < deadline)
		vt_sleep_ms(5);
	o->out = growbuf_take(&bo);
	o->err = growbuf_take(&be);
	if (w != pid) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fprintf(stderr, "harness: %s did not exit after closing its output\n", argv[0]);
		return -1;
	}
	if (WIFEXITED(status))
		o->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		o->exit_code = 128 + WTERMSIG(status);
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
