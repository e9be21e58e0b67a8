/* daemon_stats.c - histograms, clocks, shapes and output of vabench --daemon. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_cli.h"
#include "daemon_bench.h"

/* ---- histograms ------------------------------------------------------------------------- */

static unsigned bucket_of(uint64_t v)
{
	if (v < (1u << DB_HIST_SUB_BITS))
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= DB_HIST_SUB_BITS */
	unsigned sub = (unsigned)(v >> (e - DB_HIST_SUB_BITS)) & ((1u << DB_HIST_SUB_BITS) - 1);
	return ((e - DB_HIST_SUB_BITS + 1) << DB_HIST_SUB_BITS) + sub;
}

/* The largest value that falls in bucket b (a quantile reads as "at most this"). */
static uint64_t bucket_top(unsigned b)
{
	if (b < (1u << DB_HIST_SUB_BITS))
		return b;
	unsigned e = (b >> DB_HIST_SUB_BITS) + DB_HIST_SUB_BITS - 1;
	uint64_t sub = b & ((1u << DB_HIST_SUB_BITS) - 1);
	uint64_t lo = (1ull << e) | (sub << (e - DB_HIST_SUB_BITS));
	return lo + (1ull << (e - DB_HIST_SUB_BITS)) - 1;
}

void db_hist_add(struct db_hist *h, uint64_t ns)
{
	h->counts[bucket_of(ns)]++;
	h->n++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
}

void db_hist_merge(struct db_hist *into, const struct db_hist *from)
{
	for (unsigned i = 0; i < DB_HIST_BUCKETS; i++)
		into->counts[i] += from->counts[i];
	into->n += from->n;
	into->sum += from->sum;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t db_hist_quantile(const struct db_hist *h, double q)
{
	if (!h->n)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)h->n);
	if (rank >= h->n)
		rank = h->n - 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < DB_HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen > rank) {
			uint64_t top = bucket_top(i);
			return top < h->max ? top : h->max;
		}
	}
	return h->max;
}

/* ---- clocks ----------------------------------------------------------------------------- */

uint64_t db_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t db_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t db_pid_cpu_ns(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name (which may hold spaces) start past the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long utime = 0, stime = 0;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
		   &stime) != 2)
		return 0;
	long hz = sysconf(_SC_CLK_TCK);
	return (utime + stime) * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
}

void db_fail(struct db_result *r, const char *fmt, ...)
{
	if (r->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
	r->failed = true;
}

/* ---- shapes (the vabench workloads that make sense one request at a time) --------------- */

static void fix_size(uint64_t unit, uint64_t *rng, uint64_t *size, uint64_t *align)
{
	*size = unit;
	*align = 0;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void random_size(uint64_t unit, uint64_t *rng, uint64_t *size, uint64_t *align)
{
	*size = unit * (1 + xorshift(rng) % 100);
	*align = 0;
}

static void fix_align(uint64_t unit, uint64_t *rng, uint64_t *size, uint64_t *align)
{
	*size = unit * 5;
	*align = unit * 8;
}

static void random_size_align(uint64_t unit, uint64_t *rng, uint64_t *size, uint64_t *align)
{
	unsigned r = (unsigned)(xorshift(rng) & 0xff);
	*size = unit * (r % 10 + 1);
	uint64_t a = 1ull << (r % 23);
	*align = a < unit ? 0 : a;
}

static const struct db_shape shape_fix = {"fix_size", "every range is one unit", fix_size};
static const struct db_shape shape_rnd = {"random_size", "1..100 units", random_size};
static const struct db_shape shape_align = {"fix_align", "5 units aligned to 8 units", fix_align};
static const struct db_shape shape_rnd_align = {
    "random_size_align", "1..10 units aligned to 2^(0..22) bytes (at least the quantum)",
    random_size_align};

const struct db_shape *const db_shapes[] = {&shape_fix, &shape_rnd, &shape_align, &shape_rnd_align,
					    NULL};

const struct db_shape *db_shape_find(const char *name)
{
	for (unsigned i = 0; db_shapes[i]; i++)
		if (strcmp(db_shapes[i]->name, name) == 0)
			return db_shapes[i];
	return NULL;
}

/* ---- output ----------------------------------------------------------------------------- */

static const char *mode_name(enum db_mode m)
{
	return m == DB_RAW	? "vad"
	       : m == DB_LIBVAD ? "libvad"
	       : m == DB_RESP	? "redis"
	       : m == DB_MALLOC ? "malloc"
	       : m == DB_MMAP	? "mmap"
				: "echo";
}

static double per_sec(uint64_t n, uint64_t ns)
{
	return ns ? (double)n * 1e9 / (double)ns : 0;
}

static void loadavg(double *l1)
{
	*l1 = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if (!f)
		return;
	if (fscanf(f, "%lf", l1) != 1)
		*l1 = -1;
	fclose(f);
}

void db_print_json(FILE *f, const struct db_params *p, const struct db_result *r)
{
	double la;
	loadavg(&la);
	fprintf(f, "{\"mode\":\"%s\",\"label\":", mode_name(p->mode));
	bench_put_json_string(f, p->label ? p->label : "");
	fprintf(
	    f,
	    ",\"workload\":\"%s\",\"unit\":%llu,\"clients\":%u,\"pipeline\":%u,"
	    "\"batch\":%u,\"drivers\":%u,\"procs\":%s,\"touch\":%s,\"seconds\":%.6f,"
	    "\"requests\":%llu,\"items\":%llu,\"allocs\":%llu,\"errors\":%llu,"
	    "\"requests_per_sec\":%.0f,\"items_per_sec\":%.0f,"
	    "\"alloc_p50_ns\":%llu,\"alloc_p99_ns\":%llu,\"alloc_p999_ns\":%llu,"
	    "\"alloc_max_ns\":%llu,\"alloc_mean_ns\":%.0f,\"alloc_samples\":%llu,"
	    "\"all_p50_ns\":%llu,\"all_p99_ns\":%llu,"
	    "\"client_cpu_ns_per_req\":%.0f,\"daemon_cpu_ns_per_req\":%.0f,"
	    "\"req_frame\":%llu,\"resp_frame\":%llu,\"loadavg\":%.2f,\"populate\":%s,"
	    "\"faults\":%llu,\"context_switches\":%llu,\"wall_ns\":%llu",
	    p->shape ? p->shape->name : "-", (unsigned long long)p->unit, p->clients, p->pipeline,
	    p->batch, p->drivers, p->procs ? "true" : "false", p->touch ? "true" : "false",
	    (double)r->wall_ns / 1e9, (unsigned long long)r->requests, (unsigned long long)r->items,
	    (unsigned long long)r->allocs, (unsigned long long)r->errors,
	    per_sec(r->requests, r->wall_ns), per_sec(r->items, r->wall_ns),
	    (unsigned long long)db_hist_quantile(&r->alloc_lat, 0.5),
	    (unsigned long long)db_hist_quantile(&r->alloc_lat, 0.99),
	    (unsigned long long)db_hist_quantile(&r->alloc_lat, 0.999),
	    (unsigned long long)r->alloc_lat.max,
	    r->alloc_lat.n ? (double)r->alloc_lat.sum / (double)r->alloc_lat.n : 0,
	    (unsigned long long)r->alloc_lat.n,
	    (unsigned long long)db_hist_quantile(&r->all_lat, 0.5),
	    (unsigned long long)db_hist_quantile(&r->all_lat, 0.99),
	    r->requests ? (double)r->cpu_ns / (double)r->requests : 0,
	    r->requests && r->daemon_cpu_ns ? (double)r->daemon_cpu_ns / (double)r->requests : 0,
	    (unsigned long long)r->req_bytes, (unsigned long long)r->resp_bytes, la,
	    p->populate ? "true" : "false", (unsigned long long)r->faults,
	    (unsigned long long)r->csw, (unsigned long long)r->wall_ns);
	if (r->failed) {
		fputs(",\"error\":", f);
		bench_put_json_string(f, r->errmsg);
	}
	fputs("}\n", f);
	fflush(f);
}

void db_print_header(FILE *f)
{
	fprintf(f, "%-6s %-11s %4s %4s %5s %3s %11s %11s %9s %9s %9s %9s %8s  %s\n", "mode",
		"workload", "cli", "pipe", "batch", "drv", "req/s", "items/s", "p50 us", "p99 us",
		"p999 us", "max us", "dcpu/req", "notes");
}

void db_print_row(FILE *f, const struct db_params *p, const struct db_result *r)
{
	char notes[300] = "";
	double la;
	loadavg(&la);
	if (r->failed)
		snprintf(notes, sizeof(notes), "ERROR: %s", r->errmsg);
	else
		snprintf(notes, sizeof(notes), "%s%s%sload %.1f%s%s",
			 r->errors ? "error replies " : "", p->touch ? "touch " : "",
			 p->procs ? "procs " : "", la, p->label && *p->label ? " " : "",
			 p->label ? p->label : "");
	fprintf(
	    f, "%-6s %-11.11s %4u %4u %5u %3u %11.0f %11.0f %9.1f %9.1f %9.1f %9.1f %8.0f  %s\n",
	    mode_name(p->mode), p->shape ? p->shape->name : "-", p->clients, p->pipeline, p->batch,
	    p->drivers, per_sec(r->requests, r->wall_ns), per_sec(r->items, r->wall_ns),
	    (double)db_hist_quantile(&r->alloc_lat, 0.5) / 1e3,
	    (double)db_hist_quantile(&r->alloc_lat, 0.99) / 1e3,
	    (double)db_hist_quantile(&r->alloc_lat, 0.999) / 1e3, (double)r->alloc_lat.max / 1e3,
	    r->requests && r->daemon_cpu_ns ? (double)r->daemon_cpu_ns / (double)r->requests : 0,
	    notes);
	fflush(f);
}
