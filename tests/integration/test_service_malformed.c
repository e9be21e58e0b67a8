/*
 * test_service_malformed.c - what a raw socket can throw at the daemon: oversized and
 * empty length headers, truncated frames, undecodable protobuf, requests without an
 * operation, requests before hello, a wrong protocol version, byte-at-a-time writers,
 * pipelined bursts and clients that vanish with replies unread. Each time the offender
 * gets an error or is dropped, a bystander client keeps working, and at the end the
 * daemon holds no extra bytes and no extra file descriptors.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "rawclient.h"
#include "vtassert.h"

#define PAGE	       4096u
#define REPLY_TIMEOUT  vt_timeout_ms(5000)
#define BYSTANDER_SIZE (8 * PAGE)
#define BYSTANDER_SEED 0xB75

struct malformed {
	struct vt_daemon d;
	vad_client *bystander;
	void *bystander_range;
	uint64_t base_busy; /* with the bystander's range */
	int base_fds;	    /* with the bystander connected */
};

static int group_setup(void **state)
{
	/* No periodic snapshot during the run: the SQLite WAL files it opens on first write
	 * would look like descriptor leaks. */
	if (VT_GROUP_FIXTURE_SETUP(state, struct malformed, "stats_interval = 1h\n", NULL) != 0)
		return -1;
	struct malformed *m = *state;
	if (vt_connect(&m->d, "bystander", &m->bystander) != 0)
		return -1;
	if (vad_alloc(m->bystander, BYSTANDER_SIZE, 0, &m->bystander_range) != 0) {
		fprintf(stderr, "bystander alloc: %s\n", vad_last_error(m->bystander));
		return -1;
	}
	vt_fill_pattern(m->bystander_range, BYSTANDER_SIZE, BYSTANDER_SEED);
	struct vad_stats s;
	if (vt_wait_busy(&m->d, BYSTANDER_SIZE, 2, vt_timeout_ms(2000), &s) != 0)
		return -1;
	m->base_busy = s.busy_bytes;
	/* The harness's own probe connections close asynchronously: the baseline is the
	 * lowest count seen over a short quiet period. */
	m->base_fds = vt_fd_count(m->d.pid);
	for (int i = 0; i < 30; i++) {
		vt_sleep_ms(10);
		int n = vt_fd_count(m->d.pid);
		if (n >= 0 && n < m->base_fds)
			m->base_fds = n;
	}
	return m->base_fds > 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	struct malformed *m = *state;
	if (m->bystander)
		vad_close(m->bystander);
	return vt_group_daemon_stop_if_running(state);
}

/* The bystander's range is intact and it can still allocate and free. */
static void assert_bystander_ok(struct malformed *m)
{
	assert_true(vt_check_pattern(m->bystander_range, BYSTANDER_SIZE, BYSTANDER_SEED) < 0);
	void *p;
	VT_ASSERT_OK(m->bystander, vad_alloc(m->bystander, PAGE, 0, &p));
	memset(p, 0xEE, PAGE);
	VT_ASSERT_OK(m->bystander, vad_free(m->bystander, p));
	struct vad_stats s;
	VT_ASSERT_OK(m->bystander, vad_stats(m->bystander, &s));
	assert_int_equal(BYSTANDER_SIZE, s.held_bytes);
}

/* The offender got an error reply and/or was disconnected (never an OK, never silence). */
static void assert_refused_or_dropped(struct vt_raw *r, const char *what)
{
	Vad__Response *resp = NULL;
	enum vt_raw_result res = vt_raw_recv(r, &resp, REPLY_TIMEOUT);
	if (res == VT_RAW_RESPONSE) {
		if (resp->error == VAD__ERROR__OK)
			fail_msg("%s: the daemon answered OK", what);
		assert_non_null(resp->message);
		assert_true(resp->message[0] != '\0');
		vt_raw_response_free(resp);
		/* The stream cannot be resynchronised: the daemon must close it. */
		if (!vt_raw_wait_closed(r, REPLY_TIMEOUT))
			fail_msg("%s: error sent but the connection stayed open", what);
	} else if (res != VT_RAW_CLOSED) {
		fail_msg("%s: the daemon neither answered nor closed within %d ms", what,
			 REPLY_TIMEOUT);
	}
}

static void raw_open(struct malformed *m, struct vt_raw *r, bool hello)
{
	assert_int_equal(0, vt_raw_connect(r, m->d.socket_path));
	if (hello)
		assert_int_equal(0, vt_raw_hello(r, "raw"));
}

/* A working connection: one alloc and free round trip. */
static void assert_raw_works(struct vt_raw *r)
{
	uint64_t off = 0;
	int rc = vt_raw_alloc(r, PAGE, &off);
	if (rc != 0)
		fail_msg("alloc on the raw connection: %s", vt_error_name(rc));
	rc = vt_raw_free(r, off);
	if (rc != 0)
		fail_msg("free on the raw connection: %s", vt_error_name(rc));
}

static void send_header(struct vt_raw *r, uint32_t len)
{
	uint8_t hdr[VAD_FRAME_HEADER];
	vad_frame_put_header(hdr, len);
	assert_int_equal(0, vt_raw_send(r, hdr, sizeof(hdr)));
}

/* ---- framing -------------------------------------------------------------------- */

static void test_oversized_length_header(void **state)
{
	struct malformed *m = *state;
	static const uint32_t lengths[] = {VAD_FRAME_MAX_DEFAULT + 1, 0x7fffffffu, 0xffffffffu};
	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		for (int hello = 0; hello < 2; hello++) {
			struct vt_raw r;
			raw_open(m, &r, hello);
			send_header(&r, lengths[i]);
			uint8_t junk[512];
			memset(junk, 'x', sizeof(junk));
			/* the daemon may already have closed: a failed send is fine */
			send(r.fd, junk, sizeof(junk), MSG_NOSIGNAL);
			char what[64];
			snprintf(what, sizeof(what), "length %u%s", lengths[i],
				 hello ? " after hello" : "");
			assert_refused_or_dropped(&r, what);
			vt_raw_close(&r);
			assert_bystander_ok(m);
		}
	}
}

static void test_zero_length_frame(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, true);
	send_header(&r, 0);
	assert_refused_or_dropped(&r, "zero-length frame");
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

static void test_truncated_frame_then_close(void **state)
{
	struct malformed *m = *state;
	for (int hello = 0; hello < 2; hello++) {
		struct vt_raw r;
		raw_open(m, &r, hello);
		send_header(&r, 100);
		assert_int_equal(0, vt_raw_send(&r, "0123456789", 10));
		vt_raw_close(&r);
		/* and a lone half header */
		raw_open(m, &r, hello);
		assert_int_equal(0, vt_raw_send(&r, "\x10\x00", 2));
		vt_raw_close(&r);
		assert_bystander_ok(m);
	}
}

static void test_byte_at_a_time(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, false);
	struct vt_req q;
	uint8_t frame[256];
	size_t n = vt_frame_request(vt_req_hello(&q, "slow"), 5, frame, sizeof(frame));
	assert_true(n > VAD_FRAME_HEADER);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(0, vt_raw_send(&r, &frame[i], 1));
		vt_sleep_ms(2); /* a pace, not a wait: each byte its own read in the daemon */
	}
	Vad__Response *resp = NULL;
	assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&r, &resp, REPLY_TIMEOUT));
	assert_int_equal(5, resp->id);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	vt_raw_response_free(resp);
	assert_raw_works(&r);
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

/* ---- undecodable and unexpected requests --------------------------------------- */

static void test_garbage_protobuf(void **state)
{
	struct malformed *m = *state;
	/* Wire type 7 does not exist; an 11-byte varint is too long; a length-delimited
	 * field that runs past the end. */
	static const uint8_t garbage[][12] = {
	    {0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	    {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	    {0x1a, 0x7f, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a},
	};
	struct vt_raw r;
	raw_open(m, &r, true);
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		assert_null(vad__request__unpack(NULL, sizeof(garbage[i]), garbage[i]));
		send_header(&r, sizeof(garbage[i]));
		assert_int_equal(0, vt_raw_send(&r, garbage[i], sizeof(garbage[i])));
		Vad__Response *resp = NULL;
		enum vt_raw_result res = vt_raw_recv(&r, &resp, REPLY_TIMEOUT);
		if (res != VT_RAW_RESPONSE)
			fail_msg("garbage %zu: no EPROTO reply (%s)", i,
				 res == VT_RAW_CLOSED ? "connection closed" : "timeout");
		if (resp->error != VAD__ERROR__EPROTO)
			fail_msg("garbage %zu: %s, expected EPROTO", i, vt_error_name(resp->error));
		assert_true(resp->message && resp->message[0]);
		vt_raw_response_free(resp);
		/* The frame boundary was intact, so the connection still works. */
		assert_raw_works(&r);
	}
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

static void test_request_without_op(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, true);
	Vad__Request req = VAD__REQUEST__INIT;
	req.id = 77;
	Vad__Response *resp = vt_raw_call(&r, &req, REPLY_TIMEOUT);
	assert_non_null(resp);
	if (resp->error != VAD__ERROR__EUNSUPPORTED)
		fail_msg("request without op: %s, expected EUNSUPPORTED",
			 vt_error_name(resp->error));
	assert_true(resp->message && resp->message[0]);
	vt_raw_response_free(resp);
	assert_raw_works(&r);
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

static void test_first_request_not_hello(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, false);
	struct vt_req q;
	Vad__Request *req = vt_req_alloc(&q, NULL, PAGE, 0, 0);
	req->id = 9;
	Vad__Response *resp = vt_raw_call(&r, req, REPLY_TIMEOUT);
	assert_non_null(resp);
	if (resp->error != VAD__ERROR__ENOHELLO)
		fail_msg("alloc before hello: %s, expected ENOHELLO", vt_error_name(resp->error));
	assert_true(resp->message && resp->message[0]);
	vt_raw_response_free(resp);
	vt_raw_close(&r);
	/* Same for an admin operation. */
	raw_open(m, &r, false);
	resp = vt_raw_call(&r, vt_req_purge(&q, NULL), REPLY_TIMEOUT);
	assert_non_null(resp);
	assert_int_equal(VAD__ERROR__ENOHELLO, resp->error);
	vt_raw_response_free(resp);
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

static void test_wrong_protocol_version(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, false);
	struct vt_req q;
	vt_req_hello(&q, "future");
	q.op.hello.version = VAD_PROTOCOL_VERSION + 1000;
	Vad__Response *resp = vt_raw_call(&r, &q.req, REPLY_TIMEOUT);
	assert_non_null(resp);
	if (resp->error != VAD__ERROR__EVERSION)
		fail_msg("hello with version %u: %s, expected EVERSION", q.op.hello.version,
			 vt_error_name(resp->error));
	vt_raw_response_free(resp);
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

static void test_free_unknown_offsets(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, true);
	static const uint64_t offsets[] = {12345, 0, 1ull << 62, UINT64_MAX};
	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		int rc = vt_raw_free(&r, offsets[i]);
		if (rc != VAD__ERROR__ENOTHELD)
			fail_msg("free of offset %llu never held: %s, expected ENOTHELD",
				 (unsigned long long)offsets[i], vt_error_name(rc));
	}
	assert_raw_works(&r);
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

/* ---- pipelining and vanishing clients ------------------------------------------- */

#define BURST 50

static void test_pipelined_burst(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, true);
	/* BURST alloc requests in one write. */
	uint8_t *buf = malloc(BURST * 64);
	assert_non_null(buf);
	size_t len = 0;
	for (int i = 0; i < BURST; i++) {
		struct vt_req q;
		size_t n =
		    vt_frame_request(vt_req_alloc(&q, NULL, PAGE * (uint64_t)(1 + i % 3), 0, 0),
				     1000 + (uint64_t)i, buf + len, BURST * 64 - len);
		assert_true(n > 0);
		len += n;
	}
	assert_int_equal(0, vt_raw_send(&r, buf, len));
	uint64_t offsets[BURST];
	bool seen[BURST] = {false};
	for (int i = 0; i < BURST; i++) {
		Vad__Response *resp = NULL;
		assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&r, &resp, REPLY_TIMEOUT));
		assert_true(resp->id >= 1000 && resp->id < 1000 + BURST);
		int k = (int)(resp->id - 1000);
		assert_false(seen[k]);
		seen[k] = true;
		assert_int_equal(VAD__ERROR__OK, resp->error);
		assert_int_equal(1, resp->alloc->n_offsets);
		offsets[k] = resp->alloc->offsets[0];
		vt_raw_response_free(resp);
	}
	/* No two of them overlap. */
	for (int i = 0; i < BURST; i++)
		for (int j = i + 1; j < BURST; j++) {
			uint64_t si = PAGE * (uint64_t)(1 + i % 3),
				 sj = PAGE * (uint64_t)(1 + j % 3);
			assert_false(offsets[i] < offsets[j] + sj && offsets[j] < offsets[i] + si);
		}
	/* Free them all, pipelined too. */
	len = 0;
	for (int i = 0; i < BURST; i++) {
		struct vt_req q;
		size_t n = vt_frame_request(vt_req_free(&q, NULL, &offsets[i], 1),
					    2000 + (uint64_t)i, buf + len, BURST * 64 - len);
		assert_true(n > 0);
		len += n;
	}
	assert_int_equal(0, vt_raw_send(&r, buf, len));
	for (int i = 0; i < BURST; i++) {
		Vad__Response *resp = NULL;
		assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&r, &resp, REPLY_TIMEOUT));
		assert_true(resp->id >= 2000 && resp->id < 2000 + BURST);
		assert_int_equal(VAD__ERROR__OK, resp->error);
		vt_raw_response_free(resp);
	}
	free(buf);
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

static void test_vanish_with_replies_unread(void **state)
{
	struct malformed *m = *state;
	for (int round = 0; round < 5; round++) {
		struct vt_raw r;
		raw_open(m, &r, true);
		uint8_t buf[256 * 32];
		size_t len = 0;
		for (int i = 0; i < 256; i++) {
			struct vt_req q;
			size_t n = vt_frame_request(vt_req_alloc(&q, NULL, PAGE, 0, 0),
						    1 + (uint64_t)i, buf + len, sizeof(buf) - len);
			assert_true(n > 0);
			len += n;
		}
		assert_int_equal(0, vt_raw_send(&r, buf, len));
		vt_raw_close(&r);
	}
	/* Whatever the daemon allocated for them went back when they vanished. */
	struct vad_stats s;
	if (vt_wait_busy(&m->d, m->base_busy, UINT32_MAX, vt_timeout_ms(2000), &s) != 0)
		fail_msg("vanished clients left %llu bytes busy",
			 (unsigned long long)(s.busy_bytes - m->base_busy));
	assert_bystander_ok(m);
}

static void test_map_arena_passes_fd(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, true);
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(&r, vt_req_map_arena(&q, NULL), REPLY_TIMEOUT);
	assert_non_null(resp);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	assert_int_equal(VAD__RESPONSE__RESULT_MAP_ARENA, resp->result_case);
	assert_non_null(resp->map_arena->arena);
	assert_true(resp->map_arena->arena->size > 0);
	vt_raw_response_free(resp);
	assert_int_equal(1, r.fds_received);
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

/* A client that sends without ever reading its replies: the daemon stops reading from it
 * (bounded buffering) instead of queueing replies without limit, and serves others. */
static void test_client_that_never_reads(void **state)
{
	struct malformed *m = *state;
	struct vt_raw r;
	raw_open(m, &r, true);
	int fl = fcntl(r.fd, F_GETFL);
	assert_int_equal(0, fcntl(r.fd, F_SETFL, fl | O_NONBLOCK));
	/* One frame: free of an offset never held, answered by an error sentence that is
	 * several times longer than the request. */
	uint64_t off = 1;
	struct vt_req q;
	uint8_t frame[64];
	size_t flen = vt_frame_request(vt_req_free(&q, NULL, &off, 1), 1, frame, sizeof(frame));
	assert_true(flen > 0);
	enum { CHUNK_FRAMES = 1024 };
	uint8_t *chunk = malloc(flen * CHUNK_FRAMES);
	assert_non_null(chunk);
	for (int i = 0; i < CHUNK_FRAMES; i++)
		memcpy(chunk + (size_t)i * flen, frame, flen);
	const size_t cap = 64u << 20;
	size_t sent = 0, pos = 0;
	bool blocked = false;
	while (sent < cap && !blocked) {
		ssize_t w = send(r.fd, chunk + pos, flen * CHUNK_FRAMES - pos, MSG_NOSIGNAL);
		if (w > 0) {
			sent += (size_t)w;
			pos = (pos + (size_t)w) % (flen * CHUNK_FRAMES);
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			fail_msg("send after %zu bytes: %s", sent, strerror(errno));
		/* Full: is the daemon still draining it? */
		struct pollfd p = {.fd = r.fd, .events = POLLOUT};
		blocked = poll(&p, 1, vt_timeout_ms(500)) == 0;
	}
	free(chunk);
	print_message("the daemon stopped reading after %zu bytes of requests\n", sent);
	if (!blocked)
		fail_msg("the daemon kept reading %zu bytes of requests whose replies were never "
			 "read: unbounded buffering",
			 sent);
	/* Meanwhile everyone else is served. */
	assert_bystander_ok(m);
	assert_true(vt_daemon_alive(&m->d));
	vt_raw_close(&r);
	assert_bystander_ok(m);
}

/* ---- nothing leaked ------------------------------------------------------------- */

static void test_nothing_leaked(void **state)
{
	struct malformed *m = *state;
	assert_true(vt_daemon_alive(&m->d));
	assert_bystander_ok(m);
	struct vad_stats s;
	if (vt_wait_busy(&m->d, m->base_busy, UINT32_MAX, vt_timeout_ms(2000), &s) != 0)
		fail_msg("busy bytes %llu, baseline %llu", (unsigned long long)s.busy_bytes,
			 (unsigned long long)m->base_busy);
	/* Only the bystander and the stats connection are sessions. */
	assert_int_equal(0, vt_wait_busy(&m->d, m->base_busy, 2, vt_timeout_ms(2000), &s));
	int fds = vt_wait_fds(&m->d, m->base_fds, vt_timeout_ms(2000));
	if (fds > m->base_fds)
		fail_msg("daemon has %d open descriptors, %d before the abuse", fds, m->base_fds);
	assert_int_equal(0, vt_check_invariants(&m->d));
	vad_close(m->bystander);
	m->bystander = NULL;
	assert_int_equal(0, vt_daemon_stop(&m->d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_oversized_length_header),
	    cmocka_unit_test(test_zero_length_frame),
	    cmocka_unit_test(test_truncated_frame_then_close),
	    cmocka_unit_test(test_byte_at_a_time),
	    cmocka_unit_test(test_garbage_protobuf),
	    cmocka_unit_test(test_request_without_op),
	    cmocka_unit_test(test_first_request_not_hello),
	    cmocka_unit_test(test_wrong_protocol_version),
	    cmocka_unit_test(test_free_unknown_offsets),
	    cmocka_unit_test(test_pipelined_burst),
	    cmocka_unit_test(test_vanish_with_replies_unread),
	    cmocka_unit_test(test_map_arena_passes_fd),
	    cmocka_unit_test(test_client_that_never_reads),
	    cmocka_unit_test(test_nothing_leaked),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
