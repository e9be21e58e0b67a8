/* cmd_top.c - a live view: occupancy and rates per arena, refreshed every interval. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vactl.h"

struct top_args {
	uint64_t interval_ms;
	uint64_t count; /* 0: until interrupted */
};

enum { OPT_INTERVAL = 0x4000, OPT_COUNT };

static int on_top_opt(int opt, const char *arg, void *ctx)
{
	struct top_args *t = ctx;
	char *end;
	switch (opt) {
	case OPT_INTERVAL:
		if (vactl_parse_duration(arg, &t->interval_ms) < 0 || t->interval_ms == 0)
			return vactl_usage_error(&vactl_cmd_top,
						 "bad interval '%s' (try 1s, 500ms)", arg);
		return VACTL_EXIT_OK;
	case OPT_COUNT:
		errno = 0;
		t->count = strtoull(arg, &end, 10);
		if (errno || *end || end == arg || t->count == 0)
			return vactl_usage_error(&vactl_cmd_top, "bad count '%s'", arg);
		return VACTL_EXIT_OK;
	}
	return VACTL_EXIT_USAGE;
}

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* Per-second rate of a counter between two samples. */
static double rate(uint64_t now, uint64_t before, uint64_t ms)
{
	return ms && now >= before ? (double)(now - before) * 1000.0 / (double)ms : 0.0;
}

static const struct vad_arena_stats *find_prev(const struct vad_daemon_stats *prev,
					       const char *name)
{
	for (size_t i = 0; prev && i < prev->n_arenas; i++)
		if (strcmp(prev->arenas[i].name, name) == 0)
			return &prev->arenas[i];
	return NULL;
}

static void show_json(const struct vad_daemon_stats *d, const struct vad_daemon_stats *prev,
		      uint64_t elapsed_ms, uint64_t sample)
{
	json_object *j = json_object_new_object();
	vactl_json_add_u64(j, "sample", sample);
	vactl_json_add_u64(j, "uptime_ms", d->uptime_ms);
	vactl_json_add_u64(j, "clients", d->clients);
	vactl_json_add_u64(j, "requests", d->requests);
	vactl_json_add_u64(j, "interval_ms", elapsed_ms);
	json_object_object_add(j, "requests_per_s",
			       json_object_new_double(rate(
				   d->requests, prev ? prev->requests : d->requests, elapsed_ms)));
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < d->n_arenas; i++) {
		const struct vad_arena_stats *a = &d->arenas[i];
		const struct vad_arena_stats *p = find_prev(prev, a->name);
		json_object *ja = vactl_json_arena_stats(a);
		json_object_object_add(
		    ja, "allocs_per_s",
		    json_object_new_double(rate(a->allocs, p ? p->allocs : a->allocs, elapsed_ms)));
		json_object_object_add(
		    ja, "frees_per_s",
		    json_object_new_double(rate(a->frees, p ? p->frees : a->frees, elapsed_ms)));
		json_object_array_add(arr, ja);
	}
	json_object_object_add(j, "arenas", arr);
	vactl_json_line(j);
}

static void show_text(const struct vad_session *s, const struct vad_daemon_stats *d,
		      const struct vad_daemon_stats *prev, uint64_t elapsed_ms, bool tty)
{
	if (tty)
		fputs("\033[H\033[2J", stdout);
	char up[32], b[7][32];
	printf("%s at %s - up %s, %u clients, %.0f requests/s\n", s->server, s->socket_path,
	       vactl_fmt_duration(d->uptime_ms, up, sizeof(up)), d->clients,
	       rate(d->requests, prev ? prev->requests : d->requests, elapsed_ms));
	static const char *const heads[] = {"ARENA", "SIZE",	"BUSY",	    "USE",
					    "FREE",  "LAZY",	"RESIDENT", "LARGEST FREE",
					    "FRAG",  "ALLOC/S", "FREE/S",   "FAILS"};
	struct vactl_table *t = vactl_table_new(12, heads);
	for (size_t i = 0; i < d->n_arenas; i++) {
		const struct vad_arena_stats *a = &d->arenas[i];
		const struct vad_arena_stats *p = find_prev(prev, a->name);
		char use[16], frag[16], ar[24], fr[24], fails[24];
		snprintf(use, sizeof(use), "%.1f%%",
			 a->size ? 100.0 * (double)a->busy_bytes / (double)a->size : 0.0);
		snprintf(frag, sizeof(frag), "%.1f%%",
			 100.0 * vactl_fragmentation(a->free_bytes, a->largest_free));
		snprintf(ar, sizeof(ar), "%.0f",
			 rate(a->allocs, p ? p->allocs : a->allocs, elapsed_ms));
		snprintf(fr, sizeof(fr), "%.0f",
			 rate(a->frees, p ? p->frees : a->frees, elapsed_ms));
		snprintf(fails, sizeof(fails), "%llu", (unsigned long long)a->fails);
		vactl_table_row(t, a->name, vactl_fmt_size(a->size, b[0], 32),
				vactl_fmt_size(a->busy_bytes, b[1], 32), use,
				vactl_fmt_size(a->free_bytes, b[2], 32),
				vactl_fmt_size(a->lazy_bytes, b[3], 32),
				vactl_fmt_size(a->resident_bytes, b[5], 32),
				vactl_fmt_size(a->largest_free, b[4], 32), frag, ar, fr, fails);
	}
	vactl_table_print(t);
	if (!tty)
		putchar('\n');
	fflush(stdout);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int run_top(struct vactl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"interval", required_argument, NULL, OPT_INTERVAL},
	    {"count", required_argument, NULL, OPT_COUNT},
	    {0},
	};
	struct top_args a = {.interval_ms = 1000};
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_top, o, argc, argv, NULL, opts, on_top_opt, &a, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	if ((rc = vactl_check_operands(&vactl_cmd_top, argc, argv, first, 0)))
		return rc;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		return rc;
	struct sigaction sa = {.sa_handler = on_stop};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	struct vad_session s;
	vad_session_info(c, &s);
	bool tty = !o->json && isatty(STDOUT_FILENO);
	struct vad_daemon_stats *prev = NULL;
	uint64_t prev_at = 0;
	for (uint64_t sample = 1; !stop_requested; sample++) {
		struct vad_daemon_stats *d;
		int err = vad_stats_detail(c, NULL, &d);
		if (err) {
			rc = vactl_report(o, c, err);
			break;
		}
		uint64_t at = now_ms();
		uint64_t elapsed = prev ? at - prev_at : 0;
		if (o->json)
			show_json(d, prev, elapsed, sample);
		else
			show_text(&s, d, prev, elapsed, tty);
		free(prev);
		prev = d;
		prev_at = at;
		if (a.count && sample >= a.count)
			break;
		struct timespec ts = {(time_t)(a.interval_ms / 1000),
				      (long)(a.interval_ms % 1000) * 1000000L};
		vactl_deadline(o, false);
		nanosleep(&ts, NULL); /* a signal cuts it short, then the loop ends */
		vactl_deadline(o, true);
	}
	free(prev);
	vad_close(c);
	return rc;
}

const struct vactl_cmd vactl_cmd_top = {
    .name = "top",
    .args = "[--interval D] [--count N]",
    .summary = "live occupancy and alloc/free rates per arena",
    .help = "Samples the daemon's statistics every interval (default 1s) and shows each\n"
	    "arena's occupancy, lazy and resident bytes, largest free block, fragmentation and\n"
	    "alloc/free rates, until Ctrl-C or N samples (--count). On a terminal the screen\n"
	    "is redrawn; otherwise samples follow each other, separated by blank lines.\n"
	    "JSON: one line per sample: {sample, uptime_ms, clients, requests, interval_ms,\n"
	    "requests_per_s, arenas: [{the stats fields, allocs_per_s, frees_per_s}]};\n"
	    "rates are 0 in the first sample.\n",
    .run = run_top,
};
