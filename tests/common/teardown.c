/* teardown.c - one client's teardown timed from another client; see teardown.h. */
#include "teardown.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rawclient.h"

const char *vt_teardown_name(enum vt_teardown_how how)
{
	switch (how) {
	case VT_TEARDOWN_CLOSE:
		return "close";
	case VT_TEARDOWN_KILL:
		return "kill";
	case VT_TEARDOWN_DROP:
		return "drop";
	}
	return "?";
}

int vt_raw_alloc_many(struct vt_raw *r, uint64_t n, unsigned batch)
{
	/* A few batches in flight, so a million ranges take seconds, not minutes. */
	enum { IN_FLIGHT = 4 };
	uint64_t sent = 0, got = 0;
	unsigned pending = 0;
	while (got < n) {
		while (pending < IN_FLIGHT && sent < n) {
			uint64_t k = n - sent < batch ? n - sent : batch;
			struct vt_req q;
			if (vt_raw_send_request(r, vt_req_alloc(&q, NULL, 4096, 0, (uint32_t)k)) ==
			    0) {
				fprintf(stderr, "teardown: sending an alloc batch failed\n");
				return -1;
			}
			sent += k;
			pending++;
		}
		Vad__Response *resp = NULL;
		if (vt_raw_recv(r, &resp, vt_timeout_ms(30000)) != VT_RAW_RESPONSE) {
			fprintf(stderr,
				"teardown: no reply to an alloc batch (%llu of %llu held)\n",
				(unsigned long long)got, (unsigned long long)n);
			return -1;
		}
		if (resp->error != VAD__ERROR__OK ||
		    resp->result_case != VAD__RESPONSE__RESULT_ALLOC) {
			fprintf(stderr, "teardown: alloc batch refused after %llu ranges: %s %s\n",
				(unsigned long long)got, vt_error_name(resp->error),
				resp->message ? resp->message : "");
			vt_raw_response_free(resp);
			return -1;
		}
		got += resp->alloc->n_offsets;
		pending--;
		vt_raw_response_free(resp);
	}
	return 0;
}

/* Client A: hold n ranges, say so on ready_fd, then go away as told on go_fd. */
static void __attribute__((noreturn))
holder_child(const char *socket_path, uint64_t n, int ready_fd, int go_fd)
{
	struct vt_raw r;
	char c = 'x';
	if (vt_raw_connect(&r, socket_path) != 0 || vt_raw_hello(&r, "teardown-holder") != 0 ||
	    vt_raw_alloc_many(&r, n, 1024) != 0) {
		(void)!write(ready_fd, &c, 1);
		_exit(1);
	}
	c = 'r';
	(void)!write(ready_fd, &c, 1);
	if (read(go_fd, &c, 1) != 1)
		c = 'c';
	if (c == 'd') {
		/* A length header far above max_frame: framing is broken, the daemon drops us. */
		static const uint8_t bad[4] = {0xff, 0xff, 0xff, 0x7f};
		(void)vt_raw_send(&r, bad, sizeof(bad));
		(void)vt_raw_wait_closed(&r, vt_timeout_ms(60000));
	}
	vt_raw_close(&r);
	_exit(0);
}

/* One alloc+free of B, waiting as long as a stalled worker takes (a synchronous teardown
 * of millions of ranges took longer than the harness's usual 5 s). */
static int timed_round(struct vt_raw *b)
{
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(b, vt_req_alloc(&q, NULL, 4096, 0, 0), 600000);
	if (!resp)
		return -1;
	int rc = resp->error;
	uint64_t off = 0;
	if (rc == 0 &&
	    (resp->result_case != VAD__RESPONSE__RESULT_ALLOC || resp->alloc->n_offsets != 1))
		rc = -1;
	if (rc == 0)
		off = resp->alloc->offsets[0];
	vt_raw_response_free(resp);
	if (rc != 0)
		return rc;
	resp = vt_raw_call(b, vt_req_free(&q, NULL, &off, 1), 600000);
	if (!resp)
		return -1;
	rc = resp->error;
	vt_raw_response_free(resp);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int vt_teardown_run(const struct vt_daemon *d, uint64_t n, enum vt_teardown_how how, bool checks,
		    int timeout_ms, struct vt_teardown_result *out)
{
	memset(out, 0, sizeof(*out));
	vad_client *admin = NULL;
	struct vt_raw b = {.fd = -1};
	int ready[2] = {-1, -1}, go[2] = {-1, -1}, rc = -1;
	pid_t pid = -1;
	uint64_t *lat = NULL;
	size_t lat_cap = 1 << 20;
	struct vad_stats st;

	if (vt_connect(d, "teardown-admin", &admin) != 0 ||
	    vt_raw_connect(&b, d->socket_path) != 0 || vt_raw_hello(&b, "teardown-timed") != 0)
		goto out;
	if (vad_stats(admin, &st) != 0) {
		fprintf(stderr, "teardown: stats: %s\n", vad_last_error(admin));
		goto out;
	}
	uint64_t baseline = st.busy_bytes;
	lat = malloc(lat_cap * sizeof(*lat));
	if (!lat || pipe(ready) != 0 || pipe(go) != 0)
		goto out;
	pid = fork();
	if (pid < 0)
		goto out;
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		holder_child(d->socket_path, n, ready[1], go[0]);
	}
	close(ready[1]);
	close(go[0]);
	ready[1] = go[0] = -1;
	char c = 0;
	if (read(ready[0], &c, 1) != 1 || c != 'r') {
		fprintf(stderr, "teardown: client A could not take %llu ranges\n",
			(unsigned long long)n);
		goto out;
	}
	if (vad_stats(admin, &st) != 0 || st.busy_bytes != baseline + n * 4096) {
		fprintf(stderr, "teardown: busy %llu after A's allocations, want %llu\n",
			(unsigned long long)st.busy_bytes,
			(unsigned long long)(baseline + n * 4096));
		goto out;
	}

	uint64_t t_go = vt_now_ns(), deadline = t_go + (uint64_t)timeout_ms * 1000000u;
	if (how == VT_TEARDOWN_KILL) {
		kill(pid, SIGKILL);
	} else {
		c = how == VT_TEARDOWN_DROP ? 'd' : 'c';
		(void)!write(go[1], &c, 1);
	}
	uint64_t last_poll = 0, last_check = 0, check_gap = 2000000000u, rounds_at_poll = 0;
	for (;;) {
		uint64_t t0 = vt_now_ns();
		int e = timed_round(&b);
		uint64_t t1 = vt_now_ns();
		if (e != 0) {
			fprintf(stderr, "teardown: B's alloc+free failed: %d\n", e);
			goto out;
		}
		if (out->rounds < lat_cap)
			lat[out->rounds] = t1 - t0;
		out->rounds++;
		if (t1 - t0 > out->max_ns) {
			out->max_ns = t1 - t0;
			out->max_at_ns = t0 - t_go;
		}
		if (t1 - last_poll < 5000000u)
			continue;
		uint64_t rounds_since = out->rounds - rounds_at_poll;
		rounds_at_poll = out->rounds;
		/* Between B's rounds, untimed: are A's ranges back? Are the books right? */
		last_poll = t1;
		if (vad_stats(admin, &st) != 0) {
			fprintf(stderr, "teardown: stats: %s\n", vad_last_error(admin));
			goto out;
		}
		bool back = st.busy_bytes == baseline;
		if (!back && st.busy_bytes < baseline + n * 4096 && rounds_since > 0)
			out->partial_polls++;
		if (back && !out->back_ns)
			out->back_ns = vt_now_ns() - t_go;
		/* B goes on for at least a second: with few ranges (or none: B alone, the
		 * machine's own noise) that is what the figures cover. */
		if (back && t1 - t_go < 1000000000u)
			continue;
		/* A check holds every lock of the registry and the allocator while it walks a
		 * million holds and busy blocks (a second or more under load): one as the teardown
		 * starts, then one after twice its time, one at the end, or the reaper would
		 * mostly wait. */
		if (checks && (back || last_check == 0 || t1 - last_check > check_gap)) {
			last_check = t1;
			int ok = 0;
			char *detail = NULL;
			if (vad_check(admin, &ok, &detail) != 0) {
				fprintf(stderr, "teardown: check: %s\n", vad_last_error(admin));
				goto out;
			}
			out->checks++;
			/* The reaper gets at least twice the time a check takes (2 s at least). */
			uint64_t took = vt_now_ns() - t1;
			check_gap = took * 3 > 2000000000u ? took * 3 : 2000000000u;
			last_check = vt_now_ns();
			if (!ok && out->checks_failed++ == 0)
				snprintf(out->check_msg, sizeof(out->check_msg), "%s",
					 detail ? detail : "(no detail)");
			free(detail);
		}
		if (back)
			break;
		if (vt_now_ns() > deadline) {
			fprintf(stderr,
				"teardown: %llu of A's %llu ranges still busy after %d ms\n",
				(unsigned long long)((st.busy_bytes - baseline) / 4096),
				(unsigned long long)n, timeout_ms);
			goto out;
		}
	}
	size_t k = out->rounds < lat_cap ? out->rounds : lat_cap;
	qsort(lat, k, sizeof(*lat), cmp_u64);
	out->p99_ns = lat[k - 1 - (k - 1) / 100];
	rc = 0;
out:
	if (pid > 0) {
		if (rc != 0)
			kill(pid, SIGKILL);
		if (go[1] >= 0)
			close(go[1]);
		go[1] = -1;
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < 2; i++) {
		if (ready[i] >= 0)
			close(ready[i]);
		if (go[i] >= 0)
			close(go[i]);
	}
	free(lat);
	if (b.fd >= 0)
		vt_raw_close(&b);
	if (admin)
		vad_close(admin);
	return rc;
}
