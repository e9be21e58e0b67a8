/* top_latency.c - vactl top's latency figures: the main operations over the samples kept. */
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

static uint64_t since(uint64_t now, uint64_t before)
{
	return now >= before ? now - before : 0;
}

size_t top_latency_rows(const struct top_samples *s, struct top_lat_row *out, size_t cap,
			uint64_t *window_ms)
{
	const struct top_sample *now = top_samples_last(s), *then = top_samples_first(s);
	/* one sample, or a daemon restarted since the first: the requests since its start */
	if (then == now || then->stats->uptime_ms > now->stats->uptime_ms)
		then = NULL;
	*window_ms = then ? now->at_ms - then->at_ms : 0;
	size_t n = 0;
	/* main operations first, then the rest in the daemon's order; alloc and free always,
	 * the others when they ran */
	for (int r = 0; r <= (int)N_MAIN; r++)
		for (size_t i = 0; i < now->stats->n_ops && n < cap; i++) {
			const struct vad_op_counts *op = &now->stats->ops[i], *old = NULL;
			if (rank(op->name) != r)
				continue;
			for (size_t k = 0; then && k < then->stats->n_ops; k++)
				if (strcmp(then->stats->ops[k].name, op->name) == 0)
					old = &then->stats->ops[k];
			struct vactl_hist hn = {op->n_buckets, op->bucket_below_ns,
						op->bucket_count};
			struct vactl_hist ho = {old ? old->n_buckets : 0,
						old ? old->bucket_below_ns : NULL,
						old ? old->bucket_count : NULL};
			struct top_lat_row *row = &out[n];
			row->op = op->name;
			vactl_lat_between(&hn, &ho, &row->lat);
			row->count = old ? since(op->count, old->count) : op->count;
			row->errors = old ? since(op->errors, old->errors) : op->errors;
			if (row->count || r <= 1)
				n++;
		}
	return n;
}

void top_latency_pane(struct vactl_fit **t, char *note, size_t len, const struct top_samples *s)
{
	static char head[32];
	static const struct vactl_fit_col cols[] = {
	    {head, 0},	 {"REQUESTS", 80}, {"REQ/S", 70},  {"P50", 95},
	    {"P99", 94}, {"MAX", 60},	   {"ERRORS", 50},
	};
	const struct top_sample *now = top_samples_last(s);
	*t = NULL;
	if (!now->stats->n_ops) {
		snprintf(note, len, "LATENCY: this daemon reports no per-operation latency");
		return;
	}
	struct top_lat_row rows[64];
	uint64_t ms;
	size_t n = top_latency_rows(s, rows, sizeof(rows) / sizeof(rows[0]), &ms);
	if (ms)
		snprintf(head, sizeof(head), "LATENCY %.1fs", (double)ms / 1000.0);
	else
		snprintf(head, sizeof(head), "LATENCY since start");
	uint64_t rate_ms = ms ? ms : now->stats->uptime_ms;
	*t = vactl_fit_new(sizeof(cols) / sizeof(cols[0]), cols, 10);
	for (size_t i = 0; i < n; i++) {
		char c[24], rate[24], p50[24], p99[24], max[24], e[24];
		snprintf(c, sizeof(c), "%llu", (unsigned long long)rows[i].count);
		snprintf(rate, sizeof(rate), "%.0f", top_rate(rows[i].count, 0, rate_ms));
		snprintf(e, sizeof(e), "%llu", (unsigned long long)rows[i].errors);
		const char *cells[] = {rows[i].op,
				       c,
				       rate,
				       vactl_fmt_ns(rows[i].lat.p50_ns, p50, sizeof(p50)),
				       vactl_fmt_ns(rows[i].lat.p99_ns, p99, sizeof(p99)),
				       vactl_fmt_ns(rows[i].lat.max_ns, max, sizeof(max)),
				       e};
		vactl_fit_row(*t, cells);
	}
}
