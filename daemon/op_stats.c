/* op_stats.c - counters per operation and per error code; see op_stats.h. */
#include "op_stats.h"

#include <stdlib.h>
#include <string.h>

struct vad_op_stats *vad_op_stats_new(void)
{
	return calloc(1, sizeof(struct vad_op_stats));
}

void vad_op_stats_free(struct vad_op_stats *o)
{
	free(o);
}

enum vad_op_index vad_op_index_of(Vad__Request__OpCase op)
{
	switch (op) {
#define OP_CASE(op, name, call)                                                                    \
	case VAD__REQUEST__OP_##op:                                                                \
		return VAD_OPI_##op;
		VAD_OPS(OP_CASE)
#undef OP_CASE
	default:
		return VAD_OPI_OTHER;
	}
}

const char *vad_op_index_name(enum vad_op_index i)
{
	static const char *const names[VAD_OPI_COUNT] = {
#define OP_NAME(op, name, call) [VAD_OPI_##op] = name,
	    VAD_OPS(OP_NAME)
#undef OP_NAME
		[VAD_OPI_OTHER] = "other",
	};
	return (unsigned)i < VAD_OPI_COUNT ? names[i] : "other";
}

void vad_op_stats_sum(const struct vad_op_stats *o, struct vad_op_stats_sum *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < VAD_OPI_COUNT; i++) {
		vad_latency_sum(&o->lat[i], &out->lat[i]);
		for (unsigned b = 0; b < VAD_LAT_BUCKETS; b++)
			out->count[i] += out->lat[i].counts[b];
	}
	for (unsigned sh = 0; sh < VAD_LAT_SHARDS; sh++) {
		for (unsigned i = 0; i < VAD_OPI_COUNT; i++)
			out->errors[i] +=
			    __atomic_load_n(&o->err[sh].op_errors[i], __ATOMIC_RELAXED);
		for (unsigned c = 0; c <= VAD_ERROR_MAX; c++)
			out->codes[c] += __atomic_load_n(&o->err[sh].codes[c], __ATOMIC_RELAXED);
	}
	/* The error counts are read after the histograms: never more errors than requests. */
	for (unsigned i = 0; i < VAD_OPI_COUNT; i++)
		if (out->errors[i] > out->count[i])
			out->errors[i] = out->count[i];
}
