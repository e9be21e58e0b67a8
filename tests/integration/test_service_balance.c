/*
 * test_service_balance.c - worker_balance through the real daemon: with adaptive balance a
 * lightly loaded daemon keeps every connection on one worker, `even` deals them round-robin,
 * and connections moved between workers under load (and gathered back when it drops) keep
 * being served correctly: every range is written and verified by its owner, busy bytes return
 * to the baseline, the registry stays consistent, and a daemon stopped while it moves
 * connections exits cleanly (no sanitizer report, no leak).
 *
 * Whether and when the daemon moves connections depends on how busy its workers are, which
 * a test cannot dictate: the load below (many connections, each in its own thread, batches
 * of ranges) keeps one worker wanting a CPU all the time on any machine, so it spreads; if it
 * has not within a generous bound, the move checks are skipped, never failed. The loaders share
 * the machine's CPUs with the daemon, so the tests that want moves set worker_spread_idle = 0
 * (spread even when no CPU is idle); one test sets it above the machine's CPU count and checks
 * that saturated workers then stay as they are.
 *
 * The balancer's decisions themselves (when to spread, gather, undo, hold back) are checked on
 * any machine by tests/unit/test_daemon_balance.c with made-up samples; the log lines matched
 * here are the end-to-end check that a real daemon takes them and that moves keep serving.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vtassert.h"

#define PAGE	  4096u
#define BATCH	  128
#define N_CONNS	  6
#define N_LOADERS 18 /* threads, N_LOADERS / N_CONNS per connection: libvad pipelines them */

struct span {
	char *p;
	size_t size;
};

/* Order spans by address. */
static int by_address(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->p < y->p ? -1 : x->p > y->p;
}

struct loader {
	vad_client *c; /* shared with the other loaders of its connection */
	int id;
	volatile int *stop; /* set by the main thread: finish the round and leave */
	bool expect_errors; /* the daemon is stopped under it: errors end it quietly */
	uint64_t rounds;    /* (atomic) rounds done */
	char error[512];
};

/* Allocate BATCH ranges in one request, check they do not overlap one another, write and
 * verify the first and the last (a range overlapping another client's would be overwritten),
 * free them in one request, until told to stop. Few bytes written per range keep the work on
 * the daemon's side, so that its worker is the busy one. */
static void *loader_run(void *arg)
{
	struct loader *l = arg;
	vad_client *c = l->c;
	for (uint64_t round = 0; !__atomic_load_n(l->stop, __ATOMIC_RELAXED); round++) {
		size_t sizes[BATCH];
		void *p[BATCH];
		for (int i = 0; i < BATCH; i++)
			sizes[i] = PAGE * (1 + (size_t)((round + (uint64_t)i) % 4));
		int rc = vad_alloc_batch(c, BATCH, sizes, 0, p);
		if (rc != 0) {
			if (!l->expect_errors)
				snprintf(l->error, sizeof(l->error),
					 "loader %d round %llu: vad_alloc_batch: %d %s", l->id,
					 (unsigned long long)round, rc, vad_last_error(c));
			break;
		}
		struct span sp[BATCH];
		for (int i = 0; i < BATCH; i++)
			sp[i] = (struct span){.p = p[i], .size = sizes[i]};
		qsort(sp, BATCH, sizeof(sp[0]), by_address);
		for (int i = 1; i < BATCH; i++) {
			if (sp[i - 1].p + sp[i - 1].size > sp[i].p) {
				snprintf(
				    l->error, sizeof(l->error),
				    "loader %d round %llu: ranges %p (%zu bytes) and %p overlap",
				    l->id, (unsigned long long)round, (void *)sp[i - 1].p,
				    sp[i - 1].size, (void *)sp[i].p);
				goto out;
			}
		}
		uint64_t seed = ((uint64_t)l->id << 40) | (round << 8);
		const int check[2] = {0, BATCH - 1};
		for (int k = 0; k < 2; k++)
			vt_fill_pattern(p[check[k]], sizes[check[k]], seed + (uint64_t)k);
		for (int k = 0; k < 2; k++) {
			ssize_t bad =
			    vt_check_pattern(p[check[k]], sizes[check[k]], seed + (uint64_t)k);
			if (bad >= 0) {
				snprintf(
				    l->error, sizeof(l->error),
				    "loader %d round %llu: range %d changed at byte %zd: another "
				    "live range overlaps it",
				    l->id, (unsigned long long)round, check[k], bad);
				goto out;
			}
		}
		rc = vad_free_batch(c, BATCH, p);
		if (rc != 0) {
			if (!l->expect_errors)
				snprintf(l->error, sizeof(l->error),
					 "loader %d round %llu: vad_free_batch: %d %s", l->id,
					 (unsigned long long)round, rc, vad_last_error(c));
			break;
		}
		__atomic_add_fetch(&l->rounds, 1, __ATOMIC_RELAXED);
	}
out:
	return NULL;
}

struct load {
	vad_client *c[N_CONNS];
	struct loader l[N_LOADERS];
	pthread_t t[N_LOADERS];
	volatile int stop;
};

static void load_start(struct load *ld, const struct vt_daemon *d, bool expect_errors)
{
	memset(ld, 0, sizeof(*ld));
	for (int i = 0; i < N_CONNS; i++)
		assert_int_equal(0, vt_connect(d, "balance", &ld->c[i]));
	for (int i = 0; i < N_LOADERS; i++) {
		ld->l[i].c = ld->c[i % N_CONNS];
		ld->l[i].id = i;
		ld->l[i].stop = &ld->stop;
		ld->l[i].expect_errors = expect_errors;
		assert_int_equal(0, pthread_create(&ld->t[i], NULL, loader_run, &ld->l[i]));
	}
}

/* Stop the loaders and fail with the first one's message. */
static void load_finish(struct load *ld)
{
	__atomic_store_n(&ld->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < N_LOADERS; i++)
		pthread_join(ld->t[i], NULL);
	for (int i = 0; i < N_CONNS; i++)
		vad_close(ld->c[i]);
	for (int i = 0; i < N_LOADERS; i++)
		if (ld->l[i].error[0])
			fail_msg("%s", ld->l[i].error);
}

/* Fewest rounds any loader has done. */
static uint64_t load_min_rounds(struct load *ld)
{
	uint64_t min = UINT64_MAX;
	for (int i = 0; i < N_LOADERS; i++) {
		uint64_t r = __atomic_load_n(&ld->l[i].rounds, __ATOMIC_RELAXED);
		min = r < min ? r : min;
	}
	return min;
}

/* Wait up to timeout_ms for needle in the daemon's log. */
static bool wait_log(const struct vt_daemon *d, const char *needle, int timeout_ms)
{
	uint64_t end = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (!vt_daemon_log_contains(d, needle)) {
		if (vt_now_ns() > end)
			return false;
		vt_sleep_ms(20);
	}
	return true;
}

/* Wait up to timeout_ms until the daemon's last balance decision is on one worker again:
 * gathered because the load went, or back from a spread that did not pay. */
static bool wait_back_on_one(const struct vt_daemon *d, int timeout_ms)
{
	uint64_t end = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		char last[1024] = "";
		FILE *f = fopen(d->log_path, "r");
		assert_non_null(f);
		char line[1024];
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "worker balance: "))
				snprintf(last, sizeof(last), "%s", line);
		fclose(f);
		if (strstr(last, "gathering on 1") || strstr(last, "back to 1"))
			return true;
		if (vt_now_ns() > end)
			return false;
		vt_sleep_ms(20);
	}
}

/* Count per worker (of 2) the sessions that said hello as "light": the log has
 * "session N opened: ..., worker W" and then "session N: hello from 'light'" (the harness's
 * own probe connection says no hello). */
static void count_light(const struct vt_daemon *d, int per_worker[2])
{
	int worker_of[64];
	memset(worker_of, -1, sizeof(worker_of));
	per_worker[0] = per_worker[1] = 0;
	FILE *f = fopen(d->log_path, "r");
	assert_non_null(f);
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		const char *at = strstr(line, "session ");
		if (!at)
			continue;
		int id = atoi(at + strlen("session "));
		if (id < 0 || id >= 64)
			continue;
		const char *w = strstr(at, " opened: ");
		w = w ? strstr(w, ", worker ") : NULL;
		if (w) {
			worker_of[id] = atoi(w + strlen(", worker "));
			assert_true(worker_of[id] >= 0 && worker_of[id] < 2);
		} else if (strstr(at, ": hello from 'light'") && worker_of[id] >= 0) {
			per_worker[worker_of[id]]++;
		}
	}
	fclose(f);
}

/* The worker serving the session that said hello as name, from the log: where it opened
 * ("session N opened: ..., worker W") or, once moved, where it went last ("session N moved
 * to worker W"); -1 if the log does not say yet. */
static int session_worker(const struct vt_daemon *d, const char *name)
{
	char hello[128];
	snprintf(hello, sizeof(hello), ": hello from '%s'", name);
	static int worker_of[4096];
	int id_of_name = -1;
	memset(worker_of, -1, sizeof(worker_of));
	FILE *f = fopen(d->log_path, "r");
	assert_non_null(f);
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		const char *at = strstr(line, "session ");
		if (!at)
			continue;
		int id = atoi(at + strlen("session "));
		if (id < 0 || id >= 4096)
			continue;
		const char *w = strstr(at, " opened: ");
		w = w ? strstr(w, ", worker ") : NULL;
		const char *m = strstr(at, " moved to worker ");
		if (w)
			worker_of[id] = atoi(w + strlen(", worker "));
		else if (m)
			worker_of[id] = atoi(m + strlen(" moved to worker "));
		else if (strstr(at, hello))
			id_of_name = id;
	}
	fclose(f);
	return id_of_name >= 0 ? worker_of[id_of_name] : -1;
}

/* n clients connect one after the other and each does one alloc and free. */
static void light_clients(const struct vt_daemon *d, int n)
{
	vad_client *c[8];
	assert_true(n <= 8);
	for (int i = 0; i < n; i++) {
		assert_int_equal(0, vt_connect(d, "light", &c[i]));
		void *p;
		VT_ASSERT_OK(c[i], vad_alloc(c[i], PAGE, 0, &p));
		VT_ASSERT_OK(c[i], vad_free(c[i], p));
	}
	for (int i = 0; i < n; i++)
		vad_close(c[i]);
}

static void test_adaptive_light_load_stays_on_one_worker(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "workers = 2\nlog_level = debug\n", NULL));
	light_clients(d, 6);
	int per[2];
	count_light(d, per);
	assert_int_equal(per[0], 6);
	assert_int_equal(per[1], 0);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* Voluntary context switches of the daemon's listener thread (its main thread), or -1. */
static long listener_wakeups(const struct vt_daemon *d)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)d->pid, (int)d->pid);
	FILE *f = fopen(path, "r");
	long n = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* A connected client that sends nothing: the balancer looks once a second, not ten times
 * (an idle daemon should not keep waking a CPU). */
static void test_idle_client_is_looked_at_rarely(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "workers = 2\nlog_level = debug\n", NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "idle", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	/* A duration, not a wait: what the test counts is how often the listener wakes per
	 * second, so it looks over seconds. The first quiet look comes a tick or two after the
	 * last request; wakeups before it fall in this settling time, and the bound below has
	 * room for a few anyway. */
	vt_sleep_ms(1200);
	long before = listener_wakeups(d);
	if (before < 0) {
		vad_close(c);
		assert_int_equal(0, vt_daemon_stop(d));
		skip(); /* no per-thread status here */
	}
	uint64_t t0 = vt_now_ns();
	vt_sleep_ms(3000); /* a duration: the window the wakeups are counted over */
	long woke = listener_wakeups(d) - before;
	double secs = (double)(vt_now_ns() - t0) / 1e9;
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
	/* Counted against the window it really was (a loaded machine may stretch it): at 10
	 * looks a second it would be 10 per second; at one a second, 1 (and a few for whatever
	 * else a listener may wake for). */
	print_message("the listener woke %ld times in %.2f s with one idle client\n", woke, secs);
	if ((double)woke > 4 + 2 * secs)
		fail_msg("the listener woke %ld times in %.2f s with one idle client: more than "
			 "2 a second",
			 woke, secs);
}

static void test_even_deals_round_robin(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(
	    0, vt_daemon_setup(d, "workers = 2\nworker_balance = even\nlog_level = debug\n", NULL));
	light_clients(d, 6);
	int per[2];
	count_light(d, per);
	assert_int_equal(per[0], 3);
	assert_int_equal(per[1], 3);
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_moved_connections_keep_working(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(
	    0,
	    vt_daemon_setup(d, "workers = 2\nworker_spread_idle = 0\nlog_level = debug\n", NULL));
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));

	struct load ld;
	load_start(&ld, d, false);
	bool spread = wait_log(d, "spreading over 2", vt_timeout_ms(20000)) &&
		      wait_log(d, "handed", vt_timeout_ms(5000));
	/* Every loader completes rounds after the move (a moved connection that was lost
	 * would stall its loader, and the wait below would time out). */
	uint64_t after = load_min_rounds(&ld) + (uint64_t)vt_scale(50);
	uint64_t end = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (spread && load_min_rounds(&ld) < after && vt_now_ns() < end)
		vt_sleep_ms(20);
	uint64_t reached = load_min_rounds(&ld);
	/* A few clients stay, idle, while the load goes: the workers gather on one again (the
	 * last one hands its connections over, unless the spread was already undone because
	 * it did not pay) and they are still served. New clients go to the active worker with
	 * the fewest connections (worker 0 on a tie), so of three one lands on worker 1 while
	 * the load is spread: that one is handed over when the workers gather. */
	enum { STAYS = 3 };
	vad_client *c[STAYS];
	char name[STAYS][32];
	int on_1 = -1;
	for (int k = 0; k < STAYS; k++) {
		snprintf(name[k], sizeof(name[k]), "stays-%d", k);
		assert_int_equal(0, vt_connect(d, name[k], &c[k]));
		if (on_1 < 0 && session_worker(d, name[k]) == 1)
			on_1 = k;
	}
	load_finish(&ld);
	if (spread && reached < after)
		fail_msg("a loader did only %llu rounds of %llu within 30 s after the move",
			 (unsigned long long)reached, (unsigned long long)after);
	if (spread && !wait_back_on_one(d, vt_timeout_ms(10000)))
		fail_msg("the workers did not gather on one with idle clients only");
	/* The hand-over follows the decision: every idle client ends up on worker 0. */
	uint64_t moved_by = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	for (int k = 0; spread && k < STAYS; k++) {
		while (session_worker(d, name[k]) != 0 && vt_now_ns() < moved_by)
			vt_sleep_ms(20);
		if (session_worker(d, name[k]) != 0)
			fail_msg("idle client %s is on worker %d after the workers gathered on one",
				 name[k], session_worker(d, name[k]));
	}
	for (int k = 0; k < STAYS; k++) {
		void *p;
		VT_ASSERT_OK(c[k], vad_alloc(c[k], 3 * PAGE, 0, &p));
		vt_fill_pattern(p, 3 * PAGE, 77 + (uint64_t)k);
		assert_true(vt_check_pattern(p, 3 * PAGE, 77 + (uint64_t)k) < 0);
		VT_ASSERT_OK(c[k], vad_free(c[k], p));
		vad_close(c[k]);
	}
	if (spread)
		print_message(
		    "%s was on worker 1 while the load was spread, handed to worker 0 when it "
		    "went\n",
		    on_1 >= 0 ? name[on_1] : "no idle client (the spread was undone first)");

	struct vad_stats s;
	if (vt_wait_busy(d, base.busy_bytes, 1, vt_timeout_ms(5000), &s) != 0)
		fail_msg("busy bytes %llu with %u clients, baseline %llu",
			 (unsigned long long)s.busy_bytes, s.clients,
			 (unsigned long long)base.busy_bytes);
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
	if (!spread)
		skip(); /* served correctly, but the load never saturated a worker here */
	if (on_1 < 0)
		skip(); /* served correctly, but no idle client had to be handed over */
}

/* No idle CPU to be had (more asked than the machine has): saturated workers are left as
 * they are, and the daemon says why. */
static void test_no_spread_without_idle_cpu(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(
	    0, vt_daemon_setup(d, "workers = 2\nworker_spread_idle = 1024\nlog_level = debug\n",
			       NULL));
	struct load ld;
	load_start(&ld, d, false);
	bool refused = wait_log(d, "not spreading", vt_timeout_ms(20000));
	load_finish(&ld);
	assert_false(vt_daemon_log_contains(d, "spreading over"));
	assert_false(vt_daemon_log_contains(d, "handed"));
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
	if (!refused)
		skip(); /* the load never saturated a worker here */
}

static void test_stop_while_moving(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(
	    0,
	    vt_daemon_setup(d, "workers = 2\nworker_spread_idle = 0\nlog_level = debug\n", NULL));
	struct load ld;
	load_start(&ld, d, true);
	bool spread = wait_log(d, "handed", vt_timeout_ms(20000));
	/* Stop the daemon in the middle of the load (right after a move when there was one):
	 * it must exit 0, every session dropped, sanitizers quiet. */
	assert_int_equal(0, vt_daemon_stop(d));
	load_finish(&ld);
	if (!spread)
		skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_adaptive_light_load_stays_on_one_worker,
					    vt_fixture_blank_setup, vt_fixture_daemon_teardown),
	    cmocka_unit_test_setup_teardown(test_idle_client_is_looked_at_rarely,
					    vt_fixture_blank_setup, vt_fixture_daemon_teardown),
	    cmocka_unit_test_setup_teardown(test_even_deals_round_robin, vt_fixture_blank_setup,
					    vt_fixture_daemon_teardown),
	    cmocka_unit_test_setup_teardown(test_moved_connections_keep_working,
					    vt_fixture_blank_setup, vt_fixture_daemon_teardown),
	    cmocka_unit_test_setup_teardown(test_no_spread_without_idle_cpu, vt_fixture_blank_setup,
					    vt_fixture_daemon_teardown),
	    cmocka_unit_test_setup_teardown(test_stop_while_moving, vt_fixture_blank_setup,
					    vt_fixture_daemon_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
