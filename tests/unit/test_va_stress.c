/*
 * test_va_stress.c - multi-threaded stress of libvaspace, meant to run under TSan too.
 *
 * Worker threads allocate (mostly small sizes, so the node pools are hit; some large; some
 * aligned; some in a window; some congruent groups) and free, and hand areas to each other
 * through a mailbox (the taker retags them with va_set_owner and frees them from its own home
 * node). A checker thread drains, checks and walks; a lookup thread holds long-lived areas
 * and looks them (and random addresses) up. Most configurations run the background drain
 * thread; two run eager or with synchronous drains only. One shared array holds the state of
 * every quantum:
 *     0 = ready (never used or released), 1 = freed, waiting for the release callback,
 *     2 + t = owned by thread t, 0xffff = in the mailbox.
 * A thread claims 0 -> 2+t after an allocation returns (anything else is an overlap or a
 * range handed out before it was released), turns 2+t -> 1 just before va_free, and the
 * release callback turns 1 -> 0 (anything else is a double release or a release of busy
 * space). Inside va_walk (space frozen) free and pooled blocks must be all 0, lazy blocks 0
 * or 1, busy blocks unclaimed or claimed by the thread whose tag the library records.
 * At the end everything is freed and drained: the space must be whole, allocs == frees and
 * every freed byte released exactly once.
 * VAD_TEST_MODE=asan|tsan scales the iteration counts down; VA_TEST_FILTER selects tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <cmocka.h>

#include "vaspace.h"

#define MAX_THREADS 8
#define Q_READY	    0u
#define Q_PENDING   1u
#define Q_OWNED(t)  (2u + (unsigned)(t))
#define Q_TRANSIT   0xffffu /* in the hand-off mailbox, between two owners */
#define MAILBOX	    32

struct stress_cfg {
	const char *name;
	unsigned workers;
	unsigned nodes;
	uint32_t nq;
	uint64_t quantum;
	uint64_t lazy_max_q, zone_q;
	unsigned pool_max_quanta, pool_depth, idle_drain_ms;
	unsigned iters;	      /* per worker, normal build */
	unsigned max_held;    /* areas a worker holds at most */
	bool home_per_thread; /* va_set_home_node(t) (else the library's round robin) */
	bool switch_home;     /* workers hop between home nodes */
	bool eager, no_thread, no_pools;
};

struct shared {
	const struct stress_cfg *cfg;
	struct va_space *vs;
	uint64_t base, size, quantum;
	uint32_t nq;
	unsigned iters;
	_Atomic uint32_t *qstate;
	char tags[MAX_THREADS + 2]; /* owner tags: &tags[t] for thread t */
	atomic_uint_fast64_t released_bytes, release_calls, freed_bytes, enospc;
	atomic_uint_fast64_t walks, checks, lookups;
	atomic_uint_fast64_t errors;
	atomic_bool stop;
	pthread_mutex_t mail_lock; /* hand-off mailbox: areas passed between workers */
	struct {
		uint64_t addr, size;
	} mail[MAILBOX];
	unsigned nmail;
	atomic_uint_fast64_t handoffs, congruent, ranged;
	pthread_mutex_t err_lock;
	char first_error[640];
};

struct worker {
	struct shared *sh;
	unsigned id;
	uint64_t rng;
};

static void report(struct shared *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Record a failure (any thread); the test fails at the end with the first message. */
static void report(struct shared *sh, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&sh->err_lock);
	if (atomic_fetch_add(&sh->errors, 1) == 0) {
		va_start(ap, fmt);
		vsnprintf(sh->first_error, sizeof(sh->first_error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&sh->err_lock);
}

#define ULL(x) ((unsigned long long)(x))

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

static void *tag_of(struct shared *sh, unsigned t)
{
	return &sh->tags[t];
}

/* Thread index of an owner tag, or -1 if it is not one of ours. */
static int tag_index(struct shared *sh, const void *owner)
{
	const char *p = owner;

	if (p < sh->tags || p >= sh->tags + MAX_THREADS + 2)
		return -1;
	return (int)(p - sh->tags);
}

static uint32_t qidx(struct shared *sh, uint64_t addr)
{
	return (uint32_t)((addr - sh->base) / sh->quantum);
}

static const char *state_name(uint32_t s)
{
	return s == Q_READY	? "released"
	       : s == Q_PENDING ? "freed, not yet released"
	       : s == Q_TRANSIT ? "being handed to another thread"
				: "owned";
}

static void on_release(void *ctx, uint64_t start, uint64_t size)
{
	struct shared *sh = ctx;

	atomic_fetch_add(&sh->released_bytes, size);
	atomic_fetch_add(&sh->release_calls, 1);
	if (!size || start < sh->base || start - sh->base >= sh->size ||
	    size > sh->size - (start - sh->base) || (start - sh->base) % sh->quantum ||
	    size % sh->quantum) {
		report(sh, "release callback with a bad range [0x%llx, +0x%llx)", ULL(start),
		       ULL(size));
		return;
	}
	for (uint32_t q = qidx(sh, start), e = q + (uint32_t)(size / sh->quantum); q < e; q++) {
		uint32_t expect = Q_PENDING;

		if (!atomic_compare_exchange_strong(&sh->qstate[q], &expect, Q_READY)) {
			report(
			    sh,
			    "release callback [0x%llx, +0x%llx) covers quantum 0x%llx that is %s%s",
			    ULL(start), ULL(size), ULL(sh->base + (uint64_t)q * sh->quantum),
			    state_name(expect),
			    expect == Q_READY ? " (double release)" : " (released while busy)");
			return;
		}
	}
}

/* Claim a fresh area for thread t; false (and reported) on overlap or unreleased space. */
static bool claim(struct shared *sh, unsigned t, uint64_t addr, uint64_t size)
{
	uint32_t q0 = qidx(sh, addr), n = (uint32_t)(size / sh->quantum);

	for (uint32_t q = q0; q < q0 + n; q++) {
		uint32_t expect = Q_READY;

		if (!atomic_compare_exchange_strong(&sh->qstate[q], &expect, Q_OWNED(t))) {
			if (expect == Q_PENDING || expect == Q_TRANSIT)
				report(sh,
				       "thread %u got [0x%llx, +0x%llx) whose quantum 0x%llx was "
				       "freed "
				       "but not yet released",
				       t, ULL(addr), ULL(size),
				       ULL(sh->base + (uint64_t)q * sh->quantum));
			else
				report(
				    sh,
				    "thread %u got [0x%llx, +0x%llx) overlapping an area of thread "
				    "%u at 0x%llx",
				    t, ULL(addr), ULL(size), expect - 2,
				    ULL(sh->base + (uint64_t)q * sh->quantum));
			return false;
		}
	}
	return true;
}

/* Give an area back before freeing it: owned by t -> waiting for release. */
static bool unclaim(struct shared *sh, unsigned t, uint64_t addr, uint64_t size)
{
	uint32_t q0 = qidx(sh, addr), n = (uint32_t)(size / sh->quantum);

	for (uint32_t q = q0; q < q0 + n; q++) {
		uint32_t expect = Q_OWNED(t);

		if (!atomic_compare_exchange_strong(&sh->qstate[q], &expect, Q_PENDING)) {
			report(sh, "thread %u: quantum 0x%llx of its area [0x%llx, +0x%llx) is %s",
			       t, ULL(sh->base + (uint64_t)q * sh->quantum), ULL(addr), ULL(size),
			       state_name(expect));
			return false;
		}
	}
	return true;
}

/* Look up an address of one of thread t's areas; the answer must be that very area. */
static bool lookup_own(struct shared *sh, unsigned t, uint64_t addr, uint64_t size, uint64_t *rng)
{
	uint64_t probe = addr + rnd_below(rng, size);
	struct va_area a;
	int rc = va_lookup(sh->vs, probe, &a);

	atomic_fetch_add(&sh->lookups, 1);
	if (rc || a.start != addr || a.size != size || a.owner != tag_of(sh, t) ||
	    a.node >= sh->cfg->nodes) {
		report(sh,
		       "thread %u: va_lookup(0x%llx) in its area [0x%llx, +0x%llx) returned %d "
		       "[0x%llx, +0x%llx) owner %p node %u (expected owner %p)",
		       t, ULL(probe), ULL(addr), ULL(size), rc, ULL(a.start), ULL(a.size), a.owner,
		       a.node, tag_of(sh, t));
		return false;
	}
	return true;
}

struct held {
	uint64_t addr, size;
};

static uint64_t gen_size(uint64_t *rng, uint64_t q)
{
	uint64_t x = rnd_below(rng, 100), k;

	if (x < 75)
		k = 1 + rnd_below(rng, 8);
	else if (x < 93)
		k = 9 + rnd_below(rng, 56);
	else if (x < 99)
		k = 65 + rnd_below(rng, 192);
	else
		k = 257 + rnd_below(rng, 768);
	return k * q - (rnd_below(rng, 4) == 0 ? rnd_below(rng, q) : 0);
}

static bool free_held(struct shared *sh, unsigned t, struct held *h)
{
	void *owner = NULL;
	int rc;

	if (!unclaim(sh, t, h->addr, h->size))
		return false;
	rc = va_free(sh->vs, h->addr, &owner);
	if (rc || owner != tag_of(sh, t)) {
		report(sh, "thread %u: va_free(0x%llx) returned %d owner %p, expected 0 and %p", t,
		       ULL(h->addr), rc, owner, tag_of(sh, t));
		return false;
	}
	atomic_fetch_add(&sh->freed_bytes, h->size);
	return true;
}

/* Move every quantum of [addr, +size) from state `from` to state `to` (all or report). */
static bool move_state(struct shared *sh, unsigned t, uint64_t addr, uint64_t size, uint32_t from,
		       uint32_t to)
{
	uint32_t q0 = qidx(sh, addr), n = (uint32_t)(size / sh->quantum);

	for (uint32_t q = q0; q < q0 + n; q++) {
		uint32_t expect = from;

		if (!atomic_compare_exchange_strong(&sh->qstate[q], &expect, to)) {
			report(
			    sh,
			    "thread %u: quantum 0x%llx of area [0x%llx, +0x%llx) is %s, expected "
			    "%s",
			    t, ULL(sh->base + (uint64_t)q * sh->quantum), ULL(addr), ULL(size),
			    state_name(expect), state_name(from));
			return false;
		}
	}
	return true;
}

/* Validate a fresh area and claim it; false (reported) if anything is wrong. */
static bool accept(struct shared *sh, unsigned t, const char *what, uint64_t addr, uint64_t rsize,
		   uint64_t align, uint64_t vstart, uint64_t vend)
{
	if (addr < sh->base || addr - sh->base > sh->size - rsize || addr % align ||
	    addr < vstart || addr > vend || vend - addr < rsize) {
		report(sh,
		       "thread %u: %s returned [0x%llx, +0x%llx): not aligned to 0x%llx or outside "
		       "the window [0x%llx, 0x%llx) or the space",
		       t, what, ULL(addr), ULL(rsize), ULL(align), ULL(vstart), ULL(vend));
		return false;
	}
	return claim(sh, t, addr, rsize);
}

/* One allocation: plain (mostly), windowed, or a congruent group. */
static bool worker_alloc(struct worker *w, struct held *held, unsigned *nheld)
{
	struct shared *sh = w->sh;
	uint64_t q = sh->quantum, x = rnd_below(&w->rng, 100), end = sh->base + sh->size;
	unsigned t = w->id;
	int rc;

	if (x < 10 && *nheld + 3 <= sh->cfg->max_held) {
		uint64_t off[3], sz[3], out[3] = {0}, align = q << rnd_below(&w->rng, 3);
		unsigned n = 2 + (unsigned)rnd_below(&w->rng, 2);

		for (unsigned i = 0; i < n; i++) {
			off[i] = i ? off[i - 1] + sz[i - 1] + rnd_below(&w->rng, 3) * q : 0;
			sz[i] = (1 + rnd_below(&w->rng, 4)) * q;
		}
		rc = va_alloc_congruent(sh->vs, off, sz, n, align, tag_of(sh, t), out);
		if (rc == VA_ENOSPC) {
			atomic_fetch_add(&sh->enospc, 1);
			return true;
		}
		if (rc) {
			report(sh, "thread %u: va_alloc_congruent(n=%u) returned %d (%s)", t, n, rc,
			       va_strerror(rc));
			return false;
		}
		atomic_fetch_add(&sh->congruent, 1);
		for (unsigned i = 0; i < n; i++) {
			if (out[i] != out[0] + off[i] || out[0] % align) {
				report(
				    sh,
				    "thread %u: va_alloc_congruent area %u at 0x%llx, base 0x%llx, "
				    "offset 0x%llx, align 0x%llx",
				    t, i, ULL(out[i]), ULL(out[0]), ULL(off[i]), ULL(align));
				return false;
			}
			if (!accept(sh, t, "va_alloc_congruent", out[i], sz[i], q, sh->base, end))
				return false;
			held[(*nheld)++] = (struct held){out[i], sz[i]};
		}
		return true;
	}
	{
		uint64_t size = gen_size(&w->rng, q), align = 0, addr = 0, rsize;
		uint64_t vstart = sh->base, vend = end;
		bool ranged = x < 20;

		if (rnd_below(&w->rng, 100) < 15)
			align = q << (1 + rnd_below(&w->rng, 6));
		rsize = (size + q - 1) / q * q;
		if (ranged) {
			vstart = sh->base + rnd_below(&w->rng, sh->size - rsize + 1);
			vend = vstart + rsize + rnd_below(&w->rng, sh->size / 4);
			if (vend > end)
				vend = end;
			rc =
			    va_alloc_range(sh->vs, size, align, vstart, vend, tag_of(sh, t), &addr);
			atomic_fetch_add(&sh->ranged, 1);
		} else {
			rc = va_alloc(sh->vs, size, align, tag_of(sh, t), &addr);
		}
		if (rc == VA_ENOSPC) {
			atomic_fetch_add(&sh->enospc, 1);
			return true;
		}
		if (rc) {
			report(sh, "thread %u: va_alloc%s(0x%llx, 0x%llx) returned %d (%s)", t,
			       ranged ? "_range" : "", ULL(size), ULL(align), rc, va_strerror(rc));
			return false;
		}
		if (!accept(sh, t, ranged ? "va_alloc_range" : "va_alloc", addr, rsize,
			    align ? align : q, vstart, vend))
			return false;
		held[(*nheld)++] = (struct held){addr, rsize};
		return true;
	}
}

/* Put one of our areas in the mailbox for another thread to adopt. */
static bool worker_give(struct worker *w, struct held *held, unsigned *nheld)
{
	struct shared *sh = w->sh;
	unsigned i = (unsigned)rnd_below(&w->rng, *nheld);
	bool ok = true;

	pthread_mutex_lock(&sh->mail_lock);
	if (sh->nmail < MAILBOX) {
		ok = move_state(sh, w->id, held[i].addr, held[i].size, Q_OWNED(w->id), Q_TRANSIT);
		sh->mail[sh->nmail].addr = held[i].addr;
		sh->mail[sh->nmail].size = held[i].size;
		sh->nmail++;
		held[i] = held[--*nheld];
	}
	pthread_mutex_unlock(&sh->mail_lock);
	return ok;
}

/* Adopt an area from the mailbox: retag it (va_set_owner), then it is ours to free. */
static bool worker_take(struct worker *w, struct held *held, unsigned *nheld)
{
	struct shared *sh = w->sh;
	uint64_t addr, size;
	unsigned t = w->id;
	int rc;

	pthread_mutex_lock(&sh->mail_lock);
	if (!sh->nmail) {
		pthread_mutex_unlock(&sh->mail_lock);
		return true;
	}
	{
		unsigned i = (unsigned)rnd_below(&w->rng, sh->nmail);

		addr = sh->mail[i].addr;
		size = sh->mail[i].size;
		sh->mail[i] = sh->mail[--sh->nmail];
	}
	pthread_mutex_unlock(&sh->mail_lock);
	rc = va_set_owner(sh->vs, addr, tag_of(sh, t));
	if (rc) {
		report(sh, "thread %u: va_set_owner(0x%llx) of a busy area returned %d (%s)", t,
		       ULL(addr), rc, va_strerror(rc));
		return false;
	}
	if (!move_state(sh, t, addr, size, Q_TRANSIT, Q_OWNED(t)) ||
	    !lookup_own(sh, t, addr, size, &w->rng))
		return false;
	atomic_fetch_add(&sh->handoffs, 1);
	held[(*nheld)++] = (struct held){addr, size};
	return true;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	const struct stress_cfg *cfg = sh->cfg;
	struct held *held = calloc(cfg->max_held, sizeof(*held));
	unsigned nheld = 0, t = w->id;

	if (!held) {
		report(sh, "thread %u: out of memory", t);
		return NULL;
	}
	if (cfg->home_per_thread)
		va_set_home_node(t);
	for (unsigned it = 0; it < sh->iters && !atomic_load(&sh->errors); it++) {
		uint64_t x = rnd_below(&w->rng, 100);
		bool ok = true;

		if (cfg->switch_home && rnd_below(&w->rng, 64) == 0)
			va_set_home_node((unsigned)rnd_below(&w->rng, 2 * cfg->nodes));
		if (nheld + 3 <= cfg->max_held && (x < 50 || nheld == 0)) {
			ok = worker_alloc(w, held, &nheld);
		} else if (x < 80) {
			unsigned i = (unsigned)rnd_below(&w->rng, nheld);

			ok = lookup_own(sh, t, held[i].addr, held[i].size, &w->rng) &&
			     free_held(sh, t, &held[i]);
			if (ok)
				held[i] = held[--nheld];
		} else if (x < 84) {
			ok = worker_give(w, held, &nheld);
		} else if (x < 88) {
			if (nheld < cfg->max_held)
				ok = worker_take(w, held, &nheld);
		} else {
			unsigned i = (unsigned)rnd_below(&w->rng, nheld);

			ok = lookup_own(sh, t, held[i].addr, held[i].size, &w->rng);
		}
		if (!ok)
			break;
	}
	while (nheld && free_held(sh, t, &held[nheld - 1]))
		nheld--;
	free(held);
	return NULL;
}

/* ---- the lookup thread: long-lived areas of its own, plus random probes ---------------- */

static void *looker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	unsigned t = w->id, nheld = 0;
	struct held held[16];

	for (unsigned i = 0; i < 16; i++) {
		uint64_t size = (1 + rnd_below(&w->rng, 16)) * sh->quantum, addr;
		int rc = va_alloc(sh->vs, size, 0, tag_of(sh, t), &addr);

		if (rc == VA_ENOSPC)
			continue;
		if (rc) {
			report(sh, "lookup thread: va_alloc returned %d (%s)", rc, va_strerror(rc));
			break;
		}
		if (!claim(sh, t, addr, size))
			break;
		held[nheld++] = (struct held){addr, size};
	}
	while (!atomic_load(&sh->stop) && !atomic_load(&sh->errors)) {
		for (unsigned i = 0; i < nheld; i++)
			if (!lookup_own(sh, t, held[i].addr, held[i].size, &w->rng))
				goto out;
		for (unsigned i = 0; i < 32; i++) {
			uint64_t probe = sh->base + rnd_below(&w->rng, sh->size);
			struct va_area a;
			int rc = va_lookup(sh->vs, probe, &a);

			if (rc == VA_ENOTFOUND)
				continue;
			if (rc || probe < a.start || probe - a.start >= a.size ||
			    a.size % sh->quantum || tag_index(sh, a.owner) < 0 ||
			    a.node >= sh->cfg->nodes) {
				report(sh,
				       "lookup thread: va_lookup(0x%llx) returned %d [0x%llx, "
				       "+0x%llx) "
				       "owner %p node %u",
				       ULL(probe), rc, ULL(a.start), ULL(a.size), a.owner, a.node);
				goto out;
			}
		}
		sched_yield();
	}
out:
	while (nheld && free_held(sh, t, &held[nheld - 1]))
		nheld--;
	return NULL;
}

/* ---- the checker thread: drain, check, walk ------------------------------------------- */

struct walk_state {
	struct shared *sh;
	struct va_block_info *b;
	size_t n, cap;
	bool bad;
};

/* Runs with the space frozen: compare each block with the ownership array. */
static int walk_block(void *ctx, const struct va_block_info *b)
{
	struct walk_state *ws = ctx;
	struct shared *sh = ws->sh;
	uint32_t q0, n;

	if (b->start < sh->base || b->start - sh->base >= sh->size || !b->size ||
	    b->size > sh->size - (b->start - sh->base) || (b->start - sh->base) % sh->quantum ||
	    b->size % sh->quantum || (unsigned)b->kind > VA_BLOCK_POOLED) {
		report(sh, "walk: bad block kind %d [0x%llx, +0x%llx)", (int)b->kind, ULL(b->start),
		       ULL(b->size));
		ws->bad = true;
		return 1;
	}
	q0 = qidx(sh, b->start);
	n = (uint32_t)(b->size / sh->quantum);
	for (uint32_t q = q0; q < q0 + n; q++) {
		uint32_t s = atomic_load(&sh->qstate[q]);
		bool ok;

		if (b->kind == VA_BLOCK_BUSY)
			/* not yet claimed, being freed, or claimed by the owner the lib records */
			ok = s < 2 || s == Q_TRANSIT || tag_of(sh, s - 2) == b->owner;
		else if (b->kind == VA_BLOCK_LAZY)
			ok = s == Q_READY || s == Q_PENDING;
		else
			ok = s == Q_READY;
		if (!ok) {
			report(sh,
			       "walk: %s block [0x%llx, +0x%llx) owner %p contains quantum 0x%llx "
			       "that is %s%s",
			       b->kind == VA_BLOCK_BUSY	  ? "busy"
			       : b->kind == VA_BLOCK_LAZY ? "lazy"
			       : b->kind == VA_BLOCK_FREE ? "free"
							  : "pooled",
			       ULL(b->start), ULL(b->size), b->owner,
			       ULL(sh->base + (uint64_t)q * sh->quantum), state_name(s),
			       s >= 2 && s != Q_TRANSIT ? " by another thread" : "");
			ws->bad = true;
			return 1;
		}
	}
	if (ws->n == ws->cap) {
		size_t cap = ws->cap ? 2 * ws->cap : 1024;
		void *p = realloc(ws->b, cap * sizeof(*ws->b));

		if (!p) {
			report(sh, "walk: out of memory");
			ws->bad = true;
			return 1;
		}
		ws->b = p;
		ws->cap = cap;
	}
	ws->b[ws->n++] = *b;
	return 0;
}

static int cmp_block(const void *a, const void *b)
{
	const struct va_block_info *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static bool check_once(struct shared *sh, struct walk_state *ws)
{
	char msg[256] = "";
	uint64_t next;
	int rc = va_check(sh->vs, msg, sizeof(msg));

	atomic_fetch_add(&sh->checks, 1);
	if (rc) {
		report(sh, "va_check returned %d under load: %s", rc, msg);
		return false;
	}
	ws->n = 0;
	ws->bad = false;
	rc = va_walk(sh->vs, walk_block, ws);
	if (ws->bad)
		return false;
	if (rc) {
		report(sh, "va_walk returned %d", rc);
		return false;
	}
	atomic_fetch_add(&sh->walks, 1);
	qsort(ws->b, ws->n, sizeof(*ws->b), cmp_block);
	next = sh->base;
	for (size_t i = 0; i < ws->n; i++) {
		if (ws->b[i].start != next) {
			report(sh, "walk under load: block at 0x%llx, expected one at 0x%llx (%s)",
			       ULL(ws->b[i].start), ULL(next),
			       ws->b[i].start < next ? "overlap" : "hole");
			return false;
		}
		next += ws->b[i].size;
	}
	if (next != sh->base + sh->size) {
		report(sh, "walk under load covers up to 0x%llx, space ends at 0x%llx", ULL(next),
		       ULL(sh->base + sh->size));
		return false;
	}
	return true;
}

static void *checker_main(void *arg)
{
	struct shared *sh = arg;
	struct walk_state ws = {.sh = sh};
	unsigned round = 0;

	while (!atomic_load(&sh->stop) && !atomic_load(&sh->errors)) {
		if (round++ % 4 == 0)
			va_drain(sh->vs);
		if (!check_once(sh, &ws))
			break;
		usleep(500); /* pacing only: let the workers run between frozen walks */
	}
	free(ws.b);
	return NULL;
}

/* ---- driver ----------------------------------------------------------------------------- */

static unsigned scaled(unsigned iters)
{
	const char *mode = getenv("VAD_TEST_MODE");

	if (mode && !strcmp(mode, "asan"))
		return iters / 2;
	if (mode && !strcmp(mode, "tsan"))
		return iters / 10;
	return iters;
}

static void run_stress(void **state)
{
	const struct stress_cfg *cfg = *state;
	struct shared *sh = calloc(1, sizeof(*sh));
	struct worker w[MAX_THREADS + 1];
	pthread_t th[MAX_THREADS + 1], checker;
	struct va_config vc;
	struct va_stats st;
	struct walk_state ws;
	char msg[256] = "";
	unsigned nthreads = cfg->workers + 1, unreleased = 0;
	int rc;

	assert_non_null(sh);
	assert_true(cfg->workers <= MAX_THREADS);
	sh->cfg = cfg;
	sh->quantum = cfg->quantum;
	sh->nq = cfg->nq;
	sh->base = 16 * cfg->quantum;
	sh->size = (uint64_t)cfg->nq * cfg->quantum;
	sh->iters = scaled(cfg->iters);
	pthread_mutex_init(&sh->err_lock, NULL);
	pthread_mutex_init(&sh->mail_lock, NULL);
	sh->qstate = calloc(cfg->nq, sizeof(*sh->qstate));
	assert_non_null(sh->qstate);
	for (uint32_t i = 0; i < cfg->nq; i++)
		atomic_init(&sh->qstate[i], Q_READY);

	memset(&vc, 0, sizeof(vc));
	vc.base = sh->base;
	vc.size = sh->size;
	vc.quantum = cfg->quantum;
	vc.nodes = cfg->nodes;
	vc.lazy_max = cfg->lazy_max_q * cfg->quantum;
	vc.zone_size = cfg->zone_q * cfg->quantum;
	vc.pool_max_quanta = cfg->pool_max_quanta;
	vc.pool_depth = cfg->pool_depth;
	vc.idle_drain_ms = cfg->idle_drain_ms;
	vc.eager = cfg->eager;
	vc.no_thread = cfg->no_thread;
	vc.no_pools = cfg->no_pools;
	vc.no_idle_release = true; /* released bytes must equal freed bytes (see the end) */
	vc.release = on_release;
	vc.release_ctx = sh;
	rc = va_create(&vc, &sh->vs);
	assert_int_equal(rc, 0);

	assert_int_equal(pthread_create(&checker, NULL, checker_main, sh), 0);
	for (unsigned t = 0; t < nthreads; t++) {
		w[t] = (struct worker){.sh = sh, .id = t, .rng = 0x1234567ULL * (t + 1) + cfg->nq};
		assert_int_equal(pthread_create(&th[t], NULL,
						t < cfg->workers ? worker_main : looker_main,
						&w[t]),
				 0);
	}
	for (unsigned t = 0; t < cfg->workers; t++)
		pthread_join(th[t], NULL);
	atomic_store(&sh->stop, true);
	pthread_join(th[cfg->workers], NULL);
	pthread_join(checker, NULL);

	/* areas still in the mailbox: free them on behalf of whoever gave them */
	for (unsigned i = 0; i < sh->nmail && !atomic_load(&sh->errors); i++) {
		void *owner = NULL;

		if (!move_state(sh, MAX_THREADS, sh->mail[i].addr, sh->mail[i].size, Q_TRANSIT,
				Q_PENDING))
			break;
		rc = va_free(sh->vs, sh->mail[i].addr, &owner);
		if (rc || tag_index(sh, owner) < 0)
			report(sh, "va_free(0x%llx) of a handed-off area returned %d owner %p",
			       ULL(sh->mail[i].addr), rc, owner);
		atomic_fetch_add(&sh->freed_bytes, sh->mail[i].size);
	}

	/* quiescent now: everything freed; drain and the space must be whole */
	va_drain(sh->vs);
	if (!atomic_load(&sh->errors)) {
		memset(&ws, 0, sizeof(ws));
		ws.sh = sh;
		check_once(sh, &ws);
		free(ws.b);
	}
	rc = va_check(sh->vs, msg, sizeof(msg));
	va_get_stats(sh->vs, &st);
	for (uint32_t i = 0; i < cfg->nq; i++)
		unreleased += atomic_load(&sh->qstate[i]) != Q_READY;
	print_message(
	    "%s: %u workers x %u iterations, nodes %u: %llu allocs (%llu ranged, %llu "
	    "congruent groups), %llu ENOSPC, %llu pool hits, %llu hand-offs, %llu drains, "
	    "%llu releases, %llu walks, %llu lookups\n",
	    cfg->name, cfg->workers, sh->iters, cfg->nodes, ULL(st.allocs),
	    ULL(atomic_load(&sh->ranged)), ULL(atomic_load(&sh->congruent)),
	    ULL(atomic_load(&sh->enospc)), ULL(st.pool_hits), ULL(atomic_load(&sh->handoffs)),
	    ULL(st.drains), ULL(st.release_calls), ULL(atomic_load(&sh->walks)),
	    ULL(atomic_load(&sh->lookups)));
	va_destroy(sh->vs);

	if (atomic_load(&sh->errors))
		fail_msg("%s: %llu failures, first: %s", cfg->name, ULL(atomic_load(&sh->errors)),
			 sh->first_error);
	if (rc)
		fail_msg("%s: va_check after the run returned %d: %s", cfg->name, rc, msg);
	if (st.busy_bytes || st.free_bytes != sh->size || st.lazy_bytes || st.pooled_bytes ||
	    st.free_blocks != 1 || st.largest_free != sh->size)
		fail_msg(
		    "%s: after freeing all and va_drain: busy 0x%llx free 0x%llx (%llu blocks, "
		    "largest 0x%llx) lazy 0x%llx pooled 0x%llx; size 0x%llx",
		    cfg->name, ULL(st.busy_bytes), ULL(st.free_bytes), ULL(st.free_blocks),
		    ULL(st.largest_free), ULL(st.lazy_bytes), ULL(st.pooled_bytes), ULL(sh->size));
	if (st.allocs != st.frees)
		fail_msg("%s: allocs %llu != frees %llu", cfg->name, ULL(st.allocs), ULL(st.frees));
	if (unreleased)
		fail_msg("%s: %u quanta freed but never passed to the release callback", cfg->name,
			 unreleased);
	if (atomic_load(&sh->released_bytes) != atomic_load(&sh->freed_bytes) ||
	    st.released_bytes != atomic_load(&sh->released_bytes) ||
	    st.release_calls != atomic_load(&sh->release_calls))
		fail_msg("%s: freed 0x%llx bytes; callback released 0x%llx in %llu calls; stats "
			 "say 0x%llx in %llu calls",
			 cfg->name, ULL(atomic_load(&sh->freed_bytes)),
			 ULL(atomic_load(&sh->released_bytes)),
			 ULL(atomic_load(&sh->release_calls)), ULL(st.released_bytes),
			 ULL(st.release_calls));
	free(sh->qstate);
	pthread_mutex_destroy(&sh->err_lock);
	pthread_mutex_destroy(&sh->mail_lock);
	free(sh);
}

/* six workers over four nodes, default pools, a drain every lazy_max of frees */
static struct stress_cfg nodes4_workers6 = {
    .name = "nodes4_workers6",
    .workers = 6,
    .nodes = 4,
    .nq = 16384,
    .quantum = 4096,
    .lazy_max_q = 512,
    .idle_drain_ms = 1,
    .iters = 300000,
    .max_held = 64,
    .home_per_thread = true,
};
/* two workers hammering one node */
static struct stress_cfg one_node_two_workers = {
    .name = "one_node_two_workers",
    .workers = 2,
    .nodes = 1,
    .nq = 8192,
    .quantum = 4096,
    .lazy_max_q = 256,
    .pool_max_quanta = 64,
    .pool_depth = 16,
    .idle_drain_ms = 1,
    .iters = 600000,
    .max_held = 128,
    .home_per_thread = true,
};
/* more nodes than workers; workers hop between home nodes, frees land on foreign nodes */
static struct stress_cfg nodes8_workers4 = {
    .name = "nodes8_workers4",
    .workers = 4,
    .nodes = 8,
    .nq = 16384,
    .quantum = 4096,
    .lazy_max_q = 128,
    .pool_max_quanta = 32,
    .pool_depth = 8,
    .idle_drain_ms = 2,
    .iters = 400000,
    .max_held = 96,
    .switch_home = true,
};
/* a small space under pressure: ENOSPC, drain-on-failure and the background drain race */
static struct stress_cfg small_space_pressure = {
    .name = "small_space_pressure",
    .workers = 4,
    .nodes = 2,
    .nq = 2048,
    .quantum = 4096,
    .lazy_max_q = 64,
    .pool_max_quanta = 16,
    .pool_depth = 4,
    .idle_drain_ms = 1,
    .iters = 300000,
    .max_held = 64,
    .home_per_thread = true,
};

/* one-quantum zones over 16 nodes: areas span nodes, lookups and frees cross them */
static struct stress_cfg tiny_zones_nodes16 = {
    .name = "tiny_zones_nodes16",
    .workers = 4,
    .nodes = 16,
    .zone_q = 1,
    .nq = 8192,
    .quantum = 4096,
    .lazy_max_q = 128,
    .pool_max_quanta = 16,
    .pool_depth = 8,
    .idle_drain_ms = 1,
    .iters = 150000,
    .max_held = 96,
    .switch_home = true,
};
/* eager frees (release under the drain lock, at once) racing pooled allocations */
static struct stress_cfg eager_workers4 = {
    .name = "eager_workers4",
    .workers = 4,
    .nodes = 2,
    .nq = 8192,
    .quantum = 4096,
    .pool_max_quanta = 16,
    .pool_depth = 8,
    .iters = 150000,
    .max_held = 96,
    .home_per_thread = true,
    .eager = true,
    .no_thread = true,
};
/* no background thread: only the freeing path and failed allocations drain */
static struct stress_cfg sync_drains_workers4 = {
    .name = "sync_drains_workers4",
    .workers = 4,
    .nodes = 3,
    .nq = 4096,
    .quantum = 4096,
    .lazy_max_q = 32,
    .pool_max_quanta = 8,
    .pool_depth = 8,
    .iters = 200000,
    .max_held = 64,
    .switch_home = true,
    .no_thread = true,
};

/* ---- spaces created and destroyed concurrently --------------------------------------------- */

struct churn {
	unsigned id, rounds;
	atomic_uint_fast64_t *errors;
	char err[512];
};

static void count_release(void *ctx, uint64_t start, uint64_t size)
{
	*(uint64_t *)ctx += size; /* one space per thread; drains of it are serialised */
}

/* One thread: create a space, churn it, check it is whole again, destroy it; repeat. Block
 * objects move between threads and spaces through the shared object cache meanwhile. */
static void *churn_main(void *arg)
{
	struct churn *c = arg;
	uint64_t rng = 77 + c->id, released = 0;

	for (unsigned round = 0; round < c->rounds && !c->err[0]; round++) {
		struct va_config vc = {
		    .base = (uint64_t)c->id << 40,
		    .size = 1024 * 4096,
		    .nodes = 1 + (round + c->id) % 4,
		    .lazy_max = 32 * 4096,
		    .pool_max_quanta = 8,
		    .idle_drain_ms = 1,
		    .no_thread = round % 3 == 0,
		    .eager = round % 5 == 4,
		    .no_idle_release = true, /* released must equal freed */
		    .release = count_release,
		    .release_ctx = &released,
		};
		struct va_space *vs;
		uint64_t addrs[64], freed = 0, sizes[64];
		unsigned n = 0;
		struct va_stats st;
		char msg[256] = "";
		int rc;

		released = 0;
		if ((rc = va_create(&vc, &vs)) != 0) {
			snprintf(c->err, sizeof(c->err), "va_create: %d", rc);
			break;
		}
		for (unsigned op = 0; op < 400; op++) {
			if (n < 64 && (rnd_below(&rng, 2) || !n)) {
				uint64_t size = (1 + rnd_below(&rng, 12)) * 4096;

				rc = va_alloc(vs, size, 0, c, &addrs[n]);
				if (rc == 0)
					sizes[n++] = size;
				else if (rc != VA_ENOSPC)
					snprintf(c->err, sizeof(c->err), "va_alloc: %d", rc);
			} else {
				unsigned i = (unsigned)rnd_below(&rng, n);

				if ((rc = va_free(vs, addrs[i], NULL)) != 0)
					snprintf(c->err, sizeof(c->err), "va_free: %d", rc);
				freed += sizes[i];
				addrs[i] = addrs[--n];
				sizes[i] = sizes[n];
			}
		}
		while (n) {
			n--;
			if ((rc = va_free(vs, addrs[n], NULL)) != 0)
				snprintf(c->err, sizeof(c->err), "va_free: %d", rc);
			freed += sizes[n];
		}
		va_drain(vs);
		rc = va_check(vs, msg, sizeof(msg));
		va_get_stats(vs, &st);
		if (!c->err[0] && (rc || st.busy_bytes || st.free_bytes != vc.size ||
				   st.free_blocks != 1 || released != freed))
			snprintf(
			    c->err, sizeof(c->err),
			    "round %u: va_check %d (%s), busy 0x%llx free 0x%llx in %llu blocks, "
			    "released 0x%llx of 0x%llx freed",
			    round, rc, msg, ULL(st.busy_bytes), ULL(st.free_bytes),
			    ULL(st.free_blocks), ULL(released), ULL(freed));
		va_destroy(vs);
	}
	if (c->err[0])
		atomic_fetch_add(c->errors, 1);
	return NULL;
}

static void spaces_come_and_go(void **state)
{
	struct churn c[4];
	pthread_t th[4];
	atomic_uint_fast64_t errors = 0;

	for (unsigned t = 0; t < 4; t++) {
		c[t] = (struct churn){.id = t + 1, .rounds = scaled(1000), .errors = &errors};
		assert_int_equal(pthread_create(&th[t], NULL, churn_main, &c[t]), 0);
	}
	for (unsigned t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	for (unsigned t = 0; t < 4; t++)
		if (c[t].err[0])
			fail_msg("churn thread %u: %s", t, c[t].err);
	assert_int_equal(atomic_load(&errors), 0);
}

int main(void)
{
#define STRESS(c)                                                                                  \
	{                                                                                          \
		.name = #c, .test_func = run_stress, .initial_state = &(c)                         \
	}
	const struct CMUnitTest tests[] = {
	    STRESS(nodes4_workers6),	STRESS(one_node_two_workers),
	    STRESS(nodes8_workers4),	STRESS(small_space_pressure),
	    STRESS(eager_workers4),	STRESS(sync_drains_workers4),
	    STRESS(tiny_zones_nodes16), cmocka_unit_test(spaces_come_and_go),
	};

	if (getenv("VA_TEST_FILTER"))
		cmocka_set_test_filter(getenv("VA_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
