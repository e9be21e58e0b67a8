/*
 * bench_workload.c - the eight allocation loops of lib/test_vmalloc.c (2018-2024), same
 * shapes, sizes in quanta instead of pages, and a ring of live areas. Each comment gives the kernel
 * loop.
 */
#include <stdlib.h>
#include <string.h>

#include "bench_workload.h"

/* Allocate; count a failure. Returns true on success. */
static bool try_alloc(struct bench_wctx *c, uint64_t size, uint64_t align, uint64_t *addr)
{
	if (c->ops->alloc(c->h, size, align, addr) == VA_OK)
		return true;
	c->fails++;
	return false;
}

/* Free; a failing free is a bug of the implementation, remembered in c->error. */
static void must_free(struct bench_wctx *c, uint64_t addr)
{
	int rc = c->ops->free(c->h, addr);

	if (rc && !c->error)
		c->error = rc;
}

/*
 * fix_size_alloc_test:
 *	for (i = 0; i < test_loop_count; i++) { p = vmalloc(1 page); vfree(p); }
 */
static void fix_size_op(struct bench_wctx *c, uint64_t i)
{
	uint64_t a;

	if (try_alloc(c, c->quantum, 0, &a))
		must_free(c, a);
}

/* Areas a setup keeps for the whole loop. */
struct held_state {
	uint64_t *addrs;
	uint64_t n;
};

static void free_held(struct bench_wctx *c)
{
	struct held_state *st = c->state;

	if (!st)
		return;
	for (uint64_t i = 0; i < st->n; i++)
		must_free(c, st->addrs[i]);
	free(st->addrs);
	free(st);
	c->state = NULL;
}

static unsigned fls_u(unsigned x)
{
	return x ? 32 - (unsigned)__builtin_clz(x) : 0;
}

/*
 * full_fit_alloc_test:
 *	junk_length = fls(num_online_cpus()) * (32 MiB / PAGE_SIZE);
 *	for (i < junk_length) { ptr[i] = vmalloc(1 page); junk_ptr[i] = vmalloc(1 page); }
 *	for (i < junk_length) vfree(junk_ptr[i]);     -- leaves 1-page holes
 *	loop: { p = vmalloc(1 page); vfree(p); }     -- each fits a hole exactly
 * junk_length is 8192 quanta per fls(CPUs), as with 4 KiB pages; the holes are
 * made reusable (drained) before the loop like every setup's frees.
 */
static int full_fit_setup(struct bench_wctx *c)
{
	uint64_t n = (uint64_t)fls_u(c->ncpus) * 8192, junk;
	struct held_state *st = calloc(1, sizeof(*st));

	if (!st)
		return VA_ENOMEM;
	st->addrs = malloc(n * sizeof(*st->addrs));
	if (!st->addrs) {
		free(st);
		return VA_ENOMEM;
	}
	c->state = st;
	for (uint64_t i = 0; i < n; i++) {
		int rc = c->ops->alloc(c->h, c->quantum, 0, &st->addrs[i]);

		if (rc == VA_OK)
			rc = c->ops->alloc(c->h, c->quantum, 0, &junk);
		if (rc) {
			st->n = i;
			return rc;
		}
		st->n = i + 1;
		must_free(c, junk);
	}
	return c->error;
}

static void full_fit_op(struct bench_wctx *c, uint64_t i)
{
	fix_size_op(c, i);
}

/*
 * long_busy_list_alloc_test:
 *	for (i < 15000) ptr[i] = vmalloc(1 page);
 *	loop: { p1 = vmalloc(100 pages); p2 = vmalloc(1 page); vfree(p1); vfree(p2); }
 */
static int long_busy_list_setup(struct bench_wctx *c)
{
	struct held_state *st = calloc(1, sizeof(*st));

	if (!st)
		return VA_ENOMEM;
	st->addrs = malloc(15000 * sizeof(*st->addrs));
	if (!st->addrs) {
		free(st);
		return VA_ENOMEM;
	}
	c->state = st;
	for (st->n = 0; st->n < 15000; st->n++) {
		int rc = c->ops->alloc(c->h, c->quantum, 0, &st->addrs[st->n]);

		if (rc)
			return rc;
	}
	return VA_OK;
}

static void long_busy_list_op(struct bench_wctx *c, uint64_t i)
{
	uint64_t p1, p2;

	if (!try_alloc(c, 100 * c->quantum, 0, &p1))
		return;
	if (!try_alloc(c, c->quantum, 0, &p2)) {
		must_free(c, p1);
		return;
	}
	must_free(c, p1);
	must_free(c, p2);
}

/*
 * random_size_alloc_test:
 *	loop: { n = get_random_u32_inclusive(1, 100); p = vmalloc(n pages); vfree(p); }
 */
static void random_size_op(struct bench_wctx *c, uint64_t i)
{
	uint64_t n = bench_rand(&c->rng) % 100 + 1, a;

	if (try_alloc(c, n * c->quantum, 0, &a))
		must_free(c, a);
}

/*
 * fix_align_alloc_test:
 *	loop: { p = __vmalloc_node(5 pages, THREAD_ALIGN << 1, ...); vfree(p); }
 * THREAD_ALIGN is 4 pages on x86-64 (16 KiB stacks), so the alignment is 8 quanta.
 */
static void fix_align_op(struct bench_wctx *c, uint64_t i)
{
	uint64_t a;

	if (try_alloc(c, 5 * c->quantum, 8 * c->quantum, &a))
		must_free(c, a);
}

/*
 * random_size_align_alloc_test:
 *	loop: { rnd = get_random_u8(); align = 1 << (rnd % 23);
 *		size = ((rnd % 10) + 1) * PAGE_SIZE; p = __vmalloc_node(size, align); vfree(p); }
 * align is in bytes as in the kernel (up to 4 MiB) and raised to the quantum.
 */
static void random_size_align_op(struct bench_wctx *c, uint64_t i)
{
	unsigned rnd = (unsigned)(bench_rand(&c->rng) & 0xff);
	uint64_t align = 1ull << (rnd % 23), size = (rnd % 10 + 1) * c->quantum, a;

	if (align < c->quantum)
		align = c->quantum;
	if (try_alloc(c, size, align, &a))
		must_free(c, a);
}

/*
 * align_shift_alloc_test ("supposed to fail"):
 *	for (i = 0; i < BITS_PER_LONG; i++) { p = __vmalloc_node(PAGE_SIZE, 1UL << i);
 *		if (!p) return -1; vfree(p); }
 * One op is one attempt; the sweep of shifts restarts at 0 after the first failure
 * (where the kernel's test returns) or after shift 63. Failures are expected and
 * counted in fails.
 */
struct shift_state {
	unsigned shift;
};

static int align_shift_setup(struct bench_wctx *c)
{
	c->state = calloc(1, sizeof(struct shift_state));
	return c->state ? VA_OK : VA_ENOMEM;
}

static void align_shift_op(struct bench_wctx *c, uint64_t i)
{
	struct shift_state *st = c->state;
	uint64_t a;

	if (try_alloc(c, c->quantum, 1ull << st->shift, &a)) {
		must_free(c, a);
		st->shift = (st->shift + 1) % 64;
	} else {
		st->shift = 0;
	}
}

/*
 * Not a kernel loop: a ring of RING_LIVE live areas of 1..100 quanta, each op frees the
 * oldest and allocates a new one in its place (a server whose clients come and go).
 */
#define RING_LIVE 1000

static int ring_setup(struct bench_wctx *c)
{
	struct held_state *st = calloc(1, sizeof(*st));

	if (!st)
		return VA_ENOMEM;
	st->addrs = malloc(RING_LIVE * sizeof(*st->addrs));
	if (!st->addrs) {
		free(st);
		return VA_ENOMEM;
	}
	c->state = st;
	for (st->n = 0; st->n < RING_LIVE; st->n++) {
		int rc = c->ops->alloc(c->h, (bench_rand(&c->rng) % 100 + 1) * c->quantum, 0,
				       &st->addrs[st->n]);

		if (rc)
			return rc;
	}
	return VA_OK;
}

static void ring_op(struct bench_wctx *c, uint64_t i)
{
	struct held_state *st = c->state;
	uint64_t slot = st->n ? i % st->n : 0;

	if (st->n)
		must_free(c, st->addrs[slot]);
	else
		st->n = 1;
	if (try_alloc(c, (bench_rand(&c->rng) % 100 + 1) * c->quantum, 0, &st->addrs[slot]))
		return;
	/* a failure shrinks the ring: the last live area takes the slot */
	st->addrs[slot] = st->addrs[--st->n];
}

static void free_state(struct bench_wctx *c)
{
	free(c->state);
	c->state = NULL;
}

/*
 * pcpu_alloc_test:
 *	for (i < 35000) pcpu[i] = __alloc_percpu(size, align = 1 << rand(1..11));
 *	for (i < 35000) free_percpu(pcpu[i]);
 * The vmalloc side of the percpu allocator is pcpu_get_vm_areas: one congruent set of
 * areas per chunk, placed top-down. Here each op allocates one congruent set of 4
 * groups (like 4 NUMA nodes) of u quanta each (u = 1..16), spaced 2u apart, base
 * aligned to 1 << rand(1..11) bytes raised to the quantum. The loop keeps the kernel's
 * shape, phases of B allocations then B frees (one set per op), with B = 64 instead of
 * 35000: the kernel's 35000 percpu objects fill only a handful of chunks, i.e. a handful
 * of pcpu_get_vm_areas calls, and every top-down search walks down past the live sets
 * above it, so 35000 live sets would measure a situation the kernel never sees.
 */
#define CONGRUENT_BATCH	 64
#define CONGRUENT_GROUPS 4

struct congruent_state {
	uint64_t (*sets)[CONGRUENT_GROUPS];
	bool *live;
	uint64_t batch;
};

static int congruent_setup(struct bench_wctx *c)
{
	struct congruent_state *st = calloc(1, sizeof(*st));

	if (!st)
		return VA_ENOMEM;
	st->batch = c->loops < CONGRUENT_BATCH ? (c->loops ? c->loops : 1) : CONGRUENT_BATCH;
	st->sets = calloc(st->batch, sizeof(*st->sets));
	st->live = calloc(st->batch, sizeof(*st->live));
	c->state = st;
	return st->sets && st->live ? VA_OK : VA_ENOMEM;
}

static void congruent_op(struct bench_wctx *c, uint64_t i)
{
	struct congruent_state *st = c->state;
	uint64_t slot = i % st->batch, offs[CONGRUENT_GROUPS], sizes[CONGRUENT_GROUPS];

	if ((i / st->batch) % 2 == 1) {
		if (st->live[slot])
			for (unsigned g = 0; g < CONGRUENT_GROUPS; g++)
				must_free(c, st->sets[slot][g]);
		st->live[slot] = false;
		return;
	}
	uint64_t r = bench_rand(&c->rng);
	uint64_t u = (r % 16 + 1) * c->quantum;
	uint64_t align = 1ull << ((r >> 8) % 11 + 1);

	if (align < c->quantum)
		align = c->quantum;
	for (unsigned g = 0; g < CONGRUENT_GROUPS; g++) {
		offs[g] = g * 2 * u;
		sizes[g] = u;
	}
	if (c->ops->alloc_congruent(c->h, offs, sizes, CONGRUENT_GROUPS, align, st->sets[slot]) ==
	    VA_OK)
		st->live[slot] = true;
	else
		c->fails++;
}

static void congruent_teardown(struct bench_wctx *c)
{
	struct congruent_state *st = c->state;

	if (!st)
		return;
	for (uint64_t s = 0; st->live && s < st->batch; s++)
		if (st->live[s])
			for (unsigned g = 0; g < CONGRUENT_GROUPS; g++)
				must_free(c, st->sets[s][g]);
	free(st->sets);
	free(st->live);
	free(st);
	c->state = NULL;
}

static const struct bench_workload wl_fix_size = {
    "fix_size", "alloc/free 1 quantum", NULL, fix_size_op, NULL,
};
static const struct bench_workload wl_full_fit = {
    "full_fit",	    "1-quantum holes between held areas; alloc/free 1 quantum",
    full_fit_setup, full_fit_op,
    free_held,
};
static const struct bench_workload wl_long_busy_list = {
    "long_busy_list",
    "15000 held 1-quantum areas; alloc 100 + 1, free both",
    long_busy_list_setup,
    long_busy_list_op,
    free_held,
};
static const struct bench_workload wl_random_size = {
    "random_size", "alloc/free 1..100 quanta", NULL, random_size_op, NULL,
};
static const struct bench_workload wl_fix_align = {
    "fix_align", "alloc/free 5 quanta aligned to 8 quanta", NULL, fix_align_op, NULL,
};
static const struct bench_workload wl_random_size_align = {
    "random_size_align",
    "1..10 quanta aligned to 1 << (rnd % 23) bytes",
    NULL,
    random_size_align_op,
    NULL,
};
static const struct bench_workload wl_align_shift = {
    "align_shift",     "1 quantum aligned to 1 << 0..63 (fails expected)",
    align_shift_setup, align_shift_op,
    free_state,
};
static const struct bench_workload wl_ring = {
    "ring",	"1000 live areas of 1..100 quanta: free the oldest, alloc a new one",
    ring_setup, ring_op,
    free_held,
};
static const struct bench_workload wl_congruent = {
    "congruent",	"pcpu_get_vm_areas: 4 congruent groups, top-down, in batches",
    congruent_setup,	congruent_op,
    congruent_teardown,
};

const struct bench_workload *const bench_workloads[] = {
    &wl_fix_size,	   &wl_full_fit,    &wl_long_busy_list, &wl_random_size, &wl_fix_align,
    &wl_random_size_align, &wl_align_shift, &wl_congruent,	&wl_ring,	 NULL,
};

const struct bench_workload *bench_workload_find(const char *name)
{
	for (unsigned i = 0; bench_workloads[i]; i++)
		if (!strcmp(bench_workloads[i]->name, name))
			return bench_workloads[i];
	return NULL;
}
