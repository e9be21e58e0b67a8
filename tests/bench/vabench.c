/*
 * vabench.c - the allocator benchmark: command line, run matrix, output.
 *
 * Runs the cross product of the --workload, --impl, --threads and --held lists (all
 * workloads and implementations by default) and prints one result per combination:
 * a table for people (stdout, or stderr with --json) and, with --json or --out, one
 * JSON object per line for scripts (tests/bench/check-bar reads them).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cli.h"
#include "bench_extras.h"
#include "bench_run.h"
#include "daemon_bench.h"
#include "bench_selftest.h"

#define MAX_LIST 32

struct options {
	const struct bench_workload *wls[MAX_LIST];
	const struct bench_impl_ops *impls[MAX_LIST];
	unsigned threads[MAX_LIST];
	uint64_t held[MAX_LIST];
	unsigned nwl, nimpl, nthreads, nheld;
	uint64_t loops, quantum, space_size, base, seed, meta_live;
	bool base_set, json, selftest;
	double max_seconds;
	unsigned sample_every, repeat;
	const char *out_path;
};

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: vabench [options]\n"
	       "  --workload LIST    comma-separated workloads (default: all)\n"
	       "  --impl LIST        comma-separated implementations (default: all)\n"
	       "  --threads LIST     worker threads, released together (default: 1)\n"
	       "  --held LIST        live areas kept through the loop, holes between (default: 0)\n"
	       "  --loops N          loop iterations per thread (default: 1000000)\n"
	       "  --max-seconds S    stop a thread's loop after S seconds, 0 = never (default: 2)\n"
	       "  --quantum BYTES    allocation unit (default: 4K)\n"
	       "  --space-size BYTES size of the space (default: 1T)\n"
	       "  --base BYTES       first address (default: the space size)\n"
	       "  --sample-every K   time one op in K for percentiles (default: 8)\n"
	       "  --seed N           random seed (default: 1)\n"
	       "  --meta-live N      live ranges for the metadata line, 0 = none (default: 1M)\n"
	       "  --repeat N         run the whole matrix N times, interleaved; report each\n"
	       "                     combination's fastest run (default: 1)\n"
	       "  --json             JSON lines on stdout, the table on stderr\n"
	       "  --out FILE         also append the JSON lines to FILE\n"
	       "  --selftest         check every implementation against a reference, then exit\n"
	       "  --list             list workloads and implementations\n"
	       "  --daemon SOCK      load a running vad through its socket instead\n"
	       "                     (vabench --daemon SOCK --help for its options)\n"
	       "  --echo             the socketpair echo baseline (see --daemon)\n"
	       "Sizes take K, M, G, T suffixes (powers of 1024).\n");
}

static void list_all(void)
{
	printf("workloads:\n");
	for (unsigned i = 0; bench_workloads[i]; i++)
		printf("  %-18s %s\n", bench_workloads[i]->name, bench_workloads[i]->desc);
	printf("implementations:\n");
	for (unsigned i = 0; bench_impls[i]; i++)
		printf("  %-18s %s\n", bench_impls[i]->name, bench_impls[i]->desc);
}

/* Split a comma list and hand each item to fn; -1 on the first bad item. */
static int parse_list(char *arg, const char *what, unsigned *count,
		      int (*fn)(const char *item, unsigned idx, void *ctx), void *ctx)
{
	char *save = NULL;

	*count = 0;
	for (char *tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*count >= MAX_LIST) {
			fprintf(stderr, "vabench: too many %s (at most %d)\n", what, MAX_LIST);
			return -1;
		}
		if (fn(tok, *count, ctx)) {
			fprintf(stderr, "vabench: bad %s '%s' (see --list)\n", what, tok);
			return -1;
		}
		(*count)++;
	}
	if (!*count) {
		fprintf(stderr, "vabench: empty %s list\n", what);
		return -1;
	}
	return 0;
}

static int add_wl(const char *s, unsigned i, void *ctx)
{
	struct options *o = ctx;

	return (o->wls[i] = bench_workload_find(s)) ? 0 : -1;
}

static int add_impl(const char *s, unsigned i, void *ctx)
{
	struct options *o = ctx;

	return (o->impls[i] = bench_impl_find(s)) ? 0 : -1;
}

static int add_threads(const char *s, unsigned i, void *ctx)
{
	struct options *o = ctx;
	uint64_t v;

	if (bench_parse_u64(s, &v) || v < 1 || v > 1024)
		return -1;
	o->threads[i] = (unsigned)v;
	return 0;
}

static int add_held(const char *s, unsigned i, void *ctx)
{
	struct options *o = ctx;

	return bench_parse_u64(s, &o->held[i]);
}

enum {
	OPT_WORKLOAD = 256,
	OPT_IMPL,
	OPT_THREADS,
	OPT_HELD,
	OPT_LOOPS,
	OPT_MAXSEC,
	OPT_QUANTUM,
	OPT_SPACE,
	OPT_BASE,
	OPT_SAMPLE,
	OPT_SEED,
	OPT_REPEAT,
	OPT_META,
	OPT_JSON,
	OPT_OUT,
	OPT_SELFTEST,
	OPT_LIST,
	OPT_HELP,
};

static const struct option long_opts[] = {
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"impl", required_argument, NULL, OPT_IMPL},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"held", required_argument, NULL, OPT_HELD},
    {"loops", required_argument, NULL, OPT_LOOPS},
    {"max-seconds", required_argument, NULL, OPT_MAXSEC},
    {"quantum", required_argument, NULL, OPT_QUANTUM},
    {"space-size", required_argument, NULL, OPT_SPACE},
    {"base", required_argument, NULL, OPT_BASE},
    {"sample-every", required_argument, NULL, OPT_SAMPLE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"meta-live", required_argument, NULL, OPT_META},
    {"json", no_argument, NULL, OPT_JSON},
    {"out", required_argument, NULL, OPT_OUT},
    {"selftest", no_argument, NULL, OPT_SELFTEST},
    {"list", no_argument, NULL, OPT_LIST},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Returns 0 to run, 1 to exit successfully (help, list), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct options *o)
{
	uint64_t v;
	char *end;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_WORKLOAD:
			rc = parse_list(optarg, "workload", &o->nwl, add_wl, o);
			break;
		case OPT_IMPL:
			rc = parse_list(optarg, "implementation", &o->nimpl, add_impl, o);
			break;
		case OPT_THREADS:
			rc = parse_list(optarg, "thread count", &o->nthreads, add_threads, o);
			break;
		case OPT_HELD:
			rc = parse_list(optarg, "held count", &o->nheld, add_held, o);
			break;
		case OPT_LOOPS:
			rc = bench_parse_u64(optarg, &o->loops);
			break;
		case OPT_META:
			rc = bench_parse_u64(optarg, &o->meta_live);
			break;
		case OPT_MAXSEC:
			o->max_seconds = strtod(optarg, &end);
			rc = *end || o->max_seconds < 0 ? -1 : 0;
			break;
		case OPT_QUANTUM:
			rc = bench_parse_u64(optarg, &o->quantum);
			if (!rc && (o->quantum == 0 || (o->quantum & (o->quantum - 1))))
				rc = -1;
			break;
		case OPT_SPACE:
			rc = bench_parse_u64(optarg, &o->space_size);
			break;
		case OPT_BASE:
			rc = bench_parse_u64(optarg, &o->base);
			o->base_set = true;
			break;
		case OPT_SAMPLE:
			rc = bench_parse_u64(optarg, &v);
			if (!rc && (v < 1 || v > 1000000))
				rc = -1;
			o->sample_every = (unsigned)v;
			break;
		case OPT_SEED:
			rc = bench_parse_u64(optarg, &o->seed);
			break;
		case OPT_REPEAT:
			rc = bench_parse_u64(optarg, &v);
			if (!rc && (v < 1 || v > 1000))
				rc = -1;
			o->repeat = (unsigned)v;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_OUT:
			o->out_path = optarg;
			break;
		case OPT_SELFTEST:
			o->selftest = true;
			break;
		case OPT_LIST:
			list_all();
			return 1;
		case OPT_HELP:
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
		if (bench_cli_check_value(rc, long_opts[c - OPT_WORKLOAD].name, optarg))
			return 2;
	}
	if (bench_cli_no_operands(argc, argv, optind))
		return 2;
	if (o->space_size == 0 || o->space_size % o->quantum) {
		fprintf(stderr, "vabench: --space-size must be a non-zero multiple of --quantum\n");
		return 2;
	}
	if (!o->base_set)
		o->base = o->space_size;
	if (o->base % o->quantum || o->base + o->space_size < o->base) {
		fprintf(stderr, "vabench: --base must be a multiple of --quantum and the space "
				"must fit in 64 bits\n");
		return 2;
	}
	return 0;
}

static void print_json(FILE *f, const struct bench_params *p, const struct bench_result *r,
		       unsigned repeat)
{
	double secs = (double)r->wall_ns / 1e9;
	double ns_per_op = r->ops ? (double)r->thread_ns / (double)r->ops : 0;
	double ops_per_sec = r->wall_ns ? (double)r->ops / secs : 0;

	fprintf(f,
		"{\"workload\":\"%s\",\"impl\":\"%s\",\"threads\":%u,\"held\":%llu,"
		"\"loops\":%llu,\"ops\":%llu,\"fails\":%llu,\"seconds\":%.6f,"
		"\"ns_per_op\":%.1f,\"cpu_ns_per_op\":%.1f,\"ops_per_sec\":%.0f,\"p50_ns\":%llu,"
		"\"p99_ns\":%llu,"
		"\"p999_ns\":%llu,\"max_ns\":%llu,\"samples\":%llu,\"sample_every\":%u,"
		"\"capped\":%s,\"repeat\":%u,\"setup_seconds\":%.3f,\"quantum\":%llu,"
		"\"space_size\":%llu",
		p->wl->name, p->impl->name, p->threads, (unsigned long long)p->held,
		(unsigned long long)p->loops, (unsigned long long)r->ops,
		(unsigned long long)r->fails, secs, ns_per_op,
		r->ops ? (double)r->cpu_ns / (double)r->ops : 0, ops_per_sec,
		(unsigned long long)r->pct.p50, (unsigned long long)r->pct.p99,
		(unsigned long long)r->pct.p999, (unsigned long long)r->pct.max,
		(unsigned long long)r->pct.count, p->sample_every, r->capped ? "true" : "false",
		repeat, (double)r->setup_ns / 1e9, (unsigned long long)p->quantum,
		(unsigned long long)p->space_size);
	if (r->delta.has_va)
		fprintf(
		    f,
		    ",\"allocs\":%llu,\"frees\":%llu,\"zero_calls\":%llu,\"release_calls\":%llu,"
		    "\"release_ratio\":%.4f,\"released_bytes\":%llu,\"pool_hits\":%llu,"
		    "\"pool_hit_ratio\":%.4f,\"drains\":%llu",
		    (unsigned long long)r->delta.allocs, (unsigned long long)r->delta.frees,
		    (unsigned long long)r->delta.zero_calls,
		    (unsigned long long)r->delta.release_calls,
		    r->delta.frees ? (double)r->delta.release_calls / (double)r->delta.frees : 0,
		    (unsigned long long)r->delta.released_bytes,
		    (unsigned long long)r->delta.pool_hits,
		    r->delta.allocs ? (double)r->delta.pool_hits / (double)r->delta.allocs : 0,
		    (unsigned long long)r->delta.drains);
	if (r->error) {
		fputs(",\"error\":", f);
		bench_put_json_string(f, r->errmsg); /* may quote the library's sentences */
	}
	fprintf(f, "}\n");
	fflush(f);
}

static void print_header(FILE *f)
{
	fprintf(f, "%-18s %-10s %3s %8s %9s %10s %10s %9s %9s %9s %7s  %s\n", "workload", "impl",
		"thr", "held", "ops", "ns/op", "cpu ns/op", "Mops/s", "p50 ns", "p99 ns", "fails",
		"notes");
}

static void print_row(FILE *f, const struct bench_params *p, const struct bench_result *r)
{
	double ns_per_op = r->ops ? (double)r->thread_ns / (double)r->ops : 0;
	double mops = r->wall_ns ? (double)r->ops * 1e3 / (double)r->wall_ns : 0;
	char notes[300] = "";

	if (r->error)
		snprintf(notes, sizeof(notes), "ERROR: %s", r->errmsg);
	else if (r->delta.has_va)
		snprintf(
		    notes, sizeof(notes),
		    "%srelease/free %.3f zero/free %.3f pool %.0f%% drains %llu",
		    r->capped ? "capped " : "",
		    r->delta.frees ? (double)r->delta.release_calls / (double)r->delta.frees : 0,
		    r->delta.frees ? (double)r->delta.zero_calls / (double)r->delta.frees : 0,
		    r->delta.allocs ? 100.0 * (double)r->delta.pool_hits / (double)r->delta.allocs
				    : 0,
		    (unsigned long long)r->delta.drains);
	else if (r->capped)
		snprintf(notes, sizeof(notes), "capped at %.1f s", p->max_seconds);
	fprintf(f, "%-18s %-10s %3u %8llu %9llu %10.1f %10.1f %9.3f %9llu %9llu %7llu  %s\n",
		p->wl->name, p->impl->name, p->threads, (unsigned long long)p->held,
		(unsigned long long)r->ops, ns_per_op,
		r->ops ? (double)r->cpu_ns / (double)r->ops : 0, mops,
		(unsigned long long)r->pct.p50, (unsigned long long)r->pct.p99,
		(unsigned long long)r->fails, notes);
	fflush(f);
}

static double throughput(const struct bench_result *r)
{
	return r->wall_ns ? (double)r->ops / (double)r->wall_ns : 0;
}

/* One combination of the run matrix and the fastest of its repetitions so far. */
struct combo {
	struct bench_params p;
	struct bench_result best;
	bool failed;
};

/*
 * Run every combination `repeat` times, interleaved (all combinations, then all again),
 * so a change of machine load during the run hits every implementation alike; keep the
 * repetition with the highest throughput (a failed one is kept and not rerun). Results
 * are printed during the last pass. Returns 0, or 1 if some run failed.
 */
static int run_matrix(struct combo *cs, size_t n, unsigned repeat, bool json, FILE *table,
		      FILE *out)
{
	struct bench_result r;
	int status = 0;

	for (unsigned rep = 0; rep < repeat; rep++)
		for (size_t i = 0; i < n; i++) {
			struct combo *c = &cs[i];

			if (!c->failed) {
				if (bench_run(&c->p, &r)) {
					c->best = r;
					c->failed = true;
					status = 1;
				} else if (rep == 0 || throughput(&r) > throughput(&c->best)) {
					c->best = r;
				}
			}
			if (rep + 1 < repeat)
				continue;
			print_row(table, &c->p, &c->best);
			if (json)
				print_json(stdout, &c->p, &c->best, repeat);
			if (out)
				print_json(out, &c->p, &c->best, repeat);
		}
	return status;
}

int main(int argc, char **argv)
{
	struct options o = {
	    .loops = 1000000,
	    .quantum = 4096,
	    .space_size = 1ull << 40,
	    .seed = 1,
	    .max_seconds = 2.0,
	    .sample_every = 8,
	    .repeat = 1,
	    .meta_live = 1000000,
	};
	FILE *table, *out = NULL;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct combo *cs;
	size_t ncombos, k = 0;
	int rc, status;

	if (daemon_bench_wanted(argc, argv))
		return daemon_bench_main(argc, argv);
	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (o.selftest)
		return bench_selftest(o.nimpl == 1 ? o.impls[0] : NULL, o.seed);
	if (!o.nwl)
		for (; bench_workloads[o.nwl]; o.nwl++)
			o.wls[o.nwl] = bench_workloads[o.nwl];
	if (!o.nimpl)
		for (; bench_impls[o.nimpl]; o.nimpl++)
			o.impls[o.nimpl] = bench_impls[o.nimpl];
	if (!o.nthreads)
		o.threads[o.nthreads++] = 1;
	if (!o.nheld)
		o.held[o.nheld++] = 0;
	if (o.out_path && !(out = fopen(o.out_path, "a"))) {
		fprintf(stderr, "vabench: cannot open %s: %s\n", o.out_path, strerror(errno));
		return 2;
	}
	table = o.json ? stderr : stdout;
	fprintf(table,
		"vabench: quantum %llu, space [%#llx, +%#llx), %llu loops per thread, "
		"cap %.1f s per run, %ld CPUs\n",
		(unsigned long long)o.quantum, (unsigned long long)o.base,
		(unsigned long long)o.space_size, (unsigned long long)o.loops, o.max_seconds,
		ncpus);
	bench_extras(table, o.impls, o.nimpl, o.quantum, o.base, o.space_size, o.meta_live);
	print_header(table);
	ncombos = (size_t)o.nwl * o.nthreads * o.nheld * o.nimpl;
	cs = calloc(ncombos, sizeof(*cs));
	if (!cs) {
		fprintf(stderr, "vabench: no memory for %zu combinations\n", ncombos);
		return 2;
	}
	for (unsigned w = 0; w < o.nwl; w++)
		for (unsigned t = 0; t < o.nthreads; t++)
			for (unsigned hd = 0; hd < o.nheld; hd++)
				for (unsigned i = 0; i < o.nimpl; i++)
					cs[k++].p = (struct bench_params){
					    .wl = o.wls[w],
					    .impl = o.impls[i],
					    .threads = o.threads[t],
					    .held = o.held[hd],
					    .loops = o.loops,
					    .base = o.base,
					    .space_size = o.space_size,
					    .quantum = o.quantum,
					    .max_seconds = o.max_seconds,
					    .sample_every = o.sample_every,
					    .seed = o.seed,
					    .ncpus = ncpus > 0 ? (unsigned)ncpus : 1,
					};
	status = run_matrix(cs, ncombos, o.repeat, o.json, table, out);
	free(cs);
	if (out)
		fclose(out);
	return status;
}
