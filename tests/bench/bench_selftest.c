/*
 * bench_selftest.c - vabench --selftest: every implementation against a bitmap oracle.
 *
 * A short random workload (allocations with and without alignment, frees, congruent
 * sets, and calls that must fail with a given code) runs through each implementation
 * in exact mode and in its benchmark configuration. A bitmap of the quanta is the
 * reference: an area handed out must be aligned, inside the space and entirely free; a
 * failure must mean that no aligned hole exists. In exact mode the address must be the
 * lowest fit (the highest base for congruent sets), so all implementations agree with
 * each other address for address. A second pass runs two threads at once and checks
 * with an atomic bitmap that no two live areas ever overlap.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_selftest.h"
#include "bench_workload.h"

#define ST_QUANTUM 4096ull
#define ST_QUANTA  4096ull /* space size in quanta */
#define ST_BASE	   (1ull << 30)
#define ST_STEPS   20000
#define ST_MAXLIVE 4096

struct oracle {
	unsigned char busy[ST_QUANTA];
};

struct live {
	uint64_t addr, quanta;
};

static bool range_free(const struct oracle *o, uint64_t q, uint64_t n)
{
	if (q + n > ST_QUANTA)
		return false;
	for (uint64_t i = 0; i < n; i++)
		if (o->busy[q + i])
			return false;
	return true;
}

static void mark(struct oracle *o, uint64_t q, uint64_t n, unsigned char v)
{
	memset(o->busy + q, v, n);
}

/* Lowest quantum index q (address aligned to align quanta) with n free quanta, or -1. */
static int64_t oracle_first_fit(const struct oracle *o, uint64_t n, uint64_t align_q)
{
	for (uint64_t q = 0; q + n <= ST_QUANTA; q += align_q)
		if (range_free(o, q, n))
			return (int64_t)q;
	return -1;
}

/* Highest base (in quanta, aligned) with every group free, or -1. */
static int64_t oracle_congruent(const struct oracle *o, const uint64_t *offq, const uint64_t *szq,
				unsigned n, uint64_t align_q)
{
	uint64_t span = offq[n - 1] + szq[n - 1];

	if (span > ST_QUANTA)
		return -1;
	for (int64_t b = (int64_t)(((ST_QUANTA - span) / align_q) * align_q); b >= 0;
	     b -= (int64_t)align_q) {
		unsigned g;

		for (g = 0; g < n; g++)
			if (!range_free(o, (uint64_t)b + offq[g], szq[g]))
				break;
		if (g == n)
			return b;
	}
	return -1;
}

struct st_run {
	const struct bench_impl_ops *impl;
	void *h;
	bool exact;
	struct oracle o;
	struct live live[ST_MAXLIVE];
	unsigned nlive;
	uint64_t rng;
	char where[160];
};

#define FAIL(r, ...)                                                                               \
	do {                                                                                       \
		fprintf(stderr, "selftest %s (%s) %s: ", (r)->impl->name,                          \
			(r)->exact ? "exact" : "bench config", (r)->where);                        \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		return -1;                                                                         \
	} while (0)

static int step_alloc(struct st_run *r)
{
	uint64_t x = bench_rand(&r->rng);
	uint64_t n = x % 8 == 0 ? x % 300 + 1 : x % 24 + 1;
	uint64_t align_q = (x >> 20) % 4 == 0 ? 1ull << ((x >> 24) % 8) : 1;
	uint64_t addr = 0;
	int64_t want = oracle_first_fit(&r->o, n, align_q);
	int rc = r->impl->alloc(r->h, n * ST_QUANTUM - (x >> 40) % ST_QUANTUM,
				align_q == 1 ? 0 : align_q * ST_QUANTUM, &addr);

	snprintf(r->where, sizeof(r->where), "alloc %llu quanta align %llu quanta",
		 (unsigned long long)n, (unsigned long long)align_q);
	if (rc == VA_ENOSPC) {
		if (want >= 0 && !r->impl->rounds)
			FAIL(r, "ENOSPC but quantum %lld is free", (long long)want);
		return 0;
	}
	if (rc)
		FAIL(r, "unexpected error %s", va_strerror(rc));
	if (addr < ST_BASE || (addr - ST_BASE) % (align_q * ST_QUANTUM))
		FAIL(r, "address %#llx misaligned or below the space", (unsigned long long)addr);
	uint64_t q = (addr - ST_BASE) / ST_QUANTUM;
	if (!range_free(&r->o, q, n))
		FAIL(r, "area at quantum %llu overlaps a live area or leaves the space",
		     (unsigned long long)q);
	if (r->exact && (int64_t)q != want)
		FAIL(r, "exact mode gave quantum %llu, lowest fit is %lld", (unsigned long long)q,
		     (long long)want);
	mark(&r->o, q, n, 1);
	if (r->nlive < ST_MAXLIVE)
		r->live[r->nlive++] = (struct live){addr, n};
	return 0;
}

static int step_free(struct st_run *r)
{
	unsigned i;
	int rc;

	if (!r->nlive)
		return 0;
	i = (unsigned)(bench_rand(&r->rng) % r->nlive);
	snprintf(r->where, sizeof(r->where), "free %#llx", (unsigned long long)r->live[i].addr);
	rc = r->impl->free(r->h, r->live[i].addr);
	if (rc)
		FAIL(r, "error %s", va_strerror(rc));
	mark(&r->o, (r->live[i].addr - ST_BASE) / ST_QUANTUM, r->live[i].quanta, 0);
	r->live[i] = r->live[--r->nlive];
	return 0;
}

static int step_congruent(struct st_run *r)
{
	uint64_t x = bench_rand(&r->rng), offs[4], sizes[4], offq[4], szq[4], out[4];
	unsigned n = (unsigned)(x % 4) + 1;
	uint64_t align_q = 1ull << ((x >> 8) % 5), at = 0;
	int64_t want;
	int rc;

	for (unsigned g = 0; g < n; g++) {
		at += (x >> (12 + 4 * g)) % 9; /* gap before the group, 0..8 quanta */
		offq[g] = at;
		szq[g] = (x >> (30 + 4 * g)) % 8 + 1;
		at += szq[g];
		offs[g] = offq[g] * ST_QUANTUM;
		sizes[g] = szq[g] * ST_QUANTUM;
	}
	want = oracle_congruent(&r->o, offq, szq, n, align_q);
	snprintf(r->where, sizeof(r->where), "congruent %u groups span %llu quanta align %llu", n,
		 (unsigned long long)at, (unsigned long long)align_q);
	rc = r->impl->alloc_congruent(r->h, offs, sizes, n, align_q * ST_QUANTUM, out);
	if (rc == VA_ENOSPC) {
		if (want >= 0)
			FAIL(r, "ENOSPC but base quantum %lld fits", (long long)want);
		return 0;
	}
	if (rc)
		FAIL(r, "unexpected error %s", va_strerror(rc));
	uint64_t base = out[0] - offs[0];
	if (base < ST_BASE || (base - ST_BASE) % (align_q * ST_QUANTUM))
		FAIL(r, "base %#llx misaligned", (unsigned long long)base);
	uint64_t bq = (base - ST_BASE) / ST_QUANTUM;
	if (r->exact && (int64_t)bq != want)
		FAIL(r, "exact mode gave base quantum %llu, highest fit is %lld",
		     (unsigned long long)bq, (long long)want);
	for (unsigned g = 0; g < n; g++) {
		if (out[g] != base + offs[g])
			FAIL(r, "group %u not congruent", g);
		if (!range_free(&r->o, bq + offq[g], szq[g]))
			FAIL(r, "group %u overlaps a live area", g);
		mark(&r->o, bq + offq[g], szq[g], 1);
		if (r->nlive < ST_MAXLIVE)
			r->live[r->nlive++] = (struct live){out[g], szq[g]};
		else if (r->impl->free(r->h, out[g]) == VA_OK) /* no room to track it */
			mark(&r->o, bq + offq[g], szq[g], 0);
	}
	return 0;
}

/* Calls that must fail with one exact code. */
static int step_errors(struct st_run *r)
{
	uint64_t addr;
	int rc;

	strcpy(r->where, "error cases");
	if ((rc = r->impl->alloc(r->h, 0, 0, &addr)) != VA_ESIZE)
		FAIL(r, "size 0 gave %s", va_strerror(rc));
	if ((rc = r->impl->alloc(r->h, ST_QUANTUM, 3 * ST_QUANTUM, &addr)) != VA_EALIGN)
		FAIL(r, "align 3 quanta gave %s", va_strerror(rc));
	if ((rc = r->impl->free(r->h, ST_BASE - ST_QUANTUM)) != VA_ERANGE)
		FAIL(r, "free below the space gave %s", va_strerror(rc));
	for (unsigned i = 0; !r->impl->rounds && i < r->nlive; i++)
		if (r->live[i].quanta > 1) {
			rc = r->impl->free(r->h, r->live[i].addr + ST_QUANTUM);
			if (rc != VA_ENOTSTART)
				FAIL(r, "free inside an area gave %s", va_strerror(rc));
			break;
		}
	for (uint64_t q = 0; q < ST_QUANTA; q++)
		if (!r->o.busy[q]) {
			rc = r->impl->free(r->h, ST_BASE + q * ST_QUANTUM);
			if (rc != VA_EDOUBLEFREE)
				FAIL(r, "free of free quantum %llu gave %s", (unsigned long long)q,
				     va_strerror(rc));
			break;
		}
	return 0;
}

static int run_single(const struct bench_impl_ops *impl, bool exact, uint64_t seed)
{
	struct bench_space_cfg cfg = {
	    .base = ST_BASE,
	    .size = ST_QUANTA * ST_QUANTUM,
	    .quantum = ST_QUANTUM,
	    .exact = exact,
	};
	struct st_run *r = calloc(1, sizeof(*r));
	char msg[256] = "";
	int rc = 0;

	if (!r)
		return -1;
	r->impl = impl;
	r->exact = exact;
	r->rng = seed * 0x9e3779b97f4a7c15ull + 1;
	if (impl->create(&cfg, &r->h)) {
		fprintf(stderr, "selftest %s: create failed\n", impl->name);
		free(r);
		return -1;
	}
	for (unsigned s = 0; s < ST_STEPS && !rc; s++) {
		unsigned k = (unsigned)(bench_rand(&r->rng) % 100);

		/* Phases that fill the space, then drain it, so both ENOSPC and merging happen. */
		bool filling = (s / 2000) % 2 == 0;
		if (k < (filling ? 60u : 30u))
			rc = step_alloc(r);
		else if (k < 96)
			rc = step_free(r);
		else if (k < 99)
			rc = impl->rounds ? 0 : step_congruent(r);
		else
			rc = step_errors(r);
		if (!rc && s % 500 == 0 && impl->check(r->h, msg, sizeof(msg))) {
			fprintf(stderr, "selftest %s: check at step %u: %s\n", impl->name, s, msg);
			rc = -1;
		}
	}
	while (!rc && r->nlive)
		rc = step_free(r);
	if (!rc && impl->quiesce)
		impl->quiesce(r->h);
	if (!rc && impl->check(r->h, msg, sizeof(msg))) {
		fprintf(stderr, "selftest %s: final check: %s\n", impl->name, msg);
		rc = -1;
	}
	impl->destroy(r->h);
	free(r);
	return rc;
}

/* ---- two threads at once: no two live areas may overlap -------------------------- */

#define MT_QUANTA (1u << 16)
#define MT_STEPS  50000

struct mt_shared {
	const struct bench_impl_ops *impl;
	void *h;
	atomic_uchar owner[MT_QUANTA]; /* 0 free, else thread id + 1 */
	atomic_int failed;
};

struct mt_arg {
	struct mt_shared *sh;
	unsigned tid;
};

static void *mt_worker(void *p)
{
	struct mt_arg *a = p;
	struct mt_shared *sh = a->sh;
	struct live live[256];
	unsigned nlive = 0;
	uint64_t rng = a->tid * 7919 + 17;

	if (sh->impl->thread_start)
		sh->impl->thread_start(sh->h, a->tid);
	for (unsigned s = 0; s < MT_STEPS && !atomic_load(&sh->failed); s++) {
		uint64_t x = bench_rand(&rng), addr;

		if (nlive < 256 && (x % 2 || !nlive)) {
			uint64_t n = x % 300 < 10 ? (x >> 10) % 300 + 1 : (x >> 10) % 16 + 1;

			if (sh->impl->alloc(sh->h, n * ST_QUANTUM, 0, &addr))
				continue;
			uint64_t q = (addr - ST_BASE) / ST_QUANTUM;
			for (uint64_t i = 0; i < n; i++) {
				unsigned char expect = 0;

				if (q + i >= MT_QUANTA ||
				    !atomic_compare_exchange_strong(&sh->owner[q + i], &expect,
								    (unsigned char)(a->tid + 1))) {
					fprintf(
					    stderr,
					    "selftest %s threads: quantum %llu handed out twice\n",
					    sh->impl->name, (unsigned long long)(q + i));
					atomic_store(&sh->failed, 1);
					return NULL;
				}
			}
			live[nlive++] = (struct live){addr, n};
		} else {
			unsigned i = (unsigned)((x >> 8) % nlive);
			uint64_t q = (live[i].addr - ST_BASE) / ST_QUANTUM;

			/* Give the quanta up before the allocator can hand them out again. */
			for (uint64_t k = 0; k < live[i].quanta; k++)
				atomic_store(&sh->owner[q + k], 0);
			if (sh->impl->free(sh->h, live[i].addr)) {
				fprintf(stderr, "selftest %s threads: free failed\n",
					sh->impl->name);
				atomic_store(&sh->failed, 1);
				return NULL;
			}
			live[i] = live[--nlive];
		}
	}
	return NULL;
}

static int run_threads(const struct bench_impl_ops *impl)
{
	struct bench_space_cfg cfg = {
	    .base = ST_BASE,
	    .size = (uint64_t)MT_QUANTA * ST_QUANTUM,
	    .quantum = ST_QUANTUM,
	};
	struct mt_shared *sh = calloc(1, sizeof(*sh));
	struct mt_arg args[2];
	pthread_t th[2];
	char msg[256] = "";
	int rc = 0;

	if (!sh || impl->create(&cfg, &sh->h)) {
		free(sh);
		return -1;
	}
	sh->impl = impl;
	for (unsigned t = 0; t < 2; t++) {
		args[t] = (struct mt_arg){sh, t};
		pthread_create(&th[t], NULL, mt_worker, &args[t]);
	}
	for (unsigned t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	if (atomic_load(&sh->failed))
		rc = -1;
	if (!rc && impl->check(sh->h, msg, sizeof(msg))) {
		fprintf(stderr, "selftest %s threads: check: %s\n", impl->name, msg);
		rc = -1;
	}
	impl->destroy(sh->h);
	free(sh);
	return rc;
}

int bench_selftest(const struct bench_impl_ops *only, uint64_t seed)
{
	int failures = 0;

	for (unsigned i = 0; bench_impls[i]; i++) {
		const struct bench_impl_ops *impl = bench_impls[i];
		int a, b, c;

		if (only && only != impl)
			continue;
		a = impl->rounds ? 0 : run_single(impl, true, seed); /* not exact by design */
		b = run_single(impl, false, seed);
		c = run_threads(impl);
		printf("selftest %-10s exact:%s  bench-config:%s  2-threads:%s\n", impl->name,
		       a ? "FAIL" : "ok", b ? "FAIL" : "ok", c ? "FAIL" : "ok");
		failures += (a != 0) + (b != 0) + (c != 0);
	}
	printf("selftest: %s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
