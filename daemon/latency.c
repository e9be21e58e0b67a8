/* latency.c - sharded log-linear latency histograms; see latency.h. */
#include "latency.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

static __thread int my_shard = -1;
static unsigned next_shard;

void vad_latency_set_shard(unsigned n)
{
	my_shard = (int)(n % VAD_LAT_SHARDS);
}

uint64_t vad_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Bucket of a value: exact below 4, else 4 sub-buckets per power of two. */
static unsigned bucket_of(uint64_t v)
{
	if (v < 4)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	return e * 4 + (unsigned)((v >> (e - 2)) & 3);
}

uint64_t vad_latency_bucket_value(unsigned b)
{
	if (b < 8)
		return b < 4 ? b : (uint64_t)(4 + (b - 4)); /* buckets 4..7 are never used */
	unsigned e = b / 4, sub = b % 4;
	uint64_t low = (uint64_t)(4 + sub) << (e - 2);
	uint64_t width = (uint64_t)1 << (e - 2);
	return low + width / 2;
}

uint64_t vad_latency_bucket_upper(unsigned b)
{
	if (b < 4)
		return b + 1;
	if (b < 8)
		return 4; /* buckets 4..7 are never used: empty ranges at 4 */
	unsigned e = b / 4, sub = b % 4;
	if (e >= 63)
		return UINT64_MAX; /* (5 + sub) << 61 would not fit */
	return (uint64_t)(5 + sub) << (e - 2);
}

unsigned vad_latency_shard(void)
{
	if (my_shard < 0)
		my_shard =
		    (int)(__atomic_fetch_add(&next_shard, 1, __ATOMIC_RELAXED) % VAD_LAT_SHARDS);
	return (unsigned)my_shard;
}

void vad_latency_record(struct vad_latency *l, uint64_t ns)
{
	if (my_shard < 0)
		vad_latency_shard();
	__atomic_add_fetch(&l->shard[my_shard].counts[bucket_of(ns)], 1, __ATOMIC_RELAXED);
}

void vad_latency_sum(const struct vad_latency *l, struct vad_latency_sum *out)
{
	for (unsigned b = 0; b < VAD_LAT_BUCKETS; b++) {
		uint64_t s = 0;
		for (unsigned i = 0; i < VAD_LAT_SHARDS; i++)
			s += __atomic_load_n(&l->shard[i].counts[b], __ATOMIC_RELAXED);
		out->counts[b] = s;
	}
}

uint64_t vad_latency_quantile(const struct vad_latency_sum *now,
			      const struct vad_latency_sum *before, double p, uint64_t *n)
{
	uint64_t total = 0;
	for (unsigned b = 0; b < VAD_LAT_BUCKETS; b++)
		total += now->counts[b] - (before ? before->counts[b] : 0);
	if (n)
		*n = total;
	if (!total)
		return 0;
	if (p > 1)
		p = 1;
	uint64_t rank = (uint64_t)(p * (double)total);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < VAD_LAT_BUCKETS; b++) {
		seen += now->counts[b] - (before ? before->counts[b] : 0);
		if (seen >= rank)
			return vad_latency_bucket_value(b);
	}
	return vad_latency_bucket_value(VAD_LAT_BUCKETS - 1);
}
