/*
 * va_refmodel.h - a deliberately simple reference model of a vaspace, for the
 * differential tests (test_va_model.c). Header-only (static functions) because
 * each tests/unit/test_va_*.c is built as its own program.
 *
 * The model knows nothing of trees, nodes, pools or laziness. It keeps:
 *   - the busy areas: a sorted array of start quanta plus, per quantum, the start
 *     of the area covering it, so lookups are O(1) and first fit is a walk over
 *     the gaps between areas;
 *   - the release state of every quantum (ready -> busy -> pending -> ready), fed
 *     by the test and by the release callback, which may run on the allocator's
 *     background thread (hence the mutex).
 * All sizes inside are in quanta; addresses at the API are absolute.
 */
#ifndef VA_REFMODEL_H
#define VA_REFMODEL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Release state of one quantum. */
enum rm_rel {
	RM_READY = 0, /* never used, or released: may be handed out */
	RM_BUSY,      /* allocated */
	RM_PENDING,   /* freed, release callback not yet seen: must not be handed out */
};

struct refmodel {
	uint64_t base, size, quantum;
	uint32_t nq;
	uint32_t
	    *area_of; /* per quantum: start quantum + 1 of the busy area covering it, 0 if none */
	uint32_t *len_at; /* per start quantum: length of the area in quanta */
	void **owner_at;  /* per start quantum: owner tag */
	uint32_t *starts; /* sorted start quanta of the busy areas */
	uint32_t nareas;
	uint64_t busy_q;

	pthread_mutex_t rel_lock; /* guards everything below */
	uint8_t *rel;		  /* enum rm_rel per quantum */
	uint64_t pending_q;	  /* quanta in RM_PENDING */
	uint64_t released_bytes, release_calls;
	uint64_t rel_errors;
	char rel_error[256]; /* first release-accounting violation */
	/* log of release callbacks since the last rm_rel_log_take() */
	uint64_t (*log)[2];
	size_t log_len, log_cap;
};

static inline uint64_t rm_align_up(uint64_t x, uint64_t a, bool *overflow)
{
	uint64_t r;

	if (__builtin_add_overflow(x, a - 1, &r)) {
		*overflow = true;
		return 0;
	}
	*overflow = false;
	return r & ~(a - 1);
}

static inline bool rm_init(struct refmodel *m, uint64_t base, uint64_t size, uint64_t quantum)
{
	memset(m, 0, sizeof(*m));
	m->base = base;
	m->size = size;
	m->quantum = quantum;
	m->nq = (uint32_t)(size / quantum);
	m->area_of = calloc(m->nq, sizeof(*m->area_of));
	m->len_at = calloc(m->nq, sizeof(*m->len_at));
	m->owner_at = calloc(m->nq, sizeof(*m->owner_at));
	m->starts = calloc(m->nq, sizeof(*m->starts));
	m->rel = calloc(m->nq, 1);
	pthread_mutex_init(&m->rel_lock, NULL);
	return m->area_of && m->len_at && m->owner_at && m->starts && m->rel;
}

static inline void rm_fini(struct refmodel *m)
{
	free(m->area_of);
	free(m->len_at);
	free(m->owner_at);
	free(m->starts);
	free(m->rel);
	free(m->log);
	pthread_mutex_destroy(&m->rel_lock);
	memset(m, 0, sizeof(*m));
}

static inline bool rm_in_space(const struct refmodel *m, uint64_t addr)
{
	return addr >= m->base && addr - m->base < m->size;
}

/* Quantum index of an address inside the space. */
static inline uint32_t rm_qi(const struct refmodel *m, uint64_t addr)
{
	return (uint32_t)((addr - m->base) / m->quantum);
}

static inline uint64_t rm_addr(const struct refmodel *m, uint32_t qi)
{
	return m->base + (uint64_t)qi * m->quantum;
}

/* Busy area containing addr: true and its start/length (quanta) if any. */
static inline bool rm_find(const struct refmodel *m, uint64_t addr, uint32_t *start_q,
			   uint32_t *len_q)
{
	uint32_t a;

	if (!rm_in_space(m, addr))
		return false;
	a = m->area_of[rm_qi(m, addr)];
	if (!a)
		return false;
	*start_q = a - 1;
	*len_q = m->len_at[a - 1];
	return true;
}

static inline bool rm_range_free(const struct refmodel *m, uint32_t q0, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (m->area_of[q0 + i])
			return false;
	return true;
}

/* Index in starts[] of the first area starting at or after q. */
static inline uint32_t rm_lower_bound(const struct refmodel *m, uint32_t q)
{
	uint32_t lo = 0, hi = m->nareas;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (m->starts[mid] < q)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static inline void rm_insert(struct refmodel *m, uint64_t addr, uint32_t len_q, void *owner)
{
	uint32_t q0 = rm_qi(m, addr);
	uint32_t pos = rm_lower_bound(m, q0);

	memmove(&m->starts[pos + 1], &m->starts[pos], (m->nareas - pos) * sizeof(*m->starts));
	m->starts[pos] = q0;
	m->nareas++;
	for (uint32_t i = 0; i < len_q; i++)
		m->area_of[q0 + i] = q0 + 1;
	m->len_at[q0] = len_q;
	m->owner_at[q0] = owner;
	m->busy_q += len_q;
}

static inline void rm_remove(struct refmodel *m, uint32_t q0)
{
	uint32_t pos = rm_lower_bound(m, q0);
	uint32_t len_q = m->len_at[q0];

	memmove(&m->starts[pos], &m->starts[pos + 1], (m->nareas - pos - 1) * sizeof(*m->starts));
	m->nareas--;
	for (uint32_t i = 0; i < len_q; i++)
		m->area_of[q0 + i] = 0;
	m->len_at[q0] = 0;
	m->owner_at[q0] = NULL;
	m->busy_q -= len_q;
}

/* Gap iterator: start with *it = 0; each call yields the next maximal non-busy run [g0, g1)
 * (in quanta, address order) and returns false when there is none left. */
static inline bool rm_next_gap(const struct refmodel *m, uint32_t *it, uint32_t *g0, uint32_t *g1)
{
	while (*it <= m->nareas) {
		uint32_t i = (*it)++;
		uint32_t prev_end = i ? m->starts[i - 1] + m->len_at[m->starts[i - 1]] : 0;
		uint32_t next = i < m->nareas ? m->starts[i] : m->nq;

		if (next > prev_end) {
			*g0 = prev_end;
			*g1 = next;
			return true;
		}
	}
	return false;
}

/* Number of maximal free runs and the largest one, in quanta. */
static inline void rm_gap_stats(const struct refmodel *m, uint64_t *gaps, uint64_t *largest_q)
{
	uint32_t it = 0, g0, g1;

	*gaps = 0;
	*largest_q = 0;
	while (rm_next_gap(m, &it, &g0, &g1)) {
		(*gaps)++;
		if (g1 - g0 > *largest_q)
			*largest_q = g1 - g0;
	}
}

/*
 * Lowest address a with a % align == 0 and [a, a + size) non-busy, inside the space and
 * inside [vstart, vend). size is already rounded to the quantum, align raised to it.
 */
static inline bool rm_lowest_fit(const struct refmodel *m, uint64_t size, uint64_t align,
				 uint64_t vstart, uint64_t vend, uint64_t *out)
{
	uint32_t it = 0, g0, g1;

	while (rm_next_gap(m, &it, &g0, &g1)) {
		uint64_t gs = rm_addr(m, g0), ge = rm_addr(m, g1);
		uint64_t lo = gs > vstart ? gs : vstart;
		uint64_t hi = ge < vend ? ge : vend;
		bool ovf;
		uint64_t a;

		if (gs >= vend)
			return false;
		if (lo >= hi)
			continue;
		a = rm_align_up(lo, align, &ovf);
		if (!ovf && a < hi && hi - a >= size) {
			*out = a;
			return true;
		}
	}
	return false;
}

/*
 * Highest base, a multiple of align, such that every [base + off[i], + sizes[i]) lies in the
 * space and is non-busy. offsets[0] is expected to be 0 (so base itself is in the space).
 */
static inline bool rm_highest_congruent(const struct refmodel *m, const uint64_t *offsets,
					const uint64_t *sizes, unsigned n, uint64_t align,
					uint64_t *out)
{
	uint64_t last_end = offsets[n - 1] + sizes[n - 1];
	uint64_t end = m->base + m->size;
	uint32_t *prefix;
	bool found = false;

	if (last_end > m->size)
		return false;
	/* prefix[i] = busy quanta in [0, i) */
	prefix = malloc(((size_t)m->nq + 1) * sizeof(*prefix));
	if (!prefix)
		return false;
	prefix[0] = 0;
	for (uint32_t i = 0; i < m->nq; i++)
		prefix[i + 1] = prefix[i] + (m->area_of[i] != 0);

	for (uint64_t b = (end - last_end) & ~(align - 1); b >= m->base; b -= align) {
		bool ok = true;

		for (unsigned i = 0; i < n && ok; i++) {
			uint32_t q0 = rm_qi(m, b + offsets[i]);
			uint32_t nq = (uint32_t)(sizes[i] / m->quantum);

			ok = prefix[q0 + nq] == prefix[q0];
		}
		if (ok) {
			*out = b;
			found = true;
			break;
		}
		if (b < align)
			break;
	}
	free(prefix);
	return found;
}

/* ---- release accounting ------------------------------------------------------------ */

static inline void rm_rel_fail(struct refmodel *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Record a violation (called with rel_lock held). */
static inline void rm_rel_fail(struct refmodel *m, const char *fmt, ...)
{
	va_list ap;

	if (m->rel_errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(m->rel_error, sizeof(m->rel_error), fmt, ap);
		va_end(ap);
	}
}

/* The release callback: every quantum must be pending; it becomes ready. */
static inline void rm_rel_released(struct refmodel *m, uint64_t start, uint64_t size)
{
	pthread_mutex_lock(&m->rel_lock);
	m->released_bytes += size;
	m->release_calls++;
	if (m->log_len == m->log_cap) {
		size_t cap = m->log_cap ? 2 * m->log_cap : 64;
		void *p = realloc(m->log, cap * sizeof(*m->log));

		if (p) {
			m->log = p;
			m->log_cap = cap;
		}
	}
	if (m->log_len < m->log_cap) {
		m->log[m->log_len][0] = start;
		m->log[m->log_len][1] = size;
		m->log_len++;
	}
	if (size == 0 || !rm_in_space(m, start) || size > m->base + m->size - start ||
	    (start - m->base) % m->quantum || size % m->quantum) {
		rm_rel_fail(m, "release callback with a bad range [0x%llx, +0x%llx)",
			    (unsigned long long)start, (unsigned long long)size);
		pthread_mutex_unlock(&m->rel_lock);
		return;
	}
	for (uint32_t q = rm_qi(m, start), e = q + (uint32_t)(size / m->quantum); q < e; q++) {
		if (m->rel[q] != RM_PENDING) {
			rm_rel_fail(
			    m,
			    "release callback [0x%llx, +0x%llx) covers quantum at 0x%llx that is "
			    "%s",
			    (unsigned long long)start, (unsigned long long)size,
			    (unsigned long long)rm_addr(m, q),
			    m->rel[q] == RM_BUSY ? "busy (released while allocated)"
						 : "already released (double release)");
			continue;
		}
		m->rel[q] = RM_READY;
		m->pending_q--;
	}
	pthread_mutex_unlock(&m->rel_lock);
}

/* An allocation returned [q0, q0 + n): every quantum must be ready; it becomes busy.
 * Returns false (and records why) if not. */
static inline bool rm_rel_take(struct refmodel *m, uint32_t q0, uint32_t n)
{
	bool ok = true;

	pthread_mutex_lock(&m->rel_lock);
	for (uint32_t q = q0; q < q0 + n; q++) {
		if (m->rel[q] != RM_READY) {
			if (ok)
				rm_rel_fail(m, "allocation returned quantum at 0x%llx that is %s",
					    (unsigned long long)rm_addr(m, q),
					    m->rel[q] == RM_BUSY
						? "busy"
						: "freed but not yet released (would leak data)");
			ok = false;
			continue;
		}
		m->rel[q] = RM_BUSY;
	}
	pthread_mutex_unlock(&m->rel_lock);
	return ok;
}

/* The test is about to free [q0, q0 + n): busy -> pending (before the call, so a release on
 * the background thread can never see it busy). */
static inline void rm_rel_pending(struct refmodel *m, uint32_t q0, uint32_t n)
{
	pthread_mutex_lock(&m->rel_lock);
	for (uint32_t q = q0; q < q0 + n; q++) {
		if (m->rel[q] != RM_BUSY)
			rm_rel_fail(m, "model: freeing quantum 0x%llx that is not busy",
				    (unsigned long long)rm_addr(m, q));
		m->rel[q] = RM_PENDING;
		m->pending_q++;
	}
	pthread_mutex_unlock(&m->rel_lock);
}

/* Undo rm_rel_pending after a free the allocator refused. */
static inline void rm_rel_unpending(struct refmodel *m, uint32_t q0, uint32_t n)
{
	pthread_mutex_lock(&m->rel_lock);
	for (uint32_t q = q0; q < q0 + n; q++) {
		if (m->rel[q] == RM_PENDING) {
			m->rel[q] = RM_BUSY;
			m->pending_q--;
		}
	}
	pthread_mutex_unlock(&m->rel_lock);
}

/* Copy out and clear the callback log; returns the number of entries (caller frees *out). */
static inline size_t rm_rel_log_take(struct refmodel *m, uint64_t (**out)[2])
{
	size_t n;

	pthread_mutex_lock(&m->rel_lock);
	n = m->log_len;
	*out = NULL;
	if (n) {
		*out = malloc(n * sizeof(**out));
		if (*out)
			memcpy(*out, m->log, n * sizeof(**out));
		else
			n = 0;
	}
	m->log_len = 0;
	pthread_mutex_unlock(&m->rel_lock);
	return n;
}

#endif
