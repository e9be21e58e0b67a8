/*
 * test_daemon_registry.c - the registry's concurrency guarantees driven directly (no
 * sockets, so the races are tried a hundred times more often than through the daemon):
 * one thread allocates, shares and frees ranges while another attaches them (attach racing
 * the last free), frees its references or drops its whole session, and a third runs the
 * consistency check without pause. Every range is freed exactly once (allocator busy bytes
 * back to 0, as many frees as allocations, no token left), an attach never revives a dying
 * range, and every check sees a consistent registry.
 * Then each holder's open-addressing table through the registry API: growth across many
 * sizes, deletions that shift entries back across the end of the table, shrinking, absent
 * keys, equal offsets in many arenas and a growth that runs out of memory. And range objects
 * taken in batches: distinct and zeroed, through a thread's cache and the depot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "registry.h"
#include "vaspace.h"

#define QUANTUM	   4096u
#define SPACE_SIZE (256ull * 1024 * 1024)
#define BATCH	   48 /* ranges per round; not a multiple of the release chunk */

static const struct vad_quota unlimited; /* every limit 0: none */

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
	bool published;	   /* the owner's tokens of this round are valid */
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
	if (vad_registry_reserve(h, total, BATCH, &unlimited, &held) != VAD_QUOTA_OK)
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
static void attach_all(struct race *r, struct vad_holder *h, int round, uint64_t *held, size_t *n)
{
	static const bool allowed[] = {true};
	*n = 0;
	/* From the last: the owner frees from the first, so the two meet in the middle. */
	for (size_t i = BATCH; i-- > 0 && !r->error_attacher[0];) {
		struct vad_attach_result res;
		enum vad_attach_status st =
		    vad_registry_attach(r->reg, h, r->tokens[i], allowed, &unlimited, &res);
		/* A range found dying, or gone with its token remembered as freed. */
		if ((st == VAD_ATTACH_FREED || st == VAD_ATTACH_UNKNOWN) && round % 2 == 0) {
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

/* ---- tokens that die before their ranges -------------------------------------------------- */

#define ATTACHERS 2

/* Each round the owner shares its BATCH ranges, every fourth kind of token in turn (plain,
 * single use, a 1 ms ttl, plain and then revoked), and while the attachers attach them it
 * re-shares some with new options and frees its own references; the attachers take what
 * they can, count the single-use tokens they got, and free. A checker runs meanwhile. */
struct deaths {
	struct race r; /* reg, vs, tokens, offsets, the owner's error; barrier of 1 + ATTACHERS */
	unsigned single_got[BATCH]; /* atomic: OK attaches per single-use token this round */
	char error[ATTACHERS][256];
	unsigned long outcomes[VAD_ATTACH_NOMEM + 1]; /* atomic */
};

static void *deaths_owner(void *arg)
{
	struct deaths *dt = arg;
	struct race *r = &dt->r;
	struct vad_holder h;
	if (vad_holder_init(r->reg, &h, 1000, NULL) < 0)
		snprintf(r->error, sizeof(r->error), "owner: vad_holder_init failed");
	for (int round = 0; round < r->n_rounds; round++) {
		if (!r->error[0] && alloc_batch(r, &h, r->offsets) < 0)
			snprintf(r->error, sizeof(r->error), "round %d: allocating failed", round);
		for (size_t i = 0; i < BATCH && !r->error[0]; i++) {
			struct vad_token_terms terms = {.single_use = i % 4 == 1,
							.ttl_ms = i % 4 == 2 ? 1 : 0};
			__atomic_store_n(&dt->single_got[i], 0, __ATOMIC_RELAXED);
			if (vad_registry_share_with(r->reg, &h, 0, r->offsets[i], &terms,
						    r->tokens[i]) != 0)
				snprintf(r->error, sizeof(r->error), "round %d: share %zu failed",
					 round, i);
			if (i % 4 == 3 && vad_registry_unshare(r->reg, &h, 0, r->offsets[i]) != 1)
				snprintf(r->error, sizeof(r->error), "round %d: unshare %zu failed",
					 round, i);
		}
		pthread_barrier_wait(&r->barrier); /* tokens published */
		/* Replace some tokens while they are attached: single use from the middle. */
		char fresh[VAD_TOKEN_CHARS + 1];
		const struct vad_token_terms once = {.single_use = true};
		for (size_t i = BATCH / 2; i < BATCH && !r->error[0]; i += 3)
			if (vad_registry_share_with(r->reg, &h, 0, r->offsets[i], &once, fresh) !=
			    0)
				snprintf(r->error, sizeof(r->error),
					 "round %d: re-share %zu failed", round, i);
		if (!r->error[0] &&
		    vad_registry_release_batch(r->reg, &h, 0, r->offsets, BATCH) != BATCH)
			snprintf(r->error, sizeof(r->error), "round %d: releasing failed", round);
		pthread_barrier_wait(&r->barrier); /* round over */
	}
	vad_holder_fini(r->reg, &h);
	return NULL;
}

struct deaths_arg {
	struct deaths *dt;
	unsigned index;
};

static void *deaths_attacher(void *arg)
{
	struct deaths_arg *a = arg;
	struct deaths *dt = a->dt;
	struct race *r = &dt->r;
	char *error = dt->error[a->index];
	static const bool allowed[] = {true};
	struct vad_holder h;
	uint64_t held[BATCH];
	if (vad_holder_init(r->reg, &h, 1001 + a->index, NULL) < 0)
		snprintf(error, 256, "vad_holder_init failed");
	for (int round = 0; round < r->n_rounds; round++) {
		size_t n = 0;
		pthread_barrier_wait(&r->barrier); /* tokens published */
		for (size_t k = 0; k < BATCH && !error[0]; k++) {
			size_t i = a->index ? BATCH - 1 - k : k; /* the two meet in the middle */
			struct vad_attach_result res;
			enum vad_attach_status st = vad_registry_attach(r->reg, &h, r->tokens[i],
									allowed, &unlimited, &res);
			__atomic_add_fetch(&dt->outcomes[st], 1, __ATOMIC_RELAXED);
			/* What each kind of token may answer (the owner frees its references
			 * meanwhile, so any may find its range freed). */
			bool fits = st == VAD_ATTACH_OK || st == VAD_ATTACH_FREED ||
				    (i % 4 == 1 && st == VAD_ATTACH_USED) ||
				    (i % 4 == 2 && st == VAD_ATTACH_EXPIRED) ||
				    (i % 4 == 3 && st == VAD_ATTACH_REVOKED) ||
				    (i >= BATCH / 2 && (i - BATCH / 2) % 3 == 0 &&
				     st == VAD_ATTACH_REPLACED);
			if (!fits || (i % 4 == 3 && st == VAD_ATTACH_OK)) {
				snprintf(error, 256,
					 "round %d: token %zu (kind %zu) attached: status %d",
					 round, i, i % 4, (int)st);
				break;
			}
			if (st != VAD_ATTACH_OK)
				continue;
			if (i % 4 == 1 &&
			    __atomic_add_fetch(&dt->single_got[i], 1, __ATOMIC_RELAXED) > 1)
				snprintf(error, 256,
					 "round %d: single-use token %zu attached twice", round, i);
			held[n++] = res.offset;
		}
		if (n && vad_registry_release_batch(r->reg, &h, 0, held, n) != n)
			snprintf(error, 256, "round %d: releasing %zu references failed", round, n);
		pthread_barrier_wait(&r->barrier); /* round over */
	}
	vad_holder_fini(r->reg, &h);
	return NULL;
}

static void *deaths_checker(void *arg)
{
	return checker_run(&((struct deaths *)arg)->r);
}

static void test_token_deaths_race(void **state)
{
	(void)state;
	struct va_config cfg = {.size = SPACE_SIZE, .quantum = QUANTUM, .nodes = 2};
	struct deaths *dt = calloc(1, sizeof(*dt));
	assert_non_null(dt);
	struct race *r = &dt->r;
	r->n_rounds = rounds() / 3;
	assert_int_equal(0, va_create(&cfg, &r->vs));
	r->reg = vad_registry_new(&r->vs, 1);
	assert_non_null(r->reg);
	assert_int_equal(0, pthread_barrier_init(&r->barrier, NULL, 1 + ATTACHERS));
	pthread_t owner, checker, attachers[ATTACHERS];
	struct deaths_arg args[ATTACHERS];
	assert_int_equal(0, pthread_create(&checker, NULL, deaths_checker, dt));
	assert_int_equal(0, pthread_create(&owner, NULL, deaths_owner, dt));
	for (unsigned i = 0; i < ATTACHERS; i++) {
		args[i] = (struct deaths_arg){dt, i};
		assert_int_equal(0, pthread_create(&attachers[i], NULL, deaths_attacher, &args[i]));
	}
	pthread_join(owner, NULL);
	for (unsigned i = 0; i < ATTACHERS; i++)
		pthread_join(attachers[i], NULL);
	__atomic_store_n(&r->stop_check, 1, __ATOMIC_RELAXED);
	pthread_join(checker, NULL);
	pthread_barrier_destroy(&r->barrier);
	print_message("%d rounds: %lu attached, %lu used up, %lu expired, %lu revoked, %lu "
		      "replaced, %lu freed; %lu checks\n",
		      r->n_rounds, dt->outcomes[VAD_ATTACH_OK], dt->outcomes[VAD_ATTACH_USED],
		      dt->outcomes[VAD_ATTACH_EXPIRED], dt->outcomes[VAD_ATTACH_REVOKED],
		      dt->outcomes[VAD_ATTACH_REPLACED], dt->outcomes[VAD_ATTACH_FREED], r->checks);
	if (r->error[0])
		fail_msg("owner: %s", r->error);
	for (unsigned i = 0; i < ATTACHERS; i++)
		if (dt->error[i][0])
			fail_msg("attacher %u: %s", i, dt->error[i]);
	if (r->check_error[0])
		fail_msg("the registry check failed while tokens died: %s", r->check_error);
	/* Every kind of death happened, and nothing is left. */
	assert_true(dt->outcomes[VAD_ATTACH_OK] > 0 && dt->outcomes[VAD_ATTACH_USED] > 0 &&
		    dt->outcomes[VAD_ATTACH_REVOKED] > 0);
	struct va_stats st;
	va_get_stats(r->vs, &st);
	assert_int_equal(0, st.busy_bytes);
	assert_int_equal(st.allocs, st.frees);
	assert_int_equal(0, vad_registry_tokens(r->reg));
	char msg[256];
	if (vad_registry_check(r->reg, msg, sizeof(msg)) < 0)
		fail_msg("registry check at the end: %s", msg);
	vad_registry_free(r->reg);
	va_destroy(r->vs);
	free(dt);
}

/* ---- the holders' tables ---------------------------------------------------------------- */

#define TABLE_ARENAS 4
#define TABLE_SPACE  (4ull * 1024 * 1024 * 1024)

/* Arenas for the table tests: equal bases, so equal offsets recur in every arena. */
struct tables {
	struct va_space *vs[TABLE_ARENAS];
	struct vad_registry *reg;
};

static void tables_setup(struct tables *t)
{
	struct va_config cfg = {.size = TABLE_SPACE, .quantum = QUANTUM, .nodes = 1};
	for (int i = 0; i < TABLE_ARENAS; i++)
		assert_int_equal(0, va_create(&cfg, &t->vs[i]));
	t->reg = vad_registry_new(t->vs, TABLE_ARENAS);
	assert_non_null(t->reg);
}

static void tables_teardown(struct tables *t)
{
	vad_registry_reap_wait(t->reg); /* holders of more than a chunk went to the reaper */
	for (int i = 0; i < TABLE_ARENAS; i++) {
		struct va_stats st;
		va_get_stats(t->vs[i], &st);
		assert_int_equal(0, st.busy_blocks); /* every range went back exactly once */
		assert_int_equal(st.allocs, st.frees);
	}
	vad_registry_free(t->reg);
	for (int i = 0; i < TABLE_ARENAS; i++)
		va_destroy(t->vs[i]);
}

static void check_ok(struct vad_registry *reg)
{
	char msg[320];
	if (vad_registry_check(reg, msg, sizeof(msg)) < 0)
		fail_msg("registry check: %s", msg);
}

/* Allocate n one-page ranges of arena without inserting them (owners set, offsets out). */
static void alloc_ranges(struct tables *t, unsigned arena, size_t n, struct vad_range **ranges,
			 uint64_t *offsets)
{
	uint64_t *sizes = malloc(n * sizeof(*sizes));
	assert_non_null(sizes);
	for (size_t i = 0; i < n; i++) {
		sizes[i] = QUANTUM;
		ranges[i] = vad_range_get();
		assert_non_null(ranges[i]);
	}
	size_t failed;
	assert_int_equal(
	    0, va_alloc_batch(t->vs[arena], n, sizes, 0, (void *const *)ranges, offsets, &failed));
	for (size_t i = 0; i < n; i++) {
		ranges[i]->offset = offsets[i];
		ranges[i]->size = QUANTUM;
	}
	free(sizes);
}

/* Allocate and insert n ranges of arena for h, in batches of at most 1024 (max_batch). */
static void insert_ranges(struct tables *t, struct vad_holder *h, unsigned arena, size_t n,
			  uint64_t *offsets)
{
	struct vad_range **ranges = malloc((n ? n : 1) * sizeof(*ranges));
	assert_non_null(ranges);
	alloc_ranges(t, arena, n, ranges, offsets);
	uint64_t held;
	assert_int_equal(VAD_QUOTA_OK, vad_registry_reserve(h, n * QUANTUM, n, &unlimited, &held));
	for (size_t done = 0; done < n;) {
		size_t k = n - done < 1024 ? n - done : 1024;
		assert_int_equal(0, vad_registry_insert(t->reg, h, arena, ranges + done, k));
		done += k;
	}
	free(ranges);
}

/* h holds exactly once each of offsets[0..n) of arena. */
static void expect_held(struct vad_holder *h, unsigned arena, const uint64_t *offsets, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct vad_hold *o = vad_holder_find(h, arena, offsets[i]);
		if (!o || o->offset != offsets[i] || o->arena != arena || o->count != 1 ||
		    o->range->offset != offsets[i] || o->range->arena != arena)
			fail_msg("hold %zu (arena %u offset 0x%llx) lost", i, arena,
				 (unsigned long long)offsets[i]);
	}
}

/* The load factor stays at most 1/2 in a power-of-two table. */
static void expect_shape(struct vad_holder *h)
{
	size_t cap = vad_holder_capacity(h);
	assert_true(cap == 0 || (cap & (cap - 1)) == 0);
	assert_true(vad_holder_count(h) <= cap / 2);
}

static size_t scaled(size_t normal)
{
	const char *m = getenv("VAD_TEST_MODE");
	if (m && (strcmp(m, "tsan") == 0 || strcmp(m, "asan") == 0))
		return normal / 8;
	return normal;
}

/* Growth across many sizes, batch by batch; absent keys stay absent. */
static void test_table_growth(void **state)
{
	(void)state;
	static const size_t sizes[] = {1,  2,  3,  7,  8,   9,	 15,  16,   17,	  31,	32,
				       33, 63, 64, 65, 100, 127, 257, 1000, 1025, 4097, 20000};
	struct tables t;
	tables_setup(&t);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t n = sizes[si];
		uint64_t *offsets = malloc(n * sizeof(*offsets));
		assert_non_null(offsets);
		struct vad_holder h;
		assert_int_equal(0, vad_holder_init(t.reg, &h, 1000, NULL));
		assert_null(vad_holder_find(&h, 0, 0)); /* empty table */
		/* Uneven batches, so growth happens at many different fill levels. */
		for (size_t done = 0, step = 1; done < n; step = step * 3 % 37 + 1) {
			size_t k = n - done < step ? n - done : step;
			insert_ranges(&t, &h, 0, k, offsets + done);
			done += k;
			assert_int_equal(done, vad_holder_count(&h));
			expect_shape(&h);
		}
		expect_held(&h, 0, offsets, n);
		for (size_t i = 0; i < n; i++) {
			/* Same offset in another arena, an offset inside a range, one past all. */
			assert_null(vad_holder_find(&h, 1, offsets[i]));
			assert_null(vad_holder_find(&h, 0, offsets[i] + 1));
		}
		assert_null(vad_holder_find(&h, 0, TABLE_SPACE));
		check_ok(t.reg);
		vad_holder_fini(t.reg, &h);
		free(offsets);
	}
	check_ok(t.reg);
	tables_teardown(&t);
}

/* The 6 keys of the wrap-around test: each home is one of the last two slots or the first
 * of a 16-slot table, so their cluster runs across the end. */
struct wrap_keys {
	uint64_t offsets[6];
	char tokens[6][VAD_TOKEN_CHARS + 1];
};

static void release_ok(struct tables *t, struct vad_holder *h, uint64_t offset)
{
	uint64_t size;
	assert_int_equal(0, vad_registry_release(t->reg, h, 0, offset, &size));
	assert_int_equal(QUANTUM, size);
}

/* Delete every one of 6 keys clustered across the table's end, in each of the 720 orders:
 * after each deletion (a backward shift, maybe across the end) every other key is found and
 * the check, which looks each slot up by its key, passes; then free the cluster by one batch
 * in that order. */
static void test_table_backward_shift_wraps(void **state)
{
	(void)state;
	struct tables t;
	tables_setup(&t);
	/* Offsets whose home in a 16-slot table is 14, 15 or 0: a keeper holds their ranges
	 * (and shares them) so that the holder under test can attach and drop them again and
	 * again. */
	struct vad_holder keeper;
	assert_int_equal(0, vad_holder_init(t.reg, &keeper, 1000, NULL));
	enum { POOL = 512 };
	struct vad_range *pool[POOL];
	uint64_t pool_off[POOL];
	alloc_ranges(&t, 0, POOL, pool, pool_off);
	struct wrap_keys w;
	struct vad_range *chosen[6];
	size_t per_home[3] = {0}, n = 0;
	uint64_t unused[POOL];
	size_t n_unused = 0;
	for (size_t i = 0; i < POOL; i++) {
		size_t home = (size_t)vad_hold_hash(0, pool_off[i]) & 15;
		size_t which = home == 14 ? 0 : home == 15 ? 1 : home == 0 ? 2 : 3;
		if (which < 3 && per_home[which] < 2) {
			per_home[which]++;
			w.offsets[n] = pool_off[i];
			chosen[n++] = pool[i];
		} else {
			unused[n_unused++] = pool_off[i];
			vad_range_put(pool[i]);
		}
	}
	assert_int_equal(6, n);
	size_t done;
	assert_int_equal(0, va_free_batch(t.vs[0], n_unused, unused, NULL, &done));
	uint64_t held;
	assert_int_equal(VAD_QUOTA_OK,
			 vad_registry_reserve(&keeper, 6 * QUANTUM, 6, &unlimited, &held));
	assert_int_equal(0, vad_registry_insert(t.reg, &keeper, 0, chosen, 6));
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(0,
				 vad_registry_share(t.reg, &keeper, 0, w.offsets[i], w.tokens[i]));

	static const bool allowed[TABLE_ARENAS] = {true, true, true, true};
	unsigned long wrapped = 0;
	for (unsigned perm = 0; perm < 720; perm++) {
		/* The perm-th order of 0..5 (factorial number system). */
		size_t order[6], left[6] = {0, 1, 2, 3, 4, 5}, n_left = 6, code = perm;
		for (size_t i = 0; i < 6; i++) {
			size_t pick = code % n_left;
			code /= n_left;
			order[i] = left[pick];
			memmove(left + pick, left + pick + 1,
				(n_left - pick - 1) * sizeof(left[0]));
			n_left--;
		}
		struct vad_holder h;
		assert_int_equal(0, vad_holder_init(t.reg, &h, 1001, NULL));
		/* Attached in the order too, so the cluster's layout varies as well. */
		for (size_t i = 0; i < 6; i++) {
			struct vad_attach_result res;
			assert_int_equal(VAD_ATTACH_OK,
					 vad_registry_attach(t.reg, &h, w.tokens[order[5 - i]],
							     allowed, &unlimited, &res));
		}
		assert_int_equal(16, vad_holder_capacity(&h));
		for (size_t i = 0; i < 6; i++) {
			struct vad_hold *o = vad_holder_find(&h, 0, w.offsets[i]);
			assert_non_null(o);
			size_t home = (size_t)vad_hold_hash(0, w.offsets[i]) & 15;
			wrapped +=
			    (size_t)(o - h.holds) < home; /* sits past the end, at the start */
		}
		for (size_t i = 0; i < 6; i++) {
			release_ok(&t, &h, w.offsets[order[i]]);
			assert_null(vad_holder_find(&h, 0, w.offsets[order[i]]));
			for (size_t j = i + 1; j < 6; j++) {
				struct vad_hold *o = vad_holder_find(&h, 0, w.offsets[order[j]]);
				if (!o || o->count != 1 || o->offset != w.offsets[order[j]])
					fail_msg(
					    "order %u: after deleting %zu keys, key %zu is lost",
					    perm, i + 1, order[j]);
			}
			assert_int_equal(5 - i, vad_holder_count(&h));
			check_ok(t.reg);
		}
		vad_holder_fini(t.reg, &h);

		/* The same cluster freed by one batch in this order, the first key named twice
		 * (held twice): a batch's drop finds each hold where its prefetch pass saw it
		 * unless an earlier deletion's shift moved it there or away. */
		assert_int_equal(0, vad_holder_init(t.reg, &h, 1001, NULL));
		for (size_t i = 0; i < 7; i++) {
			struct vad_attach_result res;
			assert_int_equal(VAD_ATTACH_OK,
					 vad_registry_attach(t.reg, &h, w.tokens[order[i % 6]],
							     allowed, &unlimited, &res));
		}
		uint64_t batch[7];
		for (size_t i = 0; i < 7; i++)
			batch[i] = w.offsets[order[i % 6]];
		assert_int_equal(2, vad_holder_find(&h, 0, batch[0])->count);
		assert_int_equal(7, vad_registry_release_batch(t.reg, &h, 0, batch, 7));
		if (vad_holder_count(&h) != 0)
			fail_msg("order %u: a batch freeing the cluster left %zu holds", perm,
				 vad_holder_count(&h));
		check_ok(t.reg);
		vad_holder_fini(t.reg, &h);
	}
	assert_true(wrapped > 0); /* the clusters did run across the end */
	vad_holder_fini(t.reg, &keeper);
	tables_teardown(&t);
}

/* Deletion patterns on a big table: every other key, from the back, a scrambled order, and
 * a batch naming offsets twice (stops at the second naming). */
static void test_table_delete_patterns(void **state)
{
	(void)state;
	struct tables t;
	tables_setup(&t);
	size_t n = scaled(6000);
	uint64_t *offsets = malloc(n * sizeof(*offsets)), *gone = malloc(n * sizeof(*gone));
	bool *dropped = calloc(n, sizeof(*dropped));
	assert_true(offsets && gone && dropped);
	struct vad_holder h;
	assert_int_equal(0, vad_holder_init(t.reg, &h, 1000, NULL));
	insert_ranges(&t, &h, 0, n, offsets);

	/* Every other one, one at a time. */
	for (size_t i = 0; i < n; i += 2) {
		release_ok(&t, &h, offsets[i]);
		dropped[i] = true;
	}
	/* Scrambled, by a batch: a stride coprime to n over the odd ones left. */
	size_t k = 0;
	for (size_t step = 0, i = 1; step < n; step++, i = (i + 7919) % n)
		if (!dropped[i] && k < n / 4 && i % 2) {
			gone[k++] = offsets[i];
			dropped[i] = true;
		}
	assert_int_equal(k, vad_registry_release_batch(t.reg, &h, 0, gone, k));
	size_t left = 0;
	for (size_t i = 0; i < n; i++) {
		if (dropped[i])
			assert_null(vad_holder_find(&h, 0, offsets[i]));
		else
			expect_held(&h, 0, &offsets[i], 1), left++;
	}
	assert_int_equal(left, vad_holder_count(&h));
	expect_shape(&h);
	check_ok(t.reg);

	/* A batch naming one offset twice: the second naming is not held any more. */
	size_t a = 0;
	while (dropped[a])
		a++;
	uint64_t twice[3] = {offsets[a], offsets[a], offsets[a]};
	assert_int_equal(1, vad_registry_release_batch(t.reg, &h, 0, twice, 3));
	dropped[a] = true;

	/* The rest from the back. */
	for (size_t i = n; i-- > 0;)
		if (!dropped[i]) {
			release_ok(&t, &h, offsets[i]);
			dropped[i] = true;
			if (i % 97 == 0) {
				expect_shape(&h);
				check_ok(t.reg);
			}
		}
	assert_int_equal(0, vad_holder_count(&h));
	/* Given back down to what a session keeps (or never grown beyond it). */
	assert_true(vad_holder_capacity(&h) <= VAD_HOLDS_KEEP_SLOTS);
	check_ok(t.reg);
	vad_holder_fini(t.reg, &h);
	free(offsets);
	free(gone);
	free(dropped);
	tables_teardown(&t);
}

/* A session that once held many ranges gives the table's memory back after a big free, and
 * still grows again. */
static void test_table_shrink(void **state)
{
	(void)state;
	struct tables t;
	tables_setup(&t);
	size_t n = scaled(100000), keep = n / 20;
	uint64_t *offsets = malloc(n * sizeof(*offsets));
	assert_non_null(offsets);
	struct vad_holder h;
	assert_int_equal(0, vad_holder_init(t.reg, &h, 1000, NULL));
	insert_ranges(&t, &h, 0, n, offsets);
	size_t big = vad_holder_capacity(&h);
	assert_true(big >= 2 * n);
	/* Free all but keep, in batches as a client would. */
	for (size_t done = keep; done < n;) {
		size_t k = n - done < 1024 ? n - done : 1024;
		assert_int_equal(k, vad_registry_release_batch(t.reg, &h, 0, offsets + done, k));
		done += k;
		expect_shape(&h);
	}
	assert_int_equal(keep, vad_holder_count(&h));
	assert_true(big > VAD_HOLDS_KEEP_SLOTS);
	assert_true(vad_holder_capacity(&h) <= big / 8); /* below 1/8 full: shrunk */
	assert_true(vad_holder_capacity(&h) >= 2 * keep);
	/* All of them gone: down to what a session keeps. */
	assert_int_equal(keep, vad_registry_release_batch(t.reg, &h, 0, offsets, keep));
	assert_int_equal(0, vad_holder_count(&h));
	assert_int_equal(VAD_HOLDS_KEEP_SLOTS, vad_holder_capacity(&h));
	insert_ranges(&t, &h, 0, keep, offsets);
	expect_held(&h, 0, offsets, keep);
	check_ok(t.reg);
	insert_ranges(&t, &h, 0, n - keep, offsets + keep);
	expect_held(&h, 0, offsets, n);
	expect_shape(&h);
	check_ok(t.reg);
	vad_holder_fini(t.reg, &h);
	free(offsets);
	tables_teardown(&t);
}

/* The same offsets in every arena are distinct keys. */
static void test_table_equal_offsets_in_many_arenas(void **state)
{
	(void)state;
	struct tables t;
	tables_setup(&t);
	enum { N = 700 };
	static uint64_t offsets[TABLE_ARENAS][N];
	struct vad_holder h;
	assert_int_equal(0, vad_holder_init(t.reg, &h, 1000, NULL));
	for (unsigned a = 0; a < TABLE_ARENAS; a++)
		insert_ranges(&t, &h, a, N, offsets[a]);
	assert_memory_equal(offsets[0], offsets[TABLE_ARENAS - 1], sizeof(offsets[0]));
	assert_int_equal(TABLE_ARENAS * N, vad_holder_count(&h));
	for (unsigned a = 0; a < TABLE_ARENAS; a++)
		expect_held(&h, a, offsets[a], N);
	check_ok(t.reg);
	/* Drop arena 2's: the others' equal offsets stay. */
	assert_int_equal(N, vad_registry_release_batch(t.reg, &h, 2, offsets[2], N));
	for (unsigned a = 0; a < TABLE_ARENAS; a++)
		if (a == 2)
			for (size_t i = 0; i < N; i++)
				assert_null(vad_holder_find(&h, a, offsets[a][i]));
		else
			expect_held(&h, a, offsets[a], N);
	check_ok(t.reg);
	vad_holder_fini(t.reg, &h); /* the rest goes at disconnect */
	check_ok(t.reg);
	tables_teardown(&t);
}

/* Pages of address space in use now. */
static rlim_t address_space_now(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	assert_non_null(f);
	unsigned long pages = 0;
	assert_int_equal(1, fscanf(f, "%lu", &pages));
	fclose(f);
	return (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
}

/* A batch whose table growth cannot get memory is refused whole: nothing inserted, nothing
 * leaked, the books still balance, and the same batch goes in once memory is back. */
static void test_table_growth_out_of_memory(void **state)
{
	(void)state;
	const char *m = getenv("VAD_TEST_MODE");
	if (m && (strcmp(m, "asan") == 0 || strcmp(m, "tsan") == 0))
		skip(); /* the sanitizers' runtimes need their huge address space reservations */
	struct tables t;
	tables_setup(&t);
	enum { FIRST = 65536, MORE = 1024 };
	struct vad_holder h;
	assert_int_equal(0, vad_holder_init(t.reg, &h, 1000, NULL));
	size_t cap = 0;
	uint64_t *offsets = NULL;
	/* Fill the table to exactly half: the next batch must grow it. */
	for (size_t want = FIRST, have = 0; have < want; want = vad_holder_capacity(&h) / 2) {
		offsets = realloc(offsets, (want + MORE) * sizeof(*offsets));
		assert_non_null(offsets);
		insert_ranges(&t, &h, 0, want - have, offsets + have);
		have = want;
		cap = vad_holder_capacity(&h);
	}
	size_t held_n = vad_holder_count(&h);
	assert_int_equal(cap / 2, held_n);
	struct vad_range *more[MORE];
	alloc_ranges(&t, 0, MORE, more, offsets + held_n);
	uint64_t held;
	assert_int_equal(VAD_QUOTA_OK,
			 vad_registry_reserve(&h, MORE * QUANTUM, MORE, &unlimited, &held));

	/* The new table needs several MiB; allow 1 MiB more address space than now. */
	struct rlimit saved, tight;
	assert_int_equal(0, getrlimit(RLIMIT_AS, &saved));
	tight = saved;
	tight.rlim_cur = address_space_now() + (1u << 20);
	assert_int_equal(0, setrlimit(RLIMIT_AS, &tight));
	int rc = vad_registry_insert(t.reg, &h, 0, more, MORE);
	assert_int_equal(0, setrlimit(RLIMIT_AS, &saved));
	assert_int_equal(-1, rc);
	assert_int_equal(held_n, vad_holder_count(&h));
	assert_int_equal(cap, vad_holder_capacity(&h));
	for (size_t i = 0; i < MORE; i++)
		assert_null(vad_holder_find(&h, 0, offsets[held_n + i]));
	expect_held(&h, 0, offsets, held_n);
	/* The reservation is still the caller's; the check allows a uid charged more. */
	check_ok(t.reg);

	assert_int_equal(0, vad_registry_insert(t.reg, &h, 0, more, MORE));
	assert_true(vad_holder_capacity(&h) > cap);
	expect_held(&h, 0, offsets, held_n + MORE);
	expect_shape(&h);
	check_ok(t.reg);
	vad_holder_fini(t.reg, &h);
	free(offsets);
	tables_teardown(&t);
}

/* ---- counters never wrap (finding 10), range-count limits ------------------------------ */

/* One range of the whole 32 TiB space for a holder of uid 1 (shared; its token in tok). */
static struct vad_range *huge_range(struct vad_registry *reg, struct va_space *vs,
				    struct vad_holder *owner, char tok[VAD_TOKEN_CHARS + 1])
{
	struct vad_range *r = vad_range_get();
	assert_non_null(r);
	uint64_t off, held, size = 32ull << 40;
	assert_int_equal(0, va_alloc(vs, size, 0, r, &off));
	r->offset = off;
	r->size = size;
	assert_int_equal(VAD_QUOTA_OK, vad_registry_reserve(owner, size, 1, &unlimited, &held));
	assert_int_equal(0, vad_registry_insert(reg, owner, 0, &r, 1));
	assert_int_equal(0, vad_registry_share(reg, owner, 0, off, tok));
	return r;
}

/* 524,288 attaches of a 32 TiB range would make 2^64 bytes: with every quota unlimited the
 * attach that would reach it is refused (VAD_QUOTA_COUNTER), the totals never wrap, and the
 * books stay exact. Once with the attacher in the owner's uid (its uid charge refuses), once
 * in another uid (the arena's referenced bytes refuse: no uid alone reaches 2^64). */
static void test_counters_never_wrap(void **state)
{
	(void)state;
	for (int other_uid = 0; other_uid < 2; other_uid++) {
		struct va_config cfg = {.size = 64ull << 40, .quantum = QUANTUM, .nodes = 1};
		struct va_space *vs;
		assert_int_equal(0, va_create(&cfg, &vs));
		struct vad_registry *reg = vad_registry_new(&vs, 1);
		assert_non_null(reg);
		struct vad_holder owner, h;
		assert_int_equal(0, vad_holder_init(reg, &owner, 1, NULL));
		assert_int_equal(0, vad_holder_init(reg, &h, other_uid ? 2 : 1, NULL));
		char tok[VAD_TOKEN_CHARS + 1];
		huge_range(reg, vs, &owner, tok);
		static const bool allowed[] = {true};
		struct vad_attach_result res;
		uint64_t n = 0;
		enum vad_attach_status st;
		/* Bounded: a registry that wraps would attach forever. */
		while ((st = vad_registry_attach(reg, &h, tok, allowed, &unlimited, &res)) ==
			   VAD_ATTACH_OK &&
		       n < (1u << 20))
			n++;
		assert_int_equal(VAD_ATTACH_QUOTA, st);
		assert_int_equal(VAD_QUOTA_COUNTER, res.quota);
		/* The owner's reference plus n attaches: the most below 2^64. */
		assert_int_equal((1ull << 19) - 1, n + 1);
		assert_int_equal(n << 45, h.held_bytes);
		assert_int_equal(n, h.held_refs);
		assert_int_equal((n + 1) << 45, reg->arenas[0].ref_bytes);
		assert_int_equal(other_uid ? n << 45 : (n + 1) << 45, h.uid->held);
		check_ok(reg);
		/* And a fresh allocation cannot push the arena's total over either. */
		struct vad_range *r = vad_range_get();
		uint64_t off, held;
		assert_int_equal(0, va_alloc(vs, 1ull << 45, 0, r, &off));
		r->offset = off;
		r->size = 1ull << 45;
		if (other_uid) {
			assert_int_equal(VAD_QUOTA_OK, vad_registry_reserve(&owner, r->size, 1,
									    &unlimited, &held));
			assert_int_equal(-2, vad_registry_insert(reg, &owner, 0, &r, 1));
			vad_registry_unreserve(&owner, r->size, 1);
		} else {
			assert_int_equal(
			    VAD_QUOTA_COUNTER,
			    vad_registry_reserve(&owner, r->size, 1, &unlimited, &held));
		}
		assert_int_equal(0, va_free(vs, off, NULL));
		vad_range_put(r);
		check_ok(reg);
		vad_holder_fini(reg, &h);
		vad_holder_fini(reg, &owner);
		vad_registry_reap_wait(reg);
		struct va_stats vst;
		va_get_stats(vs, &vst);
		assert_int_equal(0, vst.busy_blocks);
		vad_registry_free(reg);
		va_destroy(vs);
	}
}

/* max_ranges_client and max_ranges_uid count references (attaches too), dying holders'
 * references count for their uid until the reaper has dropped them. */
static void test_range_limits(void **state)
{
	(void)state;
	struct tables t;
	tables_setup(&t);
	struct vad_holder a, b;
	assert_int_equal(0, vad_holder_init(t.reg, &a, 7, NULL));
	assert_int_equal(0, vad_holder_init(t.reg, &b, 7, NULL));
	const struct vad_quota q = {.ranges_client = 100, .ranges_uid = 150};
	uint64_t held;
	assert_int_equal(VAD_QUOTA_OK, vad_registry_reserve(&a, 100 * QUANTUM, 100, &q, &held));
	vad_registry_unreserve(&a, 100 * QUANTUM, 100);
	uint64_t offsets[100];
	insert_ranges(&t, &a, 0, 100, offsets);
	assert_int_equal(VAD_QUOTA_RANGES_CLIENT, vad_registry_reserve(&a, QUANTUM, 1, &q, &held));
	assert_int_equal(100, held);
	assert_int_equal(VAD_QUOTA_OK, vad_registry_reserve(&b, 50 * QUANTUM, 50, &q, &held));
	assert_int_equal(VAD_QUOTA_RANGES_UID, vad_registry_reserve(&b, QUANTUM, 1, &q, &held));
	assert_int_equal(150, held);
	vad_registry_unreserve(&b, 50 * QUANTUM, 50);
	/* a goes (to the reaper: more than a chunk); once reaped, its uid has room again. */
	vad_holder_fini(t.reg, &a);
	vad_registry_reap_wait(t.reg);
	assert_int_equal(VAD_QUOTA_OK, vad_registry_reserve(&b, 100 * QUANTUM, 100, &q, &held));
	vad_registry_unreserve(&b, 100 * QUANTUM, 100);
	check_ok(t.reg);
	vad_holder_fini(t.reg, &b);
	tables_teardown(&t);
}

struct reap_race {
	struct vad_registry *reg;
	struct vad_holder *h;
	const uint64_t *offsets;
	size_t n;
	int checks_failed;
	char msg[320];
};

/* The other holder frees its references to the shared ranges one by one, with a check after
 * every few, while the reaper drops the dying holder's. */
static void *reap_race_other(void *arg)
{
	struct reap_race *rr = arg;
	for (size_t i = 0; i < rr->n; i++) {
		if (vad_registry_release_batch(rr->reg, rr->h, 0, &rr->offsets[i], 1) != 1)
			rr->checks_failed++;
		if (i % 64 == 0 && vad_registry_check(rr->reg, rr->msg, sizeof(rr->msg)) < 0)
			rr->checks_failed++;
	}
	return NULL;
}

/* A holder of many ranges, some shared with another holder and some attached twice, goes
 * away: fini returns at once (the reaper has them), the check passes while it reaps and the
 * other holder frees the shared ranges, every range goes back exactly once, and the uid's
 * charge comes back to zero. Many holders dying at once too. */
static void test_reaper(void **state)
{
	(void)state;
	enum { N = 20000, SHARED = 2000, DYING = 8 };
	struct tables t;
	tables_setup(&t);
	uint64_t *offsets = malloc(N * sizeof(*offsets));
	assert_non_null(offsets);
	struct vad_holder a, b;
	assert_int_equal(0, vad_holder_init(t.reg, &a, 5, NULL));
	assert_int_equal(0, vad_holder_init(t.reg, &b, 6, NULL));
	insert_ranges(&t, &a, 0, N, offsets);
	static const bool allowed[] = {true, true, true, true};
	for (size_t i = 0; i < SHARED; i++) {
		char tok[VAD_TOKEN_CHARS + 1];
		struct vad_attach_result res;
		assert_int_equal(0, vad_registry_share(t.reg, &a, 0, offsets[i], tok));
		assert_int_equal(VAD_ATTACH_OK,
				 vad_registry_attach(t.reg, &b, tok, allowed, &unlimited, &res));
		if (i % 2)
			assert_int_equal(VAD_ATTACH_OK, vad_registry_attach(t.reg, &a, tok, allowed,
									    &unlimited, &res));
	}
	check_ok(t.reg);
	vad_holder_fini(t.reg, &a);
	struct reap_race rr = {.reg = t.reg, .h = &b, .offsets = offsets, .n = SHARED};
	pthread_t th;
	assert_int_equal(0, pthread_create(&th, NULL, reap_race_other, &rr));
	for (int i = 0; i < 20; i++)
		check_ok(t.reg);
	pthread_join(th, NULL);
	if (rr.checks_failed)
		fail_msg("%d failures beside the reaper: %s", rr.checks_failed, rr.msg);
	vad_registry_reap_wait(t.reg);
	check_ok(t.reg);
	assert_int_equal(0, vad_registry_dying(t.reg, NULL));
	assert_int_equal(0, vad_registry_tokens(t.reg));
	assert_int_equal(0, t.reg->arenas[0].refs);
	assert_int_equal(0, t.reg->arenas[0].ref_bytes);

	/* Many at once: DYING holders of one uid, each more than a chunk, then a check. */
	struct vad_holder many[DYING];
	for (int i = 0; i < DYING; i++) {
		assert_int_equal(0, vad_holder_init(t.reg, &many[i], 9, NULL));
		insert_ranges(&t, &many[i], (unsigned)(i % TABLE_ARENAS), 1000, offsets);
	}
	for (int i = 0; i < DYING; i++)
		vad_holder_fini(t.reg, &many[i]);
	check_ok(t.reg);
	uint64_t left;
	unsigned dying = vad_registry_dying(t.reg, &left);
	assert_true(dying <= DYING && left <= DYING * 1000);
	vad_registry_reap_wait(t.reg);
	check_ok(t.reg);
	vad_holder_fini(t.reg, &b);
	free(offsets);
	tables_teardown(&t);
}

/* The registry freed while the reaper still works: it finishes first (no leak, no range left
 * busy: ASan and the allocator's counts would say). */
/* ---- listings (vactl ranges, vactl tokens) ---------------------------------------------- */

#define LIST_MINE   300 /* ranges (and tokens) of uid 1000 */
#define LIST_THEIRS 10	/* of uid 2000 */

/* Page through the tokens visible to uid (every one when every) max at a time, marking
 * each offset seen in seen[] (indexed by offset / QUANTUM); fails on a repeat. Returns the
 * number listed; *first_next the cursor after the first page. Optionally kill tokens between
 * the first and the second page (between(ctx)). */
static size_t list_all_tokens(struct vad_registry *reg, bool every, uint32_t uid, size_t max,
			      uint8_t *seen, size_t seen_len, void (*between)(void *), void *ctx)
{
	struct vad_token_info out[16];
	assert_true(max <= 16);
	uint64_t cursor = 0;
	size_t listed = 0, pages = 0;
	bool more = true;
	while (more) {
		uint64_t next;
		size_t n =
		    vad_registry_list_tokens(reg, cursor, every, uid, out, max, &next, &more);
		assert_true(n <= max);
		for (size_t i = 0; i < n; i++) {
			size_t k = out[i].offset / QUANTUM;
			assert_true(k < seen_len);
			if (seen[k]++)
				fail_msg("token of offset 0x%llx listed twice",
					 (unsigned long long)out[i].offset);
			if (!every)
				assert_int_equal(uid, out[i].uid);
			assert_int_equal(QUANTUM, out[i].size);
			assert_int_equal(1, out[i].holders);
		}
		listed += n;
		assert_true(!more || next > cursor); /* it moves forward */
		cursor = next;
		if (++pages == 1 && between)
			between(ctx);
		assert_true(pages < 10000);
	}
	return listed;
}

struct unshare_ctx {
	struct vad_registry *reg;
	struct vad_holder *h;
	const uint64_t *offsets;
	size_t from, to;
};

static void unshare_some(void *arg)
{
	struct unshare_ctx *u = arg;
	for (size_t i = u->from; i < u->to; i++)
		assert_int_equal(1, vad_registry_unshare(u->reg, u->h, 0, u->offsets[i]));
}

/* A holder's ranges and the live tokens come back a page at a time, each exactly once; a
 * non-admin's view has only its uid's tokens; tokens that die between pages (the one the
 * cursor names among them, and more than the resume probes) neither stop the listing nor
 * repeat anything. */
static void test_listings_paged(void **state)
{
	(void)state;
	struct tables t;
	tables_setup(&t);
	struct vad_holder mine, theirs;
	assert_int_equal(0, vad_holder_init(t.reg, &mine, 1000, NULL));
	assert_int_equal(0, vad_holder_init(t.reg, &theirs, 2000, NULL));
	uint64_t off_mine[LIST_MINE], off_theirs[LIST_THEIRS];
	insert_ranges(&t, &mine, 0, LIST_MINE, off_mine);
	insert_ranges(&t, &theirs, 0, LIST_THEIRS, off_theirs);
	char token[VAD_TOKEN_CHARS + 1];
	for (size_t i = 0; i < LIST_MINE; i++) {
		assert_int_equal(0, vad_registry_share(t.reg, &mine, 0, off_mine[i], token));
		if (i < LIST_THEIRS) /* interleaved with the other uid's */
			assert_int_equal(
			    0, vad_registry_share(t.reg, &theirs, 0, off_theirs[i], token));
	}
	size_t seen_len = 2 * (LIST_MINE + LIST_THEIRS) + 64;
	uint8_t *seen = calloc(seen_len, 1);
	assert_non_null(seen);

	/* The holder's ranges, 7 at a time. */
	uint64_t cursor = 0, total = 0;
	size_t listed = 0;
	do {
		struct vad_held_info out[7];
		size_t n = vad_holder_list(&mine, &cursor, out, 7, &total);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(0, seen[out[i].offset / QUANTUM]++);
			assert_true(out[i].shared);
			assert_int_equal(1, out[i].refs);
		}
		listed += n;
	} while (cursor);
	assert_int_equal(LIST_MINE, listed);
	assert_int_equal(LIST_MINE, total);
	/* A cursor a client made up: past the end is the end, never a read past the table. */
	cursor = UINT64_MAX;
	struct vad_held_info one[1];
	assert_int_equal(0, vad_holder_list(&mine, &cursor, one, 1, &total));
	assert_int_equal(0, cursor);
	struct vad_token_info tk[1];
	uint64_t next;
	bool more = true;
	assert_int_equal(0,
			 vad_registry_list_tokens(t.reg, UINT64_MAX, true, 0, tk, 1, &next, &more));
	assert_false(more);

	memset(seen, 0, seen_len);
	assert_int_equal(LIST_MINE + LIST_THEIRS,
			 list_all_tokens(t.reg, true, 0, 7, seen, seen_len, NULL, NULL));
	memset(seen, 0, seen_len);
	assert_int_equal(LIST_THEIRS,
			 list_all_tokens(t.reg, false, 2000, 3, seen, seen_len, NULL, NULL));
	for (size_t i = 0; i < LIST_THEIRS; i++)
		assert_int_equal(1, seen[off_theirs[i] / QUANTUM]);

	/* After a first page of 5 (tokens 1-5 in share order: mine 0-2, theirs 0-1), mine 2-199
	 * die: the cursor's own token and far more than the probes after it. */
	struct unshare_ctx u = {t.reg, &mine, off_mine, 2, 200};
	memset(seen, 0, seen_len);
	size_t got = list_all_tokens(t.reg, true, 0, 5, seen, seen_len, unshare_some, &u);
	/* mine 2 was listed on the first page; 3-199 never are */
	assert_int_equal(LIST_MINE + LIST_THEIRS - 197, got);
	for (size_t i = 200; i < LIST_MINE; i++)
		assert_int_equal(1, seen[off_mine[i] / QUANTUM]);
	for (size_t i = 0; i < LIST_THEIRS; i++)
		assert_int_equal(1, seen[off_theirs[i] / QUANTUM]);

	free(seen);
	check_ok(t.reg);
	vad_holder_fini(t.reg, &mine);
	vad_holder_fini(t.reg, &theirs);
	tables_teardown(&t);
}

static void test_free_while_reaping(void **state)
{
	(void)state;
	struct tables t;
	tables_setup(&t);
	enum { N = 50000 };
	uint64_t *offsets = malloc(N * sizeof(*offsets));
	assert_non_null(offsets);
	struct vad_holder a;
	assert_int_equal(0, vad_holder_init(t.reg, &a, 5, NULL));
	insert_ranges(&t, &a, 0, N, offsets);
	vad_holder_fini(t.reg, &a);
	vad_registry_free(t.reg); /* no reap_wait: the free must wait for the reaper */
	for (int i = 0; i < TABLE_ARENAS; i++) {
		struct va_stats st;
		va_get_stats(t.vs[i], &st);
		assert_int_equal(0, st.busy_blocks);
		va_destroy(t.vs[i]);
	}
	free(offsets);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
	return x < y ? -1 : x > y;
}

/* Every object of objs[0..n) distinct and zeroed. */
static void objects_fresh(struct vad_range **objs, size_t n)
{
	static const struct vad_range zero;
	for (size_t i = 0; i < n; i++)
		assert_memory_equal(objs[i], &zero, sizeof(zero));
	qsort(objs, n, sizeof(*objs), cmp_ptr);
	for (size_t i = 1; i < n; i++)
		assert_true(objs[i - 1] != objs[i]);
}

/* Range objects in batches: a batch takes distinct zeroed objects; a thread that gives back
 * more than it keeps (16,384) passes the rest to the depot, and they all come back again,
 * distinct, to this thread and to another. */
static void *take_and_give(void *arg)
{
	struct vad_range **objs = arg;
	enum { N = 40000 };
	for (size_t i = 0; i < N; i += 1000)
		assert_true(vad_range_get_batch(objs + i, 1000));
	objects_fresh(objs, N);
	for (size_t i = 0; i < N; i++) {
		objs[i]->offset = i; /* dirty, as a range given back is */
		objs[i]->refs = 1;
		vad_range_put(objs[i]);
	}
	return NULL;
}

static void test_range_objects_in_batches(void **state)
{
	(void)state;
	enum { N = 40000 };
	struct vad_range **objs = malloc(N * sizeof(*objs));
	assert_non_null(objs);
	struct vad_range *one[3];
	assert_true(vad_range_get_batch(one, 3));
	objects_fresh(one, 3);
	for (int i = 0; i < 3; i++)
		vad_range_put(one[i]);
	take_and_give(objs); /* this thread: past its cache, through the depot */
	take_and_give(objs); /* again: the same objects come back clean */
	pthread_t other;
	assert_int_equal(0, pthread_create(&other, NULL, take_and_give, objs));
	assert_int_equal(0, pthread_join(other, NULL)); /* its spares go to the depot at exit */
	take_and_give(objs);
	free(objs);
}

int main(void)
{
	const char *m = getenv("VAD_TEST_MODE");
	if (!m || strcmp(m, "normal") == 0)
		/* Big blocks always come from mmap (no growing threshold), so the address space
		 * limit of the out-of-memory test bites instead of free heap space; it runs
		 * first, while the heap has no big free region. */
		(void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_growth_out_of_memory),
	    cmocka_unit_test(test_share_attach_free_race),
	    cmocka_unit_test(test_token_deaths_race),
	    cmocka_unit_test(test_table_growth),
	    cmocka_unit_test(test_table_backward_shift_wraps),
	    cmocka_unit_test(test_table_delete_patterns),
	    cmocka_unit_test(test_table_shrink),
	    cmocka_unit_test(test_table_equal_offsets_in_many_arenas),
	    cmocka_unit_test(test_counters_never_wrap),
	    cmocka_unit_test(test_range_limits),
	    cmocka_unit_test(test_reaper),
	    cmocka_unit_test(test_free_while_reaping),
	    cmocka_unit_test(test_listings_paged),
	    cmocka_unit_test(test_range_objects_in_batches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
