/*
 * latency.h - allocation latency histograms: log-linear buckets (4 per power of two), sharded
 * by thread so workers never share a counter's cache line. Recording is one relaxed atomic add;
 * readers sum the shards and take percentiles over the difference of two sums.
 */
#ifndef VAD_LATENCY_H
#define VAD_LATENCY_H

#include <stdint.h>

#define VAD_LAT_SHARDS	16
#define VAD_LAT_BUCKETS 256

struct vad_latency {
	struct {
		uint64_t counts[VAD_LAT_BUCKETS];
	} shard[VAD_LAT_SHARDS] __attribute__((aligned(64)));
};

/* Counts summed over the shards, for percentiles. */
struct vad_latency_sum {
	uint64_t counts[VAD_LAT_BUCKETS];
};

/* Make the calling thread record into shard n (mod VAD_LAT_SHARDS); others get one on first use. */
void vad_latency_set_shard(unsigned n);

/* Nanoseconds on the monotonic clock. */
uint64_t vad_now_ns(void);

/* The calling thread's shard (assigned on first use). */
unsigned vad_latency_shard(void);

/* The exclusive upper bound in nanoseconds of bucket b: it counts values below it and at or
 * above the previous bucket's bound (UINT64_MAX for the last). */
uint64_t vad_latency_bucket_upper(unsigned b);

/* A representative value of bucket b (the middle of its range), in nanoseconds. */
uint64_t vad_latency_bucket_value(unsigned b);

/* Count one operation that took ns nanoseconds. */
void vad_latency_record(struct vad_latency *l, uint64_t ns);

/* Sum every shard into out. */
void vad_latency_sum(const struct vad_latency *l, struct vad_latency_sum *out);

/* The p-th quantile (0 < p <= 1) in nanoseconds of the operations counted in now but not in
 * before (before may be NULL); 0 when there were none. *n gets their number (may be NULL). */
uint64_t vad_latency_quantile(const struct vad_latency_sum *now,
			      const struct vad_latency_sum *before, double p, uint64_t *n);

#endif
