/*
 * bench_lat.c - latency sampling and percentiles.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_lat.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t bench_process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bench_lat_init(struct bench_lat *l, uint64_t cap, uint64_t seed)
{
	memset(l, 0, sizeof(*l));
	l->samples = malloc(cap * sizeof(*l->samples));
	if (!l->samples)
		return -1;
	l->cap = cap;
	l->rng = seed | 1;
	return 0;
}

void bench_lat_add(struct bench_lat *l, uint64_t ns)
{
	l->seen++;
	if (l->n < l->cap) {
		l->samples[l->n++] = ns;
		return;
	}
	/* Reservoir: the new sample replaces a kept one with probability cap / seen. */
	l->rng ^= l->rng << 13;
	l->rng ^= l->rng >> 7;
	l->rng ^= l->rng << 17;
	uint64_t j = l->rng % l->seen;
	if (j < l->cap)
		l->samples[j] = ns;
}

void bench_lat_free(struct bench_lat *l)
{
	free(l->samples);
	l->samples = NULL;
	l->n = l->cap = 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t rank(const uint64_t *v, uint64_t n, double q)
{
	uint64_t i = (uint64_t)(q * (double)(n - 1) + 0.5);

	return v[i < n ? i : n - 1];
}

int bench_lat_percentiles(struct bench_lat *ls, unsigned n, struct bench_pct *out)
{
	uint64_t total = 0, k = 0, *all;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < n; i++)
		total += ls[i].n;
	if (total == 0)
		return 0;
	all = malloc(total * sizeof(*all));
	if (!all)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		memcpy(all + k, ls[i].samples, ls[i].n * sizeof(*all));
		k += ls[i].n;
	}
	qsort(all, total, sizeof(*all), cmp_u64);
	out->count = total;
	out->p50 = rank(all, total, 0.50);
	out->p99 = rank(all, total, 0.99);
	out->p999 = rank(all, total, 0.999);
	out->max = all[total - 1];
	free(all);
	return 0;
}
