/*
 * test_service_teardown.c - one client's teardown never stalls another (requirement 3):
 * client A holds a million single-page ranges and closes its socket, is killed, or is
 * dropped by the daemon for a broken frame; client B, served by the same worker (workers = 1),
 * loops alloc+free meanwhile. B is served while the teardown is under way: its rounds
 * complete between polls that see A's ranges partly back (a teardown done in one go on the
 * worker would show only "all held" and "all back"). B's worst round trip is printed; the
 * figure with its bar is the bench's (make bench-registry). Every range is back, and the
 * consistency check passes while the reaper works and after. Also: the range-count limits
 * refuse with a sentence, and a daemon stopped while reaping exits cleanly.
 */
#include <stdio.h>
#include <string.h>

#include "rawclient.h"
#include "teardown.h"
#include "vtassert.h"

static uint64_t ranges(void)
{
	return (uint64_t)vt_scale(1000000);
}

/* One worker: A's teardown would run on the worker that serves B. 8 GiB of sparse arena: room
 * for a million pages twice over. */
VT_DAEMON_GROUP(setup, "workers = 1\nworker_balance = even\nmax_ranges_client = unlimited\n",
		"[arena default]\nsize = 8G\n")

static void run(void **state, enum vt_teardown_how how)
{
	struct vt_daemon *d = *state;
	struct vt_teardown_result r;
	uint64_t n = ranges();
	assert_int_equal(0, vt_teardown_run(d, n, how, true, vt_timeout_ms(120000), &r));
	printf("# %s of %llu ranges: B's worst round trip %.2f ms (p99 %.2f ms over %llu), all "
	       "back after %.0f ms, %u polls saw them partly back with B served between, %u "
	       "checks\n",
	       vt_teardown_name(how), (unsigned long long)n, r.max_ns / 1e6, r.p99_ns / 1e6,
	       (unsigned long long)r.rounds, r.back_ns / 1e6, r.partial_polls, r.checks);
	if (r.checks_failed)
		fail_msg("%u of %u consistency checks failed during the teardown: %s",
			 r.checks_failed, r.checks, r.check_msg);
	assert_true(r.checks > 0);
	/* Two such polls at least: B got answers between two partial states of the teardown. */
	if (r.partial_polls < 2)
		fail_msg("B was not served while A's %llu ranges were torn down: %u polls saw "
			 "them partly back with a round of B's between (the teardown ran in one "
			 "go; B's worst round trip %.1f ms, all back after %.0f ms)",
			 (unsigned long long)n, r.partial_polls, r.max_ns / 1e6, r.back_ns / 1e6);
	assert_int_equal(0, vt_check_invariants(d));
	struct vad_stats st;
	assert_int_equal(0, vt_stats(d, &st));
	assert_int_equal(0, st.busy_bytes);
}

static void test_close(void **state)
{
	run(state, VT_TEARDOWN_CLOSE);
}

static void test_kill(void **state)
{
	run(state, VT_TEARDOWN_KILL);
}

static void test_drop(void **state)
{
	run(state, VT_TEARDOWN_DROP);
}

/* SIGTERM while the reaper still has a million references to drop: a clean exit (status 0,
 * no sanitizer report: vt_daemon_stop checks both) with every range given back first. */
static void test_stop_while_reaping(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw a;
	assert_int_equal(0, vt_raw_connect(&a, d->socket_path));
	assert_int_equal(0, vt_raw_hello(&a, "holder"));
	assert_int_equal(0, vt_raw_alloc_many(&a, ranges(), 1024));
	vt_raw_close(&a);
	/* Stop as soon as the session is gone (only the stats connection left): the reaper
	 * has most of the million references still to drop. */
	struct vad_stats st = {0};
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (vt_stats(d, &st) == 0 && st.clients > 1 && vt_now_ns() < deadline)
		vt_sleep_ms(1);
	printf("# stopping with %llu bytes still busy\n", (unsigned long long)st.busy_bytes);
	assert_int_equal(0, vt_daemon_stop(d));
	assert_false(vt_daemon_log_contains(d, "registry: freeing range"));
}

/* A session at max_ranges_client, and a uid at max_ranges_uid, are refused with a sentence
 * that names the limit; attaches count as references too. */
static void test_range_limits(void **state)
{
	(void)state;
	struct vt_daemon d;
	assert_int_equal(
	    0, vt_daemon_setup(&d, "max_ranges_client = 100\nmax_ranges_uid = 150\n", NULL));
	vad_client *a, *b;
	assert_int_equal(0, vt_connect(&d, "a", &a));
	assert_int_equal(0, vt_connect(&d, "b", &b));
	size_t sizes[100];
	void *p[100];
	for (int i = 0; i < 100; i++)
		sizes[i] = 4096;
	VT_ASSERT_OK(a, vad_alloc_batch(a, 100, sizes, 0, p));
	void *q;
	assert_int_equal(VAD_EQUOTA, vad_alloc(a, 4096, 0, &q));
	assert_non_null(strstr(vad_last_error(a), "max_ranges_client 100"));
	assert_non_null(strstr(vad_last_error(a), "holds 100 ranges"));
	char tok[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(a, vad_share(a, p[0], tok));
	/* b (same uid) may take 50 more references: 49 ranges and one attach. */
	void *r[49];
	VT_ASSERT_OK(b, vad_alloc_batch(b, 49, sizes, 0, r));
	size_t size;
	VT_ASSERT_OK(b, vad_attach(b, tok, &q, &size));
	assert_int_equal(VAD_EQUOTA, vad_attach(b, tok, &q, &size));
	assert_non_null(strstr(vad_last_error(b), "max_ranges_uid 150"));
	assert_int_equal(VAD_EQUOTA, vad_alloc(b, 4096, 0, &q));
	assert_non_null(strstr(vad_last_error(b), "holds 150 ranges"));
	/* Freeing makes room again. */
	VT_ASSERT_OK(a, vad_free(a, p[1]));
	VT_ASSERT_OK(b, vad_alloc(b, 4096, 0, &q));
	assert_int_equal(0, vt_check_invariants(&d));
	vad_close(a);
	vad_close(b);
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_close, setup, vt_group_daemon_stop_if_running),
	    cmocka_unit_test_setup_teardown(test_kill, setup, vt_group_daemon_stop_if_running),
	    cmocka_unit_test_setup_teardown(test_drop, setup, vt_group_daemon_stop_if_running),
	    cmocka_unit_test_setup_teardown(test_stop_while_reaping, setup,
					    vt_group_daemon_stop_if_running),
	    cmocka_unit_test(test_range_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
