/*
 * daemon_echo.c - the physical limit of the socket: one client and an echo thread on a Unix
 * socketpair, with the frame sizes of the vad run (an alloc request out, an alloc reply back)
 * and the same pipelining (P frames in flight, refilled as replies arrive, one write per
 * round). The echo thread does nothing but count whole frames and answer each with a frame
 * of the reply's size, so the difference to the vad figures is the daemon's own work.
 * With --procs the echo runs in a forked process instead of a thread: a round trip then also
 * switches address spaces, as every round trip to a daemon does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_bench.h"
#include "frame.h"
#include "vad.pb-c.h"

#define ECHO_BUF (256u * 1024u)

struct echo_server {
	int fd;
	size_t resp_len;
};

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void *echo_main(void *arg)
{
	struct echo_server *s = arg;
	uint8_t *in = malloc(ECHO_BUF), *out = calloc(1, ECHO_BUF);
	size_t in_len = 0;
	if (!in || !out)
		goto done;
	for (;;) {
		ssize_t n = read(s->fd, in + in_len, ECHO_BUF - in_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		in_len += (size_t)n;
		size_t pos = 0, frames = 0, plen;
		while (vad_frame_peek(in + pos, in_len - pos, ECHO_BUF, &plen) == VAD_FRAME_READY) {
			pos += VAD_FRAME_HEADER + plen;
			frames++;
		}
		memmove(in, in + pos, in_len - pos);
		in_len -= pos;
		size_t olen = 0;
		for (size_t i = 0; i < frames; i++) {
			if (olen + s->resp_len > ECHO_BUF) {
				if (write_all(s->fd, out, olen) < 0)
					goto done;
				olen = 0;
			}
			vad_frame_put_header(out + olen,
					     (uint32_t)(s->resp_len - VAD_FRAME_HEADER));
			olen += s->resp_len;
		}
		if (olen && write_all(s->fd, out, olen) < 0)
			break;
	}
done:
	free(in);
	free(out);
	return NULL;
}

void db_frame_sizes(const struct db_params *p, size_t *req, size_t *resp)
{
	uint64_t offsets[1024], sizes[1024];
	unsigned b = p->batch < 1024 ? p->batch : 1024;
	Vad__Request rq = VAD__REQUEST__INIT;
	Vad__Alloc a = VAD__ALLOC__INIT;
	rq.id = 100000;
	a.arena = (char *)p->arena;
	a.size = p->unit;
	a.count = b > 1 ? b : 0;
	rq.op_case = VAD__REQUEST__OP_ALLOC;
	rq.alloc = &a;
	*req = vad_frame_request_size(&rq);

	/* Typical offsets: a few hundred MiB into the arena. */
	for (unsigned i = 0; i < b; i++) {
		offsets[i] = (256ull << 20) + (uint64_t)i * p->unit;
		sizes[i] = p->unit;
	}
	Vad__Response rs = VAD__RESPONSE__INIT;
	Vad__AllocReply ar = VAD__ALLOC_REPLY__INIT;
	rs.id = 100000;
	ar.arena = (char *)(p->arena && *p->arena ? p->arena : "default");
	ar.n_offsets = ar.n_sizes = b;
	ar.offsets = offsets;
	ar.sizes = sizes;
	rs.result_case = VAD__RESPONSE__RESULT_ALLOC;
	rs.alloc = &ar;
	*resp = vad_frame_response_size(&rs);
}

void db_echo_run(const struct db_params *p, struct db_result *r)
{
	int sv[2];
	size_t req_len, resp_len;
	db_frame_sizes(p, &req_len, &resp_len);
	r->req_bytes = req_len;
	r->resp_bytes = resp_len;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		db_fail(r, "socketpair: %s", strerror(errno));
		return;
	}
	struct echo_server srv = {.fd = sv[1], .resp_len = resp_len};
	pthread_t th;
	pid_t child = -1;
	if (p->procs) {
		/* A process, like a daemon: each round trip also switches address spaces. */
		child = fork();
		if (child == 0) {
			close(sv[0]);
			echo_main(&srv);
			_exit(0);
		}
		close(sv[1]);
		sv[1] = -1;
	}
	if (p->procs ? child < 0 : pthread_create(&th, NULL, echo_main, &srv) != 0) {
		db_fail(r, "cannot start the echo %s", p->procs ? "process" : "thread");
		close(sv[0]);
		if (sv[1] >= 0)
			close(sv[1]);
		return;
	}
	unsigned P = p->pipeline;
	uint64_t *t0 = calloc(P, sizeof(*t0));
	uint8_t *out = calloc(P, req_len), *in = malloc(ECHO_BUF);
	if (!t0 || !out || !in) {
		db_fail(r, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < P; i++)
		vad_frame_put_header(out + i * req_len, (uint32_t)(req_len - VAD_FRAME_HEADER));

	uint64_t cpu0 = db_cpu_ns(), start = db_now_ns();
	uint64_t deadline = p->ops ? UINT64_MAX : start + (uint64_t)(p->seconds * 1e9);
	uint64_t issued = 0, done = 0, last = start;
	unsigned head = 0, inflight = 0;
	size_t in_len = 0;
	bool stopping = false;
	unsigned k = 0;
	for (; k < P && (!p->ops || issued < p->ops); k++, issued++)
		t0[(head + inflight++) % P] = start;
	if (write_all(sv[0], out, k * req_len) < 0) {
		db_fail(r, "echo write failed: %s", strerror(errno));
		goto out;
	}
	while (inflight) {
		ssize_t n = read(sv[0], in + in_len, ECHO_BUF - in_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			db_fail(r, "echo read failed");
			goto out;
		}
		uint64_t now = db_now_ns();
		in_len += (size_t)n;
		size_t frames = in_len / resp_len;
		in_len -= frames * resp_len; /* content is irrelevant: keep the remainder's count */
		unsigned refill = 0;
		for (size_t i = 0; i < frames; i++) {
			uint64_t lat = now - t0[head];
			head = (head + 1) % P;
			inflight--;
			if (p->ops || now <= deadline) {
				db_hist_add(&r->alloc_lat, lat);
				db_hist_add(&r->all_lat, lat);
				done++;
				last = now;
			}
			if (!p->burst && !stopping && (!p->ops || issued < p->ops)) {
				t0[(head + inflight++) % P] = now;
				issued++;
				refill++;
			}
		}
		/* Burst pipelining: the next P go out once the last reply is in. */
		for (unsigned b = 0;
		     p->burst && !inflight && b < P && !stopping && (!p->ops || issued < p->ops);
		     b++) {
			t0[(head + b) % P] = now;
			issued++;
			refill++;
		}
		if (p->burst && !inflight)
			inflight = refill;
		if (refill && write_all(sv[0], out, refill * req_len) < 0) {
			db_fail(r, "echo write failed: %s", strerror(errno));
			goto out;
		}
		if (!p->ops && now >= deadline && !stopping) {
			stopping = true;
			deadline = now;
		}
	}
	r->requests = r->allocs = done;
	r->items = done;
	r->wall_ns = (p->ops ? last : deadline) - start;
	r->cpu_ns = db_cpu_ns() - cpu0; /* client and echo thread together */
out:
	shutdown(sv[0], SHUT_RDWR);
	if (p->procs) {
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	} else {
		pthread_join(th, NULL);
	}
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	free(t0);
	free(out);
	free(in);
}
