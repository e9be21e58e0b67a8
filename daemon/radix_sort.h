/*
 * radix_sort.h - a stable LSD radix sort of (key, value) pairs by key, for the restore's and the
 * registry check's passes over millions of ranges in address order (a comparison sort of a
 * million records took 80-100 ms; this takes a few passes over the array, none for digits
 * every key shares, and none at all when the keys are in order already).
 */
#ifndef VAD_RADIX_SORT_H
#define VAD_RADIX_SORT_H

#include <stddef.h>
#include <stdint.h>

struct vad_sort_pair {
	uint64_t key, val;
};

/* Sort a[0..n) by key, stably, with tmp[0..n) as scratch; returns whichever of a and tmp holds
 * the result. */
struct vad_sort_pair *vad_radix_sort(struct vad_sort_pair *a, struct vad_sort_pair *tmp, size_t n);

#endif
