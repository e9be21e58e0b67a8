/* hostile_util.c - baselines and bystander probes for hostile and fault tests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostile_util.h"

#define PROBE_CAP  100000
#define PROBE_SIZE 4096u

long vt_rss_kb(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "hostile: %s: %s\n", path, strerror(errno));
		return -1;
	}
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int quiet_fd_count(pid_t pid)
{
	int best = vt_fd_count(pid);
	for (int i = 0; i < 30; i++) {
		vt_sleep_ms(10);
		int n = vt_fd_count(pid);
		if (n >= 0 && (best < 0 || n < best))
			best = n;
	}
	return best;
}

int vt_baseline_take(const struct vt_daemon *d, struct vt_baseline *b)
{
	memset(b, 0, sizeof(*b));
	struct vad_stats s;
	if (vt_purge(d) != 0 || vt_stats(d, &s) != 0)
		return -1;
	b->busy = s.busy_bytes;
	b->clients = s.clients > 0 ? s.clients - 1 : 0; /* minus vt_stats's own connection */
	b->fds = quiet_fd_count(d->pid);
	b->rss_kb = vt_rss_kb(d->pid);
	if (b->fds < 0 || b->rss_kb < 0)
		return -1;
	return 0;
}

int vt_baseline_check(const struct vt_daemon *d, const struct vt_baseline *b, int timeout_ms)
{
	if (!vt_daemon_alive((struct vt_daemon *)d)) {
		fprintf(stderr, "hostile: the daemon is gone\n");
		vt_daemon_print_log(d, 40);
		return -1;
	}
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct vad_stats s = {0};
	for (;;) {
		/* Fewer clients than at the baseline is no leak: a connection of the previous
		 * test may still have been closing when the baseline was taken. */
		if (vt_purge(d) == 0 && vt_stats(d, &s) == 0 && s.busy_bytes == b->busy &&
		    s.clients <= b->clients + 1)
			break;
		if (vt_now_ns() >= deadline) {
			fprintf(stderr,
				"hostile: after %d ms busy bytes are %llu (baseline %llu), clients "
				"%u (baseline %u)\n",
				timeout_ms, (unsigned long long)s.busy_bytes,
				(unsigned long long)b->busy, s.clients > 0 ? s.clients - 1 : 0,
				b->clients);
			return -1;
		}
		vt_sleep_ms(20);
	}
	/* After the wait: right after a test closed its connections at max_clients, the daemon
	 * may not have seen the closes yet and would refuse the check's connection. */
	if (vt_check_invariants(d) != 0)
		return -1;
	int fds = vt_wait_fds(d, b->fds, timeout_ms);
	if (fds > b->fds) {
		/* A connection closing right now may hold one for a moment: look again. */
		fds = quiet_fd_count(d->pid);
		if (fds > b->fds) {
			fprintf(stderr, "hostile: the daemon has %d open fds, baseline %d\n", fds,
				b->fds);
			return -1;
		}
	}
	return 0;
}

int vt_daemon_wrap_unprivileged(struct vt_daemon *d, int nofile, bool hard_too)
{
	char path[sizeof(d->vad_bin)];
	if ((size_t)snprintf(path, sizeof(path), "%s/vad-unprivileged", d->dir) >= sizeof(path))
		return -1;
	if (vt_is_root() && access("/usr/bin/setpriv", X_OK) != 0) {
		fprintf(stderr, "hostile: /usr/bin/setpriv is missing: cannot drop to nobody\n");
		return -1;
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "hostile: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "#!/bin/sh\nulimit -S -n %d || exit 125\n", nofile);
	if (hard_too)
		fprintf(f, "ulimit -H -n %d || exit 125\n", nofile);
	if (vt_is_root())
		fprintf(f,
			"exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups "
			"--inh-caps=-all %s \"$@\"\n",
			vt_nobody_path(d->vad_bin));
	else
		fprintf(f, "exec %s \"$@\"\n", d->vad_bin);
	if (fclose(f) != 0 || chmod(path, 0755) != 0) {
		fprintf(stderr, "hostile: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	memcpy(d->vad_bin, path, sizeof(path));
	/* nobody must create the socket and the stats database in the directory. */
	if (vt_is_root() && chown(d->dir, 65534, 65534) != 0) {
		fprintf(stderr, "hostile: chown %s: %s\n", d->dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- probes ------------------------------------------------------------------------------ */

int vt_probe_open(struct vt_probe *p, const struct vt_daemon *d, const char *name, int timeout_ms)
{
	memset(p, 0, sizeof(*p));
	p->timeout_ms = timeout_ms;
	p->cap = PROBE_CAP;
	p->lat_ns = malloc(p->cap * sizeof(*p->lat_ns));
	if (!p->lat_ns)
		return -1;
	if (vt_raw_connect(&p->raw, d->socket_path) != 0 || vt_raw_hello(&p->raw, name) != 0) {
		vt_raw_close(&p->raw);
		free(p->lat_ns);
		p->lat_ns = NULL;
		return -1;
	}
	return 0;
}

static void probe_fail(struct vt_probe *p, const char *what, int code)
{
	if (!p->failed)
		snprintf(p->first_error, sizeof(p->first_error), "%s: %s", what,
			 code >= 0 ? vt_error_name(code) : "no answer in time or connection lost");
	p->failed++;
}

/* One alloc, touch-free, free round pair; its latency is the time of both calls. */
static void probe_once(struct vt_probe *p)
{
	uint64_t t0 = vt_now_ns();
	struct vt_req q;
	Vad__Response *resp =
	    vt_raw_call(&p->raw, vt_req_alloc(&q, NULL, PROBE_SIZE, 0, 0), p->timeout_ms);
	if (!resp) {
		probe_fail(p, "alloc", -1);
		return;
	}
	if (resp->error != VAD__ERROR__OK || !resp->alloc || resp->alloc->n_offsets != 1) {
		probe_fail(p, "alloc", resp->error);
		vt_raw_response_free(resp);
		return;
	}
	uint64_t off = resp->alloc->offsets[0];
	vt_raw_response_free(resp);

	resp = vt_raw_call(&p->raw, vt_req_free(&q, NULL, &off, 1), p->timeout_ms);
	if (!resp) {
		probe_fail(p, "free", -1);
		return;
	}
	if (resp->error != VAD__ERROR__OK)
		probe_fail(p, "free", resp->error);
	else if (p->n < p->cap)
		p->lat_ns[p->n++] = vt_now_ns() - t0;
	vt_raw_response_free(resp);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void summarise(struct vt_probe *p, struct vt_latency *out)
{
	memset(out, 0, sizeof(*out));
	out->n = p->n;
	out->failed = p->failed;
	if (!p->n)
		return;
	qsort(p->lat_ns, p->n, sizeof(*p->lat_ns), cmp_u64);
	out->median_ns = p->lat_ns[p->n / 2];
	out->p99_ns = p->lat_ns[(size_t)p->n * 99 / 100];
	out->max_ns = p->lat_ns[p->n - 1];
}

int vt_probe_measure(struct vt_probe *p, unsigned n, struct vt_latency *out)
{
	p->n = p->failed = 0;
	p->first_error[0] = '\0';
	for (unsigned i = 0; i < n && p->failed == 0; i++)
		probe_once(p);
	summarise(p, out);
	if (p->failed)
		fprintf(stderr, "hostile: probe: %s\n", p->first_error);
	return p->failed ? -1 : 0;
}

static void *probe_main(void *arg)
{
	struct vt_probe *p = arg;
	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		probe_once(p);
		if (p->failed) {
			__atomic_store_n(&p->gave_up, 1, __ATOMIC_RELEASE);
			break; /* a lost connection cannot recover; report it */
		}
		__atomic_store_n(&p->done, p->n, __ATOMIC_RELEASE);
		vt_sleep_ms(1);
	}
	return NULL;
}

int vt_probe_start(struct vt_probe *p)
{
	p->n = p->failed = 0;
	p->first_error[0] = '\0';
	__atomic_store_n(&p->done, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&p->gave_up, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&p->stop, 0, __ATOMIC_RELEASE);
	if (pthread_create(&p->thread, NULL, probe_main, p) != 0) {
		fprintf(stderr, "hostile: pthread_create failed\n");
		return -1;
	}
	p->running = true;
	return 0;
}

int vt_probe_wait(struct vt_probe *p, unsigned n, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		unsigned done = __atomic_load_n(&p->done, __ATOMIC_ACQUIRE);
		if (done >= n)
			return 0;
		if (__atomic_load_n(&p->gave_up, __ATOMIC_ACQUIRE)) {
			fprintf(stderr, "hostile: probe failed after %u of %u round trips\n", done,
				n);
			return -1;
		}
		if (vt_now_ns() >= deadline) {
			fprintf(stderr, "hostile: probe did %u of %u round trips in %d ms\n", done,
				n, timeout_ms);
			return -1;
		}
		vt_sleep_ms(5);
	}
}

void vt_probe_stop(struct vt_probe *p, struct vt_latency *out)
{
	if (p->running) {
		__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
		pthread_join(p->thread, NULL);
		p->running = false;
	}
	summarise(p, out);
	if (p->failed)
		fprintf(stderr, "hostile: probe: %s\n", p->first_error);
}

void vt_probe_close(struct vt_probe *p)
{
	if (p->running) {
		struct vt_latency l;
		vt_probe_stop(p, &l);
	}
	vt_raw_close(&p->raw);
	free(p->lat_ns);
	p->lat_ns = NULL;
}

void vt_latency_print(const char *label, const struct vt_latency *l)
{
	printf("%s: %u round trips, median %.1f us, p99 %.1f us, max %.1f us, %u failed\n", label,
	       l->n, l->median_ns / 1e3, l->p99_ns / 1e3, l->max_ns / 1e3, l->failed);
	fflush(stdout);
}
