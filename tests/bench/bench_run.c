/*
 * bench_run.c - one measured run: N workers released together by a barrier (like
 * test_vmalloc's nr_threads behind its rw-semaphore), each doing the workload's loop
 * against one shared instance of the implementation.
 *
 * Phases: every worker runs the workload's setup; the main thread then makes the
 * --held fragmentation (2N areas of 1..16 quanta, every other one freed, so N live
 * areas with N holes between them) and drains, so the loop starts from a quiet space
 * whose holes are real; then all workers start the loop at once. Held areas are made
 * after the setups so the holes are still there when the loop starts.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"

#define LAT_CAP (1u << 18) /* samples kept per thread */

/* Each worker in cache lines of its own: its latency samples (written every few ops) shared
 * a line with the next worker's context (read every op), which cost two threads 9% more CPU
 * per op on fix_size, a cost of the bench, not of what it measures. */
struct worker {
	pthread_t thread;
	const struct bench_params *p;
	pthread_barrier_t *barrier;
	struct bench_wctx ctx;
	struct bench_lat lat;
	uint64_t start_ns, end_ns, ops;
	bool capped;
	int setup_rc;
} __attribute__((aligned(64)));

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct bench_params *p = w->p;
	const struct bench_workload *wl = p->wl;
	struct bench_wctx *c = &w->ctx;
	uint64_t i, t0, t1, deadline, mask;
	unsigned every = p->sample_every ? p->sample_every : 1;

	if (p->impl->thread_start)
		p->impl->thread_start(c->h, c->tid);
	w->setup_rc = wl->setup ? wl->setup(c) : 0;
	pthread_barrier_wait(w->barrier); /* setups done; main makes held areas */
	pthread_barrier_wait(w->barrier); /* go */

	w->start_ns = bench_now_ns();
	deadline = p->max_seconds > 0 ? w->start_ns + (uint64_t)(p->max_seconds * 1e9) : UINT64_MAX;
	mask = every;
	for (i = 0; i < p->loops && !w->setup_rc; i++) {
		if (--mask) {
			wl->op(c, i);
			continue;
		}
		mask = every;
		t0 = bench_now_ns();
		wl->op(c, i);
		t1 = bench_now_ns();
		bench_lat_add(&w->lat, t1 - t0);
		if (t1 > deadline) {
			w->capped = i + 1 < p->loops;
			i++;
			break;
		}
	}
	w->end_ns = bench_now_ns();
	w->ops = i;
	pthread_barrier_wait(w->barrier); /* everyone stopped timing */
	pthread_barrier_wait(w->barrier); /* main has read the counters */
	if (wl->teardown)
		wl->teardown(c);
	return NULL;
}

/* The fragmentation of --held: returns 0 or a VA_E* code. */
static int make_held(const struct bench_params *p, void *h, char *msg, size_t msg_len)
{
	uint64_t n = p->held * 2, rng = p->seed * 2654435761u + 12345, *addrs;
	int rc = VA_OK;

	if (!n)
		return VA_OK;
	addrs = malloc(n * sizeof(*addrs));
	if (!addrs) {
		snprintf(msg, msg_len, "no memory for %llu held addresses", (unsigned long long)n);
		return VA_ENOMEM;
	}
	for (uint64_t i = 0; i < n && !rc; i++) {
		rc = p->impl->alloc(h, (bench_rand(&rng) % 16 + 1) * p->quantum, 0, &addrs[i]);
		if (rc)
			snprintf(msg, msg_len, "held area %llu of %llu: %s", (unsigned long long)i,
				 (unsigned long long)n, va_strerror(rc));
	}
	for (uint64_t i = 1; i < n && !rc; i += 2) {
		rc = p->impl->free(h, addrs[i]);
		if (rc)
			snprintf(msg, msg_len, "freeing held area: %s", va_strerror(rc));
	}
	free(addrs); /* the kept areas go when the instance is destroyed */
	return rc;
}

int bench_run(const struct bench_params *p, struct bench_result *r)
{
	struct bench_space_cfg cfg = {
	    .base = p->base,
	    .size = p->space_size,
	    .quantum = p->quantum,
	};
	struct bench_counters before, after;
	pthread_barrier_t barrier;
	struct worker *ws;
	struct bench_lat *lats;
	uint64_t setup_start = bench_now_ns(), first = UINT64_MAX, last = 0, cpu0;
	unsigned started = 0;
	void *h;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = p->impl->create(&cfg, &h);
	if (rc) {
		snprintf(r->errmsg, sizeof(r->errmsg), "%s: create: %s", p->impl->name,
			 va_strerror(rc));
		r->error = rc;
		return -1;
	}
	ws = aligned_alloc(_Alignof(struct worker), p->threads * sizeof(*ws));
	if (ws)
		memset(ws, 0, p->threads * sizeof(*ws));
	lats = calloc(p->threads, sizeof(*lats));
	if (!ws || !lats) {
		free(ws);
		free(lats);
		p->impl->destroy(h);
		snprintf(r->errmsg, sizeof(r->errmsg), "no memory for %u workers", p->threads);
		r->error = VA_ENOMEM;
		return -1;
	}
	pthread_barrier_init(&barrier, NULL, p->threads + 1);
	for (unsigned t = 0; t < p->threads; t++) {
		struct worker *w = &ws[t];

		w->p = p;
		w->barrier = &barrier;
		w->ctx = (struct bench_wctx){
		    .ops = p->impl,
		    .h = h,
		    .quantum = p->quantum,
		    .tid = t,
		    .ncpus = p->ncpus,
		    .loops = p->loops,
		    .rng = (p->seed + 1) * 0x9e3779b97f4a7c15ull + t * 0x632be59bd9b4e019ull,
		};
		if (bench_lat_init(&w->lat, LAT_CAP, w->ctx.rng)) {
			snprintf(r->errmsg, sizeof(r->errmsg), "no memory for latency samples");
			r->error = VA_ENOMEM;
			break;
		}
	}
	/* A barrier cannot shrink, so a missing worker would hang the others: start all or none. */
	for (unsigned t = 0; t < p->threads && !r->error; t++) {
		if (pthread_create(&ws[t].thread, NULL, worker_main, &ws[t])) {
			snprintf(r->errmsg, sizeof(r->errmsg), "cannot start worker %u", t);
			r->error = VA_ENOMEM;
			break;
		}
		started++;
	}
	if (r->error) {
		/* Workers already started wait at the first barrier forever; only exit saves us. */
		if (started) {
			fprintf(stderr, "vabench: %s\n", r->errmsg);
			exit(2);
		}
		goto out;
	}

	pthread_barrier_wait(&barrier); /* setups done */
	for (unsigned t = 0; t < p->threads; t++)
		if (ws[t].setup_rc && !r->error) {
			r->error = ws[t].setup_rc;
			snprintf(r->errmsg, sizeof(r->errmsg), "%s setup (thread %u): %s",
				 p->wl->name, t, va_strerror(ws[t].setup_rc));
		}
	if (!r->error) {
		if (p->impl->thread_start)
			p->impl->thread_start(h, p->threads); /* the main thread's own home */
		rc = make_held(p, h, r->errmsg, sizeof(r->errmsg));
		if (rc)
			r->error = rc;
	}
	if (p->impl->quiesce)
		p->impl->quiesce(h);
	p->impl->counters(h, &before);
	r->setup_ns = bench_now_ns() - setup_start;
	if (r->error) /* workers see setup_rc or still run: make them skip the loop */
		for (unsigned t = 0; t < p->threads; t++)
			ws[t].setup_rc = ws[t].setup_rc ? ws[t].setup_rc : r->error;
	cpu0 = bench_process_cpu_ns();
	pthread_barrier_wait(&barrier); /* go */
	pthread_barrier_wait(&barrier); /* stopped */
	r->cpu_ns = bench_process_cpu_ns() - cpu0;
	p->impl->counters(h, &after);
	pthread_barrier_wait(&barrier); /* teardowns may start */
	for (unsigned t = 0; t < p->threads; t++)
		pthread_join(ws[t].thread, NULL);

	for (unsigned t = 0; t < p->threads; t++) {
		struct worker *w = &ws[t];

		r->ops += w->ops;
		r->fails += w->ctx.fails;
		r->thread_ns += w->end_ns - w->start_ns;
		r->capped |= w->capped;
		if (w->start_ns < first)
			first = w->start_ns;
		if (w->end_ns > last)
			last = w->end_ns;
		if (w->ctx.error && !r->error) {
			r->error = w->ctx.error;
			snprintf(r->errmsg, sizeof(r->errmsg), "%s: free failed in thread %u: %s",
				 p->impl->name, t, va_strerror(w->ctx.error));
		}
		lats[t] = w->lat;
	}
	r->wall_ns = last > first ? last - first : 0;
	if (bench_lat_percentiles(lats, p->threads, &r->pct) && !r->error) {
		r->error = VA_ENOMEM;
		snprintf(r->errmsg, sizeof(r->errmsg), "no memory for percentiles");
	}
	r->delta = (struct bench_counters){
	    .has_va = after.has_va,
	    .allocs = after.allocs - before.allocs,
	    .frees = after.frees - before.frees,
	    .fails = after.fails - before.fails,
	    .drains = after.drains - before.drains,
	    .release_calls = after.release_calls - before.release_calls,
	    .released_bytes = after.released_bytes - before.released_bytes,
	    .pool_hits = after.pool_hits - before.pool_hits,
	    .zero_calls = after.zero_calls - before.zero_calls,
	};
	if (!r->error) {
		char msg[200] = "";

		if (p->impl->quiesce)
			p->impl->quiesce(h);
		rc = p->impl->check(h, msg, sizeof(msg));
		if (rc) {
			r->error = rc;
			snprintf(r->errmsg, sizeof(r->errmsg), "invariant check after the run: %s",
				 msg);
		}
	}
out:
	for (unsigned t = 0; t < p->threads; t++)
		bench_lat_free(&ws[t].lat);
	pthread_barrier_destroy(&barrier);
	free(ws);
	free(lats);
	p->impl->destroy(h);
	return r->error ? -1 : 0;
}
