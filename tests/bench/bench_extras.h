/*
 * bench_extras.h - what every vabench run reports once per implementation besides the
 * loops: whether an exact-size hole is used, and metadata bytes per live range.
 */
#ifndef BENCH_EXTRAS_H
#define BENCH_EXTRAS_H

#include <stdint.h>
#include <stdio.h>

#include "bench_impl.h"

/* One line per implementation on f: the 97-quanta hole test and, measured in a child
 * process each (a fresh heap), malloc'd bytes per live range at live live ranges. */
void bench_extras(FILE *f, const struct bench_impl_ops *const *impls, unsigned n, uint64_t quantum,
		  uint64_t base, uint64_t space_size, uint64_t live);

#endif
