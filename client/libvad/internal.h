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

#include "frame.h"
#include "vad.h"

/* Largest response payload libvad accepts: lists of many clients can be long. */
#define LIBVAD_RESPONSE_MAX (16u * 1024u * 1024u)
/* The smallest max_frame a daemon accepts (vad.conf refuses less): requests libvad may
 * split (frees) are cut to fit it, and the room a Free frame needs besides its offsets
 * and arena name (length prefix, id, tags and lengths). */
#define LIBVAD_SAFE_FRAME    4096u
#define LIBVAD_FREE_OVERHEAD 40u

/* Receive buffer size kept between replies (it grows for larger ones, then shrinks). */
#define LIBVAD_RBUF_KEEP (64u * 1024u)
/* Most fds one recvmsg collects; the daemon sends one per MapArena reply. */
#define LIBVAD_FDS_PER_READ 16

/* One arena mapped into this process. Never removed before vad_close, so pointers to
 * it (and to its name) stay valid for the client's life. */
struct libvad_arena {
	char *name;
	int fd;
	uint8_t *base;
	uint64_t size;
	uint64_t quantum;
};

/* A range this client holds, keyed by its start address. */
struct libvad_held {
	uintptr_t addr; /* key */
	struct libvad_arena *arena;
	uint64_t offset;
	uint64_t size;
	uint32_t refs; /* alloc plus attaches of the same range by this client */
	UT_hash_handle hh;
};

/* A call waiting for its response (lives on the caller's stack). */
struct libvad_pending {
	uint64_t id;
	bool done;
	int err;	     /* VAD_OK or a local failure (VAD_EGONE, VAD_EPROTO) */
	Vad__Response *resp; /* owned by the waiter once done */
	int fd;		     /* the arena fd that came with a MapArena reply, or -1 */
	pthread_cond_t cond;
	struct libvad_pending *next;
};

struct vad_client {
	int sock;
	uint64_t generation; /* unique per client, for the thread-local error slots */
	char *socket_path;

	/* hello reply */
	uint64_t session_id;
	uint32_t protocol_version;
	bool admin;
	char *server;
	char *default_arena;

	/* request ids and sending */
	uint64_t next_id; /* atomic */
	pthread_mutex_t send_lock;

	/* receiving: leader/follower over lock */
	pthread_mutex_t lock;
	struct libvad_pending *pending; /* waiters, any order */
	bool reading;			/* one waiter is the reader now */
	int dead_err;			/* nonzero: the connection is unusable */
	char *dead_msg;			/* the daemon's parting sentence, if it sent one */
	uint8_t *rbuf;			/* touched only by the reader */
	size_t rlen, rcap;
	int *fdq; /* received fds not yet claimed, arrival order */
	size_t fdq_len, fdq_cap;

	/* mappings and held ranges */
	pthread_mutex_t arena_lock;
	struct libvad_arena **arenas;
	size_t n_arenas, cap_arenas;
	pthread_mutex_t held_lock;
	struct libvad_held *held;
};

/* transport.c */

/* Send req (its id is set here) and wait for the matching response. On VAD_OK *resp is
 * the decoded response (free with vad__response__free_unpacked(r, NULL)) and, if fd is
 * not NULL, *fd is the descriptor that came with it or -1. Does not look at resp->error. */
int libvad_call(vad_client *c, Vad__Request *req, Vad__Response **resp, int *fd);

/* libvad_call, then turn a daemon error into its VAD_E* code (recording the daemon's
 * sentence) and check that the result has the expected case. On VAD_OK the caller owns
 * *resp. Every failure is recorded for vad_last_error. */
int libvad_rpc(vad_client *c, Vad__Request *req, Vad__Response__ResultCase expect,
	       Vad__Response **resp, int *fd);

/* The daemon's parting sentence (an unasked error reply before it closed), or NULL.
 * Valid until vad_close. */
const char *libvad_dead_message(vad_client *c);

/* The VAD_E* code of a decoded response: the daemon's error (its sentence recorded for
 * vad_last_error), VAD_EPROTO if the result is not of the expected case, else VAD_OK.
 * Does not free r. */
int libvad_response_error(vad_client *c, const Vad__Response *r, Vad__Response__ResultCase expect);

/* Free the receive-side state (buffer, queued fds). */
void libvad_transport_destroy(vad_client *c);

/* errors.c */

/* Record err with msg (NULL: vad_strerror(err)) as the calling thread's last error on c;
 * returns err so callers can write `return libvad_fail(c, err, msg)`. c may be NULL. */
int libvad_fail(vad_client *c, int err, const char *msg);

/* Like libvad_fail with a printf-style sentence. */
int libvad_failf(vad_client *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* arenas.c */

/* The mapping of arena name, mapping it first (MapArena round trip) if needed. */
int libvad_arena_get(vad_client *c, const char *name, struct libvad_arena **out);

/* The mapping containing ptr, or NULL. */
struct libvad_arena *libvad_arena_find(vad_client *c, const void *ptr);

/* Unmap and close every arena. */
void libvad_arenas_destroy(vad_client *c);

/* held.c */

/* Record one more reference to [offset, offset+size) of arena; VAD_ENOMEM on failure. */
int libvad_held_add(vad_client *c, struct libvad_arena *arena, uint64_t offset, uint64_t size);

/* Drop one reference to the range starting at addr (no-op if not recorded). */
void libvad_held_drop(vad_client *c, uintptr_t addr);

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
