/*
 * daemon_libvad.c - the same load through the real client library, for honesty: every
 * connection is one vad_client shared by P threads (libvad pipelines calls across threads),
 * each thread alternating alloc (or alloc_batch of B) and free (free_batch) with blocking
 * calls. Pointers come back mapped, so --touch writes through the library's own mapping
 * (every byte), and --populate asks for prefaulted ranges (VAD_POPULATE).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_bench.h"
#include "vad.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Write the whole range, as a user filling what it got would. */
static void touch(void *ptr, size_t size)
{
	memset(ptr, 1, size);
	__asm__ volatile("" : : "r"(ptr) : "memory"); /* the writes are not dead */
}

void db_libvad_driver(struct db_driver *d)
{
	const struct db_params *p = d->p;
	struct db_result *r = &d->r;
	vad_client *c = d->client;
	unsigned B = p->batch;
	size_t *sizes = calloc(B, sizeof(*sizes));
	void **ptrs = calloc(B, sizeof(*ptrs));
	uint64_t rng = p->seed * 0x9e3779b97f4a7c15ull + d->index + 1;
	bool ok = sizes && ptrs && c;
	if (!ok)
		db_fail(r, c ? "out of memory" : "no client connection");

	pthread_barrier_wait(d->barrier);
	if (!ok)
		goto out;
	uint64_t cpu0 = thread_cpu_ns();
	d->t_start = db_now_ns();
	uint64_t deadline = p->ops ? UINT64_MAX : d->t_start + (uint64_t)(p->seconds * 1e9);
	uint64_t last = d->t_start, issued = 0;
	while (p->ops ? issued < p->ops : last < deadline) {
		uint64_t size, align = 0, a0;
		for (unsigned i = 0; i < B; i++) {
			p->shape->next(p->unit, &rng, &size, i ? &a0 : &align);
			sizes[i] = (size_t)size;
		}
		uint64_t t0 = db_now_ns();
		unsigned flags = p->populate ? VAD_POPULATE : 0;
		int rc = B == 1
			     ? vad_alloc_flags(c, NULL, sizes[0], (size_t)align, flags, &ptrs[0])
			     : vad_alloc_batch_flags(c, NULL, B, sizes, (size_t)align, flags, ptrs);
		uint64_t t1 = db_now_ns();
		if (rc != VAD_OK) {
			r->errors++;
			db_fail(r, "alloc failed: %s (%s)", vad_strerror(rc), vad_last_error(c));
			break;
		}
		if (p->touch)
			for (unsigned i = 0; i < B; i++)
				touch(ptrs[i], sizes[i]);
		uint64_t t2 = db_now_ns();
		rc = B == 1 ? vad_free(c, ptrs[0]) : vad_free_batch(c, B, ptrs);
		uint64_t t3 = db_now_ns();
		if (rc != VAD_OK) {
			r->errors++;
			db_fail(r, "free failed: %s (%s)", vad_strerror(rc), vad_last_error(c));
			break;
		}
		issued += 2;
		if (p->ops || t1 <= deadline) {
			db_hist_add(&r->alloc_lat, t1 - t0);
			db_hist_add(&r->all_lat, t1 - t0);
			r->allocs++;
			r->requests++;
			r->items += B;
		}
		if (p->ops || t3 <= deadline) {
			db_hist_add(&r->all_lat, t3 - t2);
			r->requests++;
			r->items += B;
		}
		last = t3;
	}
	d->t_end = p->ops ? last : deadline;
	if (d->t_end < d->t_start)
		d->t_end = d->t_start;
	d->r.cpu_ns = thread_cpu_ns() - cpu0;
out:
	free(sizes);
	free(ptrs);
}
