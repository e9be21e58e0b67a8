/*
 * test_service_registry.c - the registry's concurrency guarantees through the socket:
 * sessions on different workers share ranges (share/attach) and drop their references at
 * the same time (free, attach racing the last free, disconnect), round after round, while an
 * admin session runs the consistency check. Every range must be freed exactly once (busy
 * bytes back to the start, the allocator's frees equal its allocs, no failed free in the
 * log), no attach may bring back a dying range, and every check must see a consistent
 * registry.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "vtassert.h"

#define PAGE	 4096u
#define SESSIONS 4  /* round-robin (worker_balance = even) over 2 workers: both get some */
#define BATCH	 24 /* ranges the round's owner allocates and shares */

/* How the round's references go away. */
enum round_kind {
	ROUND_FREE,  /* everyone attached; then all free at once */
	ROUND_RACE,  /* the others attach while the owner frees: attach may find it gone */
	ROUND_CLOSE, /* everyone attached; the others disconnect while the owner frees */
	ROUND_KINDS,
};

struct race {
	const char *socket_path;
	int rounds;
	pthread_barrier_t barrier;
	char tokens[BATCH][VAD_TOKEN_LEN + 1]; /* the round's shares, written by its owner */
	uint64_t seed;			       /* the round's pattern seed */
	int failed;			       /* atomic: stop doing work, keep the barriers */
	char error[512];		       /* first failure */
	pthread_mutex_t error_lock;
	int attached, gone; /* atomic: attaches that won, and lost, the race with a free */
};

struct player {
	struct race *race;
	int id;
};

static void race_fail(struct race *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void race_fail(struct race *r, const char *fmt, ...)
{
	pthread_mutex_lock(&r->error_lock);
	if (!r->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->error, sizeof(r->error), fmt, ap);
		va_end(ap);
	}
	__atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&r->error_lock);
}

static bool race_failed(struct race *r)
{
	return __atomic_load_n(&r->failed, __ATOMIC_RELAXED);
}

static size_t range_size(size_t i)
{
	return (1 + i % 3) * PAGE;
}

/* The owner's part of a round: allocate, write and share BATCH ranges. */
static void owner_prepare(struct player *p, vad_client *c, void **ptrs)
{
	struct race *r = p->race;
	size_t sizes[BATCH];
	for (size_t i = 0; i < BATCH; i++)
		sizes[i] = range_size(i);
	int rc = vad_alloc_batch(c, BATCH, sizes, 0, ptrs);
	if (rc != 0) {
		race_fail(r, "session %d: vad_alloc_batch: %s", p->id, vad_last_error(c));
		return;
	}
	for (size_t i = 0; i < BATCH; i++) {
		vt_fill_pattern(ptrs[i], sizes[i], r->seed + i);
		rc = vad_share(c, ptrs[i], r->tokens[i]);
		if (rc != 0) {
			race_fail(r, "session %d: vad_share: %s", p->id, vad_last_error(c));
			return;
		}
	}
}

/* Attach every token of the round (the first ranges twice, so one session holds several
 * references to a range). Stores what it got in ptrs/n; a token whose range is gone is
 * fine only when may_be_gone. */
static void attach_all(struct player *p, vad_client *c, bool may_be_gone, void **ptrs, size_t *n)
{
	struct race *r = p->race;
	*n = 0;
	for (size_t i = 0; i < BATCH + BATCH / 4 && !race_failed(r); i++) {
		size_t k = i % BATCH;
		void *q;
		size_t size;
		int rc = vad_attach(c, r->tokens[k], &q, &size);
		if (rc == VAD_ETOKEN && may_be_gone) {
			__atomic_add_fetch(&r->gone, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (rc != 0) {
			race_fail(r, "session %d: vad_attach of range %zu: %d %s", p->id, k, rc,
				  vad_last_error(c));
			return;
		}
		__atomic_add_fetch(&r->attached, 1, __ATOMIC_RELAXED);
		if (size != range_size(k)) {
			race_fail(r, "session %d: attached range %zu has %zu bytes, not %zu", p->id,
				  k, size, range_size(k));
			return;
		}
		/* A reference keeps the range and its bytes, whoever freed theirs. */
		ssize_t bad = vt_check_pattern(q, size, r->seed + k);
		if (bad >= 0) {
			race_fail(r, "session %d: attached range %zu (%zu bytes) differs at %zd",
				  p->id, k, size, bad);
			return;
		}
		ptrs[(*n)++] = q;
	}
}

static void free_all(struct player *p, vad_client *c, void **ptrs, size_t n)
{
	if (n == 0 || race_failed(p->race))
		return;
	int rc = vad_free_batch(c, n, ptrs);
	if (rc != 0)
		race_fail(p->race, "session %d: vad_free_batch of %zu: %s", p->id, n,
			  vad_last_error(c));
}

static void *player_run(void *arg)
{
	struct player *p = arg;
	struct race *r = p->race;
	vad_client *c = NULL;
	void *mine[BATCH], *attached[2 * BATCH];
	size_t n_attached = 0;
	if (vad_connect(r->socket_path, "registry-race", &c) != 0)
		race_fail(r, "session %d: vad_connect: %s", p->id, vad_last_error(NULL));

	for (int round = 0; round < r->rounds; round++) {
		bool owner = round % SESSIONS == p->id;
		enum round_kind kind = (enum round_kind)(round / SESSIONS % ROUND_KINDS);
		if (!c && !race_failed(r) && vad_connect(r->socket_path, "registry-race", &c) != 0)
			race_fail(r, "session %d: vad_connect: %s", p->id, vad_last_error(NULL));
		if (owner && !race_failed(r)) {
			r->seed = (uint64_t)round * 1000 + 1;
			owner_prepare(p, c, mine);
		}
		pthread_barrier_wait(&r->barrier); /* tokens published */
		n_attached = 0;
		if (!owner && kind != ROUND_RACE && !race_failed(r))
			attach_all(p, c, false, attached, &n_attached);
		pthread_barrier_wait(&r->barrier); /* everyone who attaches first has */
		if (owner) {
			free_all(p, c, mine, BATCH);
		} else if (!race_failed(r)) {
			if (kind == ROUND_RACE) {
				attach_all(p, c, true, attached, &n_attached);
				free_all(p, c, attached, n_attached);
			} else if (kind == ROUND_CLOSE) {
				vad_close(c); /* the daemon drops every reference of the session */
				c = NULL;
			} else {
				free_all(p, c, attached, n_attached);
			}
		}
		pthread_barrier_wait(&r->barrier); /* round over: the next owner may start */
	}
	if (c)
		vad_close(c);
	return NULL;
}

struct checker {
	const char *socket_path;
	int stop; /* atomic */
	int checks;
	char error[512];
};

/* Run the registry and allocator check in a loop until told to stop; the first
 * inconsistent report is kept. */
static void *checker_run(void *arg)
{
	struct checker *k = arg;
	vad_client *c;
	if (vad_connect(k->socket_path, "registry-check", &c) != 0) {
		snprintf(k->error, sizeof(k->error), "checker: vad_connect: %s",
			 vad_last_error(NULL));
		return NULL;
	}
	while (!__atomic_load_n(&k->stop, __ATOMIC_RELAXED)) {
		int ok = 0;
		char *detail = NULL;
		int rc = vad_check(c, &ok, &detail);
		if (rc != 0 || !ok) {
			snprintf(k->error, sizeof(k->error), "check %d: %s", k->checks + 1,
				 rc != 0 ? vad_last_error(c) : (detail ? detail : "not ok"));
			free(detail);
			break;
		}
		free(detail);
		k->checks++;
	}
	vad_close(c);
	return NULL;
}

static void test_shared_ranges_dropped_concurrently(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "workers = 2\nworker_balance = even\n", NULL));
	struct vad_stats base, s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(2000), &base));

	struct race r = {.socket_path = d->socket_path};
	r.rounds = SESSIONS * ROUND_KINDS * vt_scale(24);
	pthread_mutex_init(&r.error_lock, NULL);
	pthread_barrier_init(&r.barrier, NULL, SESSIONS);
	struct checker k = {.socket_path = d->socket_path};
	pthread_t checker_thread, threads[SESSIONS];
	struct player players[SESSIONS];
	assert_int_equal(0, pthread_create(&checker_thread, NULL, checker_run, &k));
	for (int i = 0; i < SESSIONS; i++) {
		players[i] = (struct player){.race = &r, .id = i};
		assert_int_equal(0, pthread_create(&threads[i], NULL, player_run, &players[i]));
	}
	for (int i = 0; i < SESSIONS; i++)
		pthread_join(threads[i], NULL);
	__atomic_store_n(&k.stop, 1, __ATOMIC_RELAXED);
	pthread_join(checker_thread, NULL);
	pthread_barrier_destroy(&r.barrier);
	pthread_mutex_destroy(&r.error_lock);
	print_message("%d rounds: %d attaches, %d found their range gone; %d checks\n", r.rounds,
		      r.attached, r.gone, k.checks);
	if (r.failed)
		fail_msg("%s", r.error);
	if (k.error[0])
		fail_msg("the check saw an inconsistent registry while sessions raced: %s",
			 k.error);
	assert_true(k.checks > 0);

	/* Every range went back exactly once: nothing stays busy, and the allocator counted
	 * as many frees as allocations (a second free of a range would fail and be logged, a
	 * missing one would leave it busy). */
	if (vt_wait_busy(d, base.busy_bytes, base.clients, vt_timeout_ms(2000), &s) != 0)
		fail_msg("busy bytes %llu after every session dropped its ranges, expected %llu",
			 (unsigned long long)s.busy_bytes, (unsigned long long)base.busy_bytes);
	assert_int_equal(s.allocs - base.allocs, s.frees - base.frees);
	assert_true(s.allocs - base.allocs >= (uint64_t)r.rounds * BATCH);
	assert_int_equal(0, vt_check_invariants(d));
	if (vt_daemon_log_contains(d, "registry: freeing range"))
		fail_msg("the daemon failed to free a range (freed twice?)");
	assert_int_equal(0, vt_daemon_stop(d));
}

/* A session's references to one range add up: alloc, attach the own token twice, free three
 * times from another worker's session in between; the range goes only with the last. */
static void test_references_across_workers(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "workers = 2\nworker_balance = even\n", NULL));
	struct vad_stats base, s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(2000), &base));
	vad_client *a, *b;
	assert_int_equal(0, vt_connect(d, "refs-a", &a));
	assert_int_equal(0, vt_connect(d, "refs-b", &b));
	void *p, *q, *q2;
	size_t size;
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(a, vad_alloc(a, 3 * PAGE, 0, &p));
	VT_ASSERT_OK(a, vad_share(a, p, token));
	VT_ASSERT_OK(b, vad_attach(b, token, &q, &size));
	VT_ASSERT_OK(b, vad_attach(b, token, &q2, &size));
	assert_ptr_equal(q, q2);
	VT_ASSERT_OK(a, vad_free(a, p));
	/* b's two references keep it, and its token. */
	VT_ASSERT_OK(a, vad_attach(a, token, &p, &size));
	VT_ASSERT_OK(a, vad_free(a, p));
	VT_ASSERT_OK(b, vad_free(b, q));
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(base.busy_bytes + 3 * PAGE, s.busy_bytes);
	assert_int_equal(0, vt_check_invariants(d));
	VT_ASSERT_OK(b, vad_free(b, q));
	/* The last reference went: the token with it. */
	VT_ASSERT_ERR(a, VAD_ETOKEN, vad_attach(a, token, &p, &size));
	VT_ASSERT_ERR(b, VAD_ENOTHELD, vad_free(b, q));
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(base.busy_bytes, s.busy_bytes);
	assert_int_equal(0, vt_check_invariants(d));
	vad_close(a);
	vad_close(b);
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    VT_OWN_DAEMON_TEST(test_shared_ranges_dropped_concurrently),
	    VT_OWN_DAEMON_TEST(test_references_across_workers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
