/*
 * test_service_replies.c - what error replies say, seen through a raw socket: every string a
 * client sent comes back (and reaches the log) escaped to printable ASCII and bounded, so a
 * strict proto3 decoder accepts the reply; an Alloc whose count and sizes disagree is refused
 * instead of guessed at; size messages give exact figures where a rounded one would hide the
 * difference; and a batch whose sizes sum past 2^64 is refused, never wrapped to a small total.
 */
#include <string.h>

#include "rawclient.h"
#include "vtassert.h"

#define PAGE	      4096u
#define GiB	      (1024ull * 1024 * 1024)
#define REPLY_TIMEOUT vt_timeout_ms(5000)

/* A 256M default arena and a sparse 16 GiB one (nothing is touched: it costs no memory). */
static const char *const reply_arenas = "[arena default]\n"
					"size = 256M\n"
					"\n"
					"[arena big]\n"
					"size = 16G\n";

VT_DAEMON_GROUP(group_setup, "stats_interval = 1h\n", reply_arenas)

static void raw_open(const struct vt_daemon *d, struct vt_raw *r, const char *name)
{
	assert_int_equal(0, vt_raw_connect(r, d->socket_path));
	assert_int_equal(0, vt_raw_hello(r, name));
}

/* Every byte of text is printable ASCII (so valid UTF-8 for any proto3 decoder). */
static void assert_printable(const char *text, const char *what)
{
	assert_non_null(text);
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			fail_msg("%s: byte 0x%02x at %zu of \"%s\" is not printable ASCII", what,
				 *p, (size_t)(p - (const unsigned char *)text), text);
}

/* resp (consumed) is the error want; its sentence is printable and contains each needle. */
static void expect_error(Vad__Response *resp, int want, const char *what, const char *needle1,
			 const char *needle2)
{
	assert_non_null(resp);
	if ((int)resp->error != want)
		fail_msg("%s: got %s (\"%s\"), expected %s", what, vt_error_name(resp->error),
			 resp->message ? resp->message : "", vt_error_name(want));
	assert_printable(resp->message, what);
	if (needle1 && !strstr(resp->message, needle1))
		fail_msg("%s: \"%s\" does not contain \"%s\"", what, resp->message, needle1);
	if (needle2 && !strstr(resp->message, needle2))
		fail_msg("%s: \"%s\" does not contain \"%s\"", what, resp->message, needle2);
	vt_raw_response_free(resp);
}

static Vad__Response *alloc_req(struct vt_raw *r, const char *arena, uint64_t size, uint64_t align,
				uint32_t count, const uint64_t *sizes, size_t n_sizes)
{
	struct vt_req q;
	vt_req_alloc(&q, arena, size, align, count);
	q.op.alloc.sizes = (uint64_t *)sizes;
	q.op.alloc.n_sizes = n_sizes;
	return vt_raw_call(r, &q.req, REPLY_TIMEOUT);
}

/* Free what an OK alloc reply granted (consumes resp). */
static void free_granted(struct vt_raw *r, Vad__Response *resp, size_t want)
{
	assert_non_null(resp);
	if (resp->error != VAD__ERROR__OK)
		fail_msg("alloc: %s (\"%s\")", vt_error_name(resp->error), resp->message);
	assert_int_equal(VAD__RESPONSE__RESULT_ALLOC, resp->result_case);
	assert_int_equal(want, resp->alloc->n_offsets);
	struct vt_req q;
	Vad__Response *fr = vt_raw_call(
	    r, vt_req_free(&q, resp->alloc->arena, resp->alloc->offsets, resp->alloc->n_offsets),
	    REPLY_TIMEOUT);
	assert_non_null(fr);
	assert_int_equal(VAD__ERROR__OK, fr->error);
	assert_int_equal(want, fr->free->freed);
	vt_raw_response_free(fr);
	vt_raw_response_free(resp);
}

/* ---- client strings come back escaped ----------------------------------------------------- */

/* A name with a newline, an escape sequence, a quote and bytes that are not UTF-8. */
static const char hostile[] = "a\nb\x1b[31m'\xff\xfe";
static const char hostile_escaped[] = "a\\nb\\x1b[31m\\'\\xff\\xfe";

static void test_arena_names_escaped(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r, "escapes");

	expect_error(alloc_req(&r, hostile, PAGE, 0, 0, NULL, 0), VAD__ERROR__ENOARENA, "alloc",
		     hostile_escaped, NULL);

	/* Every request that names the hostile arena: ENOARENA, the name echoed escaped. */
	uint64_t off = 0;
	struct vt_req q[6];
	const struct {
		Vad__Request *req;
		const char *what;
	} naming[] = {
	    {vt_req_free(&q[0], hostile, &off, 1), "free"},
	    {vt_req_map_arena(&q[1], hostile), "map-arena"},
	    {vt_req_share(&q[2], hostile, 0), "share"},
	    {vt_req_stats(&q[3], hostile), "stats"},
	    /* The test runs as the daemon's user or root: an admin, so these reach the lookup. */
	    {vt_req_purge(&q[4], hostile), "purge"},
	    {vt_req_walk(&q[5], hostile, 0, 0), "walk"},
	};
	for (size_t i = 0; i < sizeof(naming) / sizeof(naming[0]); i++)
		expect_error(vt_raw_call(&r, naming[i].req, REPLY_TIMEOUT), VAD__ERROR__ENOARENA,
			     naming[i].what, hostile_escaped, NULL);

	/* A long name is cut, and says so: the sentence stays short. */
	char longname[2000];
	memset(longname, '\x01', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	Vad__Response *resp = alloc_req(&r, longname, PAGE, 0, 0, NULL, 0);
	assert_non_null(resp);
	assert_true(strlen(resp->message) < 400);
	expect_error(resp, VAD__ERROR__ENOARENA, "alloc with a long name", "\\x01\\x01", "...'");

	/* A malformed token is described, never echoed. */
	expect_error(vt_raw_call(&r, vt_req_attach(&q[0], hostile), REPLY_TIMEOUT),
		     VAD__ERROR__ETOKEN, "attach", "token", NULL);
	vt_raw_close(&r);
}

static void test_session_name_escaped(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r, hostile);
	/* The second hello's refusal names the session as it was recorded. */
	struct vt_req q;
	expect_error(vt_raw_call(&r, vt_req_hello(&q, "again"), REPLY_TIMEOUT), VAD__ERROR__EINVAL,
		     "second hello", hostile_escaped, NULL);
	/* A frame too large to read breaks the stream; the daemon logs the session's name. */
	uint8_t header[4] = {0xff, 0xff, 0xff, 0x7f};
	assert_int_equal(0, vt_raw_send(&r, header, sizeof(header)));
	assert_true(vt_raw_wait_closed(&r, REPLY_TIMEOUT));
	vt_raw_close(&r);
	uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
	while (!vt_daemon_log_contains(d, hostile_escaped) && vt_now_ns() < deadline)
		vt_sleep_ms(10);
	if (!vt_daemon_log_contains(d, hostile_escaped)) {
		vt_daemon_print_log(d, 20);
		fail_msg("the log does not name the session as '%s'", hostile_escaped);
	}
	assert_false(vt_daemon_log_contains(d, "\x1b"));
	assert_false(vt_daemon_log_contains(d, "\xff"));
}

/* ---- count and sizes ------------------------------------------------------------------------ */

static void test_count_and_sizes_agree(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r, "counts");
	const uint64_t sizes[5] = {PAGE, 2 * PAGE, PAGE, 3 * PAGE, PAGE};
	expect_error(alloc_req(&r, "", 0, 0, 3, sizes, 5), VAD__ERROR__EINVAL, "count 3, 5 sizes",
		     "count 3", "5 sizes");
	expect_error(alloc_req(&r, "", 0, 0, 6, sizes, 5), VAD__ERROR__EINVAL, "count 6, 5 sizes",
		     "count 6", "5 sizes");
	expect_error(alloc_req(&r, "", PAGE, 0, 0, sizes, 5), VAD__ERROR__EINVAL, "size and sizes",
		     "size 4096", "5 sizes");
	/* Nothing was allocated by the refusals. */
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, REPLY_TIMEOUT, &s));
	/* count 0, or count equal to the list, means one range per size. */
	free_granted(&r, alloc_req(&r, "", 0, 0, 0, sizes, 5), 5);
	free_granted(&r, alloc_req(&r, "", 0, 0, 5, sizes, 5), 5);
	/* Without sizes, count ranges of size (0 means 1). */
	free_granted(&r, alloc_req(&r, "", PAGE, 0, 0, NULL, 0), 1);
	free_granted(&r, alloc_req(&r, "", PAGE, 0, 4, NULL, 0), 4);
	vt_raw_close(&r);
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, REPLY_TIMEOUT, &s));
}

/* ---- exact figures -------------------------------------------------------------------------- */

static void test_exact_size_messages(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r, "sizes");
	expect_error(alloc_req(&r, "big", 16 * GiB + PAGE, 0, 0, NULL, 0), VAD__ERROR__ESIZE,
		     "16 GiB + 4 KiB", "size 17179873280 B (16 GiB + 4 KiB)",
		     "17179869184 B (16 GiB)");
	expect_error(alloc_req(&r, "big", 16 * GiB + 1, 0, 0, NULL, 0), VAD__ERROR__ESIZE,
		     "16 GiB + 1 B", "17179869185 B (16 GiB + 1 B)", "17179869184 B (16 GiB)");
	/* Round figures stay short. */
	expect_error(alloc_req(&r, "big", 32 * GiB, 0, 0, NULL, 0), VAD__ERROR__ESIZE, "32 GiB",
		     "size 32 GiB", "of 16 GiB");
	expect_error(alloc_req(&r, "big", PAGE, 32 * GiB, 0, NULL, 0), VAD__ERROR__EALIGN,
		     "alignment 32 GiB", "alignment 32 GiB", "(16 GiB)");
	/* No room: the request and the largest free block, exactly. */
	Vad__Response *hold = alloc_req(&r, "big", 16 * GiB - 1024 * 1024, 0, 0, NULL, 0);
	assert_non_null(hold);
	assert_int_equal(VAD__ERROR__OK, hold->error);
	expect_error(alloc_req(&r, "big", 1024 * 1024 + PAGE, 0, 0, NULL, 0), VAD__ERROR__ENOSPC,
		     "1 MiB + 4 KiB", "1052672 B (1 MiB + 4 KiB)", "1048576 B (1 MiB)");
	free_granted(&r, hold, 1);
	vt_raw_close(&r);
}

/* ---- batch sums ----------------------------------------------------------------------------- */

#define BATCH 1024

static void test_batch_sum_never_wraps(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r, "sums");
	uint64_t *sizes = malloc(BATCH * sizeof(*sizes));
	assert_non_null(sizes);
	/* 1024 x 2^63 sums to 0 modulo 2^64. */
	for (int i = 0; i < BATCH; i++)
		sizes[i] = 1ull << 63;
	expect_error(alloc_req(&r, "big", 0, 0, 0, sizes, BATCH), VAD__ERROR__ESIZE, "2^63 each",
		     "range 1 of 1024", NULL);
	/* Each fits the arena; together they pass it (and 2^64) long before the end. */
	for (int i = 0; i < BATCH; i++)
		sizes[i] = 16 * GiB;
	expect_error(alloc_req(&r, "big", 0, 0, 0, sizes, BATCH), VAD__ERROR__ESIZE, "16 GiB each",
		     "range 2 of 1024", "16 GiB");
	/* Sizes that would wrap once rounded up to the quantum. */
	sizes[0] = PAGE;
	sizes[1] = UINT64_MAX;
	expect_error(alloc_req(&r, "big", 0, 0, 0, sizes, 2), VAD__ERROR__ESIZE, "2^64 - 1",
		     "range 2 of 2", NULL);
	/* count x size is refused by max_batch before any sum. */
	expect_error(alloc_req(&r, "big", 1ull << 62, 0, UINT32_MAX, NULL, 0), VAD__ERROR__ETOOBIG,
		     "count 2^32 - 1", "max_batch", NULL);
	free(sizes);
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, REPLY_TIMEOUT, &s));
	/* A sound batch still works on the same connection. */
	const uint64_t ok[3] = {PAGE, 8 * GiB, PAGE};
	free_granted(&r, alloc_req(&r, "big", 0, 0, 0, ok, 3), 3);
	vt_raw_close(&r);
	assert_int_equal(0, vt_check_invariants(d));
}

static void test_daemon_survived(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(5000), &s));
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_arena_names_escaped),
	    cmocka_unit_test(test_session_name_escaped),
	    cmocka_unit_test(test_count_and_sizes_agree),
	    cmocka_unit_test(test_exact_size_messages),
	    cmocka_unit_test(test_batch_sum_never_wraps),
	    cmocka_unit_test(test_daemon_survived),
	};
	return cmocka_run_group_tests_name("replies", tests, group_setup,
					   vt_group_daemon_stop_if_running);
}
