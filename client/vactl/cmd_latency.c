/* cmd_latency.c - vactl latency: each operation's requests and latency, one line per interval. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lathist.h"
#include "live.h"
#include "term.h"

struct latency_args {
	struct vactl_live live;
	const char *op; /* --op: this operation only, a line every interval */
};

enum { OPT_OP = VACTL_OPT_LIVE_END };

static int on_latency_opt(int opt, const char *arg, void *ctx)
{
	struct latency_args *a = ctx;
	if (opt == OPT_OP) {
		a->op = arg;
		return VACTL_EXIT_OK;
	}
	return vactl_live_opt(&vactl_cmd_latency, &a->live, opt, arg);
}

static const struct vad_op_counts *find_op(const struct vad_daemon_stats *d, const char *name)
{
	for (size_t i = 0; d && i < d->n_ops; i++)
		if (strcmp(d->ops[i].name, name) == 0)
			return &d->ops[i];
	return NULL;
}

/* The "alloc, free, ..." list of the daemon's operations into buf. */
static const char *op_names(const struct vad_daemon_stats *d, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < d->n_ops && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", d->ops[i].name);
	return buf;
}

/* One operation's line (text) or object (JSON) for the interval from old to now. */
static void show_op(const struct vad_op_counts *op, const struct vad_op_counts *old,
		    const char *clock, json_object *arr)
{
	struct vactl_hist hn = {op->n_buckets, op->bucket_below_ns, op->bucket_count};
	struct vactl_hist ho = {old ? old->n_buckets : 0, old ? old->bucket_below_ns : NULL,
				old ? old->bucket_count : NULL};
	struct vactl_lat l;
	vactl_lat_between(&hn, &ho, &l);
	uint64_t count = !old ? op->count : op->count >= old->count ? op->count - old->count : 0;
	uint64_t errs = !old			    ? op->errors
			: op->errors >= old->errors ? op->errors - old->errors
						    : 0;
	if (arr) {
		json_object *j = json_object_new_object();
		vactl_json_add_str(j, "op", op->name);
		vactl_json_add_u64(j, "count", count);
		vactl_json_add_u64(j, "errors", errs);
		vactl_json_add_u64(j, "p50_ns", l.p50_ns);
		vactl_json_add_u64(j, "p99_ns", l.p99_ns);
		vactl_json_add_u64(j, "max_ns", l.max_ns);
		json_object_array_add(arr, j);
		return;
	}
	char p50[24], p99[24], max[24];
	printf("%-8s  %-10s %10llu %8s %8s %8s %7llu\n", clock, op->name, (unsigned long long)count,
	       vactl_fmt_ns(l.p50_ns, p50, sizeof(p50)), vactl_fmt_ns(l.p99_ns, p99, sizeof(p99)),
	       vactl_fmt_ns(l.max_ns, max, sizeof(max)), (unsigned long long)errs);
}

/* One interval: every operation that ran in it (or --op's, ran or not). */
static void show_interval(const struct latency_args *a, const struct vad_daemon_stats *now,
			  const struct vad_daemon_stats *old, uint64_t sample, uint64_t ms,
			  bool json)
{
	time_t t = time(NULL);
	struct tm tm;
	char clock[16];
	strftime(clock, sizeof(clock), "%H:%M:%S", localtime_r(&t, &tm));
	json_object *j = json ? json_object_new_object() : NULL;
	json_object *arr = json ? json_object_new_array() : NULL;
	bool any = false;
	for (size_t i = 0; i < now->n_ops; i++) {
		const struct vad_op_counts *op = &now->ops[i], *before = find_op(old, op->name);
		if (a->op ? strcmp(op->name, a->op) != 0 : before && op->count == before->count)
			continue;
		show_op(op, before, clock, arr);
		any = true;
	}
	if (j) {
		vactl_json_add_u64(j, "sample", sample);
		vactl_json_add_u64(j, "interval_ms", ms);
		json_object_object_add(j, "ops", arr);
		vactl_json_line(j);
	} else {
		if (!any)
			printf("%-8s  %-10s %10d %8s %8s %8s %7d\n", clock, "(none)", 0, "-", "-",
			       "-", 0);
		fflush(stdout);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int run_latency(struct vactl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    VACTL_LIVE_OPTIONS, {"op", required_argument, NULL, OPT_OP}, {0}};
	struct latency_args a = {.live = {.interval_ms = 1000}};
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_latency, o, argc, argv, NULL, opts, on_latency_opt, &a,
				 &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	if ((rc = vactl_check_operands(&vactl_cmd_latency, argc, argv, first, 0)))
		return rc;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		return rc;
	struct vad_daemon_stats *old;
	int err = vad_stats_detail(c, NULL, &old);
	if (err)
		return vactl_report_close(o, c, err);
	if (!old->n_ops) {
		fprintf(stderr, "vactl: the daemon reports no per-operation latency (it is older "
				"than this vactl)\n");
		free(old);
		vad_close(c);
		return VACTL_EXIT_REFUSED;
	}
	if (a.op && !find_op(old, a.op)) {
		char names[512];
		rc = vactl_usage_error(&vactl_cmd_latency,
				       "unknown operation '%s' (the daemon's: %s)", a.op,
				       op_names(old, names, sizeof(names)));
		free(old);
		vad_close(c);
		return rc;
	}
	vactl_term_signals();
	if (!o->json)
		printf("%-8s  %-10s %10s %8s %8s %8s %7s\n", "TIME", "OP", "COUNT", "P50", "P99",
		       "MAX", "ERRORS");
	fflush(stdout);
	uint64_t old_at = now_ms();
	for (uint64_t sample = 1; !vactl_term_stop; sample++) {
		vactl_deadline(o, false);
		for (uint64_t until = old_at + a.live.interval_ms, t;
		     !vactl_term_stop && (t = now_ms()) < until;)
			vactl_term_key(false, (int)(until - t)); /* a signal cuts it short */
		vactl_deadline(o, true);
		if (vactl_term_stop)
			break;
		struct vad_daemon_stats *now;
		if ((err = vad_stats_detail(c, NULL, &now))) {
			rc = vactl_report(o, c, err);
			break;
		}
		uint64_t at = now_ms();
		/* a daemon restarted under the same socket: its counters start again */
		show_interval(&a, now, now->uptime_ms >= old->uptime_ms ? old : NULL, sample,
			      at - old_at, o->json);
		free(old);
		old = now;
		old_at = at;
		if (a.live.count && sample >= a.live.count)
			break;
	}
	free(old);
	vad_close(c);
	return rc;
}

const struct vactl_cmd vactl_cmd_latency = {
    .name = "latency",
    .args = "[--op OP] [--interval D] [--count N]",
    .summary = "per-operation latency, one line per interval (like latency-history)",
    .help =
	"Every interval (default 1s) prints one line per operation the daemon handled in it:\n"
	"the time, the operation, its requests, their p50, p99 and maximum latency and how many\n"
	"were answered with an error. With --op OP only that operation, one line every\n"
	"interval even when idle. Latencies come from the daemon's histograms: the time it\n"
	"spent on a request (decoding, handling, encoding the reply; not the socket), each\n"
	"figure the upper bound of the bucket it fell in. Runs until Ctrl-C or N intervals\n"
	"(--count N, N >= 1). vactl's own stats request each interval counts too.\n"
	"JSON: one line per interval: {sample, interval_ms, ops: [{op, count, errors, p50_ns,\n"
	"p99_ns, max_ns}]}.\n",
    .run = run_latency,
};
