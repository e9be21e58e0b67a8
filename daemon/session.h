/*
 * session.h - one client connection without the socket: bytes in -> frames -> decoded
 * requests -> handled -> reply frames out. The server copies bytes between the socket and
 * these buffers; tests and fuzzers drive a session directly with byte streams.
 *
 * Output is one contiguous buffer. A reply that carries an fd (MapArena) is marked; the
 * next-output call stops before a mark, and returns the marked bytes with the fd, so the
 * fd travels (SCM_RIGHTS) with the first byte of its frame.
 */
#ifndef VAD_SESSION_H
#define VAD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "guess.h"
#include "peer.h"
#include "ratelimit.h"
#include "registry.h"
#include "scratch.h"
#include "service.h"
#include "state.h"
#include "vad.pb-c.h"
#include "waitq.h"

struct vad_reply;
struct worker;

/* An fd to pass with the output byte at absolute stream position pos. */
struct vad_fd_mark {
	uint64_t pos;
	int fd; /* not owned: an arena fd */
};

/* Arena fds a connection may have sent and its client not yet read (see peer_read_all). */
#define VAD_FDS_UNREAD_MAX 32

struct vad_session {
	struct vad_service *svc;
	struct vad_peer peer;
	uint64_t id;
	char name[VAD_NAME_MAX + 1]; /* set once by hello, under the registry's holders_lock */
	bool hello_done;
	bool admin;
	bool closing;	       /* framing is broken: send what is pending, then close */
	bool *allowed;	       /* per slot of the arena array: may this peer use it, to write or
				  read only (a section with tenancy: may it have a tenant arena
				  there; a tenant arena: it is this peer's own, pinned) */
	bool *reader;	       /* per slot: only read it (reader_uids/reader_gids): it is sent the
				  read-only fd and may not allocate; attach, free and map work */
	unsigned *tenant_slot; /* per section: 1 + the slot of the tenant arena this session
				  has pinned, 0 for none (session_arena.c) */
	char last_arena[VAD_NAME_MAX + 1]; /* the name of the last arena looked up that this
					      session may use, and its slot: a client names the
					      same arena request after request */
	unsigned last_arena_index;
	bool last_arena_set;
	struct vad_holder holder;
	uint8_t secret[VAD_STATE_SECRET_BYTES]; /* proves the session on a resume (hello) */
	uint32_t secret_rec;	   /* its session record in the state file, plus one; 0: none */
	bool resumed;		   /* took back a previous daemon's session (handler_resume.c) */
	uint64_t allocs, frees;	   /* atomic: ranges allocated / freed by this session */
	uint64_t requests;	   /* handled by this session */
	uint64_t requests_counted; /* of those, already added to the service's total */
	uint64_t connected_ms;	   /* epoch */

	uint8_t *in; /* received bytes [0, in_len) not yet handled */
	size_t in_len, in_cap;
	bool in_filled; /* the last read filled the buffer: grow it */

	uint8_t *out; /* reply bytes [out_head, out_len) not yet sent */
	size_t out_head, out_len, out_cap;
	uint64_t out_sent;	   /* bytes sent since the start: stream position of out_head */
	struct vad_fd_mark *marks; /* [marks_head, n_marks) in stream order */
	size_t marks_head, n_marks, marks_cap;

	struct vad_scratch scratch;

	/* Arena fds sent (or queued) that the client may not have read yet. When it reaches
	 * VAD_FDS_UNREAD_MAX, peer_read_all (set by the server; NULL: never) says whether the
	 * client has read everything already handed to the socket. */
	unsigned fds_unconfirmed;
	bool (*peer_read_all)(void *io_ctx);
	void *io_ctx;

	/* Waiting allocations (waitq.h). worker is the session's worker (set by conn.c; NULL:
	 * no event loop, so nothing waits); replied (with io_ctx) is told when a reply was
	 * added outside of vad_session_process (a waiter answered), so it gets sent. */
	struct worker *worker;
	void (*replied)(void *io_ctx);
	LIST_HEAD(, vad_waiter) waiters;
	unsigned n_waiting;

	/* Why closing was set when it was not broken framing (NULL), for the close's log line. */
	const char *closing_why;

	/* Attaches refused for their token, and the guesses among them (guess.h). */
	uint64_t attach_failures; /* atomic: listings read it */
	unsigned guesses;
	uint32_t pause_ms; /* > 0: paused (guess.h); no input handled until resumed */

	/* 0, or (1 << 32) | the uid of the administrator who killed it (vactl kill); set once
	 * from any thread with holders_lock held, acted on by the session's worker. */
	uint64_t killed_by; /* atomic */

	/* What this session makes the daemon write: log lines and event rows (ratelimit.h). */
	struct vad_rate log_rate, event_rate;
	int suppressed_level; /* the most severe level among the suppressed lines */
};

/* A new session for a connected peer (copied). NULL when out of memory. */
struct vad_session *vad_session_new(struct vad_service *svc, const struct vad_peer *peer);

/* Clear the session's record of its resume secret (it is not resumable any more). */
void vad_session_forget_secret(struct vad_session *s);

/* Drop every reference the session holds and free it. */
void vad_session_free(struct vad_session *s);

/* How looking up the arena a request names ended (vad_session_arena). */
enum vad_lookup {
	VAD_LOOKUP_OK = 0,
	VAD_LOOKUP_UNKNOWN,  /* no such arena */
	VAD_LOOKUP_DENIED,   /* the peer may not use it (why says so) */
	VAD_LOOKUP_NOT_OPEN, /* its tenant arena is not open, and opening was not asked */
	VAD_LOOKUP_LIMIT,    /* the section's max_tenants are open (why says so) */
	VAD_LOOKUP_FAILED,   /* opening the tenant arena failed (why says so) */
};

/* The arena a session means by name: "" is the default section, else a section's name, or
 * NAME@ID for its own tenant arena. A section with tenancy gives the session's tenant arena,
 * opened first when open is set, and pinned until the session ends (session_arena.c). Without
 * open (a request about ranges held) the allow-list is not asked: none are held where it
 * refuses. */
enum vad_lookup vad_session_arena(struct vad_session *s, const char *name, bool open,
				  struct vad_arena **a, unsigned *index, char *why, size_t why_len);

/* Pin the session's tenant arenas that are open already, so `allowed` covers them (before an
 * attach, whose token may name one, and before listings). */
void vad_session_pin_tenants(struct vad_session *s);

/* The tenant id the session has in section sec: its uid or its primary gid. */
uint32_t vad_session_tenant(const struct vad_session *s, unsigned sec);

/* Where to put received bytes: returns a pointer and *cap > 0, or *cap == 0 when the input
 * buffer is full (stop reading until vad_session_process has made room). */
uint8_t *vad_session_input_space(struct vad_session *s, size_t *cap);

/* n bytes were written at the input space. */
void vad_session_input_commit(struct vad_session *s, size_t n);

/* Handle every whole frame received, appending the replies; stops early while the pending
 * output is above the high watermark, once the session is closing or paused (guess.h). */
void vad_session_process(struct vad_session *s);

/* Copy up to len bytes in and process them; returns how many bytes were taken (less than
 * len only when the session stopped taking input: closing or output backlog). */
size_t vad_session_feed(struct vad_session *s, const void *data, size_t len);

/* The next bytes to send: false if nothing is pending. When *fd >= 0 the bytes must be sent
 * with that fd attached (sendmsg SCM_RIGHTS); otherwise with a plain write. */
bool vad_session_next_output(struct vad_session *s, const uint8_t **data, size_t *len, int *fd);

/* Append r as a reply outside of vad_session_process (a waiting alloc answered) and tell
 * the connection (replied); the session's scratch is reset after it. */
void vad_session_reply(struct vad_session *s, struct vad_reply *r);

/* Free what the session's scratch holds (after a handler call outside of a request). */
void vad_session_scratch_reset(struct vad_session *s);

/* n bytes of the last vad_session_next_output were sent (n >= 1 sent the fd too). */
void vad_session_output_done(struct vad_session *s, size_t n);

/* Arena fds in replies still in the session's output (not handed to the socket yet). */
size_t vad_session_fds_queued(const struct vad_session *s);

/* Bytes of reply waiting to be sent. */
size_t vad_session_output_pending(const struct vad_session *s);

/* Does the session stop taking input: framing broken, paused (guess.h), or output over the
 * high watermark? */
bool vad_session_input_blocked(const struct vad_session *s);

/* Must the connection close once the pending output is sent? */
bool vad_session_closing(const struct vad_session *s);

/* Log a line this session caused (a refusal, a failure on its behalf) at level, within its
 * log rate limit: past the burst, lines are counted and the count is logged later. */
void vad_session_log(struct vad_session *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Queue an event row this session caused (alloc-failed, quota-refused), within its event
 * rate limit: past the burst, events are counted and a "rate-limited" row says how many. */
void vad_session_event(struct vad_session *s, const char *kind, const char *detail);

/* Mark s killed by the administrator uid `by` (any thread, holders_lock held so s is alive);
 * then wake the workers (vad_service_wake_workers, after the lock), one of which owns s and
 * closes it. False when s was killed already. */
bool vad_session_kill(struct vad_session *s, uint32_t by);

/* Has an administrator killed s (its worker closes it at its next turn)? */
bool vad_session_killed(const struct vad_session *s);

/* Append the EKILLED notice (id 0) that tells a killed session's client why it goes, and mark
 * the session closing. Its worker only. */
void vad_session_kill_notice(struct vad_session *s);

/* Encode a lone error response frame (for refusals before a session exists). Returns its
 * length, or 0 if cap is too small. */
size_t vad_encode_error_frame(uint8_t *buf, size_t cap, uint64_t id, Vad__Error code,
			      const char *message);

#endif
