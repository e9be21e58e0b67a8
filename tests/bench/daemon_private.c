/*
 * daemon_private.c - the touch matrix's baselines: the libvad driver's loop (get B ranges,
 * write every byte, give them back) on process-private memory, with malloc + free or with
 * mmap + munmap (a fresh anonymous mapping each time: every page faults, as a fresh range
 * of an arena does). The figures are what a range costs without any daemon.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "daemon_bench.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *get(enum db_mode m, size_t size)
{
	if (m == DB_MALLOC)
		return malloc(size);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void put(enum db_mode m, void *p, size_t size)
{
	if (m == DB_MALLOC)
		free(p);
	else
		munmap(p, size);
}

void db_private_driver(struct db_driver *d)
{
	const struct db_params *p = d->p;
	struct db_result *r = &d->r;
	unsigned B = p->batch;
	size_t *sizes = calloc(B, sizeof(*sizes));
	void **ptrs = calloc(B, sizeof(*ptrs));
	uint64_t rng = p->seed * 0x9e3779b97f4a7c15ull + d->index + 1;
	bool ok = sizes && ptrs;
	if (!ok)
		db_fail(r, "out of memory");
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
		for (unsigned i = 0; i < B; i++) {
			ptrs[i] = get(p->mode, sizes[i]);
			if (!ptrs[i]) {
				db_fail(r, "%s of %zu bytes failed",
					p->mode == DB_MALLOC ? "malloc" : "mmap", sizes[i]);
				d->t_end = d->t_start;
				goto out;
			}
		}
		uint64_t t1 = db_now_ns();
		if (p->touch)
			for (unsigned i = 0; i < B; i++) {
				memset(ptrs[i], 1, sizes[i]);
				__asm__ volatile("" : : "r"(ptrs[i]) : "memory");
			}
		uint64_t t2 = db_now_ns();
		for (unsigned i = 0; i < B; i++)
			put(p->mode, ptrs[i], sizes[i]);
		uint64_t t3 = db_now_ns();
		issued += 2;
		if (p->ops || t3 <= deadline) {
			db_hist_add(&r->alloc_lat, t1 - t0);
			db_hist_add(&r->all_lat, t1 - t0);
			db_hist_add(&r->all_lat, t3 - t2);
			r->allocs++;
			r->requests += 2;
			r->items += 2 * B;
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
