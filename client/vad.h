/*
 * vad.h - libvad, the client library of the vad shared-memory range daemon.
 *
 * A client connects to the daemon's Unix socket, allocates ranges of a shared
 * arena and gets pointers into its own mapping of that arena. Ranges can be
 * shared with other processes through printable tokens. All functions are
 * thread-safe; one vad_client may be used by many threads at once.
 *
 * Every function that can fail returns 0 or a negative VAD_E* code; nothing is
 * printed and nothing aborts. vad_last_error() gives the daemon's sentence.
 */
#ifndef VAD_H
#define VAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VAD_VERSION_STRING "0.1.0"
#define VAD_TOKEN_LEN 32 /* printable share token; buffers are char[VAD_TOKEN_LEN + 1] */

/* Error codes: the negated values of vad.Error in proto/vad.proto. */
enum vad_error {
	VAD_OK = 0,
	VAD_EINVAL = -1,       /* a malformed or missing argument */
	VAD_ENOMEM = -2,       /* out of memory */
	VAD_ECONNECT = -3,     /* no daemon is listening on the socket */
	VAD_EGONE = -4,	       /* the daemon closed the connection (gone or restarted) */
	VAD_EPROTO = -5,       /* protocol error: undecodable message or broken framing */
	VAD_EVERSION = -6,     /* client and daemon speak different protocol versions */
	VAD_ENOSPC = -7,       /* the arena has no free range that large */
	VAD_EQUOTA = -8,       /* a per-client or per-uid quota would be exceeded */
	VAD_EPERM = -9,	       /* not allowed (arena allow-list or admin operation) */
	VAD_ENOARENA = -10,    /* no such arena */
	VAD_ENOTHELD = -11,    /* this client holds no reference to that range */
	VAD_ETOKEN = -12,      /* unknown or malformed share token */
	VAD_ESIZE = -13,       /* size is 0 or too large */
	VAD_EALIGN = -14,      /* alignment is not a power of two or is too large */
	VAD_ETOOBIG = -15,     /* request larger than the daemon's maximum frame or batch */
	VAD_EBUSY = -16,       /* the daemon has too many clients */
	VAD_EINTERNAL = -17,   /* the daemon failed internally */
	VAD_EMAP = -18,	       /* mapping the arena into this process failed */
	VAD_EUNSUPPORTED = -19,/* the daemon does not know that operation */
	VAD_ENOHELLO = -20,    /* the first request must be hello */
};

typedef struct vad_client vad_client;

/* Totals over the arenas this client may use, plus this client's own holdings. */
struct vad_stats {
	uint64_t arena_bytes;  /* sum of arena sizes */
	uint64_t busy_bytes;   /* allocated, by all clients */
	uint64_t free_bytes;   /* allocatable now */
	uint64_t lazy_bytes;   /* freed, waiting for reclaim */
	uint64_t pooled_bytes; /* reclaimed, kept in per-node pools */
	uint64_t largest_free; /* largest single free block of any arena */
	uint64_t allocs, frees, fails; /* daemon lifetime counters, summed */
	uint32_t clients;      /* connected sessions */
	uint64_t held_bytes;   /* held by this client */
	uint64_t held_ranges;  /* references held by this client */
};

/* Connect to the daemon at socket_path (NULL: $VAD_SOCKET, then $XDG_RUNTIME_DIR/vad.sock,
 * then /run/vad/vad.sock) and say hello as name (NULL: the program name). */
int vad_connect(const char *socket_path, const char *name, vad_client **out);

/* Close the connection and unmap every arena; the daemon drops all references. */
void vad_close(vad_client *c);

/* Allocate size bytes aligned to align (0: the arena's quantum) in the default arena. */
int vad_alloc(vad_client *c, size_t size, size_t align, void **out);

/* Allocate in the named arena (NULL or "": the default arena). */
int vad_alloc_in(vad_client *c, const char *arena, size_t size, size_t align, void **out);

/* Free the range starting at ptr (this client's reference to it). */
int vad_free(vad_client *c, void *ptr);

/* Allocate n ranges in the default arena in one request; all or nothing. */
int vad_alloc_batch(vad_client *c, size_t n, const size_t *sizes, size_t align, void **out);

/* Free n ranges in one request; on error, ranges before the failing one may be freed. */
int vad_free_batch(vad_client *c, size_t n, void *const *ptrs);

/* Make a token another process can attach to the range starting at ptr. */
int vad_share(vad_client *c, void *ptr, char token[VAD_TOKEN_LEN + 1]);

/* Take a reference to the range behind token; *out points at it, *size is its length. */
int vad_attach(vad_client *c, const char *token, void **out, size_t *size);

/* Fill *out with arena totals and this client's holdings. */
int vad_stats(vad_client *c, struct vad_stats *out);

/* The size of the range starting at ptr that this client holds, or 0 if none. */
size_t vad_size(vad_client *c, void *ptr);

/* Drain every arena's lazy lists and pools now (admin only). *released may be NULL. */
int vad_purge(vad_client *c, uint64_t *released);

/* Ask the daemon to re-read its configuration limits (admin only). */
int vad_reload(vad_client *c);

/* A static English sentence for a VAD_E* code. */
const char *vad_strerror(int err);

/* The daemon's sentence for this client's last failure (thread-local to the calling
 * thread's last call on c), or vad_strerror's sentence for local failures. */
const char *vad_last_error(vad_client *c);

#ifdef __cplusplus
}
#endif
#endif
