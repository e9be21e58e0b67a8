/* lathist.c - latency quantiles from the difference of two cumulative histograms. */
#include <string.h>

#include "lathist.h"

/* old's count below bound b: the count at its highest bound <= b (0 below its first). */
static uint64_t count_below(const struct vactl_hist *h, uint64_t b, size_t *j)
{
	while (*j < h->n && h->below[*j] <= b)
		(*j)++;
	return *j ? h->count[*j - 1] : 0;
}

/* The first bound of now whose count (less old's) reaches want. */
static uint64_t bound_reaching(const struct vactl_hist *now, const struct vactl_hist *old,
			       uint64_t want)
{
	size_t j = 0;
	uint64_t seen = 0;
	for (size_t i = 0; i < now->n; i++) {
		uint64_t before = old ? count_below(old, now->below[i], &j) : 0;
		uint64_t d = now->count[i] > before ? now->count[i] - before : 0;
		seen = d > seen ? d : seen; /* coarser bounds in one reading never make it fall */
		if (seen >= want)
			return now->below[i];
	}
	return now->n ? now->below[now->n - 1] : 0;
}

void vactl_lat_between(const struct vactl_hist *now, const struct vactl_hist *old,
		       struct vactl_lat *out)
{
	memset(out, 0, sizeof(*out));
	if (old && !old->n)
		old = NULL;
	if (!now->n)
		return;
	size_t j = 0;
	uint64_t last = now->count[now->n - 1];
	uint64_t before = old ? count_below(old, now->below[now->n - 1], &j) : 0;
	out->count = last > before ? last - before : 0;
	if (!out->count)
		return;
	/* the smallest count that is at least q of the total, rounded up */
	out->p50_ns = bound_reaching(now, old, (out->count + 1) / 2);
	out->p99_ns = bound_reaching(now, old, out->count - out->count / 100);
	out->max_ns = bound_reaching(now, old, out->count);
}
