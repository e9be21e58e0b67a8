/* saturate.h - sums of counters and byte totals that stop at UINT64_MAX instead of
 * wrapping: a figure that reads "as large as can be counted" stays true, a wrapped one lies. */
#ifndef VAD_SATURATE_H
#define VAD_SATURATE_H

#include <stdint.h>

/* a + b, held at UINT64_MAX. */
static inline uint64_t vad_sat_add(uint64_t a, uint64_t b)
{
	uint64_t sum;
	return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

/* *total += v, held at UINT64_MAX. */
static inline void vad_sat_add_into(uint64_t *total, uint64_t v)
{
	*total = vad_sat_add(*total, v);
}

#endif
