/*
 * internal.h - libvad's private structures: the connection, the arena mappings and the
 * table of held ranges. Nothing here is exported (libvad.map keeps only vad_* calls).
 */
#ifndef LIBVAD_INTERNAL_H
#define LIBVAD_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A library must never exit its caller: uthash reports a failed add instead (the element
 * is then not in the table) by setting libvad_hash_oom, which adders reset first. */
extern __thread bool libvad_hash_oom;
#define HASH_NONFATAL_OOM	 1
#define uthash_nonfatal_oom(obj) (libvad_hash_oom = true)
#include <uthash.h>

#include "fastwire.h"
#include "frame.h"
#include "vad.h"

/* Largest response payload libvad accepts: lists of many clients can be long. */
#define LIBVAD_RESPONSE_MAX (16u * 1024u * 1024u)
/* The smallest max_frame a daemon accepts (vad.conf refuses less): requests libvad may
 * split (frees) are cut to fit it (with VAD_FREE_FRAME_OVERHEAD, proto/wire.h). */
#define LIBVAD_SAFE_FRAME 4096u

/* Receive buffer size kept between replies (it grows for larger ones, then shrinks). */
#define LIBVAD_RBUF_KEEP (64u * 1024u)
/* Most fds one recvmsg collects; the daemon sends one per MapArena reply (one recvmsg never
 * returns the fds of two sends), so more than one is a protocol error. */
#define LIBVAD_FDS_PER_READ 16

/* One arena mapped into this process. Never removed before vad_close, so pointers to
 * it (and to its name) stay valid for the client's life. */
struct libvad_arena {
	char *name;
	int fd;
	uint8_t *base; /* aligned to max_align */
	uint64_t size;
	uint64_t quantum;
	uint64_t max_align; /* min(VAD_MAX_ALIGN, size rounded up to a power of two) */
	bool read_only;	    /* this client is one of its readers: mapped PROT_READ */
	bool retired;	    /* (atomic) its session was lost: kept until vad_close, never used */
};

/* A range this client holds, keyed by its start address. */
struct libvad_held {
	uintptr_t addr; /* key */
	struct libvad_arena *arena;
	uint64_t offset;
	uint64_t size;
	uint32_t refs; /* alloc plus attaches of the same range by this client */
	UT_hash_handle hh;
	struct libvad_held *next_spare; /* on the spare list, once out of the table */
};

/* Most unused held records a client keeps for reuse. */
#define LIBVAD_HELD_SPARE_MAX 4096u

/* Buckets of the table of calls waiting for a response; ids are handed out in order, so
 * id % LIBVAD_PENDING_BUCKETS spreads the calls in flight evenly. */
#define LIBVAD_PENDING_BUCKETS 64
/* Most frames the reader decodes before it takes the lock to deliver them. */
#define LIBVAD_DELIVER_BATCH 32
/* Send buffers of combined requests above this size are given back after use. */
#define LIBVAD_OUTQ_KEEP (64u * 1024u)

/* Where a waiting call is; the futex word it sleeps on. */
enum libvad_wait_state {
	LIBVAD_WAITING,	 /* awake: it checks the connection's state under c->lock */
	LIBVAD_SLEEPING, /* asleep on its state until a reply or the reader role comes */
	LIBVAD_DONE,	 /* answered (err, resp, fd set) and out of the table */
};

/* A call waiting for its response (lives on the caller's stack). */
struct libvad_pending {
	uint64_t id;
	uint32_t state;	     /* enum libvad_wait_state, atomic: the waiter reads it unlocked */
	int err;	     /* VAD_OK or a local failure (VAD_EGONE, VAD_EPROTO) */
	Vad__Response *resp; /* owned by the waiter once done */
	int fd;		     /* the arena fd that came with a MapArena reply, or -1 */
	bool wants_fd;	     /* a MapArena call: its reply may carry an fd */
	bool unsent;	     /* (c->lock) its frame never left on the connection that dropped
				(the sender says so): sent again once the session is resumed */
	bool marked;	     /* (written under c->lock, atomically: its owner reads it without) a
				blocking call's frame queued for the sender, whose mark points
				here: the sender clears it when done with the mark, or the owner
				unhooks the mark (libvad_unmark_locked) before it returns */
	struct libvad_fast_reply *fast;	    /* or NULL: where an Alloc/Free reply is decoded
					       without protobuf-c (resp then points into it) */
	struct libvad_pending *prev, *next; /* in its bucket */
};

struct libvad_ticket;

/* Where a ticket's or a blocking call's frame starts in an out-queue, so that a send that
 * fails tells which frames never left (sender.c). */
struct libvad_outmark {
	size_t off;		     /* its first byte in the buffer */
	struct libvad_ticket *k;     /* in the slab, never freed before vad_close, or NULL */
	uint64_t id;		     /* its request: a ticket used up meanwhile is left alone */
	struct libvad_pending *call; /* or a blocking call's record (its stack), while it is
					marked; NULL once its owner unhooked it */
};

/* Encoded requests queued for whoever is sending, with the marks of ticket frames. */
struct libvad_outbuf {
	uint8_t *buf;
	size_t len, cap;
	struct libvad_outmark *marks;
	size_t n_marks, cap_marks;
};

/* A received fd not yet claimed, with where in the reply stream it came: the bytes
 * [lo, hi) of the recvmsg that brought it, so the reply it rides on starts in there. */
struct libvad_fd {
	int fd;
	uint64_t lo, hi;
};

/* Threads to wake once c->lock is released: every sleeping waiter sleeps on its client's
 * one wake word with the bit of its id (FUTEX_WAIT_BITSET), so one FUTEX_WAKE_BITSET wakes
 * every thread a read answered instead of one syscall per thread. */
struct libvad_wakes {
	uint32_t *word; /* the client's wake word, once a wake is queued */
	uint32_t bits;	/* the bits of the threads to wake */
	size_t n;	/* wakes queued */
};

/* Tickets per slab chunk: the slab grows a chunk at a time, up to VAD_TICKETS_MAX. */
#define LIBVAD_TICKET_CHUNK  64
#define LIBVAD_TICKET_CHUNKS (VAD_TICKETS_MAX / LIBVAD_TICKET_CHUNK)

/* What a ticket's request is (tickets.c). */
enum libvad_ticket_kind {
	LIBVAD_TICKET_UNUSED, /* on the free list */
	LIBVAD_TICKET_ALLOC,
	LIBVAD_TICKET_FREE,
};

/* One submitted request (vad_*_submit) until vad_wait takes its result: the call in flight
 * it would keep on its stack if it blocked, and what its result needs. Lives in the
 * client's ticket slab, so submitting allocates nothing. */
struct libvad_ticket {
	struct libvad_pending p; /* in c->pending while in flight */
	struct libvad_fast_reply fast;
	uint64_t lists[2];  /* fast's offsets and sizes: one range */
	uint32_t gen;	    /* the handle's generation: bumped when the ticket is used up */
	uint8_t kind;	    /* enum libvad_ticket_kind */
	bool claimed;	    /* a thread is in vad_wait on it */
	uint64_t conn_gen;  /* the connection it was sent on */
	uint32_t next_free; /* index + 1 of the next unused ticket, 0: none */
	size_t n;	    /* ranges: 1, or an alloc batch's count */
	/* alloc */
	char arena[LIBVAD_FAST_ARENA_MAX + 1]; /* resolved name */
	size_t size, align;		       /* size: sizes of one range */
	size_t *sizes;			       /* the sizes asked: &size, or in batch */
	uint64_t *batch; /* a batch's lists (offsets, sizes, sizes asked), malloc'd */
	unsigned flags;
	/* free: n offsets of one arena (lists[0], or in batch followed by their records) */
	struct libvad_arena *owner;
	struct libvad_held taken; /* its record, dropped at submit (put back if not freed) */
	uint32_t next_part;	  /* a batch free's next Free (index + 1), 0: none */
	bool part;		  /* a Free after a batch free's first: no handle of its own */
	bool default_arena;	  /* alloc: no arena named (the frame says ""), for a resend */
};

struct vad_client {
	int sock;
	uint64_t generation; /* unique per client, for the thread-local error slots */
	char *socket_path;

	/* hello reply */
	char *name; /* what hello says again after a reconnect */
	uint64_t session_id;
	uint64_t resume_id; /* resume.c: the session's identity and secret (len 0: none) */
	uint8_t resume_secret[32];
	size_t resume_secret_len;
	uint64_t hello_resume_id; /* the last hello's: the new session's, if Resume fails */
	uint8_t hello_secret[32];
	size_t hello_secret_len;

	/* reconnecting (resume.c): one thread at a time; conn_gen (c->lock) counts the
	 * connections, so a thread that saw the old one dead knows another already replaced it */
	pthread_mutex_t reconnect_lock;
	uint64_t conn_gen;
	uint64_t lost_gen;     /* (written under c->lock, atomically: vad_wait reads it without)
				  the conn_gen of the connection on which the session could not
				  be resumed, 0: never; a call from before it reports VAD_ERESUME
				  too */
	uint32_t reconnect_ms; /* 0: a dropped connection stays dropped */
	uint32_t protocol_version;
	bool admin;
	char *server;
	char *default_arena;
	/* Strings a reconnect's hello replaced (server, default_arena): other threads may still
	 * read them (a call naming no arena, vad_session_info's out), so they live until
	 * vad_close. */
	char **retired;
	size_t n_retired;

	uint64_t next_id; /* atomic */

	/* c->lock guards the calls in flight and who sends and reads for them. One thread
	 * at a time sends (flat combining): a call that finds another thread sending
	 * appends its frame to outq and that thread sends it with the rest. One waiting
	 * thread at a time reads (leader/follower) and hands every reply to its waiter. */
	pthread_mutex_t lock;
	struct libvad_pending *pending[LIBVAD_PENDING_BUCKETS];
	bool sending;		     /* a thread is in the send loop */
	struct libvad_outbuf outq;   /* frames waiting for the sender */
	struct libvad_outbuf outfly; /* the frames being sent (owned by the sender) */
	bool reading;		     /* one waiter is the reader now */
	size_t sleepers;	     /* waiters in LIBVAD_SLEEPING */
	uint32_t wake_word;	     /* atomic: bumped (under c->lock) for every wake */
	bool nonblocking;	     /* atomic: vad_fd was asked for, so the socket is
					O_NONBLOCK (an event loop polls it) and libvad's own
					waits poll before they receive or send again */
	int dead_err;		     /* nonzero: the connection is unusable (written
					under c->lock, atomically: vad_progress reads it
					without) */
	char *dead_msg;		     /* the daemon's parting sentence, if it sent one */
	uint8_t *rbuf;		     /* touched only by the reader */
	size_t rlen, rcap;
	uint64_t rpos;	       /* stream position of rbuf[0] (reader only) */
	struct libvad_fd *fdq; /* received fds not yet claimed, arrival order (reader only) */
	size_t fdq_len, fdq_cap;
	size_t fd_waiters; /* atomic (written under c->lock): MapArena calls in flight, the
			      most fds the daemon may have sent that are not claimed yet */

	/* mappings and held ranges; map_lock makes one thread at a time ask for an arena's
	 * fd (held across that round trip; taken before arena_lock) */
	pthread_mutex_t map_lock;
	pthread_mutex_t arena_lock;
	struct libvad_arena **arenas;
	size_t n_arenas, cap_arenas;
	struct libvad_arena *arena_hot; /* atomic: the arena last found (arenas.c), or NULL */
	/* Arenas of a lost session (resume.c): a call in flight on another thread may still hold
	 * one, so they are freed at vad_close, not when the session is forgotten. */
	struct libvad_arena **retired_arenas;
	size_t n_retired_arenas;
	pthread_mutex_t held_lock;
	struct libvad_held *held;
	struct libvad_held *held_spare; /* records to reuse (held_lock) */
	struct libvad_held held_anchor; /* keeps held's table allocated (held.c) */
	size_t n_held_spare;

	/* tickets (tickets.c), under c->lock: chunks allocated as needed, never moved */
	struct libvad_ticket *ticket_chunks[LIBVAD_TICKET_CHUNKS];
	uint32_t tickets_made; /* tickets in the chunks */
	uint32_t tickets_free; /* index + 1 of the first unused one, 0: none */
	uint32_t tickets_out;  /* ranges of the tickets submitted, not yet waited for */
};

/* resume.c */

/* A call's own frame did not reach a daemon that hung up: it was not done (internal). */
#define LIBVAD_UNSENT (-1000)

/* The connection that was generation gen died with VAD_EGONE: reconnect (bounded backoff),
 * say hello, resume the session. VAD_OK (also when another thread already did), or the
 * error to return (VAD_EGONE when reconnecting is off or the daemon did not come back,
 * VAD_ERESUME when it came back without the session). */
int libvad_reconnect(vad_client *c, uint64_t gen);

/* May a call that found the connection dead with err reconnect? c->lock held. */
bool libvad_may_reconnect(vad_client *c, int err);

/* The reconnect bound of a new client: $VAD_RECONNECT_MS, else 30000. */
uint32_t libvad_reconnect_default(void);

/* Say hello on c's connection (connect.c); keeps what the reply says. */
int libvad_say_hello(vad_client *c, const char *name);

/* Keep the session identity of a hello reply. */
void libvad_resume_keep(vad_client *c, const Vad__HelloReply *h);

/* waiters.c */

/* Enter p (state LIBVAD_WAITING) in the table of calls in flight. c->lock held. */
void libvad_pending_add(vad_client *c, struct libvad_pending *p);

/* Take p out of the table. c->lock held. */
void libvad_pending_remove(vad_client *c, struct libvad_pending *p);

/* The call in flight with id, or NULL. c->lock held. */
struct libvad_pending *libvad_pending_find(vad_client *c, uint64_t id);

/* Answer p: take it out of the table, set its result and mark it done; queue its thread
 * on w if it sleeps. After this p may vanish as soon as c->lock is released. */
void libvad_pending_finish(vad_client *c, struct libvad_pending *p, int err, Vad__Response *resp,
			   int fd, struct libvad_wakes *w);

/* Wake one sleeping waiter (queued on w) so that it takes over reading. c->lock held. */
void libvad_pending_wake_reader(vad_client *c, struct libvad_wakes *w);

/* Mark the connection dead with err (the first error sticks) and answer every call in
 * flight with it. c->lock held. */
void libvad_fail_all_locked(vad_client *c, int err);

/* Wake the threads queued on w and empty it (one syscall). Call without c->lock: they
 * need it. */
void libvad_wakes_flush(struct libvad_wakes *w);

/* Whether p is answered (an acquire load: its result may be read after true). */
bool libvad_pending_done(const struct libvad_pending *p);

/* With c->lock held: sleep until p is answered or woken to read. Returns with c->lock
 * held unless p is done, in which case it returns true without the lock. */
bool libvad_pending_sleep(vad_client *c, struct libvad_pending *p);

/* errors.c */

/* Record err with msg (NULL: vad_strerror(err)) as the calling thread's last error on c;
 * returns err so callers can write `return libvad_fail(c, err, msg)`. c may be NULL. */
int libvad_fail(vad_client *c, int err, const char *msg);

/* Like libvad_fail with a printf-style sentence. */
int libvad_failf(vad_client *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The VAD_E* code of a daemon error value (VAD_EPROTO for values libvad does not know). */
int libvad_code_from_wire(Vad__Error e);

/* arenas.c */

/* The mapping of arena name, mapping it first (MapArena round trip) if needed. */
int libvad_arena_get(vad_client *c, const char *name, struct libvad_arena **out);

/* The mapping of arena name if it is mapped already (no round trip), or NULL. */
struct libvad_arena *libvad_arena_peek(vad_client *c, const char *name);

/* The mapping containing ptr, or NULL. */
struct libvad_arena *libvad_arena_find(vad_client *c, const void *ptr);

/* Unmap and close every arena. */
void libvad_arenas_destroy(vad_client *c);

/* Retire arena a of a lost session (arena_lock held): its fd closed, its mapping and record
 * kept until vad_close, as a call on another thread may still hold it. */
void libvad_arena_retire(vad_client *c, struct libvad_arena *a);

/* ranges.c */

/* The checks every alloc call makes before sending (flags within known, sizes, alignment,
 * VAD_POPULATE on a read-only arena); *name is the arena meant. VAD_OK or the recorded
 * failure. */
int libvad_alloc_check(vad_client *c, const char *arena, size_t n, const size_t *sizes,
		       size_t align, unsigned flags, unsigned known, const char **name);

/* Turn a successful Alloc reply for n ranges of sizes in arena name, which came on
 * connection granted_gen, into pointers and held records, after checking it against the
 * request; all or nothing (recorded failure). VAD_ERESUME (nothing given back) if a session
 * was lost since, decided under the lock that records the ranges (libvad_held_add_many). */
int libvad_take_alloc(vad_client *c, const Vad__AllocReply *ar, const char *name, size_t n,
		      const size_t *sizes, size_t align, uint64_t granted_gen, void **out);

/* The most bytes a Free frame of n offsets in an arena named name_len bytes takes. */
#define LIBVAD_FREE_FRAME_MAX(name_len, n) (VAD_FREE_FRAME_OVERHEAD + (name_len) + 10 * (n))

/* How many of offsets, from the first, fit one Free frame for an arena name of name_len
 * bytes (at least one): the daemon drops a connection that sends a frame above its
 * max_frame, and LIBVAD_SAFE_FRAME is the smallest any daemon accepts. */
size_t libvad_free_chunk(size_t name_len, size_t n, const uint64_t *offsets);

/* The end of a Free of the n ranges whose records were taken out (taken) before it went:
 * err and r are the call's outcome (r freed here, with fast); the records of what was not
 * freed go back to arena a (NULL: not put back). VAD_OK or the recorded failure. */
int libvad_free_finish(vad_client *c, struct libvad_arena *a, size_t n,
		       const struct libvad_held *taken, int err, Vad__Response *r,
		       const struct libvad_fast_reply *fast);

/* tickets.c */

/* Whether sock has events (POLLIN, POLLOUT, or an error or hang-up, which the receive or
 * send then reports) within timeout_ms (-1: no limit). */
bool libvad_wait_fd(int sock, short events, int timeout_ms);

/* Make sock O_NONBLOCK (vad_fd's mode, kept across reconnects); 0 or -1 (errno). */
int libvad_set_nonblocking(int sock);

/* The call in flight of ticket k that has request id, or NULL if k was used up (and
 * perhaps reused) since. c->lock held. */
struct libvad_pending *libvad_ticket_frame(struct libvad_ticket *k, uint64_t id);

/* Free the ticket slab (vad_close). */
void libvad_tickets_destroy(vad_client *c);

/* populate.c */

/* Prefault the n ranges just allocated at ptrs (sizes as asked) for writing; on failure
 * free them all and return the error, recorded with a sentence. */
int libvad_populate(vad_client *c, size_t n, const size_t *sizes, void *const *ptrs);

/* held.c */

/* Record one more reference to [offset, offset+size) of arena; VAD_ENOMEM on failure. */
int libvad_held_add(vad_client *c, struct libvad_arena *arena, uint64_t offset, uint64_t size);

/* Any connection: libvad_held_add_many's granted_gen for ranges whose session is not in
 * doubt. */
#define LIBVAD_GEN_ANY UINT64_MAX

/* Record one more reference to each range [offsets[i], offsets[i] + sizes[i]) of arena,
 * under one lock; all or nothing (VAD_ENOMEM: none recorded). With fresh set (new
 * allocations) a range this client holds already, or twice in the list, is a daemon
 * error: VAD_EPROTO, *clash its index, nothing recorded. Ranges granted on connection
 * granted_gen are refused (VAD_ERESUME, nothing recorded) if a session was lost since
 * (lost_gen > granted_gen): that check and the recording are under held_lock, which
 * forget_session takes after it sets lost_gen, so either the ranges are refused or they are
 * recorded before the session's records are forgotten, never recorded after. */
int libvad_held_add_many(vad_client *c, struct libvad_arena *arena, size_t n,
			 const uint64_t *offsets, const uint64_t *sizes, bool fresh, size_t *clash,
			 uint64_t granted_gen);

/* For each of the n ranges of arena at offsets: copy its record into out[i], then drop one
 * reference to it; out[i].refs is 0 if it is not held. Under one lock. */
void libvad_held_take_many(vad_client *c, struct libvad_arena *arena, size_t n,
			   const uint64_t *offsets, struct libvad_held *out);

/* Whether this client holds a range starting at addr. */
bool libvad_held_has(vad_client *c, uintptr_t addr);

/* Copy the record of the range starting at addr; false if none. */
bool libvad_held_lookup(vad_client *c, uintptr_t addr, struct libvad_held *out);

/* Forget every held range. */
void libvad_held_destroy(vad_client *c);

/* The name the daemon should use for arena: "" for the default arena. */
static inline const char *libvad_arena_arg(const char *arena)
{
	return arena ? arena : "";
}

#endif
