/*
 * test_hostile_slow.c - clients that are slow on purpose: slowloris writers trickling frames
 * byte by byte over seconds, connections that start a frame and never finish it, and
 * pipeliners that send thousands of requests and never read a reply. Meanwhile a bystander
 * keeps doing alloc/free round trips: it must be answered (its latency before and during
 * is printed, not judged), the daemon must stop reading the pipeliners instead of buffering
 * for them (its RSS stays bounded), and afterwards no byte, range or fd is left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "hostile_util.h"
#include "vtassert.h"

#define PAGE	      4096u
#define REPLY_TIMEOUT vt_timeout_ms(10000) /* generous: "answered at all" */
#define SLOW_CLIENTS  16
#define STUCK_CLIENTS 64
#define PIPELINERS    4

struct slow {
	struct vt_daemon d;
	struct vt_baseline base;
	struct vt_probe probe;
	struct vt_latency before;
};

static int group_setup(void **state)
{
	/* No periodic stats snapshot: its SQLite files would look like fd leaks. */
	return VT_GROUP_FIXTURE_SETUP(state, struct slow, "stats_interval = 1h\n", NULL);
}

/* Each test: baseline without the probe, then the probe connects and measures calm latency. */
static int test_setup(void **state)
{
	struct slow *s = *state;
	if (vt_baseline_take(&s->d, &s->base) != 0)
		return -1;
	if (vt_probe_open(&s->probe, &s->d, "bystander", REPLY_TIMEOUT) != 0)
		return -1;
	if (vt_probe_measure(&s->probe, (unsigned)vt_scale(300), &s->before) != 0)
		return -1;
	vt_latency_print("bystander before", &s->before);
	return 0;
}

static int test_teardown(void **state)
{
	struct slow *s = *state;
	vt_probe_close(&s->probe);
	return 0;
}

static void assert_back_to_baseline(struct slow *s)
{
	vt_probe_close(&s->probe);
	if (vt_baseline_check(&s->d, &s->base, vt_timeout_ms(5000)) != 0)
		fail_msg("the daemon did not return to its baseline");
}

static void assert_probe_served(struct slow *s, const char *label)
{
	struct vt_latency during;
	vt_probe_stop(&s->probe, &during);
	vt_latency_print(label, &during);
	if (during.failed)
		fail_msg("the bystander was not served during the attack: %s",
			 s->probe.first_error);
	assert_true(during.n > 0);
}

/* Encode req as frame id into buf (at most cap bytes); returns its length. */
static size_t encode(Vad__Request *req, uint64_t id, uint8_t *buf, size_t cap)
{
	size_t n = vt_frame_request(req, id, buf, cap);
	assert_true(n > 0);
	return n;
}

/* ---- slowloris: whole frames, one byte at a time ----------------------------------------- */

static void test_trickled_frames(void **state)
{
	struct slow *s = *state;
	struct vt_raw slow[SLOW_CLIENTS];
	uint8_t msg[SLOW_CLIENTS][128];
	size_t len[SLOW_CLIENTS];
	struct vt_req q;

	for (int i = 0; i < SLOW_CLIENTS; i++) {
		assert_int_equal(0, vt_raw_connect(&slow[i], s->d.socket_path));
		len[i] = encode(vt_req_hello(&q, "slowloris"), 1, msg[i], sizeof(msg[i]));
		len[i] += encode(vt_req_alloc(&q, NULL, (uint64_t)(i + 1) * PAGE, 0, 0), 2,
				 msg[i] + len[i], sizeof(msg[i]) - len[i]);
	}
	assert_int_equal(0, vt_probe_start(&s->probe));
	/* Every slow client sends one byte per round; ~40 ms per round stretches the two
	 * frames (about 25 bytes) over a second or more. */
	size_t longest = 0;
	for (int i = 0; i < SLOW_CLIENTS; i++)
		longest = len[i] > longest ? len[i] : longest;
	uint64_t t0 = vt_now_ns();
	for (size_t pos = 0; pos < longest; pos++) {
		for (int i = 0; i < SLOW_CLIENTS; i++)
			if (pos < len[i])
				assert_int_equal(0, vt_raw_send(&slow[i], &msg[i][pos], 1));
		vt_sleep_ms(40); /* a pace, not a wait: the attack's duration */
	}
	printf("trickled %zu bytes per client over %.1f s\n", longest,
	       (double)(vt_now_ns() - t0) / 1e9);
	assert_probe_served(s, "bystander during slowloris");

	/* The slow clients were served correctly in the end. */
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		Vad__Response *resp = NULL;
		assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&slow[i], &resp, REPLY_TIMEOUT));
		assert_int_equal(1, resp->id);
		assert_int_equal(VAD__ERROR__OK, resp->error);
		vt_raw_response_free(resp);
		assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&slow[i], &resp, REPLY_TIMEOUT));
		assert_int_equal(2, resp->id);
		if (resp->error != VAD__ERROR__OK)
			fail_msg("slow client %d: alloc refused: %s", i, resp->message);
		assert_int_equal(1, resp->alloc->n_offsets);
		vt_raw_response_free(resp);
		vt_raw_close(&slow[i]);
	}
	assert_back_to_baseline(s);
}

/* ---- slowloris: frames started and never finished ---------------------------------------- */

static void test_unfinished_frames(void **state)
{
	struct slow *s = *state;
	struct vt_raw stuck[STUCK_CLIENTS];
	long rss0 = vt_rss_kb(s->d.pid);

	for (int i = 0; i < STUCK_CLIENTS; i++) {
		assert_int_equal(0, vt_raw_connect(&stuck[i], s->d.socket_path));
		uint8_t buf[256];
		size_t n = 0;
		struct vt_req q;
		if (i % 2) /* a session in good standing */
			n = encode(vt_req_hello(&q, "slowloris"), 1, buf, sizeof(buf));
		switch (i % 4) {
		case 0: /* half a length header */
			buf[n++] = 0x10;
			buf[n++] = 0x00;
			break;
		case 1: /* a header announcing 60000 bytes, then 10 of them */
		case 2:
			buf[n++] = 0x60;
			buf[n++] = 0xea;
			buf[n++] = 0x00;
			buf[n++] = 0x00;
			memset(buf + n, 0x08, 10);
			n += 10;
			break;
		default: { /* a real alloc frame minus its last byte */
			uint8_t fr[64];
			size_t m = encode(vt_req_alloc(&q, NULL, PAGE, 0, 0), 2, fr, sizeof(fr));
			memcpy(buf + n, fr, m - 1);
			n += m - 1;
			break;
		}
		}
		assert_int_equal(0, vt_raw_send(&stuck[i], buf, n));
	}
	/* The daemon has every stuck connection (counted at accept) and has read the bytes of
	 * those that said hello: their one reply came, sent together with the unfinished frame. */
	struct vad_stats st = {0};
	uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
	while ((vt_stats(&s->d, &st) != 0 || st.clients < STUCK_CLIENTS + 2) &&
	       vt_now_ns() < deadline)
		vt_sleep_ms(20);
	if (st.clients < STUCK_CLIENTS + 2)
		fail_msg("the daemon counts %u clients, not the %d stuck ones, the probe and "
			 "this one",
			 st.clients, STUCK_CLIENTS);
	for (int i = 1; i < STUCK_CLIENTS; i += 2) {
		Vad__Response *resp = NULL;
		assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&stuck[i], &resp, REPLY_TIMEOUT));
		assert_int_equal(VAD__ERROR__OK, resp->error);
		vt_raw_response_free(resp);
	}
	/* With all of them pending, the bystander completes its round trips. */
	assert_int_equal(0, vt_probe_start(&s->probe));
	int waited = vt_probe_wait(&s->probe, (unsigned)vt_scale(200), REPLY_TIMEOUT);
	assert_probe_served(s, "bystander during unfinished frames");
	if (waited != 0)
		fail_msg("the bystander was not served with %d unfinished frames pending",
			 STUCK_CLIENTS);
	long rss1 = vt_rss_kb(s->d.pid);
	printf("daemon RSS %ld KiB before, %ld KiB with %d unfinished frames pending\n", rss0, rss1,
	       STUCK_CLIENTS);

	/* The stuck clients are all still connected and no frame was misread as complete: none
	 * got another reply. A negative check: 20 ms of nothing, after the hundreds of round
	 * trips above in which a misread frame would have been answered. */
	for (int i = 0; i < STUCK_CLIENTS; i++) {
		Vad__Response *resp = NULL;
		assert_int_equal(VT_RAW_TIMEOUT, vt_raw_recv(&stuck[i], &resp, 20));
	}
	for (int i = 0; i < STUCK_CLIENTS; i++)
		vt_raw_close(&stuck[i]);
	assert_back_to_baseline(s);
}

/* ---- pipeliners that never read ---------------------------------------------------------- */

/* Send from buf round-robin without blocking until the daemon has taken nothing for
 * quiet_ms; returns the bytes it took. */
static size_t push_until_stalled(int fd, const uint8_t *buf, size_t len, size_t *pos, int quiet_ms)
{
	size_t sent = 0;
	uint64_t last = vt_now_ns();
	while ((vt_now_ns() - last) / 1000000u < (uint64_t)quiet_ms) {
		ssize_t n = send(fd, buf + *pos, len - *pos, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			sent += (size_t)n;
			*pos = (*pos + (size_t)n) % len;
			last = vt_now_ns();
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			fail_msg("pipeliner send: %s", strerror(errno));
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		poll(&p, 1, 20);
	}
	return sent;
}

static void test_pipeliners_never_read(void **state)
{
	struct slow *s = *state;
	/* One block of requests, sent over and over: whole frames of stats (big replies)
	 * and one-page allocs (ranges the daemon must account for). */
	enum { PAIRS = 4096 };
	size_t cap = PAIRS * 64, len = 0;
	uint8_t *block = malloc(cap);
	assert_non_null(block);
	struct vt_req q;
	for (int i = 0; i < PAIRS; i++) {
		len += encode(vt_req_stats(&q, NULL), 3 + 2 * (uint64_t)i, block + len, cap - len);
		len += encode(vt_req_alloc(&q, NULL, PAGE, 0, 0), 4 + 2 * (uint64_t)i, block + len,
			      cap - len);
	}

	struct vt_raw pipe[PIPELINERS];
	size_t pos[PIPELINERS] = {0}, sent[PIPELINERS] = {0};
	for (int i = 0; i < PIPELINERS; i++) {
		assert_int_equal(0, vt_raw_connect(&pipe[i], s->d.socket_path));
		assert_int_equal(0, vt_raw_hello(&pipe[i], "never-reads"));
	}
	assert_int_equal(0, vt_probe_start(&s->probe));
	for (int i = 0; i < PIPELINERS; i++)
		sent[i] = push_until_stalled(pipe[i].fd, block, len, &pos[i], 500);
	long rss1 = vt_rss_kb(s->d.pid);
	/* Keep pushing: a daemon that still reads them would take more and grow. */
	size_t more = 0;
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < PIPELINERS; i++)
			more += push_until_stalled(pipe[i].fd, block, len, &pos[i], 100);
	long rss2 = vt_rss_kb(s->d.pid);
	assert_probe_served(s, "bystander during never-reading pipeliners");

	size_t total = 0;
	for (int i = 0; i < PIPELINERS; i++)
		total += sent[i];
	printf("pipeliners: %zu bytes of requests taken (%.0f frames each, block of %zu), %zu "
	       "more later; daemon RSS %ld KiB at baseline, %ld KiB when stalled, %ld KiB "
	       "after pushing on\n",
	       total, (double)total / PIPELINERS / ((double)len / (2 * PAIRS)), len, more,
	       s->base.rss_kb, rss1, rss2);
	/* Bounded: a daemon buffering without limit takes everything offered; this one must
	 * stop after about its output watermark (256 KiB of replies) plus socket buffers. */
	for (int i = 0; i < PIPELINERS; i++)
		if (sent[i] >= 16u << 20)
			fail_msg("pipeliner %d: the daemon took %zu bytes without a reply read", i,
				 sent[i]);
	if (more > (size_t)PIPELINERS * (1u << 20))
		fail_msg("the daemon kept reading stalled pipeliners (%zu bytes more)", more);
	long bound_kb = vt_mode() == VT_MODE_NORMAL ? 64 * 1024 : 512 * 1024;
	if (rss2 - s->base.rss_kb > bound_kb)
		fail_msg("daemon RSS grew by %ld KiB for %d stalled pipeliners (bound %ld KiB)",
			 rss2 - s->base.rss_kb, PIPELINERS, bound_kb);

	/* They vanish with all replies unread: every range they got goes back. */
	for (int i = 0; i < PIPELINERS; i++)
		vt_raw_close(&pipe[i]);
	free(block);
	assert_back_to_baseline(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_trickled_frames, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_unfinished_frames, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_pipeliners_never_read, test_setup, test_teardown),
	};
	return cmocka_run_group_tests_name("hostile_slow", tests, group_setup,
					   vt_group_daemon_stop);
}
