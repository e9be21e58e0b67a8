/* top_latency.c - vactl top's latency pane: the main operations over the samples kept. */
#include <stdio.h>
#include <string.h>

#include "lathist.h"
#include "top.h"

/* The operations a client's work is made of, shown first, in this order. */
static const char *const main_ops[] = {"alloc", "free", "share", "attach", "unshare", "map-arena"};
#define N_MAIN (sizeof(main_ops) / sizeof(main_ops[0]))

static int rank(const char *name)
{
	for (size_t i = 0; i < N_MAIN; i++)
		if (strcmp(main_ops[i], name) == 0)
			return (int)i;
	return (int)N_MAIN;
}

void top_latency_pane(struct vactl_fit **t, char *note, size_t len, const struct top_samples *s)
{
	static char head[32];
	static struct vactl_fit_col cols[] = {
	    {head, 0},	 {"REQUESTS", 80}, {"REQ/S", 70},  {"P50", 95},
	    {"P99", 94}, {"MAX", 60},	   {"ERRORS", 50},
	};
	const struct top_sample *now = top_samples_last(s), *then = top_samples_first(s);
	*t = NULL;
	if (!now->stats->n_ops) {
		snprintf(note, len, "LATENCY: this daemon reports no per-operation latency");
		return;
	}
	/* one sample, or a daemon restarted since the first: the requests since its start */
	if (then == now || then->stats->uptime_ms > now->stats->uptime_ms)
		then = NULL;
	uint64_t ms = then ? now->at_ms - then->at_ms : now->stats->uptime_ms;
	if (then)
		snprintf(head, sizeof(head), "LATENCY %.1fs", (double)ms / 1000.0);
	else
		snprintf(head, sizeof(head), "LATENCY since start");
	*t = vactl_fit_new(sizeof(cols) / sizeof(cols[0]), cols, 10);
	/* main operations first, then the rest in the daemon's order; only those that ran */
	for (int r = 0; r <= (int)N_MAIN; r++)
		for (size_t i = 0; i < now->stats->n_ops; i++) {
			const struct vad_op_counts *op = &now->stats->ops[i];
			if (rank(op->name) != r)
				continue;
			const struct vad_op_counts *old = NULL;
			for (size_t k = 0; then && k < then->stats->n_ops; k++)
				if (strcmp(then->stats->ops[k].name, op->name) == 0)
					old = &then->stats->ops[k];
			struct vactl_hist hn = {op->n_buckets, op->bucket_below_ns,
						op->bucket_count};
			struct vactl_hist ho = {old ? old->n_buckets : 0,
						old ? old->bucket_below_ns : NULL,
						old ? old->bucket_count : NULL};
			struct vactl_lat l;
			vactl_lat_between(&hn, &ho, &l);
			uint64_t count = old && op->count >= old->count ? op->count - old->count
					 : old				? 0
									: op->count;
			uint64_t errs = old && op->errors >= old->errors ? op->errors - old->errors
					: old				 ? 0
									 : op->errors;
			if (!count && r >= (int)N_MAIN)
				continue; /* an operation nobody used lately */
			if (!count && r > 1)
				continue; /* alloc and free always show */
			char n[24], rate[24], p50[24], p99[24], max[24], e[24];
			snprintf(n, sizeof(n), "%llu", (unsigned long long)count);
			snprintf(rate, sizeof(rate), "%.0f", top_rate(count, 0, ms));
			snprintf(e, sizeof(e), "%llu", (unsigned long long)errs);
			const char *cells[] = {op->name,
					       n,
					       rate,
					       vactl_fmt_ns(l.p50_ns, p50, sizeof(p50)),
					       vactl_fmt_ns(l.p99_ns, p99, sizeof(p99)),
					       vactl_fmt_ns(l.max_ns, max, sizeof(max)),
					       e};
			vactl_fit_row(*t, cells);
		}
}
