/*
 * server.c - the running service: a listener thread and N worker threads (worker.c), each
 * with its own libevent base (the memcached model).
 *
 * The listener (the thread in vad_server_run) accepts, reads the peer's credentials, admits or
 * refuses by them (admission.c: max_clients with admin_slots kept for admins, max_clients_uid),
 * and queues the socket to a worker: round-robin with worker_balance = even; by default
 * (adaptive) to the least loaded of the active workers, whose number follows the load: every
 * tick the listener measures the workers (scheduler statistics, requests per read, idle CPUs),
 * balance.c decides, and the workers it names hand connections over between their callbacks
 * (worker.c, conn.c). Signals (SIGTERM, SIGINT, SIGHUP) are libevent signal events on the
 * listener base.
 */
#include "server.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <systemd/sd-daemon.h>

#include "conn.h"
#include "fdpass.h"
#include "log.h"
#include "persist.h"
#include "server_internal.h"
#include "service.h"
#include "session.h"
#include "metrics_http.h"
#include "stats.h"
#include "worker.h"
#include "units.h"

#define ACCEPT_BURST	64  /* accepts per listener wake-up, so signals are not starved */
#define ACCEPT_PAUSE_MS 100 /* back-off when out of fds */
#define MAX_WORKERS	256

/* ---- admission bookkeeping (any thread) ------------------------------------------------- */

static void on_notes_summary(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	struct vad_note_summary sum[VAD_N_NOTES];
	vad_notes_take(&s->gate.notes, vad_now_ns(), sum);
	for (int i = 0; i < VAD_N_NOTES; i++) {
		if (!sum[i].counted)
			continue;
		char last[64] = "";
		if (sum[i].last_pid) /* accept failures have no peer */
			snprintf(last, sizeof(last), " (the last from pid %d, uid %u)",
				 (int)sum[i].last_pid, (unsigned)sum[i].last_uid);
		log_notice("%llu more %s in the last %d s%s", (unsigned long long)sum[i].counted,
			   vad_note_what((enum vad_note_kind)i), VAD_NOTE_INTERVAL_S, last);
	}
}

/* ---- adaptive balance (listener thread) ------------------------------------------------- */

/* A worker's time on a CPU (*run) and that plus its time runnable but waiting for one
 * (*busy: the CPU it wanted), in ns, from schedstat. Returns -1 if the kernel does not
 * provide it. */
static int worker_cpu_ns(struct worker *w, uint64_t *run_out, uint64_t *busy_out)
{
	int tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
	if (tid == 0)
		return -1;
	if (w->schedstat_fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
		w->schedstat_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (w->schedstat_fd < 0)
			return -1;
	}
	char buf[128];
	ssize_t n = pread(w->schedstat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	unsigned long long run, wait;
	if (sscanf(buf, "%llu %llu", &run, &wait) != 2)
		return -1;
	*run_out = run;
	*busy_out = run + wait;
	return 0;
}

/* Read every worker's CPU times; since the last sample, worker i wanted a CPU ws[i].load of
 * the time and ran ws[i].ran of it. Without scheduler statistics, adaptive balance turns
 * itself off (every worker active) and this returns -1. */
static int sample_cpu(struct vad_server *s, struct balance_worker_sample *ws)
{
	uint64_t now = vad_now_ns(), dt = now - s->balance_ns;
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = &s->workers[i];
		uint64_t run, busy;
		if (worker_cpu_ns(w, &run, &busy) < 0) {
			log_info("worker balance: no scheduler statistics for worker %u "
				 "(/proc/self/task/TID/schedstat); spreading connections over "
				 "all %u worker%s",
				 i, s->n_workers, vad_plural(s->n_workers));
			s->adaptive = false;
			balance_use_all(&s->balance);
			return -1;
		}
		if (ws) {
			ws[i].load =
			    busy > w->busy_ns && dt ? (double)(busy - w->busy_ns) / (double)dt : 0;
			ws[i].ran =
			    run > w->run_ns && dt ? (double)(run - w->run_ns) / (double)dt : 0;
		}
		w->busy_ns = busy;
		w->run_ns = run;
	}
	s->balance_ns = now;
	return 0;
}

/* Each worker's reads that brought requests, requests handled and connections since the
 * last tick's. */
static void sample_requests(struct vad_server *s, struct balance_worker_sample *ws)
{
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = &s->workers[i];
		uint64_t r = __atomic_load_n(&w->reads, __ATOMIC_RELAXED);
		uint64_t q = __atomic_load_n(&w->requests, __ATOMIC_RELAXED);
		ws[i].reads = r - w->reads_seen;
		ws[i].requests = q - w->requests_seen;
		ws[i].n_conns = __atomic_load_n(&w->n_conns, __ATOMIC_RELAXED);
		w->reads_seen = r;
		w->requests_seen = q;
	}
}

/* Tick in ms while clients are connected; the first tick measures from now. */
static void balance_arm(struct vad_server *s, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	if (s->balance_armed || !s->adaptive)
		return;
	if (s->balance_ns == 0) {
		if (sample_cpu(s, NULL) < 0)
			return;
		s->requests_seen = __atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED);
		vad_cpu_idle_sample(&s->cpu_idle); /* the first tick measures from now */
	}
	if (event_add(s->ev_balance, &tv) == 0)
		s->balance_armed = true;
}

/* Say what the balancer decided (the log lines tests and people look for). */
static void balance_log(const struct vad_server *s, const struct balance_action *a)
{
	const char *why = a->pipelined ? "busy with pipelined clients" : "saturated";
	switch (a->verdict) {
	case BALANCE_UNDO:
		log_debug("worker balance: %u worker%s served %.0f requests/s, %u served %.0f; "
			  "back to %u for %u ms",
			  a->from, vad_plural(a->from), a->rate_after, a->to, a->rate_before, a->to,
			  a->backoff_ms);
		break;
	case BALANCE_NO_IDLE_CPU:
		if (a->first_no_idle)
			log_debug("worker balance: %u worker%s %s, but the machine has %.2f CPUs "
				  "idle (worker_spread_idle %.2f); not spreading",
				  a->from, vad_plural(a->from), why, a->idle_min,
				  s->balance.spread_idle);
		break;
	case BALANCE_SPREAD:
		log_debug("worker balance: %u worker%s %s; spreading over %u", a->from,
			  vad_plural(a->from), why, a->to);
		break;
	case BALANCE_GATHER:
		log_debug("worker balance: %u worker%s busy %.2f of a CPU together; gathering on "
			  "%u",
			  a->from, vad_plural(a->from), a->busy, a->to);
		break;
	default:
		break;
	}
}

/* Carry out a: on a spread each active worker hands the woken one its share; workers out of
 * the active set hand over whatever they still have (also connections that were on their
 * way to them when the set shrank). */
static void balance_apply(struct vad_server *s, const struct balance_action *a)
{
	if (a->verdict == BALANCE_SPREAD) {
		for (unsigned i = 0; i < a->from; i++) {
			unsigned n = balance_share(
			    a, __atomic_load_n(&s->workers[i].n_conns, __ATOMIC_RELAXED));
			if (n)
				worker_order_give(&s->workers[i], n, a->from, 1);
		}
	}
	balance_log(s, a);
	for (unsigned i = a->to; i < s->n_workers; i++)
		if (__atomic_load_n(&s->workers[i].n_conns, __ATOMIC_RELAXED) > 0)
			worker_order_give(&s->workers[i], ~0u, 0, a->to);
}

/* Every BALANCE_TICK_MS while clients are connected: measure, let balance_tick decide
 * (balance.c says how), move connections as it says. */
static void on_balance(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	struct balance_worker_sample ws[MAX_WORKERS];
	uint64_t since = s->balance_ns;
	s->balance_armed = false;
	if (__atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED) || sample_cpu(s, ws) < 0)
		return;
	uint64_t requests = __atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED);
	struct balance_sample sample = {
	    .requests = requests - s->requests_seen,
	    .elapsed_ns = s->balance_ns - since,
	    .workers = ws,
	};
	s->requests_seen = requests;
	sample.idle = vad_cpu_idle_sample(&s->cpu_idle);
	sample.clients = __atomic_load_n(&s->svc->clients, __ATOMIC_RELAXED);
	if (sample.clients)
		sample_requests(s, ws); /* with no clients they count on to the next ones */
	struct balance_action a = balance_tick(&s->balance, &sample);
	if (a.verdict == BALANCE_STOP) {
		s->balance_ns = 0; /* nobody to serve; the next clients arm the timer again */
		return;
	}
	balance_apply(s, &a);
	balance_arm(s, a.next_tick_ms);
}

/* The worker for a new connection: round-robin over all, or (adaptive) the active worker
 * with the fewest connections. */
static struct worker *pick_worker(struct vad_server *s)
{
	if (!s->adaptive)
		return &s->workers[s->next_worker++ % s->n_workers];
	struct worker *best = &s->workers[0];
	unsigned best_n = __atomic_load_n(&best->n_conns, __ATOMIC_RELAXED);
	for (unsigned i = 1; i < s->balance.active; i++) {
		unsigned n = __atomic_load_n(&s->workers[i].n_conns, __ATOMIC_RELAXED);
		if (n < best_n) {
			best = &s->workers[i];
			best_n = n;
		}
	}
	balance_arm(s, BALANCE_TICK_MS);
	return best;
}

/* ---- listener --------------------------------------------------------------------------- */

static void pause_accepting(struct vad_server *s)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = ACCEPT_PAUSE_MS * 1000};
	if (event_add(s->ev_resume, &tv) < 0)
		return; /* without a timer to resume, keep listening rather than stop for good */
	if (s->listening) {
		event_del(s->ev_listen);
		s->listening = false;
	}
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	if (!s->listening && !__atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED)) {
		if (event_add(s->ev_listen, NULL) == 0) {
			s->listening = true;
			return;
		}
		struct timeval tv = {.tv_sec = 0, .tv_usec = ACCEPT_PAUSE_MS * 1000};
		if (event_add(s->ev_resume, &tv) < 0)
			log_err("cannot listen for new connections any more (out of memory)");
	}
}

/* Refuse a newcomer that admission turned away: EBUSY and a sentence naming the limit. */
static void refuse_admission(struct vad_server *s, int fd, const struct vad_peer *peer, bool admin,
			     enum vad_admit a, unsigned clients, unsigned uid_conns,
			     const struct vad_limits *lim)
{
	char msg[256];
	enum vad_note_kind kind;
	switch (a) {
	case VAD_ADMIT_UID:
		kind = VAD_NOTE_UID;
		snprintf(msg, sizeof(msg),
			 "uid %u already has %u connection%s to the daemon (max_clients_uid %u); "
			 "close some of them or raise max_clients_uid in vad.conf",
			 (unsigned)peer->uid, uid_conns, vad_plural(uid_conns),
			 lim->max_clients_uid);
		break;
	case VAD_ADMIT_RESERVED:
		kind = VAD_NOTE_RESERVED;
		snprintf(msg, sizeof(msg),
			 "the daemon serves %u client%s and keeps the last %u of max_clients %u "
			 "for admins (admin_slots); try again later or raise max_clients in "
			 "vad.conf",
			 clients, vad_plural(clients),
			 vad_admission_reserved(lim->max_clients, lim->admin_slots),
			 lim->max_clients);
		break;
	default:
		kind = VAD_NOTE_FULL;
		snprintf(msg, sizeof(msg),
			 "the daemon already serves as many clients as max_clients %u allows; try "
			 "again later or raise max_clients in vad.conf",
			 lim->max_clients);
		break;
	}
	if (vad_gate_note(&s->gate, kind, peer->uid, peer->pid))
		log_info("refusing pid %d (uid %u%s): %s (further such refusals are counted for "
			 "%d s)",
			 (int)peer->pid, (unsigned)peer->uid, admin ? ", admin" : "", msg,
			 VAD_NOTE_INTERVAL_S);
	vad_gate_refuse(fd, VAD__ERROR__EBUSY, msg);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct vad_server *s = arg;
	for (int i = 0; i < ACCEPT_BURST; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* EMFILE, ENFILE, ENOBUFS, ENOMEM: the socket stays readable, so retrying
			 * at once would spin; pause, and log it once per VAD_NOTE_INTERVAL_S. */
			if (vad_gate_note(&s->gate, VAD_NOTE_ACCEPT, 0, 0))
				log_warn("accept failed: %s; pausing new connections for %d ms "
					 "(further failures are counted for %d s)",
					 strerror(errno), ACCEPT_PAUSE_MS, VAD_NOTE_INTERVAL_S);
			pause_accepting(s);
			return;
		}
		uint64_t accepted_ns = vad_now_ns();
		struct pending_conn *p = calloc(1, sizeof(*p));
		char err[256];
		if (!p) {
			log_err("out of memory accepting a client");
			vad_gate_refuse(fd, VAD__ERROR__ENOMEM,
					"the daemon is out of memory; try again later");
			continue;
		}
		if (vad_peer_from_socket(fd, &p->peer, err, sizeof(err)) < 0) {
			Vad__Error code =
			    errno == ENOMEM ? VAD__ERROR__ENOMEM : VAD__ERROR__EINTERNAL;
			log_warn("refusing a connection: %s", err);
			vad_gate_refuse(fd, code, err);
			free(p);
			continue;
		}
		struct vad_service *svc = s->svc;
		struct vad_limits lim = vad_service_limits(svc);
		bool admin = vad_peer_is_admin(&p->peer, svc->daemon_uid, svc->has_admin_group,
					       svc->admin_gid);
		/* Only this thread adds clients: what it reads can only shrink meanwhile. */
		unsigned n = __atomic_load_n(&svc->clients, __ATOMIC_RELAXED);
		unsigned uid_n = vad_uid_conns_get(s->gate.uid_conns, p->peer.uid);
		enum vad_admit a = vad_admission_decide(n, uid_n, admin, lim.max_clients,
							lim.admin_slots, lim.max_clients_uid);
		if (a != VAD_ADMIT_OK) {
			refuse_admission(s, fd, &p->peer, admin, a, n, uid_n, &lim);
			vad_peer_free(&p->peer);
			free(p);
			continue;
		}
		if (vad_uid_conns_add(s->gate.uid_conns, p->peer.uid) < 0) {
			log_err("out of memory accepting a client (pid %d, uid %u)",
				(int)p->peer.pid, (unsigned)p->peer.uid);
			vad_gate_refuse(fd, VAD__ERROR__ENOMEM,
					"the daemon is out of memory; try again later");
			vad_peer_free(&p->peer);
			free(p);
			continue;
		}
		__atomic_add_fetch(&svc->clients, 1, __ATOMIC_RELAXED);
		p->accepted_ns = accepted_ns;
		p->fd = fd;
		worker_push(pick_worker(s), p);
	}
}

static void begin_stop(struct vad_server *s, const char *why)
{
	log_notice("%s: stopping (no new connections; closing every session)", why);
	snprintf(s->svc->stop_reason, sizeof(s->svc->stop_reason), "%s", why); /* the stop event */
	sd_notify(0, "STOPPING=1");
	vad_persist_freeze(s->svc);	 /* before any session closes: their holds stay recorded */
	vad_service_wait_served(s->svc); /* and every grant answered was recorded */
	__atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
	if (s->listening) {
		event_del(s->ev_listen);
		s->listening = false;
	}
	event_base_loopbreak(s->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct vad_server *s = arg;
	if (sig == SIGHUP) {
		char detail[1024];
		sd_notify(0, "RELOADING=1");
		if (vad_service_reload(s->svc, detail, sizeof(detail)) == 0) {
			log_notice("SIGHUP: %s", detail);
			vad_service_event(s->svc, "reload", detail);
		} else {
			log_warn("SIGHUP: %s", detail);
			vad_service_event(s->svc, "reload-failed", detail);
		}
		sd_notify(0, "READY=1");
		return;
	}
	begin_stop(s, sig == SIGTERM ? "SIGTERM (systemctl stop, or kill)" : "SIGINT (Ctrl-C)");
}

/* vactl restart: the listener's SIGUSR2 event does the rest. */
static void request_restart(void)
{
	kill(getpid(), SIGUSR2);
}

/* SIGUSR2 (vactl restart sends it too): a polite stop, then main re-executes vad with the
 * arenas and the state file (persist.h). */
static void on_restart(evutil_socket_t sig, short what, void *arg)
{
	struct vad_server *s = arg;
	__atomic_store_n(&s->restart_requested, true, __ATOMIC_RELAXED);
	begin_stop(s, "SIGUSR2 (restart in place)");
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	begin_stop(arg, "stop requested");
}

/* A tenant arena closed: its figures become an event row. */
static void tenant_closed(void *ctx, const char *detail)
{
	vad_service_event(ctx, "tenant-closed", detail);
}

/* Close the tenant arenas unused for their tenant_idle. */
static void on_tenants(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct vad_server *s = arg;
	vad_tenants_sweep(s->svc->tenants, vad_now_ns() / 1000000, tenant_closed, s->svc);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	unsigned clients = __atomic_load_n(&s->svc->clients, __ATOMIC_RELAXED);
	unsigned long long requests = __atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED);
	sd_notifyf(0, "%sSTATUS=%u client%s, %llu request%s handled",
		   s->watchdog ? "WATCHDOG=1\n" : "", clients, vad_plural(clients), requests,
		   vad_plural(requests));
}

/* ---- life cycle ------------------------------------------------------------------------- */

/* Raise the soft fd limit to the hard one: it bounds both the daemon's open sockets and the
 * arena fds in flight to clients that have not read them yet (charged to the daemon's user).
 * The admin slots are part of max_clients: with the limit at max_clients x 33 + 64 plus two
 * fds per tenant arena that may open, non-admins (at most max_clients - admin_slots
 * connections, 33 fds each) cannot use up what the reserved connections, the listener's
 * accept-to-refuse and the arenas need. */
static void raise_fd_limit(unsigned max_clients, uint64_t arena_fds)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			log_info("raised the open file limit from %llu to %llu",
				 (unsigned long long)was, (unsigned long long)rl.rlim_cur);
		else
			rl.rlim_cur = was;
	}
	uint64_t need = (uint64_t)max_clients * (VAD_FDS_UNREAD_MAX + 1) + 64 + arena_fds;
	if (!max_clients || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return;
	/* The way to raise it is the one that fits how vad was started. */
	char how[128];
	if (vad_log_under_systemd())
		snprintf(how, sizeof(how), "LimitNOFILE=%llu in the unit",
			 (unsigned long long)need);
	else
		snprintf(how, sizeof(how),
			 "ulimit -n %llu in the shell that starts vad, as root if above ulimit -Hn",
			 (unsigned long long)need);
	log_warn("the open file limit %llu is low for max_clients %u and %llu tenant arena "
		 "fds: clients that do not read their arena fds could use it up; raise it to "
		 "%llu (%s) or lower max_clients",
		 (unsigned long long)rl.rlim_cur, max_clients, (unsigned long long)arena_fds,
		 (unsigned long long)need, how);
}

static pthread_once_t evthread_once = PTHREAD_ONCE_INIT;
static int evthread_rc;

static void evthread_setup(void)
{
	evthread_rc = evthread_use_pthreads();
}

static void free_server(struct vad_server *s)
{
	for (unsigned i = 0; s->workers && i < s->n_workers; i++)
		worker_close_all(&s->workers[i]);
	for (unsigned i = 0; s->workers && i < s->n_workers; i++)
		worker_fini(&s->workers[i]);
	free(s->workers);
	struct event *evs[] = {s->ev_listen,	 s->ev_resume,	s->ev_stop,   s->ev_tick,
			       s->ev_balance,	 s->ev_sig[0],	s->ev_sig[1], s->ev_sig[2],
			       s->gate.ev_notes, s->ev_tenants, s->ev_restart};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	if (s->base)
		event_base_free(s->base);
	vad_cpu_idle_close(&s->cpu_idle);
	vad_uid_conns_free(s->gate.uid_conns);
	vad_notes_fini(&s->gate.notes);
	free(s);
}

/* What the whole process needs before a server runs; -1 with a reason in err. */
static int process_setup(const struct vad_config *cfg, char *err, size_t err_len)
{
	pthread_once(&evthread_once, evthread_setup);
	signal(SIGPIPE, SIG_IGN); /* sends use MSG_NOSIGNAL; this covers anything else */
	raise_fd_limit(cfg->max_clients, 2 * (uint64_t)vad_tenant_slots(cfg)); /* fd and ro_fd */
	if (vad_admission_reserved(cfg->max_clients, cfg->admin_slots) < cfg->admin_slots)
		log_notice("admin_slots %u is more than half of max_clients %u: %u are kept for "
			   "admins",
			   cfg->admin_slots, cfg->max_clients,
			   vad_admission_reserved(cfg->max_clients, cfg->admin_slots));
	/* Grow malloc heaps 16 MiB at a time and keep up to 64 MiB of freed heap: otherwise a
	 * burst of ranges costs one mprotect per 4 KiB page as a worker's arena grows, and what
	 * is trimmed after a burst is faulted in again by the next one. */
	mallopt(M_TOP_PAD, 16 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	if (evthread_rc != 0) {
		snprintf(err, err_len, "libevent has no pthreads support (evthread_use_pthreads)");
		return -1;
	}
	return 0;
}

/* The listener's events, signals caught from now on: one arriving before vad_server_run
 * waits in the base instead of killing the process with its default action. -1 when out of
 * memory. */
static int listener_events(struct vad_server *s, int listen_fd)
{
	s->ev_listen = event_new(s->base, listen_fd, EV_READ | EV_PERSIST, on_accept, s);
	s->ev_resume = evtimer_new(s->base, on_resume, s);
	s->ev_stop = event_new(s->base, -1, 0, on_stop, s);
	s->ev_tick = event_new(s->base, -1, EV_PERSIST, on_tick, s);
	s->ev_balance = evtimer_new(s->base, on_balance, s);
	s->gate.ev_notes = evtimer_new(s->base, on_notes_summary, s);
	const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};
	for (int i = 0; i < 3; i++) {
		s->ev_sig[i] = evsignal_new(s->base, sigs[i], on_signal, s);
		if (!s->ev_sig[i] || event_add(s->ev_sig[i], NULL) < 0)
			return -1;
	}
	s->ev_restart = evsignal_new(s->base, SIGUSR2, on_restart, s);
	if (!s->ev_restart || event_add(s->ev_restart, NULL) < 0)
		return -1;
	if (!s->ev_listen || !s->ev_resume || !s->ev_stop || !s->ev_tick || !s->ev_balance ||
	    !s->gate.ev_notes)
		return -1;
	return 0;
}

/* worker_balance: adaptive starts on one worker (with more than one to balance). */
static void balance_setup(struct vad_server *s, const struct vad_config *cfg)
{
	s->adaptive = cfg->worker_balance == VAD_BALANCE_ADAPTIVE && s->n_workers > 1;
	balance_init(&s->balance, s->n_workers, cfg->worker_spread_idle);
	if (!s->adaptive)
		balance_use_all(&s->balance);
	if (s->adaptive && cfg->worker_spread_idle > 0 && vad_cpu_idle_open(&s->cpu_idle) < 0)
		log_info("worker balance: /proc/stat unreadable; spreading without knowing whether "
			 "a CPU is idle");
}

/* Wake every worker (a session was killed: its owner, whichever that is now, closes it). */
static void wake_workers(void *arg)
{
	struct vad_server *s = arg;
	for (unsigned i = 0; i < s->n_workers; i++)
		event_active(s->workers[i].ev_notify, EV_READ, 0);
}

int vad_server_create(const struct vad_config *cfg, struct vad_arena **arenas, size_t n_arenas,
		      int listen_fd, struct vad_server **out, char *err, size_t err_len)
{
	*out = NULL;
	if (process_setup(cfg, err, err_len) < 0)
		return -1;
	struct vad_server *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, err_len, "out of memory creating the server");
		return -1;
	}
	vad_notes_init(&s->gate.notes, VAD_NOTE_INTERVAL_S * 1000000000ull);
	s->listen_fd = listen_fd;
	s->cpu_idle.fd = -1;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cfg->workers ? cfg->workers : (ncpu > 0 ? (unsigned)ncpu : 1);
	if (n > MAX_WORKERS)
		n = MAX_WORKERS;
	s->workers = calloc(n, sizeof(*s->workers));
	s->base = event_base_new();
	if (!s->workers || !s->base)
		goto nomem;
	/* n_workers counts the workers begun, so that free_server finishes only those. */
	for (unsigned i = 0; i < n; i++) {
		s->n_workers = i + 1;
		if (worker_init(&s->workers[i], &s->gate, s->workers, i) < 0)
			goto nomem;
	}
	s->gate.uid_conns = vad_uid_conns_new();
	balance_setup(s, cfg);
	if (listener_events(s, listen_fd) < 0 || !s->gate.uid_conns)
		goto nomem;

	/* Last: on success the service owns the arenas; on failure main still does. */
	if (vad_service_create(cfg, arenas, n_arenas, &s->svc, err, err_len) < 0) {
		free_server(s);
		return -1;
	}
	s->gate.svc = s->svc;
	s->svc->request_restart = request_restart;
	for (unsigned i = 0; i < s->n_workers; i++)
		s->workers[i].svc = s->svc; /* before any worker thread runs */
	s->svc->wake_workers = wake_workers;
	s->svc->wake_arg = s;
	snprintf(s->stats_db, sizeof(s->stats_db), "%s", cfg->stats_db);
	s->stats_interval_ms = cfg->stats_interval_ms;
	s->stats_retention_ms = cfg->stats_retention_ms;
	snprintf(s->metrics_listen, sizeof(s->metrics_listen), "%s", cfg->metrics_listen);
	*out = s;
	return 0;
nomem:
	snprintf(err, err_len, "out of memory creating the event loops");
	free_server(s);
	return -1;
}

/* Start the worker threads, then the stats thread and the metrics listener; -1 when a worker
 * could not start. */
static int start_threads(struct vad_server *s)
{
	for (unsigned i = 0; i < s->n_workers; i++) {
		int e = pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
		if (e) {
			log_err("cannot start worker thread %u: %s", i, strerror(e));
			return -1;
		}
		s->workers[i].started = true;
	}
	if (s->stats_db[0]) {
		char err[PATH_MAX + 256];
		if (vad_stats_start(s->svc, s->stats_db, s->stats_interval_ms,
				    s->stats_retention_ms, &s->stats, err, sizeof(err)) < 0)
			log_warn("running without stats: %s", err);
	}
	if (s->metrics_listen[0]) {
		char err[256];
		s->metrics = vad_metrics_http_start(s->svc, s->metrics_listen, err, sizeof(err));
		if (!s->metrics)
			log_warn("running without HTTP /metrics: %s", err);
	}
	return 0;
}

/* Listen, tell systemd we are ready, and run the listener loop until a stop. */
static int listen_until_stop(struct vad_server *s)
{
	if (event_add(s->ev_listen, NULL) < 0) {
		log_err("cannot listen for connections (out of memory)");
		return -1;
	}
	s->listening = true;
	s->watchdog = sd_watchdog_enabled(0, &s->watchdog_usec) > 0;
	uint64_t tick_us = 5000000;
	if (s->watchdog && s->watchdog_usec / 2 < tick_us)
		tick_us = s->watchdog_usec / 2;
	struct timeval tv = {.tv_sec = (time_t)(tick_us / 1000000),
			     .tv_usec = (suseconds_t)(tick_us % 1000000)};
	if (getenv("NOTIFY_SOCKET"))
		event_add(s->ev_tick, &tv);
	uint64_t sweep_ms = vad_tenants_sweep_period_ms(s->svc->tenants);
	if (sweep_ms) {
		struct timeval sweep = {.tv_sec = (time_t)(sweep_ms / 1000),
					.tv_usec = (suseconds_t)(sweep_ms % 1000 * 1000)};
		s->ev_tenants = event_new(s->base, -1, EV_PERSIST, on_tenants, s);
		if (!s->ev_tenants || event_add(s->ev_tenants, &sweep) < 0)
			log_warn("cannot schedule closing idle tenant arenas: they stay open");
	}
	sd_notifyf(0, "READY=1\nSTATUS=listening with %u worker%s%s", s->n_workers,
		   vad_plural(s->n_workers),
		   s->adaptive ? " (adaptive: as many as the load needs)" : "");
	if (!__atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED) &&
	    event_base_dispatch(s->base) < 0) {
		log_err("the listener event loop failed");
		return -1;
	}
	return 0;
}

/* Every worker closes its connections and ends; wait for all of them. */
static void stop_workers(struct vad_server *s)
{
	for (unsigned i = 0; i < s->n_workers; i++)
		if (s->workers[i].started)
			worker_stop(&s->workers[i]);
	for (unsigned i = 0; i < s->n_workers; i++) {
		if (s->workers[i].started) {
			pthread_join(s->workers[i].thread, NULL);
			s->workers[i].started = false;
		}
	}
}

int vad_server_run(struct vad_server *s)
{
	int rc = start_threads(s);
	if (rc == 0)
		rc = listen_until_stop(s);
	if (s->listening) {
		event_del(s->ev_listen);
		s->listening = false;
	}
	for (int i = 0; i < 3; i++)
		event_del(s->ev_sig[i]);
	event_del(s->ev_restart);
	event_del(s->ev_tick);
	event_del(s->ev_resume);
	event_del(s->ev_balance);
	if (s->ev_tenants)
		event_del(s->ev_tenants);
	s->balance_armed = false;

	/* The stop event says why, even when no signal or request began the stop. */
	if (!s->svc->stop_reason[0])
		snprintf(s->svc->stop_reason, sizeof(s->svc->stop_reason), "%s",
			 rc ? "a runtime failure (the log says which)" : "the listener ended");
	vad_metrics_http_stop(s->metrics);
	s->metrics = NULL;
	/* The final snapshot still sees the sessions of this moment. */
	vad_stats_stop(s->stats);
	s->stats = NULL;
	stop_workers(s);
	/* What was counted but not yet summarised still gets its line. */
	event_del(s->gate.ev_notes);
	on_notes_summary(-1, 0, s);
	log_notice("stopped: %llu request%s handled; connections refused: %llu at max_clients, "
		   "%llu for the admin slots, %llu at max_clients_uid; %llu closed at "
		   "hello_timeout",
		   (unsigned long long)__atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED),
		   vad_plural(__atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED)),
		   (unsigned long long)vad_notes_total(&s->gate.notes, VAD_NOTE_FULL),
		   (unsigned long long)vad_notes_total(&s->gate.notes, VAD_NOTE_RESERVED),
		   (unsigned long long)vad_notes_total(&s->gate.notes, VAD_NOTE_UID),
		   (unsigned long long)vad_notes_total(&s->gate.notes, VAD_NOTE_HELLO_TIMEOUT));
	return rc;
}

bool vad_server_restart_requested(struct vad_server *s)
{
	return __atomic_load_n(&s->restart_requested, __ATOMIC_RELAXED);
}

struct vad_service *vad_server_service(struct vad_server *s)
{
	return s->svc;
}

void vad_server_stop(struct vad_server *s)
{
	__atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
	event_active(s->ev_stop, EV_READ, 0);
}

void vad_server_destroy(struct vad_server *s)
{
	if (!s)
		return;
	struct vad_service *svc = s->svc;
	int fd = s->listen_fd;
	free_server(s); /* drops every remaining session before the registry goes */
	vad_service_destroy(svc);
	if (fd >= 0)
		close(fd);
}
