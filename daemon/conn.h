/*
 * conn.h - one client connection on its worker: reading requests, sending the replies of a
 * pass, backpressure, the hello timeout, closing, and leaving or joining a worker when the
 * balancer moves it. Everything here runs in the thread of the connection's worker.
 */
#ifndef VAD_CONN_H
#define VAD_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "vad.pb-c.h"

struct event;
struct pending_conn;
struct vad_gate;
struct vad_session;
struct worker;

struct conn {
	int fd;
	struct worker *w;
	struct vad_session *sess;
	struct event *ev_read, *ev_write;
	bool reading, writing, throttled, lingering;
	bool eof;	   /* the client shut down its side: send what is pending, then close */
	bool flush_queued; /* on its worker's flush list: replies go out at the end of the pass */
	struct event *ev_hello; /* until hello: closes it hello_timeout after accepted_ns */
	struct event *ev_pause; /* ends a pause of its session (guess.h); made on first use */
	bool pausing;		/* ev_pause is armed */
	uint64_t accepted_ns;	/* vad_now_ns() at accept: the hello timeout counts from it */
	struct conn *prev, *next;
	LIST_ENTRY(conn) flush_link;
};

/* Serve the accepted socket p->fd on w (its fd is taken over; the caller frees p). */
void conn_open(struct worker *w, struct pending_conn *p);

/* Close c: its events, socket and session; its admission slot is free again. */
void conn_close(struct conn *c, const char *why);

/* Close a connection that no worker owns (handed over, never adopted): no events, no list. */
void conn_drop_detached(struct vad_gate *gate, struct conn *c);

/* May c move to another worker? Not while closing: it is about to go anyway. */
bool conn_movable(const struct conn *c);

/* Take c off its worker to hand it over: its events and hello timer go, it leaves the list. */
void conn_detach(struct conn *c);

/* Serve a connection another worker detached, on w, as it was served there. */
void conn_adopt(struct worker *w, struct conn *c);

/* Close every connection of w whose session an administrator killed (vactl kill). */
void conn_close_killed(struct worker *w);

/* Send the replies of the pass of w's loop that just ended. */
void conn_flush_pass(struct worker *w);

#endif
