/*
 * bench_selftest.h - correctness check of every implementation (vabench --selftest).
 */
#ifndef BENCH_SELFTEST_H
#define BENCH_SELFTEST_H

#include <stdint.h>

#include "bench_impl.h"

/* Run the self-test on one implementation (or all if only is NULL); prints one line per
 * implementation and returns 0 if all passed, 1 otherwise. */
int bench_selftest(const struct bench_impl_ops *only, uint64_t seed);

#endif
