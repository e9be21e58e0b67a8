/*
 * daemon_main.c - vabench --daemon SOCK / --echo: options, the run matrix, drivers as threads
 * or processes, merged results. See daemon_bench.h for what the clients do.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cli.h"
#include "daemon_bench.h"
#include "vad.h"

#define MAX_LIST 16

struct dopts {
	struct db_params base;
	unsigned clients[MAX_LIST], pipes[MAX_LIST], batches[MAX_LIST];
	const struct db_shape *shapes[MAX_LIST];
	unsigned nclients, npipes, nbatches, nshapes;
	bool vad, echo, json;
	unsigned repeat;
	const char *out_path;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vabench --daemon SOCK [options]   load a running vad through its socket\n"
		"       vabench --echo [options]          the socketpair echo baseline only\n"
		"  --daemon SOCK      the daemon's socket (raw protocol clients)\n"
		"  --libvad           use the real client library instead of the raw protocol\n"
		"                     (P threads share each connection)\n"
		"  --resp             SOCK is a Redis server: every request is redis-benchmark -t\n"
		"                     set's SET key:__rand_int__ xxx (the reference, measured by\n"
		"                     this same client)\n"
		"  --echo             also run the echo baseline (1 client, same frame sizes)\n"
		"  --clients LIST     connections (default 1)\n"
		"  --pipeline LIST    requests in flight per connection (default 1)\n"
		"  --burst            pipeline in bursts: send P, wait for all P replies, send P\n"
		"                     again (redis-benchmark -P); default: a window, each reply\n"
		"                     sends the next request at once; with --libvad: one thread\n"
		"                     drives every client with tickets (vad_alloc_submit,\n"
		"                     vad_wait), P in flight each, instead of P blocking threads\n"
		"  --batch LIST       ranges per request (default 1)\n"
		"  --workload LIST    fix_size, random_size, fix_align, random_size_align\n"
		"                     (default fix_size)\n"
		"  --size BYTES       fix_size's size, the other shapes' unit (default 4K)\n"
		"  --drivers N        client threads (or processes) driving the connections; a\n"
		"                     driver with several connections multiplexes them with epoll\n"
		"                     (default: one per connection)\n"
		"  --procs            drivers are processes, not threads (the echo server too)\n"
		"  --touch            write into every range (maps the arena): every byte with\n"
		"                     --libvad and --private, one byte per page with raw clients\n"
		"  --populate         --libvad: allocate with VAD_POPULATE (prefaulted ranges)\n"
		"  --private KIND     no daemon: the same loop on process-private memory, KIND\n"
		"                     malloc (malloc + free) or mmap (mmap + munmap), one thread\n"
		"                     per client, the baseline of --touch\n"
		"  --seconds S        measure for S seconds (default 2)\n"
		"  --ops N            instead: N requests per connection\n"
		"  --arena NAME       arena to allocate in (default: the daemon's default)\n"
		"  --repeat N         run the matrix N times interleaved, keep each row's best\n"
		"  --daemon-pid PID   also report the daemon's CPU time per request\n"
		"  --label TEXT       carried into every output row\n"
		"  --seed N           random seed (default 1)\n"
		"  --json             JSON lines on stdout, the table on stderr\n"
		"  --out FILE         also append the JSON lines to FILE\n"
		"Latencies are request round trips as the client sees them (send to reply); with\n"
		"pipelining they include the time a request waits behind the others.\n");
}

bool daemon_bench_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--daemon") == 0 || strncmp(argv[i], "--daemon=", 9) == 0 ||
		    strcmp(argv[i], "--echo") == 0 || strcmp(argv[i], "--private") == 0 ||
		    strncmp(argv[i], "--private=", 10) == 0)
			return true;
	return false;
}

static int parse_uint_list(char *arg, unsigned *vals, unsigned *n, unsigned max)
{
	char *save = NULL;
	*n = 0;
	for (char *t = strtok_r(arg, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (*n >= MAX_LIST || bench_parse_u64(t, &v) || v < 1 || v > max)
			return -1;
		vals[(*n)++] = (unsigned)v;
	}
	return *n ? 0 : -1;
}

enum {
	O_DAEMON = 256,
	O_LIBVAD,
	O_RESP,
	O_ECHO,
	O_CLIENTS,
	O_PIPE,
	O_BURST,
	O_BATCH,
	O_WORKLOAD,
	O_SIZE,
	O_DRIVERS,
	O_PROCS,
	O_TOUCH,
	O_POPULATE,
	O_PRIVATE,
	O_SECONDS,
	O_OPS,
	O_ARENA,
	O_REPEAT,
	O_DPID,
	O_LABEL,
	O_SEED,
	O_JSON,
	O_OUT,
	O_HELP,
};

static const struct option dlong[] = {
    {"daemon", required_argument, NULL, O_DAEMON},
    {"libvad", no_argument, NULL, O_LIBVAD},
    {"resp", no_argument, NULL, O_RESP},
    {"echo", no_argument, NULL, O_ECHO},
    {"clients", required_argument, NULL, O_CLIENTS},
    {"pipeline", required_argument, NULL, O_PIPE},
    {"burst", no_argument, NULL, O_BURST},
    {"batch", required_argument, NULL, O_BATCH},
    {"workload", required_argument, NULL, O_WORKLOAD},
    {"size", required_argument, NULL, O_SIZE},
    {"drivers", required_argument, NULL, O_DRIVERS},
    {"procs", no_argument, NULL, O_PROCS},
    {"touch", no_argument, NULL, O_TOUCH},
    {"populate", no_argument, NULL, O_POPULATE},
    {"private", required_argument, NULL, O_PRIVATE},
    {"seconds", required_argument, NULL, O_SECONDS},
    {"ops", required_argument, NULL, O_OPS},
    {"arena", required_argument, NULL, O_ARENA},
    {"repeat", required_argument, NULL, O_REPEAT},
    {"daemon-pid", required_argument, NULL, O_DPID},
    {"label", required_argument, NULL, O_LABEL},
    {"seed", required_argument, NULL, O_SEED},
    {"json", no_argument, NULL, O_JSON},
    {"out", required_argument, NULL, O_OUT},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

/* 0 to run, 1 to exit successfully, 2 on a usage error. */
static int parse(int argc, char **argv, struct dopts *o)
{
	int c;
	uint64_t v;
	char *end, *save, *t;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", dlong, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case O_DAEMON:
			o->base.socket = optarg;
			o->vad = true;
			break;
		case O_PRIVATE:
			if (strcmp(optarg, "malloc") != 0 && strcmp(optarg, "mmap") != 0) {
				fprintf(stderr,
					"vabench: --private takes malloc or mmap, not '%s'\n",
					optarg);
				return 2;
			}
			o->base.mode = optarg[1] == 'a' ? DB_MALLOC : DB_MMAP;
			o->base.socket = "(private memory)";
			o->vad = true;
			break;
		case O_POPULATE:
			o->base.populate = true;
			break;
		case O_LIBVAD:
		case O_RESP:
			if (o->base.mode != DB_RAW) {
				fprintf(stderr,
					"vabench: --libvad and --resp exclude each other\n");
				return 2;
			}
			o->base.mode = c == O_LIBVAD ? DB_LIBVAD : DB_RESP;
			break;
		case O_ECHO:
			o->echo = true;
			break;
		case O_CLIENTS:
			rc = parse_uint_list(optarg, o->clients, &o->nclients, 4096);
			break;
		case O_PIPE:
			rc = parse_uint_list(optarg, o->pipes, &o->npipes, 4096);
			break;
		case O_BURST:
			o->base.burst = true;
			break;
		case O_BATCH:
			rc = parse_uint_list(optarg, o->batches, &o->nbatches, 1024);
			break;
		case O_WORKLOAD:
			o->nshapes = 0;
			save = NULL;
			for (t = strtok_r(optarg, ",", &save); t && !rc;
			     t = strtok_r(NULL, ",", &save)) {
				if (o->nshapes >= MAX_LIST ||
				    !(o->shapes[o->nshapes] = db_shape_find(t)))
					rc = -1;
				else
					o->nshapes++;
			}
			break;
		case O_SIZE:
			rc = bench_parse_u64(optarg, &o->base.unit);
			if (!rc && o->base.unit == 0)
				rc = -1;
			break;
		case O_DRIVERS:
			rc = bench_parse_u64(optarg, &v);
			if (!rc && (v < 1 || v > 4096))
				rc = -1;
			o->base.drivers = (unsigned)v;
			break;
		case O_PROCS:
			o->base.procs = true;
			break;
		case O_TOUCH:
			o->base.touch = true;
			break;
		case O_SECONDS:
			o->base.seconds = strtod(optarg, &end);
			rc = *end || o->base.seconds <= 0 ? -1 : 0;
			break;
		case O_OPS:
			rc = bench_parse_u64(optarg, &o->base.ops);
			break;
		case O_ARENA:
			o->base.arena = optarg;
			break;
		case O_REPEAT:
			rc = bench_parse_u64(optarg, &v);
			if (!rc && (v < 1 || v > 100))
				rc = -1;
			o->repeat = (unsigned)v;
			break;
		case O_DPID:
			rc = bench_parse_u64(optarg, &v);
			o->base.daemon_pid = (int)v;
			break;
		case O_LABEL:
			o->base.label = optarg;
			break;
		case O_SEED:
			rc = bench_parse_u64(optarg, &o->base.seed);
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_OUT:
			o->out_path = optarg;
			break;
		case O_HELP:
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
		if (bench_cli_check_value(rc, dlong[c - O_DAEMON].name, optarg))
			return 2;
	}
	if (bench_cli_no_operands(argc, argv, optind))
		return 2;
	if (o->base.mode == DB_RESP &&
	    (o->base.touch || o->nbatches > 1 || o->batches[0] > 1 || o->nshapes > 1)) {
		fprintf(stderr, "vabench: --resp sends single SETs: no --touch, --libvad, --batch "
				"above 1 or other workloads\n");
		return 2;
	}
	if (o->base.procs && o->base.mode == DB_LIBVAD) {
		fprintf(stderr, "vabench: --procs works with raw clients only (a vad_client "
				"cannot be shared across processes)\n");
		return 2;
	}
	return 0;
}

/* ---- one run -------------------------------------------------------------------------------- */

static void *driver_thread(void *arg)
{
	struct db_driver *d = arg;
	if (d->p->mode == DB_LIBVAD)
		db_libvad_driver(d);
	else if (d->p->mode == DB_MALLOC || d->p->mode == DB_MMAP)
		db_private_driver(d);
	else
		db_raw_driver(d);
	return NULL;
}

void db_run(const struct db_params *p, struct db_result *r)
{
	memset(r, 0, sizeof(*r));
	if (p->mode == DB_ECHO) {
		db_echo_run(p, r);
		return;
	}
	bool libvad = p->mode == DB_LIBVAD;
	bool private = p->mode == DB_MALLOC || p->mode == DB_MMAP;
	/* libvad with --burst: pipelined, clients spread over drivers as raw's are. */
	bool pipelined = libvad && p->burst;
	unsigned nd = libvad && !pipelined ? p->clients * p->pipeline
		      : private		   ? p->clients
				: (p->drivers && p->drivers < p->clients ? p->drivers : p->clients);
	size_t bytes = nd * sizeof(struct db_driver) + sizeof(pthread_barrier_t);
	/* Shared memory, so process drivers report through it too. */
	void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_t *th = calloc(nd, sizeof(*th));
	pid_t *pids = calloc(nd, sizeof(*pids));
	vad_client **clients = libvad ? calloc(p->clients, sizeof(*clients)) : NULL;
	if (mem == MAP_FAILED || !th || !pids || (libvad && !clients)) {
		db_fail(r, "out of memory for %u drivers", nd);
		goto out;
	}
	pthread_barrier_t *bar = mem;
	struct db_driver *ds = (struct db_driver *)((char *)mem + sizeof(pthread_barrier_t));
	pthread_barrierattr_t ba;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(bar, &ba, nd + 1);
	pthread_barrierattr_destroy(&ba);

	for (unsigned i = 0; libvad && i < p->clients; i++) {
		int rc = vad_connect(p->socket, "vabench", &clients[i]);
		if (rc != VAD_OK) {
			db_fail(r, "vad_connect(%s): %s", p->socket, vad_strerror(rc));
			clients[i] = NULL;
		}
	}
	unsigned started = 0;
	for (unsigned i = 0; i < nd; i++) {
		struct db_driver *d = &ds[i];
		memset(d, 0, sizeof(*d));
		d->p = p;
		d->index = i;
		d->barrier = bar;
		if (libvad && !pipelined) {
			d->client = clients[i / p->pipeline];
		} else {
			d->client = clients; /* pipelined libvad: the driver's are in there */
			d->first_conn = (unsigned)((uint64_t)i * p->clients / nd);
			d->n_conns =
			    (unsigned)((uint64_t)(i + 1) * p->clients / nd) - d->first_conn;
		}
		if (p->procs) {
			pid_t pid = fork();
			if (pid == 0) {
				driver_thread(d);
				_exit(0);
			}
			if (pid < 0)
				break;
			pids[i] = pid;
		} else if (pthread_create(&th[i], NULL, driver_thread, d) != 0) {
			break;
		}
		started++;
	}
	if (started < nd) {
		/* The barrier counts every driver: without them it would never open. */
		fprintf(stderr, "vabench: could only start %u of %u drivers; exiting\n", started,
			nd);
		exit(2);
	}
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	pthread_barrier_wait(bar);
	uint64_t dcpu0 = p->daemon_pid > 0 ? db_pid_cpu_ns(p->daemon_pid) : 0;
	for (unsigned i = 0; i < nd; i++) {
		if (p->procs) {
			int st;
			while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
				;
		} else {
			pthread_join(th[i], NULL);
		}
	}
	if (p->daemon_pid > 0)
		r->daemon_cpu_ns = db_pid_cpu_ns(p->daemon_pid) - dcpu0;
	getrusage(RUSAGE_SELF, &ru1);
	r->faults = (uint64_t)((ru1.ru_minflt + ru1.ru_majflt) - (ru0.ru_minflt + ru0.ru_majflt));
	r->csw = (uint64_t)((ru1.ru_nvcsw + ru1.ru_nivcsw) - (ru0.ru_nvcsw + ru0.ru_nivcsw));
	uint64_t t0 = UINT64_MAX, t1 = 0;
	for (unsigned i = 0; i < nd; i++) {
		const struct db_driver *d = &ds[i];
		if (d->r.failed && !r->failed)
			db_fail(r, "%s", d->r.errmsg);
		r->requests += d->r.requests;
		r->items += d->r.items;
		r->allocs += d->r.allocs;
		r->errors += d->r.errors;
		r->cpu_ns += d->r.cpu_ns;
		if (!r->resp_bytes)
			r->resp_bytes = d->r.resp_bytes;
		db_hist_merge(&r->alloc_lat, &d->r.alloc_lat);
		db_hist_merge(&r->all_lat, &d->r.all_lat);
		if (d->t_start && d->t_start < t0)
			t0 = d->t_start;
		if (d->t_end > t1)
			t1 = d->t_end;
	}
	r->wall_ns = t1 > t0 && t0 != UINT64_MAX ? t1 - t0 : 0;
	size_t rq, rs;
	db_frame_sizes(p, &rq, &rs);
	r->req_bytes = rq;
	pthread_barrier_destroy(bar);
out:
	for (unsigned i = 0; clients && i < p->clients; i++)
		if (clients[i])
			vad_close(clients[i]);
	free(clients);
	free(th);
	free(pids);
	if (mem != MAP_FAILED)
		munmap(mem, bytes);
}

/* ---- the matrix ----------------------------------------------------------------------------- */

static double rate(const struct db_result *r)
{
	return r->wall_ns ? (double)r->requests / (double)r->wall_ns : 0;
}

int daemon_bench_main(int argc, char **argv)
{
	struct dopts o = {
	    .base = {.mode = DB_RAW, .arena = "", .unit = 4096, .seconds = 2, .seed = 1},
	    .repeat = 1,
	};
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (!o.nclients)
		o.clients[o.nclients++] = 1;
	if (!o.npipes)
		o.pipes[o.npipes++] = 1;
	if (!o.nbatches)
		o.batches[o.nbatches++] = 1;
	if (!o.nshapes)
		o.shapes[o.nshapes++] = db_shapes[0];

	FILE *table = o.json ? stderr : stdout, *out = NULL;
	if (o.out_path && !(out = fopen(o.out_path, "a"))) {
		fprintf(stderr, "vabench: cannot open %s: %s\n", o.out_path, strerror(errno));
		return 2;
	}
	size_t cap = (size_t)o.nshapes * o.nclients * o.npipes * o.nbatches * 2;
	struct db_params *ps = calloc(cap, sizeof(*ps));
	struct db_result *best = calloc(cap, sizeof(*best));
	struct db_result *cur = malloc(sizeof(*cur));
	if (!ps || !best || !cur) {
		fprintf(stderr, "vabench: out of memory\n");
		return 2;
	}
	size_t n = 0;
	for (unsigned s = 0; s < o.nshapes; s++)
		for (unsigned c = 0; c < o.nclients; c++)
			for (unsigned pi = 0; pi < o.npipes; pi++)
				for (unsigned b = 0; b < o.nbatches; b++) {
					struct db_params p = o.base;
					p.shape = o.shapes[s];
					p.clients = o.clients[c];
					p.pipeline = o.pipes[pi];
					p.batch = o.batches[b];
					if (p.mode == DB_LIBVAD && !p.burst)
						p.drivers = p.clients * p.pipeline;
					else if (p.mode == DB_LIBVAD &&
						 (!p.drivers || p.drivers > p.clients))
						p.drivers = p.clients;
					else if (p.mode == DB_MALLOC || p.mode == DB_MMAP)
						p.drivers = p.clients;
					else if (!p.drivers || p.drivers > p.clients)
						p.drivers = p.clients;
					if (o.vad)
						ps[n++] = p;
					/* The echo: one connection, each pipeline and frame size.
					 */
					if (o.echo && s == 0 && c == 0) {
						p.mode = DB_ECHO;
						p.clients = p.drivers = 1;
						p.touch = false;
						p.daemon_pid = 0;
						ps[n++] = p;
					}
				}
	fprintf(table, "vabench --daemon %s: %zu runs x %u, %.1f s each%s\n",
		o.vad ? o.base.socket : "(echo only)", n, o.repeat, o.base.seconds,
		o.base.ops ? " (or --ops)" : "");
	db_print_header(table);
	int status = 0;
	for (unsigned rep = 0; rep < o.repeat; rep++)
		for (size_t i = 0; i < n; i++) {
			db_run(&ps[i], cur);
			if (rep == 0 || cur->failed ||
			    (!best[i].failed && rate(cur) > rate(&best[i])))
				best[i] = *cur;
			if (rep + 1 < o.repeat)
				continue;
			if (best[i].failed)
				status = 1;
			db_print_row(table, &ps[i], &best[i]);
			if (o.json)
				db_print_json(stdout, &ps[i], &best[i]);
			if (out)
				db_print_json(out, &ps[i], &best[i]);
		}
	free(ps);
	free(best);
	free(cur);
	if (out)
		fclose(out);
	return status;
}
