/*
 * daemon_bench.h - vabench --daemon: load through the socket (the service, not the library).
 *
 * Three kinds of client, all reporting the same figures:
 *   raw     encodes requests with protobuf-c itself and pipelines P per connection; this
 *           measures the daemon, not a client library (daemon_raw.c);
 *   libvad  the real client library: P threads share one vad_client, or with --burst one
 *           thread keeps P in flight per client with tickets (daemon_libvad.c);
 *   echo    the physical limit: a socketpair and an echo thread, same frame sizes and the
 *           same pipelining as raw (daemon_echo.c);
 *   resp    raw's loops speaking Redis's protocol (SET key xxx) to a Redis server, so the
 *           reference is measured by the same client as vad (daemon_raw.c).
 * Each request is one alloc or one free, alternating per pipeline slot; with batch B an
 * alloc of B ranges, then a free of those B. Connections are spread over D driver threads
 * (or processes with --procs); a driver with several connections multiplexes them with
 * epoll, like redis-benchmark's single event loop.
 */
#ifndef DAEMON_BENCH_H
#define DAEMON_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Latency histogram: log-linear, 32 buckets per power of two (about 3 % resolution). */
#define DB_HIST_SUB_BITS 5
#define DB_HIST_BUCKETS	 ((64 - DB_HIST_SUB_BITS + 1) << DB_HIST_SUB_BITS)

struct db_hist {
	uint64_t n, sum, max;
	uint64_t counts[DB_HIST_BUCKETS];
};

/* raw: vad's protocol; resp: Redis's (SET, to measure Redis with the same client); malloc
 * and mmap: the same alloc/touch/free loop on process-private memory, no daemon (the
 * baselines of the touch matrix). */
enum db_mode { DB_RAW, DB_LIBVAD, DB_ECHO, DB_RESP, DB_MALLOC, DB_MMAP };

/* The size and alignment of the next allocation (bytes; align 0 = the arena quantum). */
struct db_shape {
	const char *name;
	const char *desc;
	void (*next)(uint64_t unit, uint64_t *rng, uint64_t *size, uint64_t *align);
};

struct db_params {
	enum db_mode mode;
	const char *socket; /* raw, libvad */
	const char *arena;  /* "" = the daemon's default arena */
	const struct db_shape *shape;
	uint64_t unit;	   /* bytes: fix_size's size, random_size's step */
	unsigned clients;  /* connections */
	unsigned pipeline; /* requests in flight per connection */
	bool burst;	   /* send P, wait for all P replies, send P again (redis-benchmark -P) */
	unsigned batch;	   /* ranges per request */
	unsigned drivers;  /* threads or processes driving the connections */
	bool procs;	   /* drivers are processes */
	bool touch;	   /* write into every range (maps the arena; libvad and the private
			      baselines write every byte, raw one per page) */
	bool populate;	   /* libvad: allocate with VAD_POPULATE */
	double seconds;	   /* measure this long (when ops == 0) */
	uint64_t ops;	   /* requests per connection; 0 = run for seconds */
	uint64_t seed;
	int daemon_pid;	   /* > 0: report the daemon's CPU time per request */
	const char *label; /* free text carried into the output (e.g. "drain") */
};

struct db_result {
	uint64_t requests;	/* completed in the measured window */
	uint64_t items;		/* ranges allocated plus ranges freed (batch B counts B each) */
	uint64_t allocs;	/* alloc requests completed */
	uint64_t errors;	/* error replies */
	uint64_t wall_ns;	/* measured window */
	uint64_t cpu_ns;	/* this process's CPU time over the window (all drivers) */
	uint64_t daemon_cpu_ns; /* the daemon's, when daemon_pid was given */
	uint64_t faults;	/* page faults of this process over the window (getrusage) */
	uint64_t csw;		/* context switches of this process over the window, voluntary and
				   involuntary (getrusage): what blocking threads pay per call */
	uint64_t req_bytes, resp_bytes; /* frame sizes seen (alloc request, alloc reply) */
	struct db_hist alloc_lat;	/* alloc request round trips */
	struct db_hist all_lat;		/* every request's round trip */
	bool failed;
	char errmsg[256];
};

/* One driver's share of a run. */
struct db_driver {
	const struct db_params *p;
	unsigned index;
	unsigned first_conn, n_conns;
	struct db_result r;
	uint64_t t_start, t_end;
	void *barrier; /* pthread_barrier_t shared by every driver and the parent */
	void *client;  /* libvad: the vad_client this driver's thread shares; pipelined
			  (--burst): the array of every vad_client, this driver's from
			  first_conn */
};

/* Every workload shape, NULL-terminated. */
extern const struct db_shape *const db_shapes[];

/* The shape called name, or NULL. */
const struct db_shape *db_shape_find(const char *name);

/* Entry point of vabench --daemon / --echo (argv as vabench got it). */
int daemon_bench_main(int argc, char **argv);

/* Does argv ask for the daemon bench (--daemon or --echo)? */
bool daemon_bench_wanted(int argc, char **argv);

/* Run one combination; fills r (r->failed with a sentence on failure). */
void db_run(const struct db_params *p, struct db_result *r);

/* Drive the raw-protocol (or RESP) connections of one driver (daemon_raw.c). */
void db_raw_driver(struct db_driver *d);

/* Drive the libvad clients of one driver (daemon_libvad.c). */
void db_libvad_driver(struct db_driver *d);

/* Drive the process-private baseline loop of one driver (daemon_private.c). */
void db_private_driver(struct db_driver *d);

/* Run the echo baseline for p (daemon_echo.c). */
void db_echo_run(const struct db_params *p, struct db_result *r);

/* Frame length of a typical alloc request and reply of p (the echo uses them). */
void db_frame_sizes(const struct db_params *p, size_t *req, size_t *resp);

/* Histograms (daemon_stats.c). */
void db_hist_add(struct db_hist *h, uint64_t ns);
void db_hist_merge(struct db_hist *into, const struct db_hist *from);
uint64_t db_hist_quantile(const struct db_hist *h, double q);

/* Monotonic nanoseconds. */
uint64_t db_now_ns(void);

/* Process CPU time in nanoseconds. */
uint64_t db_cpu_ns(void);

/* CPU time (user + system) of process pid in nanoseconds, 0 if unreadable. */
uint64_t db_pid_cpu_ns(int pid);

/* Print one result as a JSON line / a table row; the header first. */
void db_print_json(FILE *f, const struct db_params *p, const struct db_result *r);
void db_print_header(FILE *f);
void db_print_row(FILE *f, const struct db_params *p, const struct db_result *r);

/* Record a failure sentence in r (first one wins). */
void db_fail(struct db_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
