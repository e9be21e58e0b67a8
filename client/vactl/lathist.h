/*
 * lathist.h - latency between two readings of a cumulative histogram (lathist.c), as the
 * daemon sends one per operation: count[i] requests took less than below[i] ns; a bound one
 * reading lacks has the count of its next lower bound. Depends on nothing else of vactl.
 */
#ifndef VACTL_LATHIST_H
#define VACTL_LATHIST_H

#include <stddef.h>
#include <stdint.h>

/* One cumulative histogram reading. */
struct vactl_hist {
	size_t n;
	const uint64_t *below; /* ascending bounds, ns */
	const uint64_t *count; /* requests below each bound */
};

/* The requests between two readings and their latency: each quantile is the bound of the
 * first bucket that reaches it (so "p99 <= that"), 0 when there were none. */
struct vactl_lat {
	uint64_t count;
	uint64_t p50_ns, p99_ns, max_ns;
};

/* The requests of now that old had not seen (old NULL or empty: all of now's). */
void vactl_lat_between(const struct vactl_hist *now, const struct vactl_hist *old,
		       struct vactl_lat *out);

#endif
