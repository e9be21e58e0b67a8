/*
 * bench_workload.h - the loops of Linux's lib/test_vmalloc.c, in quanta.
 *
 * A workload has an untimed setup (the areas the kernel test allocates before its
 * measured loop), an op (one pass of the kernel's loop body: the unit ns_per_op is
 * measured in) and a teardown that frees what setup kept.
 */
#ifndef BENCH_WORKLOAD_H
#define BENCH_WORKLOAD_H

#include <stdint.h>

#include "bench_impl.h"

/* One worker's view of a run. */
struct bench_wctx {
	const struct bench_impl_ops *ops;
	void *h;
	uint64_t quantum;
	unsigned tid, ncpus;
	uint64_t loops; /* loop count of this run (congruent sizes its batch from it) */
	uint64_t rng;
	uint64_t fails; /* allocations that returned an error */
	int error;	/* first unexpected error (a free failing), 0 if none */
	void *state;	/* owned by the workload */
};

struct bench_workload {
	const char *name;
	const char *desc;
	/* Untimed preparation; returns 0, or a VA_E* code that aborts the run. May be NULL. */
	int (*setup)(struct bench_wctx *c);
	/* One iteration i of the measured loop. */
	void (*op)(struct bench_wctx *c, uint64_t i);
	/* Free what setup and the loop still hold. May be NULL. */
	void (*teardown)(struct bench_wctx *c);
};

/* Every workload, NULL-terminated, in the kernel's order. */
extern const struct bench_workload *const bench_workloads[];

/* The workload called name, or NULL. */
const struct bench_workload *bench_workload_find(const char *name);

/* xorshift64 step: the bench's cheap per-thread random numbers. */
static inline uint64_t bench_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

#endif
