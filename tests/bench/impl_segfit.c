/*
 * impl_segfit.c - an O(1) segregated-fit baseline: the search of TLSF and OffsetAllocator.
 *
 * Free blocks sit in two-level size classes (a power-of-two first level, 16 linear
 * subdivisions in each), found through two levels of bitmaps. A request is rounded up to
 * the next class boundary before the search, so any block of the class found is big
 * enough and the search is two find-first-set instructions; the price is exactness: a hole
 * that fits the request but lies in the request's own class is never used (a 97-quanta
 * hole is in class [96, 100), a request of 97 searches from class [100, 104)). An
 * alignment above the quantum asks for size + align - 1 quanta and gives the front back.
 *
 * The records live outside the managed space (it is a shared arena the allocator may not
 * write): 24-byte nodes in one array addressed by 32-bit index, linked to their address
 * neighbours for merging, and an open-addressing hash of area starts for free by address.
 * One mutex around it all (TLSF and OffsetAllocator are single-threaded). Congruent
 * groups are not supported (VA_EINVAL).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_impl.h"

#define SL_LOG2 4
#define SL_N	(1u << SL_LOG2)
#define FL_N	30
#define NIL	UINT32_MAX

struct sf_node {
	uint32_t start, size;	       /* in quanta */
	uint32_t phys_prev, phys_next; /* address neighbours (every byte is in one node) */
	uint32_t free_prev, free_next; /* class list while free; free_next: spare list */
};

struct sf {
	pthread_mutex_t lock;
	uint64_t base, quantum;
	unsigned qshift;
	struct sf_node *nodes;
	uint32_t nnodes, cap, spare;
	uint32_t fl_map;
	uint16_t sl_map[FL_N];
	uint32_t head[FL_N][SL_N];
	uint8_t *used; /* one byte per node: busy */
	/* hash of busy starts: key quanta start, value node index */
	uint32_t *hkey, *hval;
	uint32_t hmask, hcount;
	uint64_t allocs, frees, fails;
};

/* The class holding blocks of s quanta (s >= 1). */
static void map_down(uint32_t s, unsigned *fl, unsigned *sl)
{
	if (s < SL_N) {
		*fl = 0;
		*sl = s;
		return;
	}
	unsigned f = 31 - (unsigned)__builtin_clz(s);
	*sl = (s >> (f - SL_LOG2)) - SL_N;
	*fl = f - SL_LOG2 + 1;
}

/* The lowest class whose every block holds s quanta; false past the largest class. */
static bool map_up(uint32_t s, unsigned *fl, unsigned *sl)
{
	uint64_t r = s;

	if (s >= SL_N) {
		unsigned f = 31 - (unsigned)__builtin_clz(s);
		r += (1ull << (f - SL_LOG2)) - 1;
	}
	if (r > UINT32_MAX)
		return false;
	map_down((uint32_t)r, fl, sl);
	return *fl < FL_N;
}

static uint32_t hash32(uint32_t k, uint32_t mask)
{
	return (k * 0x9e3779b1u) & mask;
}

static bool h_grow(struct sf *s);

static bool h_put(struct sf *s, uint32_t k, uint32_t v)
{
	if ((s->hcount + 1) * 2 > s->hmask + 1 && !h_grow(s))
		return false;
	uint32_t i = hash32(k, s->hmask);

	while (s->hkey[i] != NIL)
		i = (i + 1) & s->hmask;
	s->hkey[i] = k;
	s->hval[i] = v;
	s->hcount++;
	return true;
}

static bool h_grow(struct sf *s)
{
	uint32_t old = s->hkey ? s->hmask + 1 : 0, *ok = s->hkey, *ov = s->hval;
	uint32_t n = old ? old * 2 : 1024;

	s->hkey = malloc(n * sizeof(uint32_t));
	s->hval = malloc(n * sizeof(uint32_t));
	if (!s->hkey || !s->hval) {
		free(s->hkey);
		free(s->hval);
		s->hkey = ok;
		s->hval = ov;
		return false;
	}
	memset(s->hkey, 0xff, n * sizeof(uint32_t));
	s->hmask = n - 1;
	s->hcount = 0;
	for (uint32_t i = 0; i < old; i++)
		if (ok[i] != NIL)
			h_put(s, ok[i], ov[i]);
	free(ok);
	free(ov);
	return true;
}

/* Remove key k and return its value, or NIL (backward-shift deletion: no tombstones). */
static uint32_t h_take(struct sf *s, uint32_t k)
{
	uint32_t i, j, v;

	if (!s->hcount)
		return NIL;
	for (i = hash32(k, s->hmask); s->hkey[i] != k; i = (i + 1) & s->hmask)
		if (s->hkey[i] == NIL)
			return NIL;
	v = s->hval[i];
	for (j = (i + 1) & s->hmask; s->hkey[j] != NIL; j = (j + 1) & s->hmask) {
		uint32_t home = hash32(s->hkey[j], s->hmask);

		/* move j into the gap at i unless its home lies cyclically in (i, j] */
		if (((j - home) & s->hmask) >= ((j - i) & s->hmask)) {
			s->hkey[i] = s->hkey[j];
			s->hval[i] = s->hval[j];
			i = j;
		}
	}
	s->hkey[i] = NIL;
	s->hcount--;
	return v;
}

static uint32_t node_new(struct sf *s)
{
	uint32_t i = s->spare;

	if (i != NIL) {
		s->spare = s->nodes[i].free_next;
		return i;
	}
	if (s->nnodes == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 1024;
		struct sf_node *n = realloc(s->nodes, cap * sizeof(*n));
		uint8_t *u = realloc(s->used, cap);

		if (n)
			s->nodes = n;
		if (u)
			s->used = u;
		if (!n || !u)
			return NIL;
		s->cap = cap;
	}
	return s->nnodes++;
}

static void node_put(struct sf *s, uint32_t i)
{
	s->nodes[i].free_next = s->spare;
	s->spare = i;
}

static void list_insert(struct sf *s, uint32_t i)
{
	struct sf_node *n = &s->nodes[i];
	unsigned fl, sl;

	map_down(n->size, &fl, &sl);
	n->free_prev = NIL;
	n->free_next = s->head[fl][sl];
	if (n->free_next != NIL)
		s->nodes[n->free_next].free_prev = i;
	s->head[fl][sl] = i;
	s->fl_map |= 1u << fl;
	s->sl_map[fl] |= (uint16_t)(1u << sl);
	s->used[i] = 0;
}

static void list_remove(struct sf *s, uint32_t i)
{
	struct sf_node *n = &s->nodes[i];
	unsigned fl, sl;

	map_down(n->size, &fl, &sl);
	if (n->free_prev != NIL)
		s->nodes[n->free_prev].free_next = n->free_next;
	else
		s->head[fl][sl] = n->free_next;
	if (n->free_next != NIL)
		s->nodes[n->free_next].free_prev = n->free_prev;
	if (s->head[fl][sl] == NIL) {
		s->sl_map[fl] &= (uint16_t) ~(1u << sl);
		if (!s->sl_map[fl])
			s->fl_map &= ~(1u << fl);
	}
}

/* Split the first q quanta off node i into a new node placed before it; returns the new
 * node (i keeps the rest), or NIL with no memory. */
static uint32_t split_front(struct sf *s, uint32_t i, uint32_t q)
{
	uint32_t k = node_new(s);

	if (k == NIL)
		return NIL;
	struct sf_node *n = &s->nodes[i], *f = &s->nodes[k];

	f->start = n->start;
	f->size = q;
	f->phys_prev = n->phys_prev;
	f->phys_next = i;
	if (n->phys_prev != NIL)
		s->nodes[n->phys_prev].phys_next = k;
	n->phys_prev = k;
	n->start += q;
	n->size -= q;
	return k;
}

static int sf_create(const struct bench_space_cfg *cfg, void **out)
{
	struct sf *s = calloc(1, sizeof(*s));
	uint64_t quanta = cfg->size / cfg->quantum;
	uint32_t i;

	if (!s)
		return VA_ENOMEM;
	if (!quanta || quanta >= NIL) {
		free(s);
		return VA_EINVAL; /* 32-bit quantum indices */
	}
	pthread_mutex_init(&s->lock, NULL);
	s->base = cfg->base;
	s->quantum = cfg->quantum;
	s->qshift = (unsigned)__builtin_ctzll(cfg->quantum);
	s->spare = NIL;
	memset(s->head, 0xff, sizeof(s->head));
	i = node_new(s);
	if (i == NIL || !h_grow(s)) {
		free(s->nodes);
		free(s->used);
		free(s);
		return VA_ENOMEM;
	}
	s->nodes[i] = (struct sf_node){
	    .start = 0, .size = (uint32_t)quanta, .phys_prev = NIL, .phys_next = NIL};
	list_insert(s, i);
	*out = s;
	return VA_OK;
}

static void sf_destroy(void *h)
{
	struct sf *s = h;

	pthread_mutex_destroy(&s->lock);
	free(s->nodes);
	free(s->used);
	free(s->hkey);
	free(s->hval);
	free(s);
}

/* A free node of at least want quanta, off its list, or NIL. */
static uint32_t take_fit(struct sf *s, uint32_t want)
{
	unsigned fl, sl;
	uint32_t m;

	if (!map_up(want, &fl, &sl))
		return NIL;
	m = s->sl_map[fl] & (uint32_t)(~0u << sl);
	if (!m) {
		uint32_t f = fl + 1 < 32 ? s->fl_map & (~0u << (fl + 1)) : 0;

		if (!f)
			return NIL;
		fl = (unsigned)__builtin_ctz(f);
		m = s->sl_map[fl];
	}
	sl = (unsigned)__builtin_ctz(m);
	m = s->head[fl][sl];
	list_remove(s, m);
	return m;
}

static int sf_alloc_locked(struct sf *s, uint32_t q, uint32_t aq, uint64_t *addr)
{
	uint64_t want64 = (uint64_t)q + aq - 1;
	uint32_t i, k;

	if (want64 >= NIL)
		return VA_ENOSPC;
	i = take_fit(s, (uint32_t)want64);
	if (i == NIL)
		return VA_ENOSPC;
	uint32_t gap = (aq - (s->nodes[i].start & (aq - 1))) & (aq - 1);

	if (gap) { /* the front goes back to its class */
		k = split_front(s, i, gap);
		if (k == NIL)
			goto nomem;
		list_insert(s, k);
	}
	if (s->nodes[i].size > q) { /* the tail stays free */
		k = split_front(s, i, q);
		if (k == NIL)
			goto nomem;
		list_insert(s, i);
		i = k;
	}
	if (!h_put(s, s->nodes[i].start, i))
		goto nomem;
	s->used[i] = 1;
	*addr = s->base + ((uint64_t)s->nodes[i].start << s->qshift);
	return VA_OK;
nomem:
	list_insert(s, i);
	return VA_ENOMEM;
}

static int sf_alloc(void *h, uint64_t size, uint64_t align, uint64_t *addr)
{
	struct sf *s = h;
	uint64_t sz = size, al = align;
	int rc = bench_normalize(s->quantum, (uint64_t)NIL << s->qshift, &sz, &al);

	if (rc)
		return rc;
	pthread_mutex_lock(&s->lock);
	rc = sf_alloc_locked(s, (uint32_t)(sz >> s->qshift), (uint32_t)(al >> s->qshift), addr);
	if (rc)
		s->fails++;
	else
		s->allocs++;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Merge node b into its address predecessor a (both free, a off its list); b is spare. */
static void merge_into(struct sf *s, uint32_t a, uint32_t b)
{
	struct sf_node *na = &s->nodes[a], *nb = &s->nodes[b];

	na->size += nb->size;
	na->phys_next = nb->phys_next;
	if (nb->phys_next != NIL)
		s->nodes[nb->phys_next].phys_prev = a;
	node_put(s, b);
}

static int sf_free(void *h, uint64_t addr)
{
	struct sf *s = h;
	uint32_t i, p, n;

	if (addr < s->base || (addr - s->base) & (s->quantum - 1) ||
	    (addr - s->base) >> s->qshift >= NIL)
		return VA_ERANGE;
	pthread_mutex_lock(&s->lock);
	i = h_take(s, (uint32_t)((addr - s->base) >> s->qshift));
	if (i == NIL) {
		pthread_mutex_unlock(&s->lock);
		return VA_EDOUBLEFREE;
	}
	p = s->nodes[i].phys_prev;
	if (p != NIL && !s->used[p]) {
		list_remove(s, p);
		merge_into(s, p, i);
		i = p;
	}
	n = s->nodes[i].phys_next;
	if (n != NIL && !s->used[n]) {
		list_remove(s, n);
		merge_into(s, i, n);
	}
	list_insert(s, i);
	s->frees++;
	pthread_mutex_unlock(&s->lock);
	return VA_OK;
}

static int sf_alloc_congruent(void *h, const uint64_t *offs, const uint64_t *sizes, unsigned n,
			      uint64_t align, uint64_t *out)
{
	(void)h, (void)offs, (void)sizes, (void)n, (void)align, (void)out;
	return VA_EINVAL;
}

/* Every node in address order covers the space once; list membership matches used[]. */
static int sf_check(void *h, char *msg, size_t msg_len)
{
	struct sf *s = h;
	uint32_t at = 0, prev = NIL, free_nodes = 0, listed = 0;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	uint32_t i = 0;
	while (i != NIL && s->nodes[i].phys_prev != NIL) /* find the first node */
		i = s->nodes[i].phys_prev;
	for (; i != NIL; prev = i, i = s->nodes[i].phys_next) {
		if (s->nodes[i].start != at || s->nodes[i].phys_prev != prev || !s->nodes[i].size) {
			snprintf(msg, msg_len,
				 "segfit: node at quantum %u breaks the address chain", at);
			rc = VA_ECORRUPT;
			break;
		}
		if (!s->used[i]) {
			free_nodes++;
			if (prev != NIL && !s->used[prev]) {
				snprintf(msg, msg_len, "segfit: two adjacent free nodes at %u", at);
				rc = VA_ECORRUPT;
				break;
			}
		}
		at += s->nodes[i].size;
	}
	for (unsigned fl = 0; !rc && fl < FL_N; fl++)
		for (unsigned sl = 0; sl < SL_N; sl++)
			for (uint32_t k = s->head[fl][sl]; k != NIL; k = s->nodes[k].free_next)
				listed++;
	if (!rc && listed != free_nodes) {
		snprintf(msg, msg_len, "segfit: %u free nodes, %u listed", free_nodes, listed);
		rc = VA_ECORRUPT;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static void sf_counters(void *h, struct bench_counters *out)
{
	struct sf *s = h;

	pthread_mutex_lock(&s->lock);
	*out = (struct bench_counters){.allocs = s->allocs, .frees = s->frees, .fails = s->fails};
	pthread_mutex_unlock(&s->lock);
}

const struct bench_impl_ops bench_impl_segfit = {
    .name = "segfit",
    .desc = "O(1) segregated fit (TLSF/OffsetAllocator search): rounds up to its class",
    .rounds = true,
    .create = sf_create,
    .destroy = sf_destroy,
    .alloc = sf_alloc,
    .free = sf_free,
    .alloc_congruent = sf_alloc_congruent,
    .check = sf_check,
    .counters = sf_counters,
};
