/*
 * gate.h - the daemon's door, shared by the listener and the workers: the admitted
 * connections' slots (max_clients, and per uid), the rate-limited notes of refusals and hello
 * timeouts with their summary timer, and refusing a socket with one error frame. The
 * listener owns it; workers and connections only release slots and count notes.
 */
#ifndef VAD_GATE_H
#define VAD_GATE_H

#include <stdbool.h>
#include <sys/types.h>

#include "admission.h"
#include "vad.pb-c.h"

#define VAD_NOTE_INTERVAL_S 10 /* refusals and hello timeouts: one summary line per this */

struct event;
struct vad_service;

struct vad_gate {
	struct vad_service *svc;	 /* svc->clients is the max_clients count */
	struct vad_uid_conns *uid_conns; /* open connections per uid (max_clients_uid) */
	struct vad_notes notes;		 /* rate-limited log lines of refusals and timeouts */
	struct event *ev_notes;		 /* the notes' summary timer (listener base) */
};

/* An admitted connection is gone (closed, or dropped before a worker took it): its slot in
 * max_clients and in its uid's count are free again (any thread). */
void vad_gate_release(struct vad_gate *g, uid_t uid);

/* Count an event of kind; true if it is to be logged in full (any thread). The rest are
 * summarised once per VAD_NOTE_INTERVAL_S, so a flood of them is one line per interval. */
bool vad_gate_note(struct vad_gate *g, enum vad_note_kind kind, uid_t uid, pid_t pid);

/* Refuse a socket: one error frame (request id 0) if it fits the socket buffer, then close. */
void vad_gate_refuse(int fd, Vad__Error code, const char *message);

#endif
