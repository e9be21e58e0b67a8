/*
 * test_libvad_threads.c - many threads sharing one libvad connection, against the real
 * daemon: libvad pipelines their calls (one thread sends for all whose frames it finds
 * queued, one reads and hands every reply to its waiter), so these tests check what that
 * must never break.
 *
 * - Replies never cross: every thread asks for sizes no other thread asks for (the page
 *   count modulo the thread count is the thread's index) and checks every range it gets
 *   (its size, its record, a pattern written into it that no other thread overwrites),
 *   mixing single and batch allocations, frees, batch frees in two arenas (whose first
 *   use maps them: replies with fds) and stats calls (another kind of reply).
 * - More threads than the reader delivers in one batch, with large batch-free frames, so
 *   the send queue and the reader's batches both fill up.
 * - Many threads meeting an arena not mapped yet at the same moment: one MapArena goes
 *   out, the others wait for its mapping (the daemon refuses to pass more fds while 32
 *   sent on a connection are unread, so one request per thread failed under load).
 * - The daemon killed by SIGKILL while many threads are inside calls: every call returns
 *   (none hangs), each with VAD_EGONE, and later calls fail at once.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "vtassert.h"

#define PAGE  4096u
#define KEEP  6 /* ranges each thread holds at once */
#define BATCH 4

static const char *const arenas_conf = "[arena default]\n"
				       "size = 512M\n"
				       "\n"
				       "[arena second]\n"
				       "size = 256M\n";

struct worker {
	vad_client *c;
	int index, threads, iters;
	unsigned long calls; /* the kill test, atomic: calls that returned VAD_OK */
	int failures;
	char first_failure[256];
	int last_err; /* the kill test: the error that ended the loop */
	int done;     /* the kill test, atomic: the loop ended */
};

static void note_failure(struct worker *w, const char *what, int rc)
{
	if (w->failures++ == 0)
		snprintf(w->first_failure, sizeof(w->first_failure), "thread %d: %s: %d (%s) %s",
			 w->index, what, rc, vad_strerror(rc), vad_last_error(w->c));
}

/* A size only thread w asks for: index + 1 + k * threads pages. */
static size_t own_size(const struct worker *w, unsigned k)
{
	return (size_t)(w->index + 1 + (int)(k % 5) * w->threads) * PAGE;
}

static bool is_own_size(const struct worker *w, size_t size)
{
	return size % PAGE == 0 && size / PAGE >= 1 &&
	       (int)((size / PAGE - 1) % (size_t)w->threads) == w->index;
}

static uint64_t seed_of(const struct worker *w, int slot, int round)
{
	return ((uint64_t)w->index << 40) ^ ((uint64_t)slot << 20) ^ (uint64_t)round;
}

struct slot {
	void *p;
	size_t size;
	uint64_t seed;
};

/* Stamp the first and the last STAMP bytes of a range: a range another thread also got
 * (or one overlapping it) shows as a broken stamp. */
#define STAMP 64u

static void stamp(void *p, size_t size, uint64_t seed)
{
	vt_fill_pattern(p, STAMP, seed);
	vt_fill_pattern((char *)p + size - STAMP, STAMP, ~seed);
}

static bool stamp_intact(const void *p, size_t size, uint64_t seed)
{
	return vt_check_pattern(p, STAMP, seed) < 0 &&
	       vt_check_pattern((const char *)p + size - STAMP, STAMP, ~seed) < 0;
}

/* Check a range this thread holds: its size, its record and its stamp. */
static void check_slot(struct worker *w, const struct slot *s)
{
	if (vad_size(w->c, s->p) != s->size)
		note_failure(w, "vad_size of a held range changed", 0);
	struct vad_range info;
	int rc = vad_range_info(w->c, s->p, &info);
	if (rc != VAD_OK || info.size != s->size || info.refs != 1)
		note_failure(w, "vad_range_info of a held range", rc);
	if (!stamp_intact(s->p, s->size, s->seed))
		note_failure(w, "a held range was overwritten (replies crossed?)", 0);
}

/* Take a range of one of this thread's own sizes into s. */
static bool fill_slot(struct worker *w, struct slot *s, const char *arena, unsigned k,
		      uint64_t seed)
{
	size_t size = own_size(w, k);
	int rc = vad_alloc_in(w->c, arena, size, 0, &s->p);
	if (rc != VAD_OK) {
		note_failure(w, "vad_alloc_in", rc);
		return false;
	}
	if (!is_own_size(w, vad_size(w->c, s->p)) || vad_size(w->c, s->p) != size)
		note_failure(w, "vad_alloc_in returned another thread's range", 0);
	s->size = size;
	s->seed = seed;
	stamp(s->p, size, seed);
	return true;
}

static void *crossing_worker(void *arg)
{
	struct worker *w = arg;
	const char *arena = w->index % 2 ? "second" : NULL;
	struct slot held[KEEP];
	int n = 0;
	for (int i = 0; i < w->iters && w->failures == 0; i++) {
		if (n < KEEP) {
			if (fill_slot(w, &held[n], arena, (unsigned)i, seed_of(w, n, i)))
				n++;
		}
		/* A batch of own sizes, checked and freed with one batch free. */
		size_t sizes[BATCH];
		void *ptrs[BATCH];
		for (unsigned k = 0; k < BATCH; k++)
			sizes[k] = own_size(w, (unsigned)i + k);
		int rc = vad_alloc_batch_in(w->c, arena, BATCH, sizes, 0, ptrs);
		if (rc != VAD_OK) {
			note_failure(w, "vad_alloc_batch_in", rc);
			break;
		}
		for (unsigned k = 0; k < BATCH; k++) {
			if (vad_size(w->c, ptrs[k]) != sizes[k])
				note_failure(w, "a batch range has another size", 0);
			stamp(ptrs[k], sizes[k], seed_of(w, KEEP + (int)k, i));
		}
		for (unsigned k = 0; k < BATCH; k++)
			if (!stamp_intact(ptrs[k], sizes[k], seed_of(w, KEEP + (int)k, i)))
				note_failure(w, "a batch range was overwritten", 0);
		rc = vad_free_batch(w->c, BATCH, ptrs);
		if (rc != VAD_OK)
			note_failure(w, "vad_free_batch", rc);
		if (i % 7 == 0) {
			struct vad_stats st;
			rc = vad_stats(w->c, &st);
			if (rc != VAD_OK)
				note_failure(w, "vad_stats", rc);
		}
		/* Check everything held, then let one go. */
		for (int k = 0; k < n; k++)
			check_slot(w, &held[k]);
		if (n == KEEP) {
			int k = i % KEEP;
			rc = vad_free(w->c, held[k].p);
			if (rc != VAD_OK)
				note_failure(w, "vad_free", rc);
			held[k] = held[--n];
		}
	}
	for (int k = 0; k < n; k++) {
		check_slot(w, &held[k]);
		int rc = vad_free(w->c, held[k].p);
		if (rc != VAD_OK)
			note_failure(w, "vad_free at the end", rc);
	}
	return NULL;
}

static void run_crossing(struct vt_daemon *d, int threads, int iters)
{
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "threads", &c));
	struct worker *w = calloc((size_t)threads, sizeof(*w));
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	assert_non_null(w);
	assert_non_null(t);
	for (int i = 0; i < threads; i++) {
		w[i] = (struct worker){.c = c, .index = i, .threads = threads, .iters = iters};
		assert_int_equal(0, pthread_create(&t[i], NULL, crossing_worker, &w[i]));
	}
	int failures = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		if (w[i].failures) {
			fprintf(stderr, "%s (%d failures)\n", w[i].first_failure, w[i].failures);
			failures += w[i].failures;
		}
	}
	free(w);
	free(t);
	assert_int_equal(0, failures);
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(d));
}

static void test_replies_never_cross(void **state)
{
	run_crossing(*state, 16, vt_scale(300));
}

/* 48 threads: more replies than one delivery batch, more waiters than one wake list. */
static void test_more_threads_than_a_batch(void **state)
{
	run_crossing(*state, 48, vt_scale(60));
}

/* Batch frees of hundreds of pointers make frames of kilobytes: the send queue grows and
 * a combined send carries several of them. */
static void *big_free_worker(void *arg)
{
	struct worker *w = arg;
	enum { N = 300 };
	void **ptrs = calloc(N, sizeof(*ptrs));
	size_t *sizes = calloc(N, sizeof(*sizes));
	if (!ptrs || !sizes) {
		note_failure(w, "out of memory", 0);
		goto out;
	}
	for (int k = 0; k < N; k++)
		sizes[k] = own_size(w, (unsigned)k);
	for (int i = 0; i < w->iters && w->failures == 0; i++) {
		int rc = vad_alloc_batch(w->c, N, sizes, 0, ptrs);
		if (rc != VAD_OK) {
			note_failure(w, "vad_alloc_batch of 300", rc);
			break;
		}
		for (int k = 0; k < N; k++) {
			if (vad_size(w->c, ptrs[k]) != sizes[k])
				note_failure(w, "a range of the big batch has another size", 0);
			*(volatile uint32_t *)ptrs[k] = (uint32_t)(w->index * N + k);
		}
		for (int k = 0; k < N; k++)
			if (*(volatile uint32_t *)ptrs[k] != (uint32_t)(w->index * N + k))
				note_failure(w, "a range of the big batch was overwritten", 0);
		rc = vad_free_batch(w->c, N, ptrs);
		if (rc != VAD_OK)
			note_failure(w, "vad_free_batch of 300", rc);
	}
out:
	free(ptrs);
	free(sizes);
	return NULL;
}

static void test_big_frames_combined(void **state)
{
	struct vt_daemon *d = *state;
	enum { THREADS = 8 };
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "big-frees", &c));
	struct worker w[THREADS];
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] =
		    (struct worker){.c = c, .index = i, .threads = THREADS, .iters = vt_scale(30)};
		assert_int_equal(0, pthread_create(&t[i], NULL, big_free_worker, &w[i]));
	}
	int failures = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		if (w[i].failures) {
			fprintf(stderr, "%s (%d failures)\n", w[i].first_failure, w[i].failures);
			failures += w[i].failures;
		}
	}
	assert_int_equal(0, failures);
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
}

struct first_use {
	vad_client *c;
	pthread_barrier_t *start;
	void *p;
	int rc;
	char msg[256];
};

static void *first_use_worker(void *arg)
{
	struct first_use *u = arg;
	pthread_barrier_wait(u->start);
	u->rc = vad_pointer(u->c, "second", PAGE, &u->p);
	if (u->rc != VAD_OK)
		snprintf(u->msg, sizeof(u->msg), "%s", vad_last_error(u->c));
	return NULL;
}

/* 64 threads released at once, each mapping the same arena by its first vad_pointer, on
 * fresh connections a few times over: every one gets the one mapping. */
static void test_first_use_maps_once(void **state)
{
	struct vt_daemon *d = *state;
	enum { THREADS = 64 };
	for (int round = 0; round < vt_scale(10); round++) {
		vad_client *c;
		assert_int_equal(0, vt_connect(d, "first-use", &c));
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, THREADS);
		struct first_use u[THREADS];
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++) {
			u[i] = (struct first_use){.c = c, .start = &start};
			assert_int_equal(0, pthread_create(&t[i], NULL, first_use_worker, &u[i]));
		}
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&start);
		for (int i = 0; i < THREADS; i++) {
			if (u[i].rc != VAD_OK)
				fail_msg("round %d: thread %d: vad_pointer: %d (%s): %s", round, i,
					 u[i].rc, vad_strerror(u[i].rc), u[i].msg);
			assert_ptr_equal(u[0].p, u[i].p);
		}
		vad_close(c);
	}
}

/* Calls until one fails; that failure is kept. */
static void *doomed_worker(void *arg)
{
	struct worker *w = arg;
	for (unsigned i = 0;; i++) {
		void *p = NULL;
		int rc = vad_alloc(w->c, own_size(w, i), 0, &p);
		if (rc == VAD_OK)
			rc = vad_free(w->c, p);
		if (rc == VAD_OK && i % 5 == 0) {
			struct vad_stats st;
			rc = vad_stats(w->c, &st);
		}
		if (rc != VAD_OK) {
			w->last_err = rc;
			snprintf(w->first_failure, sizeof(w->first_failure), "%s",
				 vad_last_error(w->c));
			break;
		}
		__atomic_add_fetch(&w->calls, 2, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Wait until every doomed thread has left its loop (deadline: then false), joining each. */
static bool join_doomed(struct worker *w, pthread_t *t, int threads, uint64_t deadline)
{
	for (int i = 0; i < threads; i++) {
		while (!__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE)) {
			if (vt_now_ns() >= deadline)
				return false;
			vt_sleep_ms(2);
		}
		pthread_join(t[i], NULL);
	}
	return true;
}

static void test_daemon_killed_mid_calls(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, arenas_conf));
	enum { THREADS = 48 };
	int rounds = vt_mode() == VT_MODE_NORMAL ? 3 : 2;
	for (int round = 0; round < rounds; round++) {
		vad_client *c;
		assert_int_equal(0, vt_connect(d, "doomed", &c));
		struct worker w[THREADS];
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++) {
			w[i] = (struct worker){.c = c, .index = i, .threads = THREADS};
			assert_int_equal(0, pthread_create(&t[i], NULL, doomed_worker, &w[i]));
		}
		/* Kill it once every thread is under way (calls keep coming meanwhile). */
		uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
		int stalled = -1;
		for (int i = 0; i < THREADS && stalled < 0; i++) {
			while (__atomic_load_n(&w[i].calls, __ATOMIC_RELAXED) < 20 &&
			       !__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE)) {
				if (vt_now_ns() >= deadline) {
					stalled = i;
					break;
				}
				vt_sleep_ms(1);
			}
		}
		assert_int_equal(0, vt_daemon_signal(d, SIGKILL));
		while (vt_daemon_alive(d))
			assert_true(vt_now_ns() < deadline);
		assert_true(WIFSIGNALED(d->exit_status));
		/* Every thread is joined before anything is asserted: a failure must not leave
		 * threads running on this frame's workers. A thread still inside a call past
		 * the deadline is the failure itself (its frame then leaks, with the client). */
		if (!join_doomed(w, t, THREADS, deadline))
			fail_msg("round %d: a thread is still inside a call after the daemon died",
				 round);
		if (stalled >= 0)
			fail_msg("round %d: thread %d made no progress", round, stalled);
		for (int i = 0; i < THREADS; i++) {
			if (w[i].last_err != VAD_EGONE)
				fail_msg("round %d: thread %d ended with %d (%s): %s", round, i,
					 w[i].last_err, vad_strerror(w[i].last_err),
					 w[i].first_failure);
			assert_true(vt_contains(w[i].first_failure, "daemon"));
		}
		/* The dead connection stays dead, at once. */
		void *p;
		VT_ASSERT_ERR(c, VAD_EGONE, vad_alloc(c, PAGE, 0, &p));
		vad_close(c);
		if (round + 1 < rounds)
			assert_int_equal(0, vt_daemon_start(d));
	}
}

VT_DAEMON_GROUP(group_setup, NULL, arenas_conf)

int main(void)
{
	const struct CMUnitTest shared[] = {
	    cmocka_unit_test(test_replies_never_cross),
	    cmocka_unit_test(test_more_threads_than_a_batch),
	    cmocka_unit_test(test_big_frames_combined),
	    cmocka_unit_test(test_first_use_maps_once),
	};
	const struct CMUnitTest own[] = {
	    VT_OWN_DAEMON_TEST(test_daemon_killed_mid_calls),
	};
	int failed = cmocka_run_group_tests_name("libvad threads on one connection", shared,
						 group_setup, vt_group_daemon_stop);
	failed +=
	    cmocka_run_group_tests_name("libvad threads when the daemon dies", own, NULL, NULL);
	return failed;
}
