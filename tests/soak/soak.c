/*
 * soak.c - vasoak: a long run of the real daemon under many clients with mixed workloads,
 * watching for slow leaks and rare corruption.
 *
 * SOAK_CLIENTS threads (default 12), each its own libvad connection, run the vabench shapes
 * through the daemon: fix_size, random_size, aligned (random size and power-of-two
 * alignment up to 2 MiB), batch (alloc and free 16 at once), share (hand tokens to a pool
 * that share_attach threads attach and free) and churn (connect, allocate, hang up with the
 * ranges held). Every range is filled with a pattern when allocated and checked before it is
 * freed, so two clients given overlapping ranges would show. Every SOAK_CHECK_SECONDS (3)
 * the main thread asks the daemon for its invariant check (admin Check) and samples its RSS
 * and open fds. After warm-up (a fifth of the run, at most 60 s) neither may grow: the
 * highest RSS of the last quarter of the run must stay within 10% + 8 MiB of the highest
 * seen right after warm-up, and the fd count within the clients' own connections of it.
 * Each period the config is rewritten (a 32 MiB per-client quota on, then off) and the
 * daemon reloaded with SIGHUP under the load. At the end every client closes, busy bytes return to
 * zero and the daemon stops cleanly.
 *
 * Environment: VAD_BUILD_DIR (default build), SOAK_SECONDS (600), SOAK_CLIENTS (12),
 * SOAK_CHECK_SECONDS (3). Exit status 0 only if every check passed; a summary at the end.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hostile_util.h"

#define PAGE	      4096u
#define MiB	      (1024u * 1024u)
#define HOLD_MAX      64
#define TOKEN_POOL    64
#define STALL_SECONDS 60
#define SOAK_VAD_KEYS "stats_interval = 5s\nlog_level = notice\n"
#define SOAK_ARENAS   "[arena default]\nsize = 8G\n[arena huge-align]\nsize = 1G\nquantum = 64K\n"

enum shape { FIX_SIZE, RANDOM_SIZE, ALIGNED, BATCH, SHARE, SHARE_ATTACH, CHURN, N_SHAPES };
static const char *const shape_names[N_SHAPES] = {"fix_size", "random_size",  "aligned", "batch",
						  "share",    "share_attach", "churn"};

struct held {
	void *p;
	size_t size;
	uint64_t seed;
};

struct worker {
	pthread_t th;
	int index;
	enum shape shape;
	vad_client *c;
	unsigned rng;
	struct held held[HOLD_MAX];
	int n_held;
	uint64_t ops;	   /* atomic: completed operations */
	uint64_t refusals; /* ENOSPC/EQUOTA/ETOKEN: expected under load */
	char error[256];   /* first unexpected failure */
};

static struct vt_daemon daemon_;
static int stop_flag;
static int failed;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

/* Tokens of shared ranges, handed from share to share_attach workers. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static char pool[TOKEN_POOL][VAD_TOKEN_LEN + 1];
static uint64_t pool_seed[TOKEN_POOL];
static int pool_n;

/* Take tok out of the pool if it is still there: a consumer learnt that it is dead. */
static void pool_forget(const char *tok)
{
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < pool_n; i++) {
		if (strcmp(pool[i], tok) == 0) {
			pool_n--;
			memcpy(pool[i], pool[pool_n], sizeof(pool[i]));
			pool_seed[i] = pool_seed[pool_n];
			break;
		}
	}
	pthread_mutex_unlock(&pool_lock);
}

static void fail(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct worker *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&fail_lock);
	if (!w->error[0])
		vsnprintf(w->error, sizeof(w->error), fmt, ap);
	failed = 1;
	pthread_mutex_unlock(&fail_lock);
	va_end(ap);
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
}

static bool stopping(void)
{
	return __atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE);
}

static unsigned rnd(struct worker *w)
{
	return (unsigned)rand_r(&w->rng);
}

static bool expected_refusal(int rc)
{
	return rc == VAD_ENOSPC || rc == VAD_EQUOTA;
}

/* Check that a new range reads zeros (whoever held it before wrote into it: punched, or zeroed
 * in place while pooled), fill it and remember it. */
static void keep(struct worker *w, void *p, size_t size)
{
	uint64_t seed = ((uint64_t)w->index << 40) ^ w->ops ^ (uint64_t)(uintptr_t)p;
	ssize_t nz = vt_first_nonzero(p, size < 2 * PAGE ? size : 2 * PAGE);
	if (nz >= 0)
		fail(
		    w,
		    "%s: new range %p (%zu bytes) has byte 0x%02x at %zd: a previous holder's data",
		    shape_names[w->shape], p, size, ((uint8_t *)p)[nz], nz);
	vt_fill_pattern(p, size < 2 * PAGE ? size : 2 * PAGE, seed);
	w->held[w->n_held++] = (struct held){.p = p, .size = size, .seed = seed};
}

/* Check and free the range at index i. */
static void drop(struct worker *w, int i)
{
	struct held h = w->held[i];
	size_t len = h.size < 2 * PAGE ? h.size : 2 * PAGE;
	ssize_t bad = vt_check_pattern(h.p, len, h.seed);
	if (bad >= 0)
		fail(w,
		     "%s: range %p (%zu bytes) changed at byte %zd while held: another "
		     "client was given overlapping memory",
		     shape_names[w->shape], h.p, h.size, bad);
	int rc = vad_free(w->c, h.p);
	if (rc)
		fail(w, "%s: vad_free: %s", shape_names[w->shape], vad_last_error(w->c));
	w->held[i] = w->held[--w->n_held];
}

static void drop_all(struct worker *w)
{
	while (w->n_held && !failed)
		drop(w, w->n_held - 1);
}

static void one_alloc(struct worker *w, const char *arena, size_t size, size_t align)
{
	void *p;
	int rc = vad_alloc_in(w->c, arena, size, align, &p);
	if (rc == 0) {
		struct vad_range info;
		if (align && vad_range_info(w->c, p, &info) == 0 && (info.offset & (align - 1)))
			fail(w, "aligned: offset %llu is not aligned to %zu",
			     (unsigned long long)info.offset, align);
		keep(w, p, size);
	} else if (expected_refusal(rc)) {
		w->refusals++;
		drop_all(w);
	} else {
		fail(w, "%s: vad_alloc(%zu, %zu): %s", shape_names[w->shape], size, align,
		     vad_last_error(w->c));
	}
}

static void step(struct worker *w)
{
	unsigned r = rnd(w);
	bool grow = w->n_held < 8 || (w->n_held < HOLD_MAX && r % 2);
	switch (w->shape) {
	case FIX_SIZE:
		if (grow)
			one_alloc(w, NULL, PAGE, 0);
		else
			drop(w, (int)(r / 2 % (unsigned)w->n_held));
		break;
	case RANDOM_SIZE:
		if (grow)
			one_alloc(w, NULL, (size_t)(1 + r / 2 % 256) * PAGE, 0);
		else
			drop(w, (int)(r / 2 % (unsigned)w->n_held));
		break;
	case ALIGNED:
		if (grow)
			one_alloc(w, r & 1 ? "huge-align" : NULL, (size_t)(1 + r / 2 % 64) * PAGE,
				  (size_t)PAGE << (r / 128 % 10));
		else
			drop(w, (int)(r / 2 % (unsigned)w->n_held));
		break;
	case BATCH: {
		enum { N = 16 };
		size_t sizes[N];
		void *ptrs[N];
		for (int i = 0; i < N; i++)
			sizes[i] = (size_t)(1 + (r >> i) % 8) * PAGE;
		int rc = vad_alloc_batch(w->c, N, sizes, 0, ptrs);
		if (rc == 0) {
			for (int i = 0; i < N; i++)
				vt_fill_pattern(ptrs[i], PAGE, w->ops + (uint64_t)i);
			for (int i = 0; i < N; i++)
				if (vt_check_pattern(ptrs[i], PAGE, w->ops + (uint64_t)i) >= 0)
					fail(w, "batch: range %d of a batch overlaps another", i);
			rc = vad_free_batch(w->c, N, ptrs);
			if (rc)
				fail(w, "batch: vad_free_batch: %s", vad_last_error(w->c));
		} else if (expected_refusal(rc)) {
			w->refusals++;
		} else {
			fail(w, "batch: vad_alloc_batch: %s", vad_last_error(w->c));
		}
		break;
	}
	case SHARE: {
		/* Allocate, fill, share into the pool (dropping our reference later). */
		if (!grow) {
			drop(w, (int)(r / 2 % (unsigned)w->n_held));
			break;
		}
		size_t size = (size_t)(1 + r / 2 % 16) * PAGE;
		void *p;
		int rc = vad_alloc(w->c, size, 0, &p);
		if (rc) {
			if (!expected_refusal(rc))
				fail(w, "share: vad_alloc: %s", vad_last_error(w->c));
			w->refusals++;
			drop_all(w);
			break;
		}
		keep(w, p, size);
		char tok[VAD_TOKEN_LEN + 1];
		rc = vad_share(w->c, p, tok);
		if (rc) {
			fail(w, "share: vad_share: %s", vad_last_error(w->c));
			break;
		}
		/* The slot from a draw of its own: r is odd whenever grow is decided by it,
		 * and a slot never replaced would keep a token long dead. */
		unsigned pick = rnd(w);
		pthread_mutex_lock(&pool_lock);
		int slot = pool_n < TOKEN_POOL ? pool_n++ : (int)(pick % TOKEN_POOL);
		memcpy(pool[slot], tok, sizeof(tok));
		pool_seed[slot] = w->held[w->n_held - 1].seed;
		pthread_mutex_unlock(&pool_lock);
		break;
	}
	case SHARE_ATTACH: {
		if (!grow) {
			/* Nobody writes a shared range after sharing it, so its bytes
			 * must still be the sharer's when we let go of it. */
			drop(w, (int)(r / 2 % (unsigned)w->n_held));
			break;
		}
		char tok[VAD_TOKEN_LEN + 1] = "";
		uint64_t seed = 0;
		unsigned pick = rnd(w); /* not r: see SHARE */
		pthread_mutex_lock(&pool_lock);
		if (pool_n) {
			int slot = (int)(pick % (unsigned)pool_n);
			memcpy(tok, pool[slot], sizeof(tok));
			seed = pool_seed[slot];
		}
		pthread_mutex_unlock(&pool_lock);
		if (!tok[0])
			break;
		void *p;
		size_t size;
		int rc = vad_attach(w->c, tok, &p, &size);
		if (rc == VAD_ETOKEN) {
			/* Its owner freed it first: the daemon remembers the token as freed,
			 * which is no guess. A consumer that learnt a token is dead does not
			 * try it again, so it leaves the pool; kept, it would be tried long
			 * after the daemon forgot it (VAD_DEAD_TOKENS later deaths), when it
			 * is an unknown token, a guess, and 32 of them close the session. */
			if (!strstr(vad_last_error(w->c), "freed by every holder"))
				fail(w,
				     "share_attach: a token freed lately was refused as not "
				     "freed: %s",
				     vad_last_error(w->c));
			pool_forget(tok);
			w->refusals++;
			break;
		}
		if (rc) {
			if (!expected_refusal(rc))
				fail(w, "share_attach: vad_attach: %s", vad_last_error(w->c));
			w->refusals++;
			break;
		}
		/* The sharer filled it before sharing: we must see the same bytes. */
		size_t len = size < 2 * PAGE ? size : 2 * PAGE;
		if (vt_check_pattern(p, len, seed) >= 0)
			fail(w, "share_attach: attached range does not hold the sharer's bytes");
		w->held[w->n_held++] = (struct held){.p = p, .size = size, .seed = seed};
		break;
	}
	case CHURN: {
		for (int i = 0; i < 4; i++)
			one_alloc(w, NULL, (size_t)(1 + r % 32) * PAGE, 0);
		/* Hang up with the ranges held: the daemon drops them. */
		vad_close(w->c);
		w->c = NULL;
		w->n_held = 0;
		int rc = vad_connect(daemon_.socket_path, "soak-churn", &w->c);
		if (rc)
			fail(w, "churn: vad_connect: %s", vad_last_error(NULL));
		break;
	}
	default:
		break;
	}
	__atomic_add_fetch(&w->ops, 1, __ATOMIC_RELAXED);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	while (!stopping() && w->c)
		step(w);
	if (w->c) {
		drop_all(w);
		vad_close(w->c);
		w->c = NULL;
	}
	return NULL;
}

/* ---- main: samples, checks, summary ------------------------------------------------------ */

struct sample {
	double t;
	long rss_kb;
	int fds;
};

/* Open fds of the daemon, not counting its stats database files (db, -wal, -shm), which
 * SQLite opens on the first snapshot and keeps, nor the scheduler statistics of its worker
 * threads (/proc/PID/task/TID/schedstat), which worker balance opens on its first sample
 * and keeps: one per worker, however long the run. */
static int daemon_fds(void)
{
	char dir[64], link[PATH_MAX], target[PATH_MAX];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)daemon_.pid);
	int n = vt_fd_count(daemon_.pid);
	if (n < 0)
		return n;
	for (int fd = 0; fd < 4096; fd++) {
		snprintf(link, sizeof(link), "%s/%d", dir, fd);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (strncmp(target, daemon_.stats_db, strlen(daemon_.stats_db)) == 0 ||
		    (strncmp(target, "/proc/", 6) == 0 && strstr(target, "/schedstat")))
			n--;
	}
	return n;
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

int main(void)
{
	int seconds = env_int("SOAK_SECONDS", 600);
	int n_workers = env_int("SOAK_CLIENTS", 12);
	int check_every = env_int("SOAK_CHECK_SECONDS", 3);
	if (seconds < 10 || n_workers < N_SHAPES || check_every < 1) {
		fprintf(stderr,
			"vasoak: SOAK_SECONDS >= 10, SOAK_CLIENTS >= %d and "
			"SOAK_CHECK_SECONDS >= 1, please\n",
			N_SHAPES);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (vt_daemon_setup(&daemon_, SOAK_VAD_KEYS, SOAK_ARENAS) != 0)
		return 1;
	printf("vasoak: daemon pid %d on %s; %d clients, %d s, check every %d s\n",
	       (int)daemon_.pid, daemon_.socket_path, n_workers, seconds, check_every);
	fflush(stdout);

	struct worker *w = calloc((size_t)n_workers, sizeof(*w));
	int max_samples = seconds / check_every + 2;
	struct sample *samples = calloc((size_t)max_samples, sizeof(*samples));
	if (!w || !samples)
		return 1;
	long rss_start = vt_rss_kb(daemon_.pid);
	int fds_start = daemon_fds();
	uint64_t t0 = vt_now_ns();
	for (int i = 0; i < n_workers; i++) {
		w[i].index = i;
		w[i].shape = (enum shape)(i % N_SHAPES);
		w[i].rng = (unsigned)(i * 7919 + 17);
		char name[32];
		snprintf(name, sizeof(name), "soak-%s-%d", shape_names[w[i].shape], i);
		if (vt_connect(&daemon_, name, &w[i].c) != 0)
			return 1;
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
			return 1;
	}

	int n_samples = 0, checks = 0, checks_ok = 0, reloads = 0;
	uint64_t last_ops = 0, last_progress = vt_now_ns();
	double warmup = seconds / 5.0 < 60 ? seconds / 5.0 : 60;
	while (!stopping()) {
		vt_sleep_ms(check_every * 1000);
		double t = (double)(vt_now_ns() - t0) / 1e9;
		checks++;
		if (vt_check_invariants(&daemon_) == 0) {
			checks_ok++;
		} else {
			fprintf(stderr, "vasoak: invariant check %d failed at %.0f s\n", checks, t);
			failed = 1;
		}
		/* Reload under load: every other period a per-client quota comes and goes. */
		if (vt_daemon_write_config(
			&daemon_, checks % 2 ? SOAK_VAD_KEYS "quota_client = 32M\n" : SOAK_VAD_KEYS,
			SOAK_ARENAS) == 0 &&
		    vt_daemon_signal(&daemon_, SIGHUP) == 0)
			reloads++;
		if (!vt_daemon_alive(&daemon_)) {
			fprintf(stderr, "vasoak: the daemon died at %.0f s\n", t);
			vt_daemon_print_log(&daemon_, 40);
			failed = 1;
			break;
		}
		if (n_samples < max_samples)
			samples[n_samples++] =
			    (struct sample){t, vt_rss_kb(daemon_.pid), daemon_fds()};
		uint64_t ops = 0;
		for (int i = 0; i < n_workers; i++)
			ops += __atomic_load_n(&w[i].ops, __ATOMIC_RELAXED);
		if (ops != last_ops) {
			last_ops = ops;
			last_progress = vt_now_ns();
		} else if ((vt_now_ns() - last_progress) / 1000000000u > STALL_SECONDS) {
			fprintf(stderr,
				"vasoak: no operation completed for %d s: the daemon stalls\n",
				STALL_SECONDS);
			vt_daemon_print_log(&daemon_, 40);
			_exit(1); /* workers are stuck inside libvad calls */
		}
		printf("  %6.0f s: %llu ops, RSS %ld KiB, %d fds, checks %d/%d\n", t,
		       (unsigned long long)ops, samples[n_samples - 1].rss_kb,
		       samples[n_samples - 1].fds, checks_ok, checks);
		fflush(stdout);
		if (t >= seconds || failed)
			break;
	}
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < n_workers; i++)
		pthread_join(w[i].th, NULL);
	double duration = (double)(vt_now_ns() - t0) / 1e9;

	/* Growth after warm-up: highest of the first post-warm-up quarter vs of the last. */
	long rss_warm = 0, rss_late = 0;
	int fds_warm = 0, fds_late = 0;
	int first = -1;
	for (int i = 0; i < n_samples; i++)
		if (samples[i].t >= warmup) {
			first = i;
			break;
		}
	if (first >= 0) {
		int span = n_samples - first;
		int q = span / 4 > 0 ? span / 4 : 1;
		for (int i = first; i < first + q && i < n_samples; i++) {
			rss_warm = samples[i].rss_kb > rss_warm ? samples[i].rss_kb : rss_warm;
			fds_warm = samples[i].fds > fds_warm ? samples[i].fds : fds_warm;
		}
		for (int i = n_samples - q; i < n_samples; i++) {
			rss_late = samples[i].rss_kb > rss_late ? samples[i].rss_kb : rss_late;
			fds_late = samples[i].fds > fds_late ? samples[i].fds : fds_late;
		}
		if (rss_late > rss_warm + rss_warm / 10 + 8 * 1024) {
			fprintf(stderr,
				"vasoak: daemon RSS grew after warm-up: %ld KiB -> %ld KiB\n",
				rss_warm, rss_late);
			failed = 1;
		}
		if (fds_late > fds_warm + n_workers) {
			fprintf(stderr, "vasoak: daemon fds grew after warm-up: %d -> %d\n",
				fds_warm, fds_late);
			failed = 1;
		}
	}

	/* Everyone gone: nothing held, fds back, a clean stop. */
	struct vad_stats s = {0};
	int end_ok = vt_wait_busy(&daemon_, 0, 1, 10000, &s) == 0;
	if (!end_ok) {
		fprintf(stderr, "vasoak: %llu busy bytes left after every client closed\n",
			(unsigned long long)s.busy_bytes);
		failed = 1;
	}
	int fds_end = daemon_fds();
	for (int i = 0; i < 100 && fds_end > fds_start; i++) {
		vt_sleep_ms(100);
		fds_end = daemon_fds();
	}
	long rss_end = vt_rss_kb(daemon_.pid);
	if (fds_end > fds_start) {
		fprintf(stderr, "vasoak: the daemon has %d fds at the end, %d at the start\n",
			fds_end, fds_start);
		failed = 1;
	}
	if (vt_daemon_stop(&daemon_) != 0)
		failed = 1;

	uint64_t total = 0, refusals = 0;
	printf("\nvasoak summary\n");
	printf("  duration        %.0f s (warm-up %.0f s), %d clients\n", duration, warmup,
	       n_workers);
	for (int k = 0; k < N_SHAPES; k++) {
		uint64_t ops = 0, ref = 0;
		for (int i = 0; i < n_workers; i++)
			if (w[i].shape == (enum shape)k) {
				ops += w[i].ops;
				ref += w[i].refusals;
			}
		printf("  %-15s %llu operations (%llu refused as expected)\n", shape_names[k],
		       (unsigned long long)ops, (unsigned long long)ref);
		total += ops;
		refusals += ref;
	}
	printf("  operations      %llu (%.0f per second), daemon lifetime allocs %llu frees %llu\n",
	       (unsigned long long)total, total / duration, (unsigned long long)s.allocs,
	       (unsigned long long)s.frees);
	printf("  daemon RSS      start %ld KiB, after warm-up %ld KiB, last quarter %ld KiB, "
	       "end %ld KiB\n",
	       rss_start, rss_warm, rss_late, rss_end);
	printf("  daemon fds      (besides stats database, schedstat) start %d, after warm-up %d, "
	       "last "
	       "quarter %d, end %d\n",
	       fds_start, fds_warm, fds_late, fds_end);
	printf("  checks          %d of %d invariant checks passed; %d reloads (SIGHUP) under "
	       "load\n",
	       checks_ok, checks, reloads);
	for (int i = 0; i < n_workers; i++)
		if (w[i].error[0])
			printf("  FAILURE         client %d (%s): %s\n", i, shape_names[w[i].shape],
			       w[i].error);
	printf("  result          %s\n", failed ? "FAILED" : "passed");
	if (!failed)
		vt_daemon_destroy(&daemon_);
	else
		printf("  daemon files    kept in %s\n", daemon_.dir);
	free(w);
	free(samples);
	return failed ? 1 : 0;
}
