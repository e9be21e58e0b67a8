/*
 * state.h - the daemon's state file: what a restarted (or crashed) vad needs to rebuild its
 * live ranges and their holders, kept in a memfd the service manager stores beside the arena
 * memfds (persist.h). It is written in place on the request path and is interpretable at every
 * instruction boundary, so a kill -9 at any moment leaves something the next daemon can load.
 *
 * Layout: a header (magic, format version, sizes, the arenas with their file identities)
 * padded to header_size, then `capacity` records of record_size bytes. A record is one hold:
 * a holder (session id), its uid, an arena, a range [offset, offset + size) and how many
 * references the holder has to it. Its fields are written first and it is published by one
 * aligned release store of its head word (valid bit, check bits, arena, count); a count
 * change is one store of the head too, and a drop clears the head before the allocator gets
 * the range back. A range in an allocator without a record after a crash is simply free again.
 * The file is sized sparse to its capacity once: only pages of slots ever used hold memory.
 * Slots are handed out lowest first from per-thread caches over a shared free list.
 * Version 2 adds session records: arena field 0xffff, holder and uid as for a hold, and the
 * session's resume secret in place of offset and size, so a restarted daemon can tell the
 * session's own client from anyone else (version 1 files have none).
 * Version 3 adds share tokens and tenant arenas. Past the hold records, token_capacity token
 * records of 64 bytes: a live share token (its 32 characters, its range's arena and offset,
 * single use, the CLOCK_REALTIME millisecond it expires, who shared it), written whole and
 * published by one aligned release store of its head word like a hold; a token dies by the
 * clear of its head. Token slots are reused (a free list), so the file holds at most as many
 * token records as there were live tokens at once, and a range has at most one live token.
 * The arena table covers every arena slot of the daemon: the configured arenas, then the
 * tenant slots, whose entry is written when a tenant arena opens there (quantum 0: an empty
 * entry; quantum is stored last, with release). Versions 1 and 2 have neither.
 */
#ifndef VAD_STATE_H
#define VAD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VAD_STATE_MAGIC	       "VADSTATE"
#define VAD_STATE_VERSION      3 /* the newest format this vad writes; it loads every older one */
#define VAD_STATE_SECRET_BYTES 16
#define VAD_STATE_NAME_MAX     63
#define VAD_STATE_ARENAS_MAX   65535 /* arena slots: 16 bits, 0xffff marks a session record */
#define VAD_STATE_CAPACITY_MAX (1ull << 31) /* records: 64 GiB of sparse file at most */
#define VAD_STATE_TOKENS_MAX   (1ull << 30) /* token records: 64 GiB of sparse file at most */
#define VAD_STATE_TOKEN_CHARS  32	    /* a share token's characters (base62) */
#define VAD_STATE_TOKEN_BYTES  64	    /* one token record */

/* One arena as the state file knows it: the records' arena field indexes these. quantum 0:
 * an empty entry (a tenant slot with no arena open; version 3). */
struct vad_state_arena {
	char name[VAD_STATE_NAME_MAX + 1];
	uint64_t size, quantum;
	uint64_t dev, ino; /* identity of its file (fstat of the memfd) */
};

/* One hold read back from a state file. */
struct vad_state_hold {
	uint64_t slot;	 /* its record's index */
	uint32_t arena;	 /* index into the file's arenas */
	uint32_t holder; /* the session id of the holder (low 32 bits) */
	uint32_t uid;
	uint32_t count; /* references, at least 1 */
	uint64_t offset, size;
};

struct vad_state;

/* Create a state file (a memfd "vad-state"; "vad:" names arenas) for these arenas (entries
 * with quantum 0 are empty, to be set by vad_state_set_arena) with room for capacity holds
 * and sessions (at most VAD_STATE_CAPACITY_MAX) and token_capacity share tokens (at most
 * VAD_STATE_TOKENS_MAX), session ids going on from next_session. 0, or -1 with a sentence
 * in err. */
int vad_state_create(const struct vad_state_arena *arenas, size_t n_arenas, uint64_t capacity,
		     uint64_t token_capacity, uint64_t next_session, struct vad_state **out,
		     char *err, size_t err_len);

/* Map an existing state file (the fd stays the caller's) and check its header against the
 * file: magic, a version this vad knows, sizes, bounds. 0, or -1 with a sentence in err. */
int vad_state_open(int fd, struct vad_state **out, char *err, size_t err_len);

/* Unmap and free (and close the fd if vad_state_create made it). */
void vad_state_close(struct vad_state *st);

/* The state file's fd. */
int vad_state_fd(const struct vad_state *st);

/* The file's arenas (n in *n); an entry with quantum 0 is empty. */
const struct vad_state_arena *vad_state_arenas(const struct vad_state *st, size_t *n);

/* The first session id a daemon loading this file may give out. */
uint64_t vad_state_next_session(const struct vad_state *st);

/* Call fn for every valid record, in slot order; a record with its valid bit set that fails
 * its check bits or its bounds (arena, offset, size, count) stops the scan. 0, or -1 with a
 * sentence naming the record in err. fn returning nonzero stops it too (returned as -1, err
 * left to fn). */
int vad_state_scan(const struct vad_state *st, int (*fn)(void *ctx, const struct vad_state_hold *h),
		   void *ctx, char *err, size_t err_len);

/* Record a hold; returns its slot plus one, or 0 when the file is full (the hold is then not
 * kept across a restart; counted in vad_state_full). Thread-safe. */
uint32_t vad_state_put(struct vad_state *st, uint32_t arena, uint64_t offset, uint64_t size,
		       uint32_t holder, uint32_t uid, uint32_t count);

/* One session record read back: the identity a client resumes with. */
struct vad_state_session {
	uint32_t holder, uid;
	uint8_t secret[VAD_STATE_SECRET_BYTES];
};

/* Call fn for every valid session record (none in a version 1 file); a corrupted one stops
 * the scan as in vad_state_scan. 0, or -1 with a sentence in err. */
int vad_state_scan_sessions(const struct vad_state *st,
			    int (*fn)(void *ctx, const struct vad_state_session *s), void *ctx,
			    char *err, size_t err_len);

/* Record a session's resume secret; its slot plus one, or 0 (file full, or frozen by the
 * caller's choice: 0 is then simply not kept). Thread-safe. */
uint32_t vad_state_put_session(struct vad_state *st, uint32_t holder, uint32_t uid,
			       const uint8_t secret[VAD_STATE_SECRET_BYTES]);

/* Write arena entry i (< the file's arenas): an arena opening in slot i (a tenant's), before
 * any record names it. The entry is empty while it is written, so a crash leaves either the
 * old one, nothing, or the new one. Not thread-safe for one i (the tenants' lock serializes). */
void vad_state_set_arena(struct vad_state *st, uint32_t i, const struct vad_state_arena *a);

/* One share token read back from a state file, or recorded (slot ignored). */
struct vad_state_token {
	uint64_t slot; /* its record's index */
	uint32_t arena;
	uint32_t uid; /* the uid that shared it */
	bool single_use;
	uint64_t offset;     /* its range's */
	uint64_t expires_ms; /* CLOCK_REALTIME ms it expires at; 0: never */
	char token[VAD_STATE_TOKEN_CHARS + 1];
};

/* Record a live share token; its slot plus one, or 0 when the token records are full (it is
 * then not kept across a restart; logged once). Thread-safe. */
uint32_t vad_state_put_token(struct vad_state *st, const struct vad_state_token *t);

/* Clear the token record rec (0: nothing) and give its slot back. Thread-safe. */
void vad_state_drop_token(struct vad_state *st, uint32_t rec);

/* Call fn for every valid token record, in slot order (none before version 3); one that
 * fails its check bits or its bounds (arena entry, offset, characters, flags) stops the scan.
 * 0, or -1 with a sentence naming the record in err (fn's nonzero: -1, err left to fn). */
int vad_state_scan_tokens(const struct vad_state *st,
			  int (*fn)(void *ctx, const struct vad_state_token *t), void *ctx,
			  char *err, size_t err_len);

/* Does token record rec (a slot plus one) say exactly this: live, token, arena, offset? */
bool vad_state_token_is(const struct vad_state *st, uint32_t rec, const char *token, uint32_t arena,
			uint64_t offset);

/* Valid token records (a pass over the token slots ever used). */
uint64_t vad_state_tokens(const struct vad_state *st);

/* Change the count of the hold recorded at rec (a slot plus one; 0: nothing). */
void vad_state_set_count(struct vad_state *st, uint32_t rec, uint32_t count);

/* Clear the record rec (0: nothing) and give its slot back. */
void vad_state_drop(struct vad_state *st, uint32_t rec);

/* Start loading record rec (a slot plus one; 0: nothing) for a coming change of its count or
 * a drop, so a batch's cache misses overlap instead of following one another. */
void vad_state_prefetch(const struct vad_state *st, uint32_t rec);

/* Start loading the records the calling thread's next n vad_state_put calls will write (up to
 * 64 of them: the thread's cache of free slots is filled for them first). Thread-safe. */
void vad_state_prefetch_puts(struct vad_state *st, size_t n);

/* Holds that found the file full since it was created. */
uint64_t vad_state_full(const struct vad_state *st);

/* Hold records in use, session records not counted (counted by a pass over the slots used). */
uint64_t vad_state_records(const struct vad_state *st);

/* Bytes of the file: the header and every slot ever used, hold and token slots (what the state
 * costs in memory). */
uint64_t vad_state_bytes_used(const struct vad_state *st);

/* Record slots ever used (the high-water mark): at least the records a scan can find. */
uint64_t vad_state_slots(const struct vad_state *st);

#endif
