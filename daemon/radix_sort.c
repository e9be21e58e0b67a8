/* radix_sort.c - stable LSD radix sort of (key, value) pairs; see radix_sort.h. */
#include "radix_sort.h"

#include <stdbool.h>
#include <string.h>

#define DIGIT_BITS 11 /* 2048 counters: 16 KiB, in L1 with room to spare */
#define DIGITS	   (1u << DIGIT_BITS)

struct vad_sort_pair *vad_radix_sort(struct vad_sort_pair *a, struct vad_sort_pair *tmp, size_t n)
{
	bool sorted = true;
	uint64_t any = 0, all = ~0ull;
	for (size_t i = 0; i < n; i++) {
		any |= a[i].key;
		all &= a[i].key;
		if (i && a[i].key < a[i - 1].key)
			sorted = false;
	}
	if (sorted)
		return a;
	uint64_t differ = any ^ all; /* a digit no key differs in needs no pass */
	static __thread size_t count[DIGITS];
	for (unsigned shift = 0; shift < 64; shift += DIGIT_BITS) {
		if (!((differ >> shift) & (DIGITS - 1)))
			continue;
		memset(count, 0, sizeof(count));
		for (size_t i = 0; i < n; i++)
			count[(a[i].key >> shift) & (DIGITS - 1)]++;
		size_t sum = 0;
		for (unsigned d = 0; d < DIGITS; d++) {
			size_t c = count[d];
			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(a[i].key >> shift) & (DIGITS - 1)]++] = a[i];
		struct vad_sort_pair *t = a;
		a = tmp;
		tmp = t;
	}
	return a;
}
