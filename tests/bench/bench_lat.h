/*
 * bench_lat.h - per-thread latency samples and their percentiles.
 *
 * Each worker times one operation in every `every` with clock_gettime and keeps at
 * most `cap` samples (reservoir sampling past that), so the timing overhead stays a
 * small fraction of the loop and the memory stays bounded.
 */
#ifndef BENCH_LAT_H
#define BENCH_LAT_H

#include <stdint.h>

struct bench_lat {
	uint64_t *samples;
	uint64_t n;    /* samples kept */
	uint64_t seen; /* samples offered */
	uint64_t cap;
	uint64_t rng;
};

/* Latency percentiles in nanoseconds. */
struct bench_pct {
	uint64_t count, p50, p99, p999, max;
};

/* Prepare a recorder keeping at most cap samples; returns 0 or -1 (no memory). */
int bench_lat_init(struct bench_lat *l, uint64_t cap, uint64_t seed);

/* Offer one sample. */
void bench_lat_add(struct bench_lat *l, uint64_t ns);

/* Release the samples. */
void bench_lat_free(struct bench_lat *l);

/* Percentiles over the samples of n recorders (sorts them in place); 0 or -1 (no memory). */
int bench_lat_percentiles(struct bench_lat *ls, unsigned n, struct bench_pct *out);

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);

/* CPU time of the whole process (all threads) in nanoseconds. */
uint64_t bench_process_cpu_ns(void);

#endif
