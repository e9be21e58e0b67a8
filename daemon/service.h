/*
 * service.h - what every part of the running daemon shares: the arenas, the registry, the
 * reloadable limits and the daemon-wide counters. Limits and counters are read and written
 * with relaxed atomics, so workers never lock to read them.
 */
#ifndef VAD_SERVICE_H
#define VAD_SERVICE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arena.h"
#include "config.h"
#include "latency.h"
#include "ratelimit.h"
#include "registry.h"
#include "tenants.h"
#include "version.h"

struct vad_op_stats;
struct vad_config_view;

/* The daemon version reported by hello (proto/version.h). */
#define VAD_DAEMON_VERSION VAD_VERSION

/* The limits a reload may change. */
struct vad_limits {
	uint32_t max_frame;
	unsigned max_clients;
	unsigned max_batch;
	uint64_t quota_client; /* 0 = unlimited */
	uint64_t quota_uid;    /* 0 = unlimited */
	uint64_t hello_timeout_ms;
	unsigned max_clients_uid; /* 0 = unlimited */
	unsigned admin_slots;
	uint64_t max_ranges_client;  /* references one session may hold; 0 = unlimited */
	uint64_t max_ranges_uid;     /* references all sessions of a uid may hold; 0 = unlimited */
	unsigned max_waiters_client; /* alloc requests one session may have waiting (waitq.h) */
	unsigned max_waiters;	     /* alloc requests waiting in the whole daemon */
};

/* Something worth a row in the stats database's event table. */
struct vad_event {
	uint64_t ts_ms;
	char kind[32];
	char *detail; /* may be NULL */
	bool client;  /* caused by a client session (a refusal, an admin's purge) */
	struct vad_event *next;
};

struct vad_persist;

struct vad_service {
	struct vad_arena **arenas; /* [n_slots]: the configured arenas in config order (NULL for
				      a section with tenancy), then the tenant arenas' slots */
	size_t n_arenas;	   /* configured [arena] sections */
	size_t n_slots;
	unsigned default_arena; /* the section named "default", else the first */
	struct vad_tenants *tenants;
	struct vad_registry *reg;
	/* (atomic) workers inside a pass that may change holds (vad_service_serve_begin): a
	 * polite stop waits for it to reach 0 after freezing the state file. */
	unsigned serving;
	struct vad_limits limits; /* atomics */
	uid_t daemon_uid;
	bool has_admin_group;
	gid_t admin_gid;
	char admin_group[64]; /* its name, for refusals */
	char config_path[PATH_MAX];
	char stop_reason[64];	  /* why the daemon stops ("SIGTERM"), set when the stop begins */
	uint64_t start_ms;	  /* CLOCK_MONOTONIC */
	uint64_t requests;	  /* atomic: requests handled */
	struct vad_op_stats *ops; /* per operation and error code (op_stats.h) */
	struct vad_waitq *waitqs; /* [n_slots]: allocations waiting for room (waitq.h) */
	unsigned n_waiters;	  /* atomic: waiting in every queue */
	unsigned clients;	  /* atomic: connected sessions */
	uint64_t next_session_id; /* atomic */
	struct vad_persist *persist; /* the sessions of the previous daemon to resume; or NULL */
	pthread_mutex_t reload_lock;
	struct vad_config_view *config; /* reload_lock: what vactl config shows */
	pthread_mutex_t events_lock;
	struct vad_event *events,
	    **events_tail;	  /* oldest first, until the stats thread takes them */
	unsigned n_events;	  /* daemon-level events in the queue */
	unsigned n_client_events; /* client-caused events in the queue */
	uint64_t events_dropped;  /* client-caused events refused since the last take */
	/* Wakes every worker (set by the server before its threads start; NULL where a test
	 * drives sessions without one): a killed session's worker then closes it. */
	void (*wake_workers)(void *arg);
	void *wake_arg;
	uint64_t kills; /* atomic: sessions killed; a worker looks over its connections only
			   when this moved since it last did */
	pthread_mutex_t log_rate_lock;
	struct vad_rate log_rate; /* log lines of all client sessions together */
	int log_suppressed_level; /* the most severe level among those it suppressed */
	/* start_ms's moment since the epoch: the start time metrics report, fixed (reading the
	 * clocks again at each rendering would jitter, and changes() would see restarts) */
	uint64_t start_realtime_ms;
	/* Restart in place (vactl restart): set by the server; NULL where no server runs the
	 * service (unit tests, fuzzers), which then refuse it. */
	void (*request_restart)(void);
};

/* Build the service over opened arenas; on success it owns the array and each arena, on
 * failure it has taken nothing. Returns 0, or -1 with a reason in err. */
int vad_service_create(const struct vad_config *cfg, struct vad_arena **arenas, size_t n_arenas,
		       struct vad_service **out, char *err, size_t err_len);

/* Free the registry, close the arenas, free svc. Every session must be gone. */
void vad_service_destroy(struct vad_service *svc);

/* Re-read config_path and apply its reloadable limits and log level. Returns 0 with a summary
 * in detail, or -1 with the file:line reason (the old limits stay). Thread-safe. */
int vad_service_reload(struct vad_service *svc, char *detail, size_t detail_len);

/* Queue a daemon-level event (start, stop, reload, ...) for the stats database; thread-safe,
 * bounded by VAD_EVENTS_DAEMON_MAX (ratelimit.h); client-caused events never push it out. */
void vad_service_event(struct vad_service *svc, const char *kind, const char *detail);

/* Queue an event a client caused (a refusal, a purge); thread-safe; past
 * VAD_EVENTS_CLIENT_MAX queued it is dropped and counted. Sessions rate-limit their own
 * (vad_session_event). */
void vad_service_client_event(struct vad_service *svc, const char *kind, const char *detail);

/* May a line a client session caused (level, already within that session's own limit) be
 * logged? Applies the daemon-wide bucket (VAD_RATE_ALL_BURST); what it refuses is counted,
 * and the count is logged when it lets a line through again or the service is destroyed. */
bool vad_service_client_log(struct vad_service *svc, int level);

/* Take every queued event, oldest first, then an "events-dropped" one if client-caused
 * events were dropped since the last take (free with vad_events_free). */
struct vad_event *vad_service_take_events(struct vad_service *svc);

/* Free a list of events. */
void vad_events_free(struct vad_event *e);

/* Milliseconds since the service was created. */
uint64_t vad_service_uptime_ms(const struct vad_service *svc);

/* Milliseconds since the epoch. */
uint64_t vad_realtime_ms(void);

/* Copy of the current limits. */
static inline struct vad_limits vad_service_limits(const struct vad_service *svc)
{
	struct vad_limits l;
	l.max_frame = __atomic_load_n(&svc->limits.max_frame, __ATOMIC_RELAXED);
	l.max_clients = __atomic_load_n(&svc->limits.max_clients, __ATOMIC_RELAXED);
	l.max_batch = __atomic_load_n(&svc->limits.max_batch, __ATOMIC_RELAXED);
	l.quota_client = __atomic_load_n(&svc->limits.quota_client, __ATOMIC_RELAXED);
	l.quota_uid = __atomic_load_n(&svc->limits.quota_uid, __ATOMIC_RELAXED);
	l.hello_timeout_ms = __atomic_load_n(&svc->limits.hello_timeout_ms, __ATOMIC_RELAXED);
	l.max_clients_uid = __atomic_load_n(&svc->limits.max_clients_uid, __ATOMIC_RELAXED);
	l.admin_slots = __atomic_load_n(&svc->limits.admin_slots, __ATOMIC_RELAXED);
	l.max_ranges_client = __atomic_load_n(&svc->limits.max_ranges_client, __ATOMIC_RELAXED);
	l.max_ranges_uid = __atomic_load_n(&svc->limits.max_ranges_uid, __ATOMIC_RELAXED);
	l.max_waiters_client = __atomic_load_n(&svc->limits.max_waiters_client, __ATOMIC_RELAXED);
	l.max_waiters = __atomic_load_n(&svc->limits.max_waiters, __ATOMIC_RELAXED);
	return l;
}

/* The registry's view of the limits a charge is checked against. */
static inline struct vad_quota vad_limits_quota(const struct vad_limits *l)
{
	struct vad_quota q = {.bytes_client = l->quota_client,
			      .bytes_uid = l->quota_uid,
			      .ranges_client = l->max_ranges_client,
			      .ranges_uid = l->max_ranges_uid};
	return q;
}

/* A session was killed (marked already): count it and wake every worker, so that the one
 * that owns it closes it; no wake without a server. */
static inline void vad_service_wake_workers(struct vad_service *svc)
{
	__atomic_add_fetch(&svc->kills, 1, __ATOMIC_RELEASE);
	if (svc->wake_workers)
		svc->wake_workers(svc->wake_arg);
}

/* Current max_frame. */
static inline uint32_t vad_service_max_frame(const struct vad_service *svc)
{
	return __atomic_load_n(&svc->limits.max_frame, __ATOMIC_RELAXED);
}

/* Pending output above which a connection is not read from: max(256 KiB, 4 x max_frame). */
static inline size_t vad_service_high_watermark(const struct vad_service *svc)
{
	size_t four = 4 * (size_t)vad_service_max_frame(svc) + 16;
	return four > 256 * 1024 ? four : 256 * 1024;
}

/* Pending output below which reading resumes. */
static inline size_t vad_service_low_watermark(const struct vad_service *svc)
{
	return vad_service_high_watermark(svc) / 4;
}

/* A worker starts a pass that may change holds (a session's requests, a retry of waiting
 * allocations): false once a polite stop froze the state file, when it must serve nothing
 * (what it did the file would not keep). Always pair with vad_service_serve_end. */
bool vad_service_serve_begin(struct vad_service *svc);

/* The pass vad_service_serve_begin started is over. */
void vad_service_serve_end(struct vad_service *svc);

/* After the state file froze: wait until no pass begun before the freeze is still running,
 * so every hold granted was recorded or none will be answered. */
void vad_service_wait_served(struct vad_service *svc);

#endif
