/* proc.c - a background program the test talks to while it runs; see struct vt_proc. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>

#include <json-c/json.h>

#include "harness.h"

int vt_proc_start(char *const argv[], struct vt_proc *p)
{
	memset(p, 0, sizeof(*p));
	p->in_fd = p->out_fd = p->err_fd = -1;
	int fds[3];
	pid_t pid = vt_spawn(argv, false, fds);
	if (pid < 0)
		return -1;
	p->pid = pid;
	p->in_fd = fds[0];
	p->out_fd = fds[1];
	p->err_fd = fds[2];
	return 0;
}

int vt_proc_vactl(struct vt_proc *p, ...)
{
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
	char *argv[66];
	int n = 0;
	argv[n++] = bin;
	va_list ap;
	va_start(ap, p);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 65)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return vt_proc_start(argv, p);
}

int vt_proc_write(struct vt_proc *p, const char *text)
{
	size_t len = strlen(text);
	while (len > 0) {
		ssize_t w = write(p->in_fd, text, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "harness: writing to the program: %s\n", strerror(errno));
			return -1;
		}
		text += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Wait up to ms for more output (stdout or stderr). 1 if stdout grew, 0 on timeout,
 * -1 when stdout hit EOF. */
static int pump(struct vt_proc *p, int ms)
{
	struct pollfd fds[2] = {{.fd = p->out_fd, .events = POLLIN},
				{.fd = p->err_fd, .events = POLLIN}};
	int n = poll(fds, 2, ms);
	if (n <= 0)
		return 0;
	char chunk[4096];
	if (p->err_fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t r = read(p->err_fd, chunk, sizeof(chunk));
		if (r > 0) {
			vt_buf_append(&p->err, &p->err_len, &p->err_cap, chunk, (size_t)r);
		} else {
			close(p->err_fd);
			p->err_fd = -1;
		}
	}
	if (p->out_fd >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t r = read(p->out_fd, chunk, sizeof(chunk));
		if (r > 0) {
			vt_buf_append(&p->out, &p->out_len, &p->out_cap, chunk, (size_t)r);
			return 1;
		}
		close(p->out_fd);
		p->out_fd = -1;
		return -1;
	}
	return p->out_fd < 0 ? -1 : 0;
}

static void consume(struct vt_proc *p, size_t n)
{
	memmove(p->out, p->out + n, p->out_len - n + 1);
	p->out_len -= n;
}

int vt_proc_read_line(struct vt_proc *p, char *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		char *nl = p->out ? memchr(p->out, '\n', p->out_len) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - p->out);
			snprintf(buf, len, "%.*s", (int)n, p->out);
			consume(p, n + 1);
			return (int)n;
		}
		uint64_t now = vt_now_ns();
		if (now >= deadline) {
			fprintf(stderr, "harness: no output line within %d ms (stderr: %s)\n",
				timeout_ms, p->err ? p->err : "");
			return -1;
		}
		if (pump(p, (int)((deadline - now) / 1000000u) + 1) < 0 &&
		    !(p->out && memchr(p->out, '\n', p->out_len))) {
			fprintf(stderr, "harness: program closed its output (stderr: %s)\n",
				p->err ? p->err : "");
			return -1;
		}
	}
}

struct json_object *vt_proc_read_json(struct vt_proc *p, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		if (p->out_len) {
			struct json_tokener *tok = json_tokener_new();
			struct json_object *o = json_tokener_parse_ex(tok, p->out, (int)p->out_len);
			enum json_tokener_error jerr = json_tokener_get_error(tok);
			size_t used = json_tokener_get_parse_end(tok);
			json_tokener_free(tok);
			if (o) {
				consume(p, used);
				return o;
			}
			if (jerr != json_tokener_continue) {
				fprintf(stderr, "harness: program printed non-JSON: %s\n", p->out);
				return NULL;
			}
		}
		uint64_t now = vt_now_ns();
		if (now >= deadline) {
			fprintf(stderr, "harness: no JSON within %d ms (stdout: %s, stderr: %s)\n",
				timeout_ms, p->out ? p->out : "", p->err ? p->err : "");
			return NULL;
		}
		if (pump(p, (int)((deadline - now) / 1000000u) + 1) < 0) {
			fprintf(stderr, "harness: program closed its output before JSON (%s)\n",
				p->err ? p->err : "");
			return NULL;
		}
	}
}

int vt_proc_finish(struct vt_proc *p, int timeout_ms, struct vt_output *o)
{
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->in_fd = -1;
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while ((p->out_fd >= 0 || p->err_fd >= 0) && vt_now_ns() < deadline)
		pump(p, 50);
	uint64_t now = vt_now_ns();
	int code = vt_wait_child(p->pid, now < deadline ? (int)((deadline - now) / 1000000u) : 0);
	if (code < 0)
		fprintf(stderr, "harness: background program did not exit within %d ms\n",
			timeout_ms);
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	p->out_fd = p->err_fd = -1;
	if (o) {
		o->exit_code = code;
		o->out = p->out ? p->out : strdup("");
		o->err = p->err ? p->err : strdup("");
	} else {
		free(p->out);
		free(p->err);
	}
	p->out = p->err = NULL;
	return code;
}
