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
 *
 * Calls from many threads are pipelined on the client's one connection. vad_close must
 * not run while another thread is inside a call on the same client. After fork() the
 * child must not use the parent's client (the session, and what it holds, belong to the
 * parent): connect anew. If the daemon goes away, every call fails with VAD_EGONE; the
 * mappings stay readable and writable until vad_close, but a restarted daemon has new
 * arenas, so nothing written there reaches other processes any more: connect anew.
 */
#ifndef VAD_H
#define VAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one version of vad, VAD_VERSION of the sources (libvad checks that they agree). */
#define VAD_VERSION_STRING "0.1.0"
#define VAD_TOKEN_LEN	   32 /* printable share token; buffers are char[VAD_TOKEN_LEN + 1] */
/* The largest alignment libvad gives: each arena is mapped at an address aligned to the
 * smaller of this and its size rounded up to a power of two; above that: VAD_EINVAL. */
#define VAD_MAX_ALIGN ((size_t)1 << 30)

/* Error codes: the negated values of vad.Error in proto/vad.proto. */
enum vad_error {
	VAD_OK = 0,
	VAD_EINVAL = -1,	/* a malformed or missing argument */
	VAD_ENOMEM = -2,	/* out of memory */
	VAD_ECONNECT = -3,	/* no daemon is listening on the socket */
	VAD_EGONE = -4,		/* the daemon closed the connection (gone or restarted) */
	VAD_EPROTO = -5,	/* protocol error: undecodable message, broken framing, or a reply
				   that does not fit its request or the arena */
	VAD_EVERSION = -6,	/* client and daemon speak different protocol versions */
	VAD_ENOSPC = -7,	/* the arena has no free range that large */
	VAD_EQUOTA = -8,	/* a per-client or per-uid quota would be exceeded */
	VAD_EPERM = -9,		/* not allowed (arena allow-list or admin operation) */
	VAD_ENOARENA = -10,	/* no such arena */
	VAD_ENOTHELD = -11,	/* this client holds no reference to that range */
	VAD_ETOKEN = -12,	/* unknown or malformed share token */
	VAD_ESIZE = -13,	/* size is 0 or too large */
	VAD_EALIGN = -14,	/* alignment is not a power of two or is too large */
	VAD_ETOOBIG = -15,	/* request larger than the daemon's maximum frame or batch */
	VAD_EBUSY = -16,	/* the daemon has too many clients */
	VAD_EINTERNAL = -17,	/* the daemon failed internally */
	VAD_EMAP = -18,		/* mapping the arena into this process failed */
	VAD_EUNSUPPORTED = -19, /* the daemon does not know that operation */
	VAD_ENOHELLO = -20,	/* the first request must be hello */
	VAD_EREVOKED = -21,	/* the share token was revoked */
	VAD_EEXPIRED = -22,	/* the share token has expired */
	VAD_ETOKENUSED = -23,	/* the single-use share token was already used */
	VAD_EREADONLY = -24,	/* this client may only read that arena: allocation refused */
	VAD_ECOMMIT = -26,	/* commit = reserve: the range's memory could not be committed */
	VAD_ETIMEDOUT = -27,	/* vad_alloc_wait: no room was freed before the timeout */
	VAD_EKILLED = -28,	/* an administrator disconnected this client (vactl kill) */
	VAD_ERESUME = -29, /* the session cannot be resumed (unknown, expired or wrong secret) */
	VAD_EINTERRUPTED = -30, /* the daemon restarted during the call; its session was resumed
				   and the call may be retried */
};

typedef struct vad_client vad_client;

/* Totals over the arenas this client may use, plus this client's own holdings. */
struct vad_stats {
	uint64_t arena_bytes;	       /* sum of arena sizes */
	uint64_t busy_bytes;	       /* allocated, by all clients */
	uint64_t free_bytes;	       /* allocatable now */
	uint64_t lazy_bytes;	       /* freed, waiting for reclaim */
	uint64_t pooled_bytes;	       /* reclaimed, kept in per-node pools */
	uint64_t largest_free;	       /* largest single free block of any arena */
	uint64_t allocs, frees, fails; /* daemon lifetime counters, summed */
	uint32_t clients;	       /* connected sessions */
	uint64_t held_bytes;	       /* held by this client */
	uint64_t held_ranges;	       /* references held by this client */
};

/* Connect to the daemon at socket_path (NULL: $VAD_SOCKET, else /run/vad/vad.sock as root,
 * else $XDG_RUNTIME_DIR/vad.sock if a socket of the caller's is there, else
 * /run/vad/vad.sock) and say hello as name (NULL: the program name). On failure
 * vad_last_error(NULL) names the paths tried and what fits (start vad, join a group, a
 * stale socket). */
int vad_connect(const char *socket_path, const char *name, vad_client **out);

/* Close the connection and unmap every arena; the daemon drops all references. */
void vad_close(vad_client *c);

/* Allocate size bytes aligned to align (0: the arena's quantum) in the default arena. The
 * pointer is aligned to align in this process (see VAD_MAX_ALIGN) and the offset in every
 * process. */
int vad_alloc(vad_client *c, size_t size, size_t align, void **out);

/* Allocate in the named arena (NULL or "": the default arena). */
int vad_alloc_in(vad_client *c, const char *arena, size_t size, size_t align, void **out);

/* Flags of vad_alloc_flags and vad_alloc_batch_flags. */
#define VAD_POPULATE                                                                               \
	0x1u /* prefault the new ranges for writing before returning, in one                       \
		madvise(MADV_POPULATE_WRITE) per run of adjacent ranges (each page                 \
		touched where the kernel lacks it, before 5.14): the first writes                  \
		take no page faults, and a range the arena cannot back fails here                  \
		with VAD_ENOMEM (the ranges freed) instead of a SIGBUS later.                      \
		VAD_EREADONLY if the arena is mapped read-only for this client. */
#define VAD_ALLOC_FLAGS VAD_POPULATE /* every flag this libvad knows */

/* vad_alloc_in with flags (VAD_POPULATE or 0); arena NULL or "": the default arena. */
int vad_alloc_flags(vad_client *c, const char *arena, size_t size, size_t align, unsigned flags,
		    void **out);

/* vad_alloc_batch_in with flags (VAD_POPULATE or 0); all or nothing. */
int vad_alloc_batch_flags(vad_client *c, const char *arena, size_t n, const size_t *sizes,
			  size_t align, unsigned flags, void **out);

/* vad_alloc, but when the default arena has no room, wait up to timeout_ms (1 ms to about
 * 49 days; 0: do not wait, as vad_alloc) for other clients' frees to make room, first come
 * first served per arena: VAD_ETIMEDOUT when none came in time. Quotas and the daemon's
 * waiter limits (max_waiters_client, max_waiters) still refuse at once. Other threads'
 * calls on c go on meanwhile. */
int vad_alloc_wait(vad_client *c, size_t size, size_t align, uint32_t timeout_ms, void **out);

/* vad_alloc_batch_flags that waits as vad_alloc_wait, all or nothing: the batch is granted
 * whole when room for all of it is free, never a part before. */
int vad_alloc_batch_wait(vad_client *c, const char *arena, size_t n, const size_t *sizes,
			 size_t align, unsigned flags, uint32_t timeout_ms, void **out);

/*
 * Pipelined calls: submit now, take the result later, many in flight from one thread.
 *
 * A submit call sends its request and returns at once with a ticket; vad_wait takes the
 * ticket's result (waiting for the reply if it has not come) and uses the ticket up. One
 * thread can so keep many requests in flight on one client, or one request on each of many
 * clients (an event loop: poll vad_fd, call vad_progress when it is readable, vad_test or
 * vad_wait the tickets). Tickets live in a slab of the client: submitting allocates
 * nothing once the slab has grown. Blocking calls from other threads go on alongside;
 * whichever thread reads hands every reply to its call or ticket (so with blocking threads
 * on the same client a ticket may complete while vad_fd never turns readable: vad_test it).
 * A ticket is the client's: vad_wait on an unknown, used-up or foreign ticket is VAD_EINVAL.
 * When the connection drops, every ticket in flight completes as a blocking call in flight
 * would: VAD_EINTERRUPTED once the session is resumed if its request left (any of its
 * bytes: the daemon may have done it), or the reconnect's error (VAD_EGONE, VAD_ERESUME,
 * VAD_EKILLED). A request that never left (queued with VAD_MORE, or behind another send) is
 * sent again by vad_wait once the session is resumed, and completes. A batch free ticket
 * sends all its Frees (one per arena, or per frame's worth) at once, so a refused one does
 * not hold back the later ones as in vad_free_batch. vad_close frees the tickets
 * never waited for (the daemon drops whatever they got with the session).
 */
typedef uint64_t vad_ticket; /* 0 is never a ticket */

/* Most ranges a client has in flight in tickets (submitted, not yet waited for; a batch
 * counts each of its ranges); a submit beyond that fails with VAD_EQUOTA. It also keeps
 * the replies a submitter has not read yet within what the socket holds, so a thread that
 * only submits never deadlocks. */
#define VAD_TICKETS_MAX 1024

/* Flag of the submit calls: queue the request without sending it; it goes out with the
 * next submit without VAD_MORE (all queued in one send), or vad_wait, vad_test, vad_progress
 * or any blocking call on the client. */
#define VAD_MORE 0x100u

/* Submit vad_alloc_flags(c, arena, size, align, flags): VAD_POPULATE (done in vad_wait)
 * and VAD_MORE. The first use of an arena maps it here (one round trip). */
int vad_alloc_submit(vad_client *c, const char *arena, size_t size, size_t align, unsigned flags,
		     vad_ticket *t);

/* Submit vad_alloc_batch_flags(c, arena, n, sizes, align, flags) (VAD_POPULATE, VAD_MORE):
 * vad_wait fills out[0..n), all or nothing. Its lists take one malloc (n > 1). */
int vad_alloc_batch_submit(vad_client *c, const char *arena, size_t n, const size_t *sizes,
			   size_t align, unsigned flags, vad_ticket *t);

/* Submit vad_free(c, ptr); flags 0 or VAD_MORE. The range is no longer this client's
 * (vad_size 0) from now on, unless vad_wait reports that the daemon kept it. */
int vad_free_submit(vad_client *c, void *ptr, unsigned flags, vad_ticket *t);

/* Submit vad_free_batch(c, n, ptrs): n >= 1 ranges of VAD_TICKETS_MAX; flags 0 or VAD_MORE. */
int vad_free_batch_submit(vad_client *c, size_t n, void *const *ptrs, unsigned flags,
			  vad_ticket *t);

/* Complete ticket t: wait for its reply if needed and return its result (an alloc's
 * pointer in *out, a batch's n pointers in out[0..n); out may be NULL for a free). The
 * ticket is used up either way. */
int vad_wait(vad_client *c, vad_ticket t, void **out);

/* 1 if ticket t's reply is in or its connection dropped (vad_wait will not wait, unless it
 * sends again a request that never left), 0 if not; no syscall (vad_progress reads).
 * VAD_EINVAL for an unknown ticket. */
int vad_test(vad_client *c, vad_ticket t);

/* The client's socket, readable when replies may be waiting: watch it with poll/epoll and
 * call vad_progress. From the first call on the socket is non-blocking (libvad's own waits
 * poll it). It changes after a reconnect (re-register when a ticket completes with
 * VAD_EINTERRUPTED). */
int vad_fd(vad_client *c);

/* Without blocking: send what VAD_MORE queued and deliver every reply waiting in the socket
 * (one receive) to its ticket or blocking call. VAD_OK, or the error the connection died
 * with (its tickets are then all complete). */
int vad_progress(vad_client *c);

/* Free the range starting at ptr (this client's reference to it). */
int vad_free(vad_client *c, void *ptr);

/* Allocate n ranges in the default arena in one request; all or nothing. */
int vad_alloc_batch(vad_client *c, size_t n, const size_t *sizes, size_t align, void **out);

/* Free n ranges in one request; on error, ranges before the failing one may be freed. */
int vad_free_batch(vad_client *c, size_t n, void *const *ptrs);

/* Make a token another process can attach to the range starting at ptr: the range's plain
 * token (made on first use; one with options is replaced by a fresh plain one). */
int vad_share(vad_client *c, void *ptr, char token[VAD_TOKEN_LEN + 1]);

/* The options of a share token; all zero: a plain token, as vad_share makes. */
struct vad_share_opts {
	int single_use;	 /* nonzero: the first attach that succeeds uses it up (VAD_ETOKENUSED) */
	uint64_t ttl_ms; /* it expires this long after the share (VAD_EEXPIRED); 0: never */
};

/* Make a fresh token for the range at ptr with opts (NULL: plain), revoking the range's
 * earlier token (attaches with it then fail with VAD_EREVOKED). */
int vad_share_opts(vad_client *c, void *ptr, const struct vad_share_opts *opts,
		   char token[VAD_TOKEN_LEN + 1]);

/* Revoke the token of the range at ptr, if it has one: attaches with it fail with
 * VAD_EREVOKED; references already taken stay. */
int vad_unshare(vad_client *c, void *ptr);

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
 * thread's last call on c), or vad_strerror's sentence for local failures. With c NULL:
 * the sentence for this thread's last failed vad_connect (it names the socket path). */
const char *vad_last_error(vad_client *c);

/*
 * Introspection and administration. These typed calls back vactl; any program may use
 * them. Lists come back as ONE malloc'd block (the array and every string it points to):
 * release it with a single free(). Calls marked (admin) fail with VAD_EPERM unless the
 * daemon counts this peer as an administrator (see struct vad_session.admin).
 */

/* What the daemon said in its hello reply, kept for the life of the client. */
struct vad_session {
	uint64_t session_id;	   /* this connection's id, as vactl clients shows it */
	uint32_t protocol_version; /* the daemon's protocol version */
	int admin;		   /* nonzero: this peer may use admin operations */
	const char *server;	   /* e.g. "vad 0.1.0" */
	const char *default_arena; /* the arena used when none is named */
	const char *socket_path;   /* the socket this client connected to */
};

/* One arena as the daemon describes it. */
struct vad_arena_info {
	const char *name;
	uint64_t size;	     /* bytes (sparse) */
	uint64_t quantum;    /* allocation unit in bytes */
	const char *backing; /* "memfd" or the backing directory */
	int allowed;	     /* nonzero: the asking peer may allocate in it */
	int unsealed; /* nonzero: its file is not sealed against resizing (accept_unsealed) */
	const char *tenancy; /* "uid" or "gid": a section with one arena per tenant (named
				NAME@ID), or one tenant's arena; "" for a plain arena */
	unsigned tenants;    /* a section with tenancy: its tenant arenas open now */
	const char *commit;  /* "touch" (pages found at first touch) or "reserve" (committed by
				the daemon before a range is granted) */
	const char *huge;    /* "" (none), "thp", or the hugetlb page size ("2 MiB", "1 GiB") */
	const char *numa;    /* "" (no policy), "node N" or "interleave" */
};

/* Every counter the daemon keeps for one arena (vad.ArenaStats). */
struct vad_arena_stats {
	const char *name;
	uint64_t size, quantum;
	uint64_t busy_bytes, free_bytes, lazy_bytes, pooled_bytes;
	uint64_t busy_blocks, free_blocks, lazy_blocks, pooled_blocks;
	uint64_t largest_free;
	uint64_t allocs, frees, fails, drains;
	uint64_t released_bytes, release_calls, pool_hits;
	uint64_t resident_bytes;      /* bytes of the arena file backed by memory now */
	uint64_t free_released_bytes; /* free space purge and idle passes gave back (written
				       * or not: holes cost nothing), not in released_bytes */
	uint64_t committed_bytes;     /* commit = reserve: committed for live ranges */
	uint64_t commit_failures;     /* allocations refused because memory could not be
				       * committed (VAD_ECOMMIT) */
	uint32_t waiters;	      /* allocations waiting for room now (vad_alloc_wait) */
	uint64_t oldest_wait_ms;      /* how long the oldest of them has waited */
	uint64_t waits, wait_grants;  /* allocations that waited; of those, granted */
	uint64_t wait_timeouts;	      /* of those, VAD_ETIMEDOUT */
	uint64_t wait_cancels;	      /* of those, gone with their connection */
	uint64_t wait_refusals;	      /* of those, refused when room came (a quota) */
};

/* Requests of one operation since the daemon started (vad.OpStats). */
struct vad_op_counts {
	const char *name; /* "alloc", "free", ... ("other": requests naming no known operation) */
	uint64_t count;	  /* requests handled */
	uint64_t errors;  /* of those, answered with an error */
	/* Cumulative latency histogram: bucket_count[i] requests took less than
	 * bucket_below_ns[i] ns, ascending. Only bounds where the count grows are listed: at a
	 * bound one snapshot lacks, its count is the one at its next lower bound (0 below the
	 * first), so two snapshots diff into the requests between them (live p50/p99). */
	size_t n_buckets;
	const uint64_t *bucket_below_ns;
	const uint64_t *bucket_count;
};

/* Replies with one error code since the daemon started (vad.ErrorCount). */
struct vad_error_count {
	const char *name; /* "EQUOTA" */
	int code;	  /* VAD_EQUOTA (negative) */
	uint64_t count;
};

/* Daemon-wide figures plus per-arena statistics (vad.StatsReply). */
struct vad_daemon_stats {
	uint32_t clients;     /* connected sessions */
	uint64_t uptime_ms;   /* since the daemon started */
	uint64_t requests;    /* requests handled since start */
	uint64_t shares;      /* live share tokens */
	uint64_t held_bytes;  /* held by this client's session */
	uint64_t held_ranges; /* references held by this client's session */
	size_t n_arenas;
	struct vad_arena_stats *arenas; /* n_arenas entries, in the same block */
	size_t n_ops;
	struct vad_op_counts *ops; /* every operation the daemon knows, in the same block */
	size_t n_errors;
	struct vad_error_count *errors; /* codes replied at least once, in the same block */
};

/* One connected session (vad.ClientInfo). */
struct vad_client_info {
	uint64_t session_id;
	uint32_t pid, uid, gid;
	const char *name;
	uint64_t held_bytes, held_ranges;
	uint64_t allocs, frees;
	uint64_t connected_ms;	  /* connection time, ms since the epoch */
	uint64_t failed_attaches; /* attaches refused for their token (unknown, revoked, ...) */
	/* Every session of its uid together, against the uid's limits (0: no limit). */
	uint64_t uid_held_bytes, uid_held_ranges;
	uint64_t uid_quota_bytes, uid_max_ranges;
};

/* One range a session holds (vad_session_ranges). */
struct vad_held_range {
	const char *arena;
	uint64_t offset, size;
	uint32_t refs;	  /* that session's references to it */
	uint64_t holders; /* references over every session: more than refs means shared */
	int shared;	  /* nonzero: it has, or had, a share token */
	uint64_t age_ms;  /* since it was allocated */
};

/* One session's ranges, in the daemon's table order (not sorted). */
struct vad_held_list {
	uint64_t session_id;
	uint64_t total; /* ranges it held at the last page */
	size_t n;
	int truncated;		       /* nonzero: more ranges exist than max allowed */
	struct vad_held_range *ranges; /* n entries, in the same block */
};

/* One live share token (vad_tokens); never the token string unless asked for by an admin. */
struct vad_token_info {
	const char *arena;
	uint64_t offset, size; /* its range */
	uint64_t age_ms;
	uint64_t ttl_left_ms; /* when expires is set */
	int expires, single_use;
	uint64_t holders;  /* references to its range over every session */
	uint32_t uid;	   /* the uid that shared it */
	const char *token; /* "" unless show_tokens */
};

/* Live share tokens, oldest first. */
struct vad_token_list {
	uint64_t total; /* every live token (admins; 0 for others) */
	size_t n;
	int truncated;		       /* nonzero: more tokens exist than max allowed */
	struct vad_token_info *tokens; /* n entries, in the same block */
};

/* One key of the running configuration (vad_config). */
struct vad_config_key {
	const char *section; /* "vad", or "arena NAME" */
	const char *key;
	const char *value;  /* as vad --check-config shows it ("64 KiB", "unlimited") */
	const char *source; /* "default", "FILE:LINE", "command line", "reload FILE:LINE" */
};

/* The daemon's running configuration. */
struct vad_config_list {
	const char *path; /* its configuration file, "" for built-in defaults */
	int truncated;	  /* nonzero: keys were left out to stay within the daemon's max_frame */
	size_t n;
	struct vad_config_key *keys; /* n entries, in the same block */
};

/* What vad_kill disconnected. */
struct vad_killed {
	uint64_t session_id;
	uint32_t pid, uid;
	char name[64];
	uint64_t held_bytes, held_ranges; /* what it held when told to go */
};

/* Where a held range lives: arena, offset and size. */
struct vad_range {
	const char *arena; /* valid until vad_close */
	uint64_t offset;   /* from the start of the arena, the same in every process */
	size_t size;	   /* rounded to the arena's quantum */
	uint32_t refs;	   /* references this client holds (alloc plus attaches) */
};

/* What one block of an arena is (vad.BlockKind). */
enum vad_block_kind {
	VAD_BLOCK_BUSY = 0,   /* allocated */
	VAD_BLOCK_FREE = 1,   /* in the free tree */
	VAD_BLOCK_LAZY = 2,   /* freed, waiting for reclaim */
	VAD_BLOCK_POOLED = 3, /* reclaimed, kept in a node's pool */
};

/* One block of an arena's layout. */
struct vad_block {
	uint64_t offset, size;
	int kind;      /* enum vad_block_kind */
	uint32_t node; /* owning allocator node (busy, lazy, pooled) */
};

/* Who holds a busy block (the walk is for admins, who see every session). */
struct vad_block_owner {
	const char *name; /* a holding session's name; NULL: none listed (not busy, or its
			     holder is going away) */
	uint64_t session; /* that session's id */
	uint32_t holders; /* sessions holding the range (attaches included) */
};

/* An arena's layout: its blocks in address order. */
struct vad_arena_map {
	const char *arena;
	uint64_t size, quantum;
	size_t n_blocks;
	int truncated;			/* nonzero: more blocks exist than max_blocks allowed */
	struct vad_block *blocks;	/* n_blocks entries, in the same block */
	struct vad_block_owner *owners; /* n_blocks entries, blocks[i]'s owner; same block */
};

/* After the daemon closed the connection (a restart, upgrade or crash), the next call
 * reconnects to the same socket with a backoff (10 ms doubling to 500 ms) for at most max_ms
 * and resumes the session: its ranges, mappings and tokens stay. A call in flight at the drop
 * returns VAD_EINTERRUPTED if any of its request had left (the daemon may have done it: retry,
 * or check); one whose request never left (it waited behind another thread's send) is sent
 * again once resumed and completes; if the daemon came
 * back without the session, VAD_ERESUME and every range held is lost. 0 turns it off (a
 * drop is then VAD_EGONE for good). Default: $VAD_RECONNECT_MS, else 30000. Never after
 * VAD_EKILLED. */
int vad_set_reconnect(vad_client *c, uint32_t max_ms);

/* Fill *out with the daemon's hello reply; no round trip. Strings live until vad_close. */
int vad_session_info(vad_client *c, struct vad_session *out);

/* Like vad_alloc_batch but in the named arena (NULL or "": the default arena). */
int vad_alloc_batch_in(vad_client *c, const char *arena, size_t n, const size_t *sizes,
		       size_t align, void **out);

/* Describe the range this client holds starting at ptr; VAD_ENOTHELD if none (local). */
int vad_range_info(vad_client *c, const void *ptr, struct vad_range *out);

/* 1 if this client may write the range it holds at ptr, 0 if its arena is mapped read-only
 * (the client is one of the arena's readers); VAD_ENOTHELD if it holds none there (local). */
int vad_range_writable(vad_client *c, const void *ptr);

/* Pointer to offset in this process's mapping of arena (mapped on first use). Gives no
 * reference: the range may be freed by its holders at any time. */
int vad_pointer(vad_client *c, const char *arena, uint64_t offset, void **out);

/* Statistics of one arena (NULL or "": every arena this peer may use); free() *out. */
int vad_stats_detail(vad_client *c, const char *arena, struct vad_daemon_stats **out);

/* The daemon's metrics in the Prometheus text format (what its /metrics endpoint serves),
 * malloc'd into *text; free() it. */
int vad_metrics(vad_client *c, char **text);

/* The daemon's arenas; *out is an array of *n entries, free() it. */
int vad_arenas(vad_client *c, struct vad_arena_info **out, size_t *n);

/* Connected sessions (admin); *out is an array of *n entries, free() it. */
int vad_clients(vad_client *c, struct vad_client_info **out, size_t *n);

/* Drain one arena's lazy lists and pools now (admin); NULL or "" means every arena. */
int vad_purge_arena(vad_client *c, const char *arena, uint64_t *released);

/* Like vad_reload; *detail (may be NULL) gets the daemon's account of what changed,
 * malloc'd, free() it. */
int vad_reload_detail(vad_client *c, char **detail);

/* Admin: ask the daemon to stop politely and re-execute itself in place with its arenas and
 * state (like SIGUSR2): live ranges survive, every connection (this one too) is closed.
 * *detail (may be NULL) gets the daemon's sentence, to free(). */
int vad_restart(vad_client *c, char **detail);

/* The layout of arena (NULL or "": the default) in address order, at most max_blocks
 * blocks (0: all), fetched a page at a time (admin); pages are not one atomic picture
 * while others allocate. *out is one malloc'd block, free() it. */
int vad_walk(vad_client *c, const char *arena, size_t max_blocks, struct vad_arena_map **out);

/* The ranges of session `client` (its id, or a pid or name only one session has; a non-admin
 * names only its own uid's sessions), at most max (0: all), fetched a page at a time; pages
 * are no atomic picture while it allocates. *out is one malloc'd block, free() it. */
int vad_session_ranges(vad_client *c, const char *client, size_t max, struct vad_held_list **out);

/* Live share tokens, at most max (0: all), paged: every one for an admin, else its own uid's;
 * the token strings only when an admin asks (show_tokens, else VAD_EPERM). free() *out. */
int vad_tokens(vad_client *c, int show_tokens, size_t max, struct vad_token_list **out);

/* Disconnect session `client` (as vad_session_ranges names it) and drop its references as a
 * disconnect would (admin); its client's calls then fail with VAD_EKILLED. out may be NULL. */
int vad_kill(vad_client *c, const char *client, struct vad_killed *out);

/* The daemon's running configuration, each key with where its value came from (admin).
 * *out is one malloc'd block, free() it. */
int vad_config(vad_client *c, struct vad_config_list **out);

/* Run the daemon's allocator invariant checker on every arena (admin). *ok is 1 when
 * every arena is sound, 0 if not; *detail (may be NULL) gets the daemon's report,
 * malloc'd, free() it. */
int vad_check(vad_client *c, int *ok, char **detail);

#ifdef __cplusplus
}
#endif
#endif
