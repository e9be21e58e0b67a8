/*
 * test_daemon_registry.c - the registry's concurrency guarantees driven directly (no
 * sockets, so the races are tried a hundred times more often than through the daemon):
 * one thread allocates, shares and frees ranges while another attaches them (attach racing
 * the last free), frees its references or drops its whole session, and a third runs the
 * consistency check without pause. Every range is freed exactly once (allocator busy bytes
 * back to 0, as many frees as allocations, no token left), an attach never revives a dying
 * range, and every check sees a consistent registry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"
#include "vaspace.h"

#define QUANTUM	   4096u
#define SPACE_SIZE (256ull * 1024 * 1024)
#define BATCH	   48 /* ranges per round; not a multiple of the release chunk */

static int rounds(void)
{
	const char *m = getenv("VAD_TEST_MODE");
	if (m && (strcmp(m, "tsan") == 0 || strcmp(m, "asan") == 0))
		return 300;
	return 3000;
}

struct race {
	struct vad_registry *reg;
	struct va_space *vs;
	pthread_barrier_t barrier;
	char tokens[BATCH][VAD_TOKEN_CHARS + 1];
	uint64_t offsets[BATCH];
	bool published;	  /* the owner's tokens of this round are valid */
	unsigned arrivals; /* atomic: the start line of each round's race */
	int n_rounds;
	char error[256]; /* the owner's first failure (read after the join) */
	char error_attacher[256];
	unsigned long attached, gone;
	int stop_check; /* atomic */
	unsigned long checks;
	char check_error[320];
};

/* Wait until both players reached the start line of round: a spin, so that both run into
 * the race at once instead of one waking up after the other is done. */
static void start_line(struct race *r, int round)
{
	unsigned want = 2 * ((unsigned)round + 1);
	__atomic_add_fetch(&r->arrivals, 1, __ATOMIC_ACQ_REL);
	for (unsigned spins = 1; __atomic_load_n(&r->arrivals, __ATOMIC_ACQUIRE) < want; spins++)
		if (spins % 256 == 0)
			sched_yield(); /* the other player may need this CPU */
}

static size_t range_size(size_t i)
{
	return (1 + i % 3) * QUANTUM;
}

/* Allocate BATCH ranges for h as handle_alloc does: reserve, va_alloc_batch with the range
 * objects as owners, insert. */
static int alloc_batch(struct race *r, struct vad_holder *h, uint64_t *offsets)
{
	struct vad_range *ranges[BATCH];
	uint64_t sizes[BATCH], total = 0, held;
	for (size_t i = 0; i < BATCH; i++) {
		sizes[i] = range_size(i);
		total += sizes[i];
		ranges[i] = vad_range_get();
		if (!ranges[i])
			return -1;
	}
	if (vad_registry_reserve(h, total, 0, 0, &held) != VAD_QUOTA_OK)
		return -1;
	size_t failed;
	if (va_alloc_batch(r->vs, BATCH, sizes, 0, (void *const *)ranges, offsets, &failed) < 0)
		return -1;
	for (size_t i = 0; i < BATCH; i++) {
		ranges[i]->offset = offsets[i];
		ranges[i]->size = sizes[i];
	}
	return vad_registry_insert(r->reg, h, 0, ranges, BATCH);
}

static void *owner_run(void *arg)
{
	struct race *r = arg;
	struct vad_holder h;
	if (vad_holder_init(r->reg, &h, 1000, NULL) < 0)
		snprintf(r->error, sizeof(r->error), "owner: vad_holder_init failed");
	for (int round = 0; round < r->n_rounds; round++) {
		if (!r->error[0] && alloc_batch(r, &h, r->offsets) < 0)
			snprintf(r->error, sizeof(r->error), "round %d: allocating failed", round);
		for (size_t i = 0; i < BATCH && !r->error[0]; i++)
			if (vad_registry_share(r->reg, &h, 0, r->offsets[i], r->tokens[i]) != 0)
				snprintf(r->error, sizeof(r->error), "round %d: share %zu failed",
					 round, i);
		r->published = !r->error[0];
		pthread_barrier_wait(&r->barrier); /* tokens published */
		start_line(r, round);
		/* Odd rounds: the attacher attaches first, so this free is not the last. Even
		 * rounds: it attaches while this frees, and may find ranges gone. */
		if (round % 2)
			pthread_barrier_wait(&r->barrier);
		if (!r->error[0] &&
		    vad_registry_release_batch(r->reg, &h, 0, r->offsets, BATCH) != BATCH)
			snprintf(r->error, sizeof(r->error), "round %d: releasing failed", round);
		pthread_barrier_wait(&r->barrier); /* round over */
	}
	vad_holder_fini(r->reg, &h);
	return NULL;
}

/* Attach every token of the round; *n gets the offsets this holder now references. */
static void attach_all(struct race *r, struct vad_holder *h, int round, uint64_t *held,
		       size_t *n)
{
	static const bool allowed[] = {true};
	*n = 0;
	/* From the last: the owner frees from the first, so the two meet in the middle. */
	for (size_t i = BATCH; i-- > 0 && !r->error_attacher[0];) {
		struct vad_attach_result res;
		enum vad_attach_status st =
		    vad_registry_attach(r->reg, h, r->tokens[i], allowed, 0, 0, &res);
		if (st == VAD_ATTACH_UNKNOWN && round % 2 == 0) {
			r->gone++;
			continue;
		}
		if (st != VAD_ATTACH_OK || res.offset != r->offsets[i] ||
		    res.size != range_size(i)) {
			snprintf(r->error_attacher, sizeof(r->error_attacher),
				 "round %d: attach %zu: status %d, offset 0x%llx size %llu", round,
				 i, (int)st, (unsigned long long)res.offset,
				 (unsigned long long)res.size);
			return;
		}
		r->attached++;
		held[(*n)++] = res.offset;
	}
}

static void *attacher_run(void *arg)
{
	struct race *r = arg;
	struct vad_holder h;
	uint64_t held[BATCH];
	if (vad_holder_init(r->reg, &h, 1001, NULL) < 0)
		snprintf(r->error_attacher, sizeof(r->error_attacher), "vad_holder_init failed");
	for (int round = 0; round < r->n_rounds; round++) {
		size_t n = 0;
		pthread_barrier_wait(&r->barrier); /* tokens published */
		start_line(r, round);
		if (r->published && !r->error_attacher[0])
			attach_all(r, &h, round, held, &n);
		if (round % 2)
			pthread_barrier_wait(&r->barrier); /* attached before the owner frees */
		if (round % 4 == 1) {
			/* A disconnect: drop everything the session holds at once. */
			vad_holder_fini(r->reg, &h);
			if (vad_holder_init(r->reg, &h, 1001, NULL) < 0)
				snprintf(r->error_attacher, sizeof(r->error_attacher),
					 "vad_holder_init failed");
		} else if (n && vad_registry_release_batch(r->reg, &h, 0, held, n) != n) {
			snprintf(r->error_attacher, sizeof(r->error_attacher),
				 "round %d: releasing %zu attached references failed", round, n);
		}
		pthread_barrier_wait(&r->barrier); /* round over */
	}
	vad_holder_fini(r->reg, &h);
	return NULL;
}

static void *checker_run(void *arg)
{
	struct race *r = arg;
	while (!__atomic_load_n(&r->stop_check, __ATOMIC_RELAXED)) {
		char msg[256];
		if (vad_registry_check(r->reg, msg, sizeof(msg)) < 0) {
			snprintf(r->check_error, sizeof(r->check_error), "check %lu: %s",
				 r->checks + 1, msg);
			break;
		}
		r->checks++;
	}
	return NULL;
}

/* Send stderr (where the registry logs a failed free) to a temporary file; returns the
 * saved stderr. */
static int capture_stderr(FILE **file)
{
	fflush(stderr);
	*file = tmpfile();
	assert_non_null(*file);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(*file), STDERR_FILENO) >= 0);
	return saved;
}

/* Put stderr back, echo what was captured and say whether it holds needle. */
static bool restore_stderr(int saved, FILE *file, const char *needle)
{
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	bool found = false;
	char line[512];
	rewind(file);
	while (fgets(line, sizeof(line), file)) {
		fputs(line, stderr);
		found |= strstr(line, needle) != NULL;
	}
	fclose(file);
	return found;
}

static void test_share_attach_free_race(void **state)
{
	(void)state;
	struct va_config cfg = {.size = SPACE_SIZE, .quantum = QUANTUM, .nodes = 2};
	struct race r = {.n_rounds = rounds()};
	assert_int_equal(0, va_create(&cfg, &r.vs));
	r.reg = vad_registry_new(&r.vs, 1);
	assert_non_null(r.reg);
	assert_int_equal(0, pthread_barrier_init(&r.barrier, NULL, 2));

	FILE *log;
	int saved_stderr = capture_stderr(&log);
	pthread_t owner, attacher, checker;
	assert_int_equal(0, pthread_create(&checker, NULL, checker_run, &r));
	assert_int_equal(0, pthread_create(&owner, NULL, owner_run, &r));
	assert_int_equal(0, pthread_create(&attacher, NULL, attacher_run, &r));
	pthread_join(owner, NULL);
	pthread_join(attacher, NULL);
	__atomic_store_n(&r.stop_check, 1, __ATOMIC_RELAXED);
	pthread_join(checker, NULL);
	pthread_barrier_destroy(&r.barrier);
	bool failed_free = restore_stderr(saved_stderr, log, "registry: freeing range");
	print_message("%d rounds: %lu attaches, %lu found their range dying or gone; %lu "
		      "checks\n",
		      r.n_rounds, r.attached, r.gone, r.checks);
	if (r.error[0])
		fail_msg("owner: %s", r.error);
	if (r.error_attacher[0])
		fail_msg("attacher: %s", r.error_attacher);
	if (r.check_error[0])
		fail_msg("the registry check failed while holders raced: %s", r.check_error);
	assert_true(r.checks > 0);
	/* A range freed twice (a dying one brought back by an attach) fails in the allocator,
	 * which the registry logs. */
	if (failed_free)
		fail_msg("the registry failed to give a range back: freed twice?");

	/* Exactly once: nothing busy, one free per allocation, no token left behind. */
	struct va_stats st;
	va_get_stats(r.vs, &st);
	assert_int_equal(0, st.busy_bytes);
	assert_int_equal(0, st.busy_blocks);
	assert_int_equal(st.allocs, st.frees);
	assert_int_equal((uint64_t)r.n_rounds * BATCH, st.allocs);
	assert_int_equal(0, vad_registry_tokens(r.reg));
	char msg[256];
	if (vad_registry_check(r.reg, msg, sizeof(msg)) < 0)
		fail_msg("registry check at the end: %s", msg);
	if (va_check(r.vs, msg, sizeof(msg)) < 0)
		fail_msg("allocator check at the end: %s", msg);
	vad_registry_free(r.reg);
	va_destroy(r.vs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_share_attach_free_race),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
