/*
 * bench_run.h - run one (workload, implementation, threads, held) combination.
 */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_impl.h"
#include "bench_lat.h"
#include "bench_workload.h"

struct bench_params {
	const struct bench_workload *wl;
	const struct bench_impl_ops *impl;
	unsigned threads;
	uint64_t held;	/* live areas kept through the loop, with holes between them */
	uint64_t loops; /* loop iterations per thread */
	uint64_t base, space_size, quantum;
	double max_seconds;    /* per-thread cap on the measured loop; 0 = none */
	unsigned sample_every; /* time one op in this many */
	uint64_t seed;
	unsigned ncpus;
};

struct bench_result {
	uint64_t ops;	    /* loop iterations done, all threads */
	uint64_t fails;	    /* failed allocations during the loop */
	uint64_t wall_ns;   /* first thread start to last thread end */
	uint64_t thread_ns; /* sum over threads of each one's loop time */
	uint64_t setup_ns;  /* workload setup + held setup + drain */
	uint64_t cpu_ns;    /* process CPU time over the loop, every thread (drain thread too) */
	bool capped;	    /* some thread hit max_seconds before its loops */
	struct bench_pct pct;
	struct bench_counters delta; /* counters over the measured loop */
	int error;		     /* 0, or the first VA_E* that made the run invalid */
	char errmsg[256];
};

/* Run it; returns 0, or -1 with r->errmsg set (the run's figures are then not valid). */
int bench_run(const struct bench_params *p, struct bench_result *r);

#endif
