/*
 * daemon_libvad.c - the same load through the real client library, for honesty. Blocking
 * (the default): every connection is one vad_client shared by P threads (libvad pipelines
 * calls across threads), each thread alternating alloc (or alloc_batch of B) and free
 * (free_batch) with blocking calls. Pipelined (--burst): one thread drives its clients the
 * way the raw driver's --burst does, with libvad's tickets: P allocs submitted per client
 * (held back with VAD_MORE and sent in one send), their tickets waited for, then P frees
 * the same way; one client is driven with blocking waits, several through epoll on their
 * vad_fd with vad_progress. Pointers come back mapped, so --touch writes through the
 * library's own mapping (every byte), and --populate asks for prefaulted ranges
 * (VAD_POPULATE).
 */
#include <errno.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_bench.h"
#include "vad.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Write the whole range, as a user filling what it got would. */
static void touch(void *ptr, size_t size)
{
	memset(ptr, 1, size);
	__asm__ volatile("" : : "r"(ptr) : "memory"); /* the writes are not dead */
}

static void pipelined_driver(struct db_driver *d);

void db_libvad_driver(struct db_driver *d)
{
	const struct db_params *p = d->p;
	if (p->burst) {
		pipelined_driver(d);
		return;
	}
	struct db_result *r = &d->r;
	vad_client *c = d->client;
	unsigned B = p->batch;
	size_t *sizes = calloc(B, sizeof(*sizes));
	void **ptrs = calloc(B, sizeof(*ptrs));
	uint64_t rng = p->seed * 0x9e3779b97f4a7c15ull + d->index + 1;
	bool ok = sizes && ptrs && c;
	if (!ok)
		db_fail(r, c ? "out of memory" : "no client connection");

	pthread_barrier_wait(d->barrier);
	if (!ok)
		goto out;
	uint64_t cpu0 = thread_cpu_ns();
	d->t_start = db_now_ns();
	uint64_t deadline = p->ops ? UINT64_MAX : d->t_start + (uint64_t)(p->seconds * 1e9);
	uint64_t last = d->t_start, issued = 0;
	while (p->ops ? issued < p->ops : last < deadline) {
		uint64_t size, align = 0, a0;
		for (unsigned i = 0; i < B; i++) {
			p->shape->next(p->unit, &rng, &size, i ? &a0 : &align);
			sizes[i] = (size_t)size;
		}
		uint64_t t0 = db_now_ns();
		unsigned flags = p->populate ? VAD_POPULATE : 0;
		int rc = B == 1
			     ? vad_alloc_flags(c, NULL, sizes[0], (size_t)align, flags, &ptrs[0])
			     : vad_alloc_batch_flags(c, NULL, B, sizes, (size_t)align, flags, ptrs);
		uint64_t t1 = db_now_ns();
		if (rc != VAD_OK) {
			r->errors++;
			db_fail(r, "alloc failed: %s (%s)", vad_strerror(rc), vad_last_error(c));
			break;
		}
		if (p->touch)
			for (unsigned i = 0; i < B; i++)
				touch(ptrs[i], sizes[i]);
		uint64_t t2 = db_now_ns();
		rc = B == 1 ? vad_free(c, ptrs[0]) : vad_free_batch(c, B, ptrs);
		uint64_t t3 = db_now_ns();
		if (rc != VAD_OK) {
			r->errors++;
			db_fail(r, "free failed: %s (%s)", vad_strerror(rc), vad_last_error(c));
			break;
		}
		issued += 2;
		if (p->ops || t1 <= deadline) {
			db_hist_add(&r->alloc_lat, t1 - t0);
			db_hist_add(&r->all_lat, t1 - t0);
			r->allocs++;
			r->requests++;
			r->items += B;
		}
		if (p->ops || t3 <= deadline) {
			db_hist_add(&r->all_lat, t3 - t2);
			r->requests++;
			r->items += B;
		}
		last = t3;
	}
	d->t_end = p->ops ? last : deadline;
	if (d->t_end < d->t_start)
		d->t_end = d->t_start;
	d->r.cpu_ns = thread_cpu_ns() - cpu0;
out:
	free(sizes);
	free(ptrs);
}

/* One client of the pipelined driver: its burst of P tickets in flight. */
struct pconn {
	vad_client *c;
	vad_ticket *t;
	void **ptrs;
	size_t *sizes;
	unsigned next;	 /* the oldest ticket not yet waited for */
	unsigned m;	 /* tickets in this burst (fewer than P at the end of an --ops run) */
	uint64_t issued; /* requests submitted (--ops counts them per client, as raw does) */
	bool freeing;	 /* the burst in flight is the frees */
	bool done;	 /* stopped: nothing in flight, nothing held */
	uint64_t t0;	 /* when the burst was sent */
};

struct pdriver {
	struct db_driver *d;
	const struct db_params *p;
	uint64_t rng, deadline, last;
	uint64_t now; /* when the last read was seen (raw's stamp: once per read) */
	bool stopping;
};

/* Submit the next burst of c: P allocs, or the frees of what the last burst got. The last
 * submit sends them all. */
static int burst(struct pdriver *pd, struct pconn *pc)
{
	const struct db_params *p = pd->p;
	pc->freeing = !pc->freeing;
	if (!pc->freeing) {
		/* Allocs while the run lasts (the frees of what they got always follow). */
		uint64_t left =
		    p->ops ? (pc->issued < p->ops ? p->ops - pc->issued : 0) : p->pipeline;
		pc->m = left < p->pipeline ? (unsigned)left : p->pipeline;
		if (pd->stopping || pc->m == 0) {
			pc->done = true;
			return 0;
		}
	}
	unsigned P = pc->m;
	for (unsigned k = 0; k < P; k++) {
		unsigned more = k + 1 < P ? VAD_MORE : 0;
		int rc;
		if (pc->freeing) {
			rc = vad_free_submit(pc->c, pc->ptrs[k], more, &pc->t[k]);
		} else {
			uint64_t size, align = 0;
			p->shape->next(p->unit, &pd->rng, &size, &align);
			pc->sizes[k] = (size_t)size;
			rc = vad_alloc_submit(pc->c, NULL, pc->sizes[k], (size_t)align,
					      more | (p->populate ? VAD_POPULATE : 0), &pc->t[k]);
		}
		if (rc != VAD_OK) {
			db_fail(&pd->d->r, "%s submit failed: %s (%s)",
				pc->freeing ? "free" : "alloc", vad_strerror(rc),
				vad_last_error(pc->c));
			return -1;
		}
	}
	pc->t0 = db_now_ns();
	pc->next = 0;
	pc->issued += P;
	return 0;
}

/* Take the result of c's oldest ticket (waiting for it if needed), count it, and start the
 * next burst once the last is in. A reply already in (in) came with the last read, at
 * pd->now; else this wait reads it. */
static int retire(struct pdriver *pd, struct pconn *pc, bool in)
{
	struct db_result *r = &pd->d->r;
	unsigned k = pc->next++;
	int rc = vad_wait(pc->c, pc->t[k], pc->freeing ? NULL : &pc->ptrs[k]);
	if (!in)
		pd->now = db_now_ns();
	uint64_t now = pd->now;
	if (rc != VAD_OK) {
		r->errors++;
		db_fail(r, "%s failed: %s (%s)", pc->freeing ? "free" : "alloc", vad_strerror(rc),
			vad_last_error(pc->c));
		return -1;
	}
	if (!pc->freeing && pd->p->touch)
		touch(pc->ptrs[k], pc->sizes[k]);
	if (pd->p->ops || now <= pd->deadline) {
		db_hist_add(&r->all_lat, now - pc->t0);
		if (!pc->freeing) {
			db_hist_add(&r->alloc_lat, now - pc->t0);
			r->allocs++;
		}
		r->requests++;
		r->items++;
		pd->last = now;
	}
	if (!pd->stopping && now >= pd->deadline)
		pd->stopping = true;
	return pc->next == pc->m ? burst(pd, pc) : 0;
}

/* Every client's tickets through epoll on their fds, vad_progress when one is readable. */
static void loop_epoll(struct pdriver *pd, struct pconn *pcs, unsigned n)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		db_fail(&pd->d->r, "epoll_create1: %s", strerror(errno));
		return;
	}
	unsigned active = 0;
	for (unsigned i = 0; i < n; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &pcs[i]};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, vad_fd(pcs[i].c), &ev) < 0) {
			db_fail(&pd->d->r, "epoll_ctl: %s", strerror(errno));
			goto out;
		}
		if (burst(pd, &pcs[i]) < 0)
			goto out;
		active++;
	}
	struct epoll_event evs[64];
	while (active) {
		int m = epoll_wait(ep, evs, 64, 20);
		if (m < 0 && errno != EINTR) {
			db_fail(&pd->d->r, "epoll_wait: %s", strerror(errno));
			goto out;
		}
		pd->now = db_now_ns(); /* raw's stamp of every reply this round reads */
		for (int i = 0; i < m; i++) {
			struct pconn *pc = evs[i].data.ptr;
			if (pc->done)
				continue;
			int rc = vad_progress(pc->c);
			if (rc != VAD_OK) {
				db_fail(&pd->d->r, "vad_progress: %s (%s)", vad_strerror(rc),
					vad_last_error(pc->c));
				goto out;
			}
			/* What this read brought; a burst sent now waits for its own event. */
			while (!pc->done && vad_test(pc->c, pc->t[pc->next]) == 1)
				if (retire(pd, pc, true) < 0)
					goto out;
			if (pc->done)
				active--;
		}
		if (!pd->stopping && pd->now >= pd->deadline)
			pd->stopping = true;
	}
out:
	close(ep);
}

/* Pipelined: this driver's clients (d->client is the array of every client), driven from
 * one thread with tickets. */
static void pipelined_driver(struct db_driver *d)
{
	const struct db_params *p = d->p;
	vad_client **all = d->client;
	unsigned n = d->n_conns, P = p->pipeline;
	struct pconn *pcs = calloc(n, sizeof(*pcs));
	bool ok = pcs != NULL && p->batch == 1;
	for (unsigned i = 0; ok && i < n; i++) {
		pcs[i].c = all[d->first_conn + i];
		pcs[i].t = calloc(P, sizeof(vad_ticket));
		pcs[i].ptrs = calloc(P, sizeof(void *));
		pcs[i].sizes = calloc(P, sizeof(size_t));
		pcs[i].freeing = true; /* the first burst is allocs */
		ok = pcs[i].c && pcs[i].t && pcs[i].ptrs && pcs[i].sizes;
		/* Set up before the window, as raw's connections are: the arena mapped (the
		 * first alloc maps it), the socket in vad_fd's non-blocking mode. */
		void *warm;
		if (ok && vad_alloc(pcs[i].c, 4096, 0, &warm) == VAD_OK)
			vad_free(pcs[i].c, warm);
		if (ok && n > 1)
			vad_fd(pcs[i].c);
	}
	if (!ok)
		db_fail(&d->r, p->batch != 1
				   ? "--libvad --burst submits single ranges: batch 1 only"
				   : "out of memory or no client connection");
	pthread_barrier_wait(d->barrier);
	if (ok) {
		struct pdriver pd = {.d = d, .p = p, .rng = p->seed * 0x9e3779b97f4a7c15ull + 1};
		uint64_t cpu0 = thread_cpu_ns();
		d->t_start = db_now_ns();
		pd.deadline = p->ops ? UINT64_MAX : d->t_start + (uint64_t)(p->seconds * 1e9);
		if (n == 1) {
			if (burst(&pd, &pcs[0]) == 0)
				while (!pcs[0].done &&
				       retire(&pd, &pcs[0],
					      vad_test(pcs[0].c, pcs[0].t[pcs[0].next]) == 1) == 0)
					;
		} else {
			loop_epoll(&pd, pcs, n);
		}
		d->t_end = p->ops ? pd.last : pd.deadline;
		if (d->t_end < d->t_start)
			d->t_end = d->t_start;
		d->r.cpu_ns = thread_cpu_ns() - cpu0;
	}
	for (unsigned i = 0; pcs && i < n; i++) {
		free(pcs[i].t);
		free(pcs[i].ptrs);
		free(pcs[i].sizes);
	}
	free(pcs);
}
