/*
 * op_stats.h - daemon-wide counters per operation (the rows of ops.h) and per error code (the
 * rows of proto/errors.h): requests, errors and a latency histogram per operation. Recording a
 * successful request is one relaxed atomic add (its latency bucket, in the thread's shard:
 * latency.h); a failed one adds to two more counters. Readers sum the shards.
 */
#ifndef VAD_OP_STATS_H
#define VAD_OP_STATS_H

#include <stdint.h>

#include "errors.h"
#include "latency.h"
#include "ops.h"
#include "vad.pb-c.h"

/* One index per row of VAD_OPS, then VAD_OPI_OTHER for requests that name no known
 * operation (undecodable, or an operation this daemon does not know). */
enum vad_op_index {
#define OP_INDEX(op, name, call) VAD_OPI_##op,
	VAD_OPS(OP_INDEX)
#undef OP_INDEX
	    VAD_OPI_OTHER,
	VAD_OPI_COUNT
};

struct vad_op_stats {
	struct vad_latency lat[VAD_OPI_COUNT]; /* a request's count is its histogram's sum */
	struct {
		uint64_t op_errors[VAD_OPI_COUNT];
		uint64_t codes[VAD_ERROR_MAX + 1];
	} err[VAD_LAT_SHARDS] __attribute__((aligned(64)));
};

/* A summed copy, for replies and the metrics text. */
struct vad_op_stats_sum {
	struct vad_latency_sum lat[VAD_OPI_COUNT];
	uint64_t count[VAD_OPI_COUNT];
	uint64_t errors[VAD_OPI_COUNT];
	uint64_t codes[VAD_ERROR_MAX + 1];
};

/* A zeroed table (calloc'd: untouched shards cost no resident memory), or NULL. */
struct vad_op_stats *vad_op_stats_new(void);

/* Free it. */
void vad_op_stats_free(struct vad_op_stats *o);

/* The index of a request's operation case (VAD_OPI_OTHER for one ops.h lacks). */
enum vad_op_index vad_op_index_of(Vad__Request__OpCase op);

/* The name of an index ("alloc", ..., "other"). */
const char *vad_op_index_name(enum vad_op_index i);

/* Count one request of operation i that took ns and ended with error (0: OK). */
static inline void vad_op_stats_record(struct vad_op_stats *o, enum vad_op_index i, uint64_t ns,
				       int error)
{
	vad_latency_record(&o->lat[i], ns);
	if (__builtin_expect(error != 0, 0)) {
		unsigned sh = vad_latency_shard();
		__atomic_add_fetch(&o->err[sh].op_errors[i], 1, __ATOMIC_RELAXED);
		if (error > 0 && error <= VAD_ERROR_MAX)
			__atomic_add_fetch(&o->err[sh].codes[error], 1, __ATOMIC_RELAXED);
	}
}

/* Count an error of operation i whose request was counted already (a waiting alloc's). */
static inline void vad_op_stats_error(struct vad_op_stats *o, enum vad_op_index i, int error)
{
	unsigned sh = vad_latency_shard();
	__atomic_add_fetch(&o->err[sh].op_errors[i], 1, __ATOMIC_RELAXED);
	if (error > 0 && error <= VAD_ERROR_MAX)
		__atomic_add_fetch(&o->err[sh].codes[error], 1, __ATOMIC_RELAXED);
}

/* Sum every shard into out. */
void vad_op_stats_sum(const struct vad_op_stats *o, struct vad_op_stats_sum *out);

#endif
