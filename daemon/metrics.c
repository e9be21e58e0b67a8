/* metrics.c - the Prometheus text of the daemon's figures; see metrics.h. */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "commit.h"
#include "errors.h"
#include "op_stats.h"
#include "service.h"
#include "vad.pb-c.h"
#include "vaspace.h"
#include "version.h"
#include "waitq.h"

/* A growing text; once an allocation fails every append is a no-op and the result NULL. */
struct text {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	if (t->failed)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if ((size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		size_t cap =
		    t->cap * 2 > t->len + (size_t)n + 1 ? t->cap * 2 : t->len + (size_t)n + 1;
		char *b = realloc(t->buf, cap);
		if (!b) {
			t->failed = true;
			return;
		}
		t->buf = b;
		t->cap = cap;
	}
}

static void family(struct text *t, const char *name, const char *type, const char *help)
{
	put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

const char *vad_metrics_escape(const char *s, char *buf, size_t cap)
{
	size_t o = 0;
	if (!cap)
		return buf;
	for (; *s; s++) {
		const char *esc = *s == '\\'   ? "\\\\"
				  : *s == '"'  ? "\\\""
				  : *s == '\n' ? "\\n"
					       : NULL;
		size_t n = esc ? 2 : 1;
		if (o + n >= cap)
			break;
		if (esc) {
			buf[o++] = esc[0];
			buf[o++] = esc[1];
		} else {
			buf[o++] = *s;
		}
	}
	buf[o] = '\0';
	return buf;
}

/* One arena's figures, copied while it is pinned. */
struct arena_fig {
	char label[2 * (VAD_NAME_MAX + VAD_TENANT_SUFFIX_MAX) + 2]; /* its name, escaped */
	struct va_stats st;
	uint64_t resident, committed, commit_failures;
	Vad__ArenaStats wait; /* the slot's queue of allocations waiting for room (waitq.h) */
};

/* The per-arena families: name, type, help, the value from struct arena_fig *f. Names and
 * units follow Prometheus's conventions (base units, _total for counters). */
#define ARENA_FAMILIES(X)                                                                          \
	X("vad_arena_size_bytes", "gauge", "Size of the arena.", f->st.size)                       \
	X("vad_arena_busy_bytes", "gauge", "Bytes of the arena in live ranges.", f->st.busy_bytes) \
	X("vad_arena_free_bytes", "gauge", "Bytes of the arena in its free tree.",                 \
	  f->st.free_bytes)                                                                        \
	X("vad_arena_lazy_bytes", "gauge", "Freed bytes waiting for reclaim.", f->st.lazy_bytes)   \
	X("vad_arena_pooled_bytes", "gauge", "Reclaimed bytes kept in the nodes' pools.",          \
	  f->st.pooled_bytes)                                                                      \
	X("vad_arena_largest_free_bytes", "gauge", "The largest free block of the arena.",         \
	  f->st.largest_free)                                                                      \
	X("vad_arena_committed_bytes", "gauge",                                                    \
	  "Bytes committed for live ranges (commit = reserve arenas).", f->committed)              \
	X("vad_arena_resident_bytes", "gauge", "Bytes of the arena's file backed by memory.",      \
	  f->resident)                                                                             \
	X("vad_arena_quantum_bytes", "gauge", "The arena's allocation unit.", f->st.quantum)       \
	X("vad_arena_ranges", "gauge", "Live ranges in the arena.", f->st.busy_blocks)             \
	X("vad_allocs_total", "counter", "Ranges allocated in the arena.", f->st.allocs)           \
	X("vad_frees_total", "counter", "Ranges freed in the arena.", f->st.frees)                 \
	X("vad_alloc_failures_total", "counter", "Allocations the arena had no room for.",         \
	  f->st.fails)                                                                             \
	X("vad_commit_failures_total", "counter",                                                  \
	  "Alloc requests refused because their memory could not be committed.",                   \
	  f->commit_failures)                                                                      \
	X("vad_drains_total", "counter", "Lazy reclaim passes.", f->st.drains)                     \
	X("vad_released_bytes_total", "counter",                                                   \
	  "Bytes of freed ranges given back to the system.", f->st.released_bytes)                 \
	X("vad_release_calls_total", "counter", "Hole punches that gave freed ranges back.",       \
	  f->st.release_calls)                                                                     \
	X("vad_pool_hits_total", "counter", "Allocations served from a node's pool.",              \
	  f->st.pool_hits)                                                                         \
	X("vad_arena_waiting_allocs", "gauge",                                                     \
	  "Alloc requests waiting for room (vad_alloc_wait).", f->wait.waiters)                    \
	X("vad_alloc_waits_total", "counter", "Alloc requests that waited for room.",              \
	  f->wait.waits)                                                                           \
	X("vad_alloc_wait_grants_total", "counter", "Waiting alloc requests granted.",             \
	  f->wait.wait_grants)                                                                     \
	X("vad_alloc_wait_timeouts_total", "counter", "Waiting alloc requests that timed out.",    \
	  f->wait.wait_timeouts)

/* Copy the figures of every visible arena (VAD_METRICS_ARENAS_MAX at most) into figs;
 * returns how many, *omitted the visible ones left out. */
static size_t collect_arenas(struct vad_service *svc, vad_metrics_visible_fn visible, void *ctx,
			     struct arena_fig *figs, size_t *omitted)
{
	size_t n = 0;
	*omitted = 0;
	for (size_t i = 0; i < svc->n_slots; i++) {
		struct vad_arena *a = vad_arena_pin(svc->tenants, i);
		if (!a)
			continue;
		if (visible && !visible(ctx, a)) {
			vad_arena_unpin(svc->tenants, a);
			continue;
		}
		if (n == VAD_METRICS_ARENAS_MAX) {
			(*omitted)++;
			vad_arena_unpin(svc->tenants, a);
			continue;
		}
		struct arena_fig *f = &figs[n++];
		vad_metrics_escape(a->conf.name, f->label, sizeof(f->label));
		va_get_stats(a->vs, &f->st);
		f->resident = vad_arena_resident_bytes(a);
		f->committed = vad_arena_committed_bytes(a, &f->st);
		f->commit_failures = __atomic_load_n(&a->commit_failures, __ATOMIC_RELAXED);
		vad__arena_stats__init(&f->wait);
		vad_waitq_fill_stats(&f->wait, svc, (unsigned)i);
		vad_arena_unpin(svc->tenants, a);
	}
	return n;
}

static void render_daemon(struct text *t, struct vad_service *svc, size_t n_arenas, size_t omitted)
{
	family(t, "vad_build_info", "gauge", "The daemon's version (the value is always 1).");
	put(t, "vad_build_info{version=\"%s\"} 1\n", VAD_DAEMON_VERSION);
	uint64_t start_ms = svc->start_realtime_ms;
	family(t, "vad_start_time_seconds", "gauge", "When the daemon started, since the epoch.");
	put(t, "vad_start_time_seconds %" PRIu64 ".%03u\n", start_ms / 1000,
	    (unsigned)(start_ms % 1000));
	family(t, "vad_sessions", "gauge", "Connected client sessions.");
	put(t, "vad_sessions %u\n", __atomic_load_n(&svc->reg->n_holders, __ATOMIC_RELAXED));
	family(t, "vad_share_tokens", "gauge", "Live share tokens.");
	put(t, "vad_share_tokens %" PRIu64 "\n", vad_registry_tokens(svc->reg));
	family(t, "vad_arenas", "gauge",
	       "Open arenas this text covers (tenant arenas included), shown or left out.");
	put(t, "vad_arenas %zu\n", n_arenas + omitted);
	family(t, "vad_metrics_arenas_omitted", "gauge",
	       "Arenas left out of this text (at most 256 are shown).");
	put(t, "vad_metrics_arenas_omitted %zu\n", omitted);
}

static void render_arenas(struct text *t, const struct arena_fig *figs, size_t n)
{
#define ARENA_FAMILY(name, type, help, value)                                                      \
	family(t, name, type, help);                                                               \
	for (size_t i = 0; i < n; i++) {                                                           \
		const struct arena_fig *f = &figs[i];                                              \
		put(t, "%s{arena=\"%s\"} %" PRIu64 "\n", name, f->label, (uint64_t)(value));       \
	}
	ARENA_FAMILIES(ARENA_FAMILY)
#undef ARENA_FAMILY
}

static void render_ops(struct text *t, const struct vad_op_stats_sum *sum)
{
	family(t, "vad_requests_total", "counter", "Requests handled, by operation.");
	for (unsigned i = 0; i < VAD_OPI_COUNT; i++)
		put(t, "vad_requests_total{op=\"%s\"} %" PRIu64 "\n",
		    vad_op_index_name((enum vad_op_index)i), sum->count[i]);
	family(t, "vad_request_errors_total", "counter",
	       "Requests answered with an error, by operation.");
	for (unsigned i = 0; i < VAD_OPI_COUNT; i++)
		put(t, "vad_request_errors_total{op=\"%s\"} %" PRIu64 "\n",
		    vad_op_index_name((enum vad_op_index)i), sum->errors[i]);
	family(t, "vad_errors_total", "counter", "Replies with an error, by error code.");
	for (int c = 1; c <= VAD_ERROR_MAX; c++)
		if (vad_error_known(c))
			put(t, "vad_errors_total{code=\"%s\"} %" PRIu64 "\n", vad_error_name(c),
			    sum->codes[c]);
	family(t, "vad_request_duration_seconds", "histogram",
	       "Time the daemon took to handle a request, by operation (the sum is estimated from "
	       "the buckets' middles).");
	/* The bounds' text once per rendering, not once per line. */
	char le[VAD_METRICS_LE_HIGH + 1][24];
	for (unsigned k = VAD_METRICS_LE_LOW; k <= VAD_METRICS_LE_HIGH; k++)
		snprintf(le[k], sizeof(le[k]), "%.10g", (double)((uint64_t)1 << k) / 1e9);
	for (unsigned i = 0; i < VAD_OPI_COUNT; i++) {
		const char *op = vad_op_index_name((enum vad_op_index)i);
		const struct vad_latency_sum *h = &sum->lat[i];
		uint64_t cum = 0, total = 0;
		double sum_s = 0;
		unsigned b = 0;
		for (unsigned k = VAD_METRICS_LE_LOW; k <= VAD_METRICS_LE_HIGH; k++) {
			/* 2^k ns is the upper bound of latency.h's bucket 4(k-1)+3. */
			for (; b <= 4 * (k - 1) + 3; b++)
				cum += h->counts[b];
			put(t,
			    "vad_request_duration_seconds_bucket{op=\"%s\",le=\"%s\"} %" PRIu64
			    "\n",
			    op, le[k], cum);
		}
		for (b = 0; b < VAD_LAT_BUCKETS; b++) {
			total += h->counts[b];
			sum_s += (double)h->counts[b] * (double)vad_latency_bucket_value(b) / 1e9;
		}
		put(t, "vad_request_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
		    op, total);
		put(t, "vad_request_duration_seconds_sum{op=\"%s\"} %.9g\n", op, sum_s);
		put(t, "vad_request_duration_seconds_count{op=\"%s\"} %" PRIu64 "\n", op, total);
	}
}

char *vad_metrics_render(struct vad_service *svc, vad_metrics_visible_fn visible, void *ctx,
			 size_t *len)
{
	struct text t = {.cap = 16384};
	t.buf = malloc(t.cap);
	struct arena_fig *figs = calloc(VAD_METRICS_ARENAS_MAX, sizeof(*figs));
	struct vad_op_stats_sum *sum = malloc(sizeof(*sum));
	if (!t.buf || !figs || !sum) {
		free(t.buf);
		free(figs);
		free(sum);
		return NULL;
	}
	t.buf[0] = '\0';
	size_t omitted;
	size_t n = collect_arenas(svc, visible, ctx, figs, &omitted);
	vad_op_stats_sum(svc->ops, sum);
	render_daemon(&t, svc, n, omitted);
	render_arenas(&t, figs, n);
	render_ops(&t, sum);
	free(figs);
	free(sum);
	if (t.failed) {
		free(t.buf);
		return NULL;
	}
	*len = t.len;
	return t.buf;
}
