/*
 * admission.h - who may connect: max_clients with a few slots kept for admin peers, a limit
 * on the connections of one uid, and notes of refusals and hello timeouts that a flood
 * cannot turn into a flood of log lines. The listener decides; server.c does the I/O.
 */
#ifndef VAD_ADMISSION_H
#define VAD_ADMISSION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What the listener does with a newcomer. */
enum vad_admit {
	VAD_ADMIT_OK,
	VAD_ADMIT_FULL,	    /* max_clients connections: nobody else gets in */
	VAD_ADMIT_RESERVED, /* only the slots kept for admins are left */
	VAD_ADMIT_UID,	    /* the newcomer's uid has max_clients_uid connections */
};

/* The slots of max_clients kept for admins: admin_slots, but never more than half. */
unsigned vad_admission_reserved(unsigned max_clients, unsigned admin_slots);

/* Decide for a newcomer, given the connections now (clients, and of its uid) and whether it
 * is an admin (root, the daemon's uid, admin_group: exempt from the uid limit and allowed
 * into the reserved slots). max_clients 0 or max_clients_uid 0: no such limit. */
enum vad_admit vad_admission_decide(unsigned clients, unsigned uid_conns, bool admin,
				    unsigned max_clients, unsigned admin_slots,
				    unsigned max_clients_uid);

/* ---- connections per uid ---------------------------------------------------------------- */

/* The number of open connections of every uid that has one (thread-safe). */
struct vad_uid_conns;

/* An empty table, or NULL when out of memory. */
struct vad_uid_conns *vad_uid_conns_new(void);

/* Free the table and every entry. */
void vad_uid_conns_free(struct vad_uid_conns *t);

/* Connections of uid now. */
unsigned vad_uid_conns_get(struct vad_uid_conns *t, uid_t uid);

/* One more connection of uid; 0, or -1 when out of memory (nothing counted). */
int vad_uid_conns_add(struct vad_uid_conns *t, uid_t uid);

/* One connection of uid fewer (an entry that drops to 0 is freed). */
void vad_uid_conns_drop(struct vad_uid_conns *t, uid_t uid);

/* How many uids have connections (for tests). */
unsigned vad_uid_conns_uids(struct vad_uid_conns *t);

/* ---- notes: rate-limited log lines ------------------------------------------------------ */

/* What a note is about: X(name, what a summary line counts). */
#define VAD_NOTE_KINDS(X)                                                                          \
	X(HELLO_TIMEOUT, "connections closed for not completing hello within hello_timeout")       \
	X(FULL, "connections refused at max_clients")                                              \
	X(RESERVED, "connections refused because only the slots kept for admins were left")        \
	X(UID, "connections refused at max_clients_uid")                                           \
	X(ACCEPT, "accept failures")

enum vad_note_kind {
#define VAD_NOTE_ENUM(name, what) VAD_NOTE_##name,
	VAD_NOTE_KINDS(VAD_NOTE_ENUM)
#undef VAD_NOTE_ENUM
	    VAD_N_NOTES
};

/* What the caller of vad_notes_hit does. */
enum vad_note_verdict {
	VAD_NOTE_LOG,	    /* log this one in full */
	VAD_NOTE_COUNTED,   /* counted; a summary is already due */
	VAD_NOTE_COUNT_ARM, /* counted; arm the summary timer (interval from now) */
};

/* The first event of a kind is logged in full; the rest within interval_ns of it are only
 * counted, and one summary line per interval says how many there were. Thread-safe. */
struct vad_notes {
	pthread_mutex_t lock;
	uint64_t interval_ns;
	bool summary_due; /* a summary timer is armed */
	struct vad_note {
		uint64_t window_ns; /* when the current window began (0: none yet) */
		uint64_t counted;   /* counted, not logged, since the last summary */
		uint64_t total;	    /* every event since the start */
		uid_t last_uid;	    /* of the last counted event, for the summary */
		pid_t last_pid;
	} kind[VAD_N_NOTES];
};

/* Set up notes with a window of interval_ns. */
void vad_notes_init(struct vad_notes *n, uint64_t interval_ns);

/* Release the lock. */
void vad_notes_fini(struct vad_notes *n);

/* Record one event of kind at now_ns, from uid/pid; says whether to log it. */
enum vad_note_verdict vad_notes_hit(struct vad_notes *n, enum vad_note_kind kind, uint64_t now_ns,
				    uid_t uid, pid_t pid);

/* What a summary line says about one kind. */
struct vad_note_summary {
	uint64_t counted; /* events counted, not logged, since the last summary (0: none) */
	uid_t last_uid;	  /* of the last of them */
	pid_t last_pid;
};

/* At the summary timer: take every kind's count since the last summary into out[] and clear
 * summary_due. A kind that had some starts a new window now, so a flood that goes on is
 * counted again: one summary line per interval, never a line per event. */
void vad_notes_take(struct vad_notes *n, uint64_t now_ns, struct vad_note_summary out[VAD_N_NOTES]);

/* Every event of kind since the start. */
uint64_t vad_notes_total(struct vad_notes *n, enum vad_note_kind kind);

/* What a summary line of kind counts ("connections refused at max_clients"). */
const char *vad_note_what(enum vad_note_kind kind);

#endif
