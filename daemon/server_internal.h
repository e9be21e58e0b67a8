/*
 * server_internal.h - the server's own state, shared by its parts: server.c (listener,
 * balancing, life cycle) and its timer callbacks. Workers and connections do not see it: they
 * get the service, the gate (gate.h) and the worker pool. Other modules use server.h.
 */
#ifndef VAD_SERVER_INTERNAL_H
#define VAD_SERVER_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "admission.h"
#include "balance.h"
#include "cpu_idle.h"
#include "gate.h"
#include "listen_addr.h"

struct event;
struct event_base;
struct vad_service;
struct vad_metrics_http;
struct vad_stats_writer;
struct worker;

struct vad_server {
	struct vad_service *svc;
	int listen_fd;
	struct event_base *base;
	struct event *ev_listen, *ev_resume, *ev_stop, *ev_tick;
	struct event *ev_sig[3];
	struct worker *workers;
	unsigned n_workers, next_worker;
	bool adaptive;		      /* worker_balance = adaptive: use as few workers as keep up */
	bool balance_armed;	      /* the balance timer is pending */
	uint64_t balance_ns;	      /* when the workers' busy times were last read, 0 = not yet */
	uint64_t requests_seen;	      /* svc->requests at the last tick */
	struct balance_state balance; /* adaptive: the balancer's memory (balance.c) */
	struct vad_cpu_idle cpu_idle; /* the machine's idle CPUs (fd -1: unknown) */
	struct event *ev_balance;
	struct event *ev_tenants; /* sweeps idle tenant arenas (tenants.h); NULL without tenancy */
	int stop_requested;	  /* atomic */
	bool listening;
	bool watchdog;
	uint64_t watchdog_usec;
	struct vad_gate gate;	  /* slots, notes of refusals and timeouts (gate.c) */
	struct event *ev_restart; /* SIGUSR2: stop, then re-execute with the same fds */
	bool restart_requested;	  /* atomic */
	char stats_db[PATH_MAX];
	uint64_t stats_interval_ms, stats_retention_ms;
	struct vad_stats_writer *stats;
	char metrics_listen[VAD_LISTEN_ADDR_MAX]; /* "" = no HTTP /metrics */
	struct vad_metrics_http *metrics;
};

#endif
