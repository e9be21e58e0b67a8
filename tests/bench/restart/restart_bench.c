/*
 * restart_bench - what a restart costs with many live ranges (run by `make bench-restart`):
 * vad runs under a stand-in for systemd's fd store (fdstore_standin.h); a few clients fill it
 * with N live ranges (batches of 1024 allocations of 4, 8, 4 and 16 KiB, a quarter of each
 * batch freed again so free space is cut into many gaps; some ranges shared to another
 * client), then the daemon is restarted again and again: politely (SIGTERM, wait for its
 * exit, start it with the stored fds) and after a kill -9. For each restart: the stop, the
 * start to READY split into the daemon's own phases (its "restore: phases" log line), the
 * state file's bytes per live range; then the median of each column per kind of restart.
 *
 * usage: restart_bench [--ranges N] [--clients C] [--runs R] [--shares S] [--workers W]
 *                      [--perf PREFIX]
 *   N live ranges (default 1000000), C filling clients (4), R restarts of each kind (5),
 *   S ranges each client shares with the next (1000), W daemon workers (2);
 *   --perf: each restarted daemon runs under `perf record -g` from before its exec until it
 *   exits (PREFIX.1, PREFIX.2, ...); its start column then holds perf's attach too.
 * VAD_BUILD_DIR names the build directory holding vad. The clients stay connected until the
 * first stop; from then on the previous daemon's holds are kept for their clients
 * (resume_grace is an hour here) and each restart brings back all of them.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdstore_standin.h"
#include "harness.h"
#include "rawclient.h"

#define BATCH	  1024
#define MAX_RUNS  64
#define N_PHASES  13
#define N_COLUMNS (3 + N_PHASES + 1)

/* The phases the daemon logs at the end of a restore, in its order ("restore: phases"). */
static const char *const phase_names[N_PHASES] = {
    "open",	"load",	   "sort",  "holders",	      "rebuild", "ranges", "allocators",
    "va_check", "release", "holds", "registry_check", "store",	 "total",
};

/* One restart's figures in ms: stop, start to READY, stop to READY, the daemon's phases
 * (NAN when not logged), then exec: start to READY less the daemon's own total. */
struct run {
	double col[N_COLUMNS];
	double cpu[N_PHASES]; /* the daemon's CPU time per phase ("restore: cpu") */
	double state_bytes_per_range;
	double life_cpu; /* CPU time of the daemon this restart stopped, all its life (NAN: the
			    one that served the fill) */
	uint64_t holds;
};

static const char *const column_names[N_COLUMNS] = {
    "stop",    "start",	  "stop>READY", "open",	  "load",     "sort",
    "holders", "rebuild", "ranges",	"allocs", "va_check", "release",
    "holds",   "reg_chk", "store",	"total",  "exec+rdy",
};

struct opts {
	uint64_t ranges;
	unsigned clients, runs, shares, workers;
	const char *perf; /* --perf PREFIX */
};

/* --perf: the profiler attached to the daemon started last. */
static struct {
	const char *prefix;
	unsigned n;
	pid_t pid;
} perf;

static void perf_attach(void *ctx, pid_t pid)
{
	char out[PATH_MAX], target[16];
	snprintf(out, sizeof(out), "%s.%u", perf.prefix, ++perf.n);
	snprintf(target, sizeof(target), "%d", (int)pid);
	perf.pid = fork();
	if (perf.pid == 0) {
		execlp("perf", "perf", "record", "-q", "-F", "4999", "-g", "-p", target, "-o", out,
		       (char *)NULL);
		_exit(127);
	}
	vt_sleep_ms(500); /* perf is attached by then */
}

/* The daemon exited: its profile is complete. */
static void perf_done(void)
{
	if (perf.pid > 0)
		waitpid(perf.pid, NULL, 0);
	perf.pid = 0;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* ---- filling ---------------------------------------------------------------------------- */

struct client {
	struct vt_raw r;
	uint64_t live;
	uint64_t *kept; /* the first offsets it kept (to share) */
	unsigned n_kept;
};

/* One alloc batch of n ranges of size, a quarter of them freed again; the rest live. */
static int fill_batch(struct client *c, uint64_t size, unsigned n, unsigned want_kept)
{
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(&c->r, vt_req_alloc(&q, NULL, size, 0, n), 60000);
	if (!resp || resp->error != VAD__ERROR__OK ||
	    resp->result_case != VAD__RESPONSE__RESULT_ALLOC || resp->alloc->n_offsets != n) {
		fprintf(stderr,
			"restart_bench: an alloc batch failed after %" PRIu64 " ranges: %s %s\n",
			c->live, resp ? vt_error_name(resp->error) : "no reply",
			resp && resp->message ? resp->message : "");
		if (resp)
			vt_raw_response_free(resp);
		return -1;
	}
	uint64_t gone[BATCH];
	unsigned n_gone = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = resp->alloc->offsets[i];
		if (n >= 4 && i % 4 == 3) {
			gone[n_gone++] = off;
			continue;
		}
		c->live++;
		if (c->n_kept < want_kept)
			c->kept[c->n_kept++] = off;
	}
	vt_raw_response_free(resp);
	if (!n_gone)
		return 0;
	resp = vt_raw_call(&c->r, vt_req_free(&q, NULL, gone, n_gone), 60000);
	int rc = resp && resp->error == VAD__ERROR__OK ? 0 : -1;
	if (rc)
		fprintf(stderr, "restart_bench: a free batch failed: %s\n",
			resp ? vt_error_name(resp->error) : "no reply");
	if (resp)
		vt_raw_response_free(resp);
	return rc;
}

static int fill_client(struct client *c, uint64_t want, unsigned shares)
{
	static const uint64_t sizes[4] = {4096, 8192, 4096, 16384};
	for (unsigned b = 0; c->live < want; b++) {
		uint64_t left = want - c->live;
		unsigned n = left >= BATCH * 3 / 4 ? BATCH : (unsigned)left;
		if (fill_batch(c, sizes[b % 4], n, shares) != 0)
			return -1;
	}
	return 0;
}

/* Client i shares its kept ranges; client i + 1 attaches each. */
static int share_ranges(struct client *from, struct client *to)
{
	for (unsigned i = 0; i < from->n_kept; i++) {
		struct vt_req q;
		Vad__Response *resp =
		    vt_raw_call(&from->r, vt_req_share(&q, NULL, from->kept[i]), 10000);
		if (!resp || resp->error != VAD__ERROR__OK ||
		    resp->result_case != VAD__RESPONSE__RESULT_SHARE) {
			fprintf(stderr, "restart_bench: share failed\n");
			if (resp)
				vt_raw_response_free(resp);
			return -1;
		}
		char token[64];
		snprintf(token, sizeof(token), "%s", resp->share->token);
		vt_raw_response_free(resp);
		resp = vt_raw_call(&to->r, vt_req_attach(&q, token), 10000);
		int ok = resp && resp->error == VAD__ERROR__OK;
		if (resp)
			vt_raw_response_free(resp);
		if (!ok) {
			fprintf(stderr, "restart_bench: attach failed\n");
			return -1;
		}
	}
	return 0;
}

static int fill(const struct vt_daemon *d, struct client *cl, const struct opts *o)
{
	uint64_t t0 = vt_now_ns();
	for (unsigned i = 0; i < o->clients; i++) {
		cl[i].kept = calloc(o->shares ? o->shares : 1, sizeof(uint64_t));
		if (!cl[i].kept || vt_raw_connect(&cl[i].r, d->socket_path) != 0 ||
		    vt_raw_hello(&cl[i].r, "restart-bench") != 0)
			return -1;
	}
	for (unsigned i = 0; i < o->clients; i++) {
		uint64_t want = o->ranges / o->clients + (i < o->ranges % o->clients);
		if (fill_client(&cl[i], want, o->shares) != 0)
			return -1;
	}
	for (unsigned i = 0; o->clients > 1 && i < o->clients; i++)
		if (share_ranges(&cl[i], &cl[(i + 1) % o->clients]) != 0)
			return -1;
	printf("filled %" PRIu64 " live ranges from %u clients (%u shared by each) in %.1f s\n",
	       o->ranges, o->clients, o->clients > 1 ? o->shares : 0,
	       (double)(vt_now_ns() - t0) / 1e9);
	return 0;
}

/* ---- one restart ------------------------------------------------------------------------- */

/* The phase times of the daemon's last line starting with what (its log) into out[]. */
static void parse_line(const char *log_path, const char *what, double *out, uint64_t *holds)
{
	for (int i = 0; i < N_PHASES; i++)
		out[i] = NAN;
	FILE *f = fopen(log_path, "r");
	if (!f)
		return;
	char line[2048], last[2048] = "";
	while (fgets(line, sizeof(line), f))
		if (strstr(line, what))
			snprintf(last, sizeof(last), "%s", line);
	fclose(f);
	for (int i = 0; i < N_PHASES; i++) {
		char key[64];
		snprintf(key, sizeof(key), " %s ", phase_names[i]);
		const char *p = strstr(last, key);
		if (p)
			out[i] = strtod(p + strlen(key), NULL);
	}
	const char *h = strstr(last, "; ");
	if (holds)
		*holds = h ? strtoull(h + 2, NULL, 10) : 0;
}

/* The daemon's last "restore: phases" and "restore: cpu" lines. */
static void read_phases(const char *log_path, struct run *r)
{
	parse_line(log_path, "restore: phases", &r->col[3], &r->holds);
	parse_line(log_path, "restore: cpu", r->cpu, NULL);
}

static bool first_stop = true; /* the daemon that served the fill is stopped next */

static int restart(struct fdstore_standin *m, char *const argv[], const char *log_path, int sig,
		   uint64_t ranges, struct run *r)
{
	uint64_t t0 = vt_now_ns();
	if (kill(m->pid, sig) != 0 || standin_wait_exit(m, 120000) != 0)
		return -1;
	uint64_t t1 = vt_now_ns();
	r->life_cpu = first_stop ? NAN : m->cpu_ms;
	first_stop = false;
	if (sig == SIGTERM && (!WIFEXITED(m->status) || WEXITSTATUS(m->status) != 0)) {
		fprintf(stderr, "restart_bench: the daemon's stop failed (status 0x%x)\n",
			m->status);
		return -1;
	}
	perf_done();
	if (standin_start(m, argv, log_path) != 0)
		return -1;
	if (perf.prefix && standin_resume(m, perf_attach, NULL) != 0)
		return -1;
	if (standin_wait_ready(m, 120000) != 0)
		return -1;
	r->col[0] = ms(t1 - t0);
	r->col[1] = ms(m->ready_ns - t1);
	r->col[2] = ms(m->ready_ns - t0);
	read_phases(log_path, r);
	r->col[N_COLUMNS - 1] = r->col[1] - r->col[3 + N_PHASES - 1];
	struct stat sb;
	int fd = standin_fd_prefixed(m, "state.");
	r->state_bytes_per_range =
	    fd >= 0 && fstat(fd, &sb) == 0 ? (double)sb.st_blocks * 512 / (double)ranges : NAN;
	return 0;
}

/* ---- report ------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void print_header(void)
{
	printf("%-6s", "kind");
	for (int c = 0; c < N_COLUMNS; c++)
		printf(" %8s", column_names[c]);
	printf(" %8s %9s %8s\n", "B/range", "holds", "life_cpu");
}

static void print_run(const char *kind, const struct run *r)
{
	printf("%-6s", kind);
	for (int c = 0; c < N_COLUMNS; c++)
		printf(" %8.1f", r->col[c]);
	printf(" %8.1f %9" PRIu64 " %8.1f\n", r->state_bytes_per_range, r->holds, r->life_cpu);
	fflush(stdout);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_median(const char *kind, const struct run *runs, unsigned n)
{
	struct run med = {0};
	double v[MAX_RUNS];
	for (int c = 0; c <= N_COLUMNS; c++) {
		for (unsigned i = 0; i < n; i++)
			v[i] = c < N_COLUMNS ? runs[i].col[c] : runs[i].state_bytes_per_range;
		if (c < N_COLUMNS)
			med.col[c] = median(v, n);
		else
			med.state_bytes_per_range = median(v, n);
	}
	unsigned k = 0; /* the daemons' CPU, those whose whole life is a restore and a stop */
	for (unsigned i = 0; i < n; i++)
		if (!isnan(runs[i].life_cpu))
			v[k++] = runs[i].life_cpu;
	med.life_cpu = k ? median(v, k) : NAN;
	med.holds = runs[n - 1].holds;
	char label[16];
	snprintf(label, sizeof(label), "%s~", kind);
	print_run(label, &med);
}

/* The daemon's CPU time per phase, median over the runs, under the wall-clock columns. */
static void print_cpu_median(const char *kind, const struct run *runs, unsigned n)
{
	double v[MAX_RUNS];
	printf("%-6s %8s %8s %8s", kind, "", "", "");
	for (int i = 0; i < N_PHASES; i++) {
		for (unsigned k = 0; k < n; k++)
			v[k] = runs[k].cpu[i];
		printf(" %8.1f", median(v, n));
	}
	printf("\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	*o =
	    (struct opts){.ranges = 1000000, .clients = 4, .runs = 5, .shares = 1000, .workers = 2};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return -1;
		if (strcmp(a, "--ranges") == 0)
			o->ranges = strtoull(v, NULL, 10);
		else if (strcmp(a, "--clients") == 0)
			o->clients = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--runs") == 0)
			o->runs = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--shares") == 0)
			o->shares = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--workers") == 0)
			o->workers = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--perf") == 0)
			o->perf = v;
		else
			return -1;
		i++;
	}
	if (!o->ranges || !o->clients || o->clients > 64 || !o->runs || o->runs > MAX_RUNS ||
	    !o->workers || o->shares > o->ranges / o->clients / 2)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse(argc, argv, &o) != 0) {
		fprintf(stderr, "usage: restart_bench [--ranges N] [--clients C] [--runs R] "
				"[--shares S] [--workers W] [--perf PREFIX]\n");
		return 2;
	}
	struct vt_daemon d;
	if (vt_daemon_init(&d) != 0)
		return 1;
	char vad_extra[512], arena[128], notify[PATH_MAX];
	snprintf(vad_extra, sizeof(vad_extra),
		 "workers = %u\nlog_level = info\nresume_grace = 1h\nmax_ranges_client = "
		 "unlimited\nmax_ranges_uid = unlimited\n",
		 o.workers);
	/* Room for the ranges (8 KiB on average), the gaps between them, and slack. */
	snprintf(arena, sizeof(arena), "[arena default]\nsize = %" PRIu64 "M\n",
		 (o.ranges * 8192 * 4 / 3 >> 20) + 512);
	snprintf(notify, sizeof(notify), "%s/notify.sock", d.dir);
	struct fdstore_standin m;
	if (vt_daemon_write_config(&d, vad_extra, arena) != 0 || standin_open(&m, notify) != 0)
		return 1;
	char *vad_argv[] = {d.vad_bin, "-c", d.conf_path, "--foreground", NULL};
	int rc = 1;
	struct client *cl = calloc(o.clients, sizeof(*cl));
	struct run polite[MAX_RUNS], crash[MAX_RUNS];
	if (!cl || standin_start(&m, vad_argv, d.log_path) != 0 ||
	    standin_wait_ready(&m, 60000) != 0)
		goto out;
	d.pid = m.pid;
	if (fill(&d, cl, &o) != 0)
		goto out;
	perf.prefix = o.perf;
	m.hold_start = o.perf != NULL;
	print_header();
	for (unsigned i = 0; i < 2 * o.runs; i++) {
		bool kill9 = i % 2; /* interleaved: the machine's noise hits both kinds alike */
		struct run *r = kill9 ? &crash[i / 2] : &polite[i / 2];
		if (restart(&m, vad_argv, d.log_path, kill9 ? SIGKILL : SIGTERM, o.ranges, r) != 0)
			goto out;
		d.pid = m.pid;
		if (i == 0) /* their daemon is gone: the next ones keep their holds */
			for (unsigned k = 0; k < o.clients; k++)
				vt_raw_close(&cl[k].r);
		if (r->holds < o.ranges) {
			fprintf(stderr,
				"restart_bench: the daemon restored %" PRIu64
				" holds where %" PRIu64 " ranges live\n",
				r->holds, o.ranges);
			goto out;
		}
		print_run(kill9 ? "kill9" : "term", r);
	}
	printf("median of %u runs each:\n", o.runs);
	print_median("term", polite, o.runs);
	print_median("kill9", crash, o.runs);
	printf("the daemon's CPU time per phase (ms, median; total: every thread's):\n");
	print_cpu_median("term", polite, o.runs);
	print_cpu_median("kill9", crash, o.runs);
	printf(
	    "columns, ms: stop = the signal to the exit; start = the exec to READY; then the "
	    "daemon's phases (its \"restore: phases\" line; rebuild is the wall time of "
	    "ranges .. reg_chk, allocs/va_check/release on one thread overlapping "
	    "holds/reg_chk on another); exec+rdy = start less the daemon's total (exec, "
	    "config, READY); B/range = the stored state file's memory per live range; life_cpu = "
	    "the CPU time of the daemon this restart stopped over its whole life (its own "
	    "restore, idle, and this stop: every thread, from wait4)\n");
	rc = 0;
out:
	if (m.pid) {
		kill(m.pid, SIGTERM);
		standin_wait_exit(&m, 120000);
	}
	perf_done();
	d.pid = 0;
	if (rc)
		vt_daemon_print_log(&d, 30);
	standin_close(&m);
	vt_daemon_destroy(&d);
	for (unsigned i = 0; cl && i < o.clients; i++)
		free(cl[i].kept);
	free(cl);
	return rc;
}
