/*
 * test_libvad_fake.c - libvad against a fake daemon that speaks the protocol over a real
 * Unix socket, so the client side is tested on its own: id matching with responses sent
 * out of order, fd passing for MapArena (several maps in flight), held-range bookkeeping,
 * error sentences, the typed admin calls, and a connection that dies under waiting threads.
 *
 * The fake also lies, one trick per request (struct fake.trick), so that every check libvad
 * makes on a reply is shown refusing one by one with VAD_EPROTO and its sentence: granted
 * sizes, counts, offsets and alignment, ranges granted twice, the arena named, request ids
 * never sent or answered twice, fds on replies that carry none, two fds, a flood of fds,
 * map replies that describe another arena, a bad quantum or a short file, a free that
 * claims success without freeing; and it dies in every state (mid-reply, mid-fd, between
 * calls, under many threads), which must leave no crash and no fd behind; tickets of
 * pipelined calls meet the same lies.
 *
 * A resumable fake (hello gives a secret, Resume takes a departed connection's holds, as
 * across a restart; it counts the frames of every request id) shows tickets across a cut:
 * one whose frame never left is sent again once and completes, one sent is interrupted, a
 * send cut in its middle splits them at the cut, a batch free's Frees likewise, a blocking
 * call queued behind another thread's send is sent again and completes; and a
 * session the fake refuses to resume: every ticket from before it VAD_ERESUME, the arenas
 * retired and mapped anew, the new session resumable in its turn; every call that meets
 * the loss says so with the reconnect's sentence.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "fdpass.h"
#include "frame.h"
#include "vad.h"

#define ARENA_SIZE   (16u << 20)
#define QUANTUM	     4096u
#define DIE_SIZE     0xDEAD000u /* an Alloc of this size makes the fake hang up */
#define WRONG_SIZE   0xBAD1000u /* ... answers it with a FreeReply */
#define JUNK_SIZE    0xBAD2000u /* ... answers it with an undecodable frame */
#define MANY_CLIENTS 5000
#define MAX_HOLDS    4096
#define MAX_CONNS    64
#define MAX_IDS	     8192				/* request ids the fake counts frames of */
#define FAKE_SECRET  "fake-resume-secret-0123456789abc" /* 32 bytes */

/* ---- the fake daemon ------------------------------------------------------------------ */

/* How the fake lies in its answer to the next request of trick_op (0: any request). */
enum trick {
	TRICK_NONE,
	TRICK_SHORT_GRANT,	/* alloc: grant one quantum whatever was asked */
	TRICK_FEWER_RANGES,	/* alloc: one range fewer than asked */
	TRICK_OFFSET_OUTSIDE,	/* alloc: an offset past the end of the arena */
	TRICK_PAST_END,		/* alloc: a range that starts inside and ends past the end */
	TRICK_MISALIGNED,	/* alloc: an offset not aligned as asked */
	TRICK_HELD_AGAIN,	/* alloc: the range this client got just before */
	TRICK_DUP_IN_BATCH,	/* alloc: the same offset twice in one reply */
	TRICK_OTHER_ARENA,	/* alloc: the ranges are in the other arena */
	TRICK_UNKNOWN_ID,	/* any: the reply carries an id never sent */
	TRICK_TWICE,		/* any: the reply is sent twice */
	TRICK_STRAY_FD,		/* any: an fd rides on the reply */
	TRICK_MAP_ERROR_FD,	/* map: an error reply, with an fd */
	TRICK_TWO_FDS,		/* map: two fds on the reply */
	TRICK_FD_FLOOD,		/* map: an fd on each of the first bytes of the reply */
	TRICK_MAP_OTHER_NAME,	/* map: describes the other arena */
	TRICK_MAP_BAD_QUANTUM,	/* map: a quantum that is no power of two */
	TRICK_MAP_SMALL_FILE,	/* map: passes a file smaller than the arena */
	TRICK_FREE_SHORT,	/* free: success, with nothing freed */
	TRICK_DIE_MID_REPLY,	/* any: half the reply, then hang up */
	TRICK_DIE_MID_FD,	/* map: the first byte of the reply with its fd, then hang up */
	TRICK_DIE_AFTER_HEADER, /* any: the frame's length only, then hang up */
	TRICK_WALK_OWNER,	/* walk: one busy block filling the arena, owner "fake-owner" */
	TRICK_WALK_LONG_OWNER,	/* walk: the same with an owner name of 300 bytes */
	TRICK_HANG_UP,		/* any: read it, answer nothing, hang up */
	TRICK_STALL,		/* any: read it, read nothing more until released, hang up */
};

#define FLOOD_FDS 64

struct fake_arena {
	const char *name;
	int fd;
	uint64_t next; /* bump allocator: ranges are never reused */
};

struct hold {
	int conn;
	unsigned arena;
	uint64_t offset, size;
};

struct fake {
	char dir[64], path[96];
	int listen_fd;
	pthread_t acceptor;
	uint32_t hello_version;
	pthread_mutex_t lock;
	struct fake_arena arenas[2];
	bool map_without_fd; /* answer MapArena without passing the fd */
	enum trick trick;    /* one lie for the next request of trick_op, then none */
	Vad__Request__OpCase trick_op;
	int small_fd;	   /* a file smaller than an arena (TRICK_MAP_SMALL_FILE) */
	bool many_clients; /* answer Clients with MANY_CLIENTS entries */
	Vad__ClientInfo *many[MANY_CLIENTS];
	struct hold holds[MAX_HOLDS];
	size_t n_holds;
	char tokens[16][VAD_TOKEN_LEN + 1];
	struct hold token_range[16];
	size_t n_tokens;
	int live_conns;
	/* Resume (like a daemon restart): with resumable, hello gives a secret and a departed
	 * connection's holds wait for a Resume of its session; refuse_resume answers ERESUME. */
	bool resumable, refuse_resume;
	int session_of[MAX_CONNS]; /* the session a connection speaks for (resume id - 1) */
	bool departed[MAX_CONNS];
	pthread_cond_t departure;
	unsigned frames[MAX_IDS]; /* requests received per request id, over every connection */
	bool stalled, released;	  /* TRICK_STALL: a connection stopped reading; let it go */
	int conn_fds[MAX_CONNS];
	pthread_t conn_threads[MAX_CONNS];
	int n_conns;
};

struct conn_arg {
	struct fake *f;
	int fd, id;
};

static int find_arena(struct fake *f, const char *name)
{
	if (!*name)
		return 0;
	for (int i = 0; i < 2; i++)
		if (strcmp(f->arenas[i].name, name) == 0)
			return i;
	return -1;
}

static void set_error(Vad__Response *r, Vad__Error e, const char *msg)
{
	r->error = e;
	r->message = (char *)msg;
}

/* The trick for request q (taken: it applies once), or TRICK_NONE. */
static enum trick take_trick(struct fake *f, const Vad__Request *q)
{
	pthread_mutex_lock(&f->lock);
	enum trick t = TRICK_NONE;
	if (f->trick != TRICK_NONE && (f->trick_op == 0 || f->trick_op == q->op_case)) {
		t = f->trick;
		f->trick = TRICK_NONE;
	}
	pthread_mutex_unlock(&f->lock);
	return t;
}

static void set_trick(struct fake *f, enum trick t, Vad__Request__OpCase op)
{
	pthread_mutex_lock(&f->lock);
	f->trick = t;
	f->trick_op = op;
	pthread_mutex_unlock(&f->lock);
}

/* Apply an alloc trick to the n ranges just granted (their holds are the last n). */
static void lie_about_alloc(struct fake *f, int conn, enum trick t, Vad__AllocReply *ar, size_t n)
{
	struct hold *mine = &f->holds[f->n_holds - n];
	switch (t) {
	case TRICK_SHORT_GRANT:
		ar->sizes[0] = QUANTUM;
		break;
	case TRICK_FEWER_RANGES:
		ar->n_offsets = ar->n_sizes = n - 1;
		break;
	case TRICK_OFFSET_OUTSIDE:
		ar->offsets[0] = ARENA_SIZE;
		break;
	case TRICK_PAST_END:
		ar->sizes[0] = ARENA_SIZE;
		break;
	case TRICK_MISALIGNED:
		/* 4 KiB past a 64 KiB boundary; the hold moves with it, so it can be given back. */
		ar->offsets[0] = mine->offset = ARENA_SIZE / 2 + QUANTUM;
		break;
	case TRICK_HELD_AGAIN:
		for (size_t k = f->n_holds - n; k-- > 0;)
			if (f->holds[k].conn == conn && f->holds[k].arena == mine->arena) {
				ar->offsets[0] = f->holds[k].offset;
				break;
			}
		break;
	case TRICK_DUP_IN_BATCH:
		ar->offsets[1] = ar->offsets[0];
		break;
	case TRICK_OTHER_ARENA:
		ar->arena = (char *)f->arenas[mine->arena ? 0 : 1].name;
		break;
	default:
		break;
	}
}

/* Build the reply to one request. Returns the fd to attach (or -1), or -2 to hang up. */
static int answer(struct fake *f, int conn, const Vad__Request *q, Vad__Response *r, void *scratch,
		  enum trick t)
{
	/* scratch holds every sub-message this reply needs (one request at a time). */
	struct {
		Vad__HelloReply hello;
		Vad__ResumeReply resume;
		Vad__AllocReply alloc;
		uint64_t offs[1024], sizes[1024];
		Vad__FreeReply free;
		Vad__MapArenaReply map;
		Vad__ArenaInfo info[2];
		Vad__ArenaInfo *infop[2];
		Vad__ShareReply share;
		char token[VAD_TOKEN_LEN + 1];
		Vad__AttachReply attach;
		Vad__StatsReply stats;
		Vad__ArenaStats as[2];
		Vad__ArenaStats *asp[2];
		Vad__ArenasReply arenas;
		Vad__ClientsReply clients;
		Vad__ClientInfo ci;
		Vad__ClientInfo *cip[1];
		Vad__PurgeReply purge;
		Vad__ReloadReply reload;
		Vad__CheckReply check;
		Vad__WalkReply walk;
		Vad__Block block;
		Vad__Block *blockp[1];
	} *s = scratch;
	r->id = q->id;
	int fd = -1;
	if (t == TRICK_HANG_UP)
		return -2;
	if (t == TRICK_STALL) {
		pthread_mutex_lock(&f->lock);
		f->stalled = true;
		pthread_cond_broadcast(&f->departure);
		while (!f->released)
			pthread_cond_wait(&f->departure, &f->lock);
		pthread_mutex_unlock(&f->lock);
		return -2;
	}
	pthread_mutex_lock(&f->lock);
	switch (q->op_case) {
	case VAD__REQUEST__OP_HELLO:
		vad__hello_reply__init(&s->hello);
		s->hello.version = f->hello_version;
		s->hello.server = "fake 0.0";
		s->hello.session_id = (uint64_t)conn + 100;
		s->hello.default_arena = "default";
		s->hello.admin = 1;
		if (f->resumable) {
			s->hello.resume_id = (uint64_t)f->session_of[conn] + 1;
			s->hello.resume_secret.data = (uint8_t *)FAKE_SECRET;
			s->hello.resume_secret.len = strlen(FAKE_SECRET);
		}
		r->result_case = VAD__RESPONSE__RESULT_HELLO;
		r->hello = &s->hello;
		break;
	case VAD__REQUEST__OP_RESUME: {
		uint64_t rid = q->resume->resume_id;
		if (f->refuse_resume || !f->resumable || rid == 0 || rid > MAX_CONNS ||
		    q->resume->secret.len != strlen(FAKE_SECRET) ||
		    memcmp(q->resume->secret.data, FAKE_SECRET, strlen(FAKE_SECRET)) != 0) {
			set_error(r, VAD__ERROR__ERESUME, "fake: no such session to resume");
			break;
		}
		int sess = (int)rid - 1;
		/* The session's old connections first finish leaving, then their holds are
		 * this connection's. */
		for (int k = 0; k < f->n_conns; k++)
			while (k != conn && f->session_of[k] == sess && !f->departed[k])
				pthread_cond_wait(&f->departure, &f->lock);
		for (size_t k = 0; k < f->n_holds; k++)
			if (f->holds[k].conn != conn && f->session_of[f->holds[k].conn] == sess)
				f->holds[k].conn = conn;
		f->session_of[conn] = sess;
		vad__resume_reply__init(&s->resume);
		r->result_case = VAD__RESPONSE__RESULT_RESUME;
		r->resume = &s->resume;
		break;
	}
	case VAD__REQUEST__OP_ALLOC: {
		Vad__Alloc *a = q->alloc;
		size_t n = a->n_sizes ? a->n_sizes : 1;
		int ai = find_arena(f, a->arena);
		if (a->size == DIE_SIZE) {
			fd = -2;
			break;
		}
		if (a->size == JUNK_SIZE) {
			fd = -3;
			break;
		}
		if (a->size == WRONG_SIZE) {
			vad__free_reply__init(&s->free);
			r->result_case = VAD__RESPONSE__RESULT_FREE;
			r->free = &s->free;
			break;
		}
		if (ai < 0) {
			set_error(r, VAD__ERROR__ENOARENA, "fake: no such arena");
			break;
		}
		uint64_t total = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t sz = a->n_sizes ? a->sizes[i] : a->size;
			if (sz == 0) {
				set_error(r, VAD__ERROR__ESIZE, "fake: size 0 is not a range");
				goto unlock;
			}
			s->sizes[i] = (sz + QUANTUM - 1) / QUANTUM * QUANTUM;
			total += s->sizes[i];
		}
		struct fake_arena *fa = &f->arenas[ai];
		if (fa->next + total > ARENA_SIZE || f->n_holds + n > MAX_HOLDS) {
			set_error(r, VAD__ERROR__ENOSPC, "fake: the arena is full");
			break;
		}
		vad__alloc_reply__init(&s->alloc);
		for (size_t i = 0; i < n; i++) {
			s->offs[i] = fa->next;
			fa->next += s->sizes[i];
			f->holds[f->n_holds++] =
			    (struct hold){conn, (unsigned)ai, s->offs[i], s->sizes[i]};
		}
		s->alloc.arena = (char *)fa->name;
		s->alloc.n_offsets = s->alloc.n_sizes = n;
		s->alloc.offsets = s->offs;
		s->alloc.sizes = s->sizes;
		lie_about_alloc(f, conn, t, &s->alloc, n);
		r->result_case = VAD__RESPONSE__RESULT_ALLOC;
		r->alloc = &s->alloc;
		break;
	}
	case VAD__REQUEST__OP_FREE: {
		int ai = find_arena(f, q->free->arena);
		vad__free_reply__init(&s->free);
		size_t i;
		for (i = 0; ai >= 0 && i < q->free->n_offsets; i++) {
			size_t k;
			for (k = 0; k < f->n_holds; k++)
				if (f->holds[k].conn == conn && f->holds[k].arena == (unsigned)ai &&
				    f->holds[k].offset == q->free->offsets[i])
					break;
			if (k == f->n_holds)
				break;
			f->holds[k] = f->holds[--f->n_holds];
		}
		s->free.freed = (uint32_t)i;
		r->result_case = VAD__RESPONSE__RESULT_FREE;
		r->free = &s->free;
		if (ai < 0 || i < q->free->n_offsets)
			set_error(r, VAD__ERROR__ENOTHELD, "fake: range not held by this client");
		if (t == TRICK_FREE_SHORT) {
			set_error(r, VAD__ERROR__OK, "");
			s->free.freed = 0;
		}
		break;
	}
	case VAD__REQUEST__OP_MAP_ARENA: {
		int ai = find_arena(f, q->map_arena->arena);
		if (ai < 0) {
			set_error(r, VAD__ERROR__ENOARENA, "fake: no such arena to map");
			break;
		}
		vad__map_arena_reply__init(&s->map);
		vad__arena_info__init(&s->info[0]);
		s->info[0].name = (char *)f->arenas[ai].name;
		s->info[0].size = ARENA_SIZE;
		s->info[0].quantum = QUANTUM;
		s->info[0].backing = "memfd";
		s->info[0].allowed = 1;
		s->map.arena = &s->info[0];
		r->result_case = VAD__RESPONSE__RESULT_MAP_ARENA;
		r->map_arena = &s->map;
		fd = f->map_without_fd ? -1 : f->arenas[ai].fd;
		if (t == TRICK_MAP_OTHER_NAME)
			s->info[0].name = (char *)f->arenas[ai ? 0 : 1].name;
		if (t == TRICK_MAP_BAD_QUANTUM)
			s->info[0].quantum = 3 * QUANTUM;
		if (t == TRICK_MAP_SMALL_FILE)
			fd = f->small_fd;
		if (t == TRICK_MAP_ERROR_FD) {
			r->result_case = VAD__RESPONSE__RESULT__NOT_SET;
			set_error(r, VAD__ERROR__EPERM, "fake: not allowed (and here is an fd)");
		}
		break;
	}
	case VAD__REQUEST__OP_SHARE: {
		int ai = find_arena(f, q->share->arena);
		size_t k;
		for (k = 0; ai >= 0 && k < f->n_holds; k++)
			if (f->holds[k].conn == conn && f->holds[k].arena == (unsigned)ai &&
			    f->holds[k].offset == q->share->offset)
				break;
		if (ai < 0 || k == f->n_holds || f->n_tokens == 16) {
			set_error(r, VAD__ERROR__ENOTHELD, "fake: cannot share that");
			break;
		}
		snprintf(f->tokens[f->n_tokens], sizeof(f->tokens[0]), "tok%029zu", f->n_tokens);
		f->token_range[f->n_tokens] = f->holds[k];
		vad__share_reply__init(&s->share);
		snprintf(s->token, sizeof(s->token), "%s", f->tokens[f->n_tokens]);
		f->n_tokens++;
		s->share.token = s->token;
		r->result_case = VAD__RESPONSE__RESULT_SHARE;
		r->share = &s->share;
		break;
	}
	case VAD__REQUEST__OP_ATTACH: {
		size_t k;
		for (k = 0; k < f->n_tokens; k++)
			if (strcmp(f->tokens[k], q->attach->token) == 0)
				break;
		if (k == f->n_tokens || f->n_holds == MAX_HOLDS) {
			set_error(r, VAD__ERROR__ETOKEN, "fake: unknown token");
			break;
		}
		struct hold h = f->token_range[k];
		h.conn = conn;
		f->holds[f->n_holds++] = h;
		vad__attach_reply__init(&s->attach);
		s->attach.arena = (char *)f->arenas[h.arena].name;
		s->attach.offset = h.offset;
		s->attach.size = h.size;
		r->result_case = VAD__RESPONSE__RESULT_ATTACH;
		r->attach = &s->attach;
		break;
	}
	case VAD__REQUEST__OP_STATS: {
		vad__stats_reply__init(&s->stats);
		for (int i = 0; i < 2; i++) {
			Vad__ArenaStats *a = &s->as[i];
			vad__arena_stats__init(a);
			a->name = (char *)f->arenas[i].name;
			a->size = ARENA_SIZE;
			a->quantum = QUANTUM;
			a->busy_bytes = f->arenas[i].next;
			a->free_bytes = ARENA_SIZE - f->arenas[i].next;
			a->largest_free = a->free_bytes;
			a->allocs = 10 + (uint64_t)i;
			a->frees = 5;
			a->fails = 1;
			a->lazy_bytes = 7;
			a->pool_hits = 3;
			s->asp[i] = a;
		}
		s->stats.n_arenas = 2;
		s->stats.arenas = s->asp;
		s->stats.clients = (uint32_t)f->live_conns;
		s->stats.uptime_ms = 4242;
		uint64_t held = 0, ranges = 0;
		for (size_t k = 0; k < f->n_holds; k++)
			if (f->holds[k].conn == conn) {
				held += f->holds[k].size;
				ranges++;
			}
		s->stats.held_bytes = held;
		s->stats.held_ranges = ranges;
		r->result_case = VAD__RESPONSE__RESULT_STATS;
		r->stats = &s->stats;
		break;
	}
	case VAD__REQUEST__OP_ARENAS:
		vad__arenas_reply__init(&s->arenas);
		for (int i = 0; i < 2; i++) {
			vad__arena_info__init(&s->info[i]);
			s->info[i].name = (char *)f->arenas[i].name;
			s->info[i].size = ARENA_SIZE;
			s->info[i].quantum = QUANTUM;
			s->info[i].backing = i ? "/dev/hugepages" : "memfd";
			s->info[i].allowed = 1;
			s->infop[i] = &s->info[i];
		}
		s->arenas.n_arenas = 2;
		s->arenas.arenas = s->infop;
		r->result_case = VAD__RESPONSE__RESULT_ARENAS;
		r->arenas = &s->arenas;
		break;
	case VAD__REQUEST__OP_CLIENTS:
		vad__clients_reply__init(&s->clients);
		vad__client_info__init(&s->ci);
		s->ci.session_id = (uint64_t)conn + 100;
		s->ci.pid = (uint32_t)getpid();
		s->ci.name = "test-client";
		s->ci.held_ranges = 3;
		s->cip[0] = &s->ci;
		s->clients.n_clients = 1;
		s->clients.clients = s->cip;
		if (f->many_clients) {
			/* The same entry many times: a reply far larger than 64 KiB. */
			s->clients.n_clients = MANY_CLIENTS;
			s->clients.clients = f->many;
			for (size_t k = 0; k < MANY_CLIENTS; k++)
				f->many[k] = &s->ci;
		}
		r->result_case = VAD__RESPONSE__RESULT_CLIENTS;
		r->clients = &s->clients;
		break;
	case VAD__REQUEST__OP_PURGE:
		if (*q->purge->arena && find_arena(f, q->purge->arena) < 0) {
			set_error(r, VAD__ERROR__ENOARENA, "fake: no arena to purge");
			break;
		}
		vad__purge_reply__init(&s->purge);
		s->purge.released_bytes = *q->purge->arena ? 4096 : 12345;
		r->result_case = VAD__RESPONSE__RESULT_PURGE;
		r->purge = &s->purge;
		break;
	case VAD__REQUEST__OP_RELOAD:
		set_error(r, VAD__ERROR__EPERM, "fake: admin operation 'reload' needs root");
		break;
	case VAD__REQUEST__OP_CHECK:
		vad__check_reply__init(&s->check);
		s->check.ok = 0;
		s->check.detail = "fake: arena 'default' subtree max wrong";
		r->result_case = VAD__RESPONSE__RESULT_CHECK;
		r->check = &s->check;
		break;
	case VAD__REQUEST__OP_WALK:
		/* A walk that never ends: one block per page of a two-quantum arena, and more
		 * always promised. */
		vad__walk_reply__init(&s->walk);
		vad__block__init(&s->block);
		s->block.offset = q->walk->from;
		s->block.size = QUANTUM;
		s->blockp[0] = &s->block;
		s->walk.arena = "default";
		s->walk.size = 2 * QUANTUM;
		s->walk.quantum = QUANTUM;
		s->walk.n_blocks = 1;
		s->walk.blocks = s->blockp;
		s->walk.more = 1;
		s->walk.next = q->walk->from + QUANTUM;
		if (t == TRICK_WALK_OWNER || t == TRICK_WALK_LONG_OWNER) {
			static char long_name[301];
			memset(long_name, 'n', sizeof(long_name) - 1);
			s->block.size = 2 * QUANTUM;
			s->block.kind = VAD__BLOCK_KIND__BUSY;
			s->block.owner = t == TRICK_WALK_OWNER ? "fake-owner" : long_name;
			s->block.owner_session = 7;
			s->block.other_holders = 1;
			s->walk.more = 0;
			s->walk.next = 0;
		}
		r->result_case = VAD__RESPONSE__RESULT_WALK;
		r->walk = &s->walk;
		break;
	default:
		set_error(r, VAD__ERROR__EUNSUPPORTED, "fake: unknown operation");
	}
unlock:
	pthread_mutex_unlock(&f->lock);
	return fd;
}

/* Send len bytes with n fds attached to them (n may be 0). */
static int send_fds(int sock, const void *buf, size_t len, const int *fds, size_t n)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(FLOOD_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n > 0) {
		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Send the reply r (with fd, if >= 0) the way trick t says; -1 to hang up. */
static int send_tricked(struct fake *f, int sock, Vad__Response *r, int fd, enum trick t)
{
	size_t cap = vad_frame_response_size(r);
	uint8_t *buf = malloc(cap);
	size_t len = buf ? vad_frame_encode_response(r, buf, cap) : 0;
	int rc = -1;
	int fds[FLOOD_FDS];
	for (size_t i = 0; i < FLOOD_FDS; i++)
		fds[i] = f->arenas[0].fd;
	if (len == 0)
		goto out;
	switch (t) {
	case TRICK_TWO_FDS:
		rc = send_fds(sock, buf, len, fds, 2);
		break;
	case TRICK_STRAY_FD:
	case TRICK_MAP_ERROR_FD:
		rc = send_fds(sock, buf, len, fds, 1);
		break;
	case TRICK_FD_FLOOD:
		/* One fd per byte: libvad stops reading at the second. */
		rc = 0;
		for (size_t i = 0; i < len && rc == 0; i++)
			rc = send_fds(sock, buf + i, 1, fds, i < FLOOD_FDS ? 1 : 0);
		break;
	case TRICK_DIE_MID_REPLY:
		send_fds(sock, buf, len / 2, NULL, 0);
		break;
	case TRICK_DIE_MID_FD:
		send_fds(sock, buf, 1, &fd, fd >= 0 ? 1 : 0);
		break;
	case TRICK_DIE_AFTER_HEADER:
		send_fds(sock, buf, VAD_FRAME_HEADER, NULL, 0);
		break;
	case TRICK_TWICE:
		rc = send_fds(sock, buf, len, &fd, fd >= 0 ? 1 : 0);
		if (rc == 0)
			rc = send_fds(sock, buf, len, NULL, 0);
		break;
	default:
		rc = send_fds(sock, buf, len, &fd, fd >= 0 ? 1 : 0);
	}
out:
	free(buf);
	return rc;
}

static int send_frame(int sock, const Vad__Response *r, int fd)
{
	size_t cap = vad_frame_response_size(r);
	uint8_t *buf = malloc(cap);
	size_t len = buf ? vad_frame_encode_response(r, buf, cap) : 0;
	if (len == 0) {
		free(buf);
		return -1;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t n = off == 0 ? vad_send_with_fd(sock, buf, len, fd)
				     : send(sock, buf + off, len - off, MSG_NOSIGNAL);
		if (n <= 0) {
			free(buf);
			return -1;
		}
		off += (size_t)n;
	}
	free(buf);
	return 0;
}

/* Serve one connection: decode every whole request of a read, then answer them in
 * reverse order so responses reach libvad out of order. */
static void *serve(void *arg)
{
	struct conn_arg *ca = arg;
	struct fake *f = ca->f;
	static __thread uint8_t rbuf[1 << 17];
	size_t rlen = 0;
	enum { BATCH = 64 };
	Vad__Request *reqs[BATCH];
	for (;;) {
		ssize_t n = recv(ca->fd, rbuf + rlen, sizeof(rbuf) - rlen, 0);
		if (n <= 0)
			break;
		rlen += (size_t)n;
		size_t off = 0, nreq = 0, plen;
		while (nreq < BATCH && vad_frame_peek(rbuf + off, rlen - off, sizeof(rbuf),
						      &plen) == VAD_FRAME_READY) {
			reqs[nreq] =
			    vad__request__unpack(NULL, plen, rbuf + off + VAD_FRAME_HEADER);
			off += VAD_FRAME_HEADER + plen;
			if (reqs[nreq] && reqs[nreq]->id < MAX_IDS) {
				pthread_mutex_lock(&f->lock);
				f->frames[reqs[nreq]->id]++;
				pthread_mutex_unlock(&f->lock);
			}
			if (reqs[nreq])
				nreq++;
		}
		memmove(rbuf, rbuf + off, rlen - off);
		rlen -= off;
		bool hang_up = false;
		for (size_t i = nreq; i-- > 0;) {
			Vad__Response r = VAD__RESPONSE__INIT;
			static __thread char scratch[40000];
			enum trick t = take_trick(f, reqs[i]);
			int fd = hang_up ? -1 : answer(f, ca->id, reqs[i], &r, scratch, t);
			if (fd == -2)
				hang_up = true;
			if (fd == -3) {
				/* A frame whose payload is no protobuf message at all. */
				static const uint8_t junk[] = {5,    0,	   0,	 0,   0xff,
							       0xff, 0xff, 0xff, 0xff};
				fd = -1;
				if (send(ca->fd, junk, sizeof(junk), MSG_NOSIGNAL) != sizeof(junk))
					hang_up = true;
				vad__request__free_unpacked(reqs[i], NULL);
				continue;
			}
			if (t == TRICK_UNKNOWN_ID)
				r.id += 1000;
			if (!hang_up && t != TRICK_NONE && send_tricked(f, ca->fd, &r, fd, t) < 0)
				hang_up = true;
			else if (!hang_up && t == TRICK_NONE && send_frame(ca->fd, &r, fd) < 0)
				hang_up = true;
			vad__request__free_unpacked(reqs[i], NULL);
		}
		if (hang_up)
			break;
	}
	pthread_mutex_lock(&f->lock);
	/* Like the daemon: a departing session drops everything it holds (a resumable one
	 * keeps it for its Resume, as across a restart). */
	for (size_t k = 0; k < f->n_holds && !f->resumable;)
		if (f->holds[k].conn == ca->id)
			f->holds[k] = f->holds[--f->n_holds];
		else
			k++;
	f->live_conns--;
	/* Departed once nothing more goes through: a send to it fails from now on. */
	shutdown(ca->fd, SHUT_RDWR);
	f->departed[ca->id] = true;
	pthread_cond_broadcast(&f->departure);
	pthread_mutex_unlock(&f->lock);
	free(ca);
	return NULL;
}

static void *accept_loop(void *arg)
{
	struct fake *f = arg;
	for (;;) {
		int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return NULL; /* the listening socket was shut down */
		struct conn_arg *ca = malloc(sizeof(*ca));
		pthread_mutex_lock(&f->lock);
		if (!ca || f->n_conns == MAX_CONNS) {
			pthread_mutex_unlock(&f->lock);
			free(ca);
			close(fd);
			continue;
		}
		*ca = (struct conn_arg){f, fd, f->n_conns};
		f->session_of[f->n_conns] = f->n_conns;
		f->conn_fds[f->n_conns] = fd;
		f->live_conns++;
		pthread_create(&f->conn_threads[f->n_conns], NULL, serve, ca);
		f->n_conns++;
		pthread_mutex_unlock(&f->lock);
	}
}

static struct fake *fake_start(uint32_t hello_version)
{
	struct fake *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->hello_version = hello_version;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->departure, NULL);
	snprintf(f->dir, sizeof(f->dir), "/tmp/libvad-fake-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/vad.sock", f->dir);
	static const char *const names[] = {"default", "second"};
	for (int i = 0; i < 2; i++) {
		f->arenas[i].name = names[i];
		f->arenas[i].fd = memfd_create(names[i], MFD_CLOEXEC);
		assert_true(f->arenas[i].fd >= 0);
		assert_int_equal(ftruncate(f->arenas[i].fd, ARENA_SIZE), 0);
	}
	f->small_fd = memfd_create("small", MFD_CLOEXEC);
	assert_true(f->small_fd >= 0);
	assert_int_equal(ftruncate(f->small_fd, QUANTUM), 0);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", f->path);
	assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(listen(f->listen_fd, 64), 0);
	pthread_create(&f->acceptor, NULL, accept_loop, f);
	return f;
}

/* Hang up every connection now, between calls. */
static void fake_hang_up(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	for (int i = 0; i < f->n_conns; i++)
		shutdown(f->conn_fds[i], SHUT_RDWR);
	pthread_mutex_unlock(&f->lock);
}

static void fake_stop(struct fake *f)
{
	shutdown(f->listen_fd, SHUT_RDWR);
	pthread_join(f->acceptor, NULL);
	for (int i = 0; i < f->n_conns; i++) {
		shutdown(f->conn_fds[i], SHUT_RDWR);
		pthread_join(f->conn_threads[i], NULL);
		close(f->conn_fds[i]);
	}
	close(f->listen_fd);
	for (int i = 0; i < 2; i++)
		close(f->arenas[i].fd);
	close(f->small_fd);
	unlink(f->path);
	rmdir(f->dir);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->departure);
	free(f);
}

static int scaled(int n)
{
	const char *m = getenv("VAD_TEST_MODE");
	if (m && strcmp(m, "asan") == 0)
		return n / 5 ? n / 5 : 1;
	if (m && strcmp(m, "tsan") == 0)
		return n / 10 ? n / 10 : 1;
	return n;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_connect_refused(void **state)
{
	vad_client *c = (vad_client *)1;
	int err = vad_connect("/nonexistent/dir/vad.sock", NULL, &c);
	assert_int_equal(err, VAD_ECONNECT);
	assert_null(c);
	const char *msg = vad_last_error(NULL);
	assert_non_null(strstr(msg, "/nonexistent/dir/vad.sock"));
	assert_non_null(strstr(msg, "no vad socket at"));
	/* $VAD_SOCKET is used when no path is given. */
	setenv("VAD_SOCKET", "/nonexistent/env/vad.sock", 1);
	assert_int_equal(vad_connect(NULL, "x", &c), VAD_ECONNECT);
	assert_non_null(strstr(vad_last_error(NULL), "/nonexistent/env/vad.sock"));
	unsetenv("VAD_SOCKET");
}

static void test_version_mismatch(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION + 1);
	vad_client *c;
	assert_int_equal(vad_connect(f->path, "old", &c), VAD_EVERSION);
	assert_non_null(strstr(vad_last_error(NULL), "protocol"));
	fake_stop(f);
}

static void test_alloc_write_free(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	vad_client *c;
	assert_int_equal(vad_connect(f->path, "t", &c), VAD_OK);
	struct vad_session s;
	assert_int_equal(vad_session_info(c, &s), VAD_OK);
	assert_string_equal(s.server, "fake 0.0");
	assert_string_equal(s.default_arena, "default");
	assert_string_equal(s.socket_path, f->path);
	assert_true(s.admin);

	void *p, *q;
	assert_int_equal(vad_alloc(c, 5000, 0, &p), VAD_OK);
	assert_int_equal(vad_size(c, p), 8192);
	memset(p, 0xab, 8192);
	assert_int_equal(vad_alloc(c, 100, 0, &q), VAD_OK);
	assert_ptr_equal((char *)q, (char *)p + 8192); /* bump allocator, same mapping */
	struct vad_range r;
	assert_int_equal(vad_range_info(c, q, &r), VAD_OK);
	assert_string_equal(r.arena, "default");
	assert_int_equal(r.offset, 8192);
	assert_int_equal(r.size, 4096);
	assert_int_equal(r.refs, 1);

	/* The daemon's sentence reaches vad_last_error. */
	void *z;
	assert_int_equal(vad_alloc(c, 0, 0, &z), VAD_ESIZE);
	assert_string_equal(vad_last_error(c), "fake: size 0 is not a range");
	assert_int_equal(vad_alloc_in(c, "nope", 4096, 0, &z), VAD_ENOARENA);

	assert_int_equal(vad_free(c, p), VAD_OK);
	assert_int_equal(vad_size(c, p), 0);
	assert_int_equal(vad_free(c, p), VAD_ENOTHELD); /* daemon refuses */
	int local;
	assert_int_equal(vad_free(c, &local), VAD_ENOTHELD); /* refused locally */
	assert_non_null(strstr(vad_last_error(c), "not inside any mapped arena"));
	assert_int_equal(vad_free(c, q), VAD_OK);

	/* Batches, across two arenas. */
	size_t sizes[3] = {4096, 1, 3 * 4096};
	void *v[3];
	assert_int_equal(vad_alloc_batch(c, 3, sizes, 0, v), VAD_OK);
	assert_int_equal(vad_size(c, v[2]), 3 * 4096);
	void *w[2];
	assert_int_equal(vad_alloc_batch_in(c, "second", 2, sizes, 0, w), VAD_OK);
	assert_int_equal(vad_range_info(c, w[1], &r), VAD_OK);
	assert_string_equal(r.arena, "second");
	void *all[5] = {v[0], w[0], v[1], w[1], v[2]};
	assert_int_equal(vad_free_batch(c, 5, all), VAD_OK);
	for (int i = 0; i < 5; i++)
		assert_int_equal(vad_size(c, all[i]), 0);

	/* A partial batch free: the first range is freed, the second refused. */
	assert_int_equal(vad_alloc_batch(c, 2, sizes, 0, v), VAD_OK);
	void *mixed[2] = {v[0], v[0]};
	assert_int_equal(vad_free_batch(c, 2, mixed), VAD_ENOTHELD);
	assert_int_equal(vad_size(c, v[0]), 0);
	assert_int_equal(vad_size(c, v[1]), 4096);

	struct vad_stats st;
	assert_int_equal(vad_stats(c, &st), VAD_OK);
	assert_int_equal(st.arena_bytes, 2ull * ARENA_SIZE);
	assert_int_equal(st.allocs, 21);
	assert_int_equal(st.held_ranges, 1);
	assert_int_equal(st.held_bytes, 4096);
	assert_int_equal(st.clients, 1);
	vad_close(c);
	fake_stop(f);
}

static void test_share_attach(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	vad_client *a, *b;
	assert_int_equal(vad_connect(f->path, "a", &a), VAD_OK);
	assert_int_equal(vad_connect(f->path, "b", &b), VAD_OK);
	void *p;
	assert_int_equal(vad_alloc_in(a, "second", 4096, 0, &p), VAD_OK);
	strcpy(p, "hello from a");
	char token[VAD_TOKEN_LEN + 1];
	assert_int_equal(vad_share(a, p, token), VAD_OK);
	assert_int_equal(strlen(token), VAD_TOKEN_LEN);
	void *q;
	size_t size = 0;
	assert_int_equal(vad_attach(b, token, &q, &size), VAD_OK);
	assert_int_equal(size, 4096);
	assert_string_equal(q, "hello from a"); /* the same memfd, mapped twice */
	assert_int_equal(vad_attach(b, "not-a-token", &q, &size), VAD_ETOKEN);
	/* Attaching twice gives a second reference: two frees. */
	void *q2;
	assert_int_equal(vad_attach(b, token, &q2, &size), VAD_OK);
	assert_ptr_equal(q, q2);
	struct vad_range r;
	assert_int_equal(vad_range_info(b, q, &r), VAD_OK);
	assert_int_equal(r.refs, 2);
	assert_int_equal(vad_free(b, q), VAD_OK);
	assert_int_equal(vad_size(b, q), 4096);
	assert_int_equal(vad_free(b, q), VAD_OK);
	assert_int_equal(vad_size(b, q), 0);
	void *ptr;
	assert_int_equal(vad_pointer(b, "second", r.offset, &ptr), VAD_OK);
	assert_ptr_equal(ptr, q);
	assert_int_equal(vad_pointer(b, "second", ARENA_SIZE, &ptr), VAD_EINVAL);
	vad_close(b);
	vad_close(a);
	fake_stop(f);
}

static void test_admin_calls(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	vad_client *c;
	assert_int_equal(vad_connect(f->path, "admin", &c), VAD_OK);
	struct vad_daemon_stats *d;
	assert_int_equal(vad_stats_detail(c, NULL, &d), VAD_OK);
	assert_int_equal(d->n_arenas, 2);
	assert_string_equal(d->arenas[1].name, "second");
	assert_int_equal(d->arenas[1].allocs, 11);
	assert_int_equal(d->arenas[0].pool_hits, 3);
	assert_int_equal(d->uptime_ms, 4242);
	free(d);
	struct vad_arena_info *ai;
	size_t n;
	assert_int_equal(vad_arenas(c, &ai, &n), VAD_OK);
	assert_int_equal(n, 2);
	assert_string_equal(ai[1].backing, "/dev/hugepages");
	assert_int_equal(ai[0].quantum, QUANTUM);
	free(ai);
	struct vad_client_info *ci;
	assert_int_equal(vad_clients(c, &ci, &n), VAD_OK);
	assert_int_equal(n, 1);
	assert_string_equal(ci[0].name, "test-client");
	assert_int_equal(ci[0].pid, (uint32_t)getpid());
	free(ci);
	uint64_t released = 0;
	assert_int_equal(vad_purge(c, &released), VAD_OK);
	assert_int_equal(released, 12345);
	assert_int_equal(vad_purge_arena(c, "second", &released), VAD_OK);
	assert_int_equal(released, 4096);
	assert_int_equal(vad_purge_arena(c, "nope", NULL), VAD_ENOARENA);
	assert_int_equal(vad_reload(c), VAD_EPERM);
	assert_string_equal(vad_last_error(c), "fake: admin operation 'reload' needs root");
	int ok = 1;
	char *detail = NULL;
	assert_int_equal(vad_check(c, &ok, &detail), VAD_OK);
	assert_int_equal(ok, 0);
	assert_string_equal(detail, "fake: arena 'default' subtree max wrong");
	free(detail);
	vad_close(c);
	fake_stop(f);
}

/* ---- many threads on one client ---------------------------------------------------------- */

struct worker {
	vad_client *c;
	int id, iters;
	int failures;
};

static void *pipeline_worker(void *arg)
{
	struct worker *w = arg;
	const char *arena = w->id % 2 ? "second" : NULL;
	for (int i = 0; i < w->iters; i++) {
		size_t size = 4096u * (1u + (unsigned)((w->id + i) % 3));
		void *p;
		if (vad_alloc_in(w->c, arena, size, 0, &p) != VAD_OK) {
			w->failures++;
			continue;
		}
		memset(p, w->id, size);
		if (vad_size(w->c, p) != size)
			w->failures++;
		const unsigned char *b = p;
		for (size_t k = 0; k < size; k += 512)
			if (b[k] != (unsigned char)w->id)
				w->failures++;
		if (i % 10 == 0) {
			struct vad_stats st;
			if (vad_stats(w->c, &st) != VAD_OK)
				w->failures++;
		}
		if (vad_free(w->c, p) != VAD_OK)
			w->failures++;
	}
	return NULL;
}

static void test_pipelined_threads(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	vad_client *c;
	assert_int_equal(vad_connect(f->path, "pipeline", &c), VAD_OK);
	enum { THREADS = 8 };
	pthread_t t[THREADS];
	struct worker w[THREADS];
	/* Bump allocation never reuses: stay inside two 16 MiB arenas. */
	int iters = scaled(150);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){c, i + 1, iters, 0};
		pthread_create(&t[i], NULL, pipeline_worker, &w[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
	struct vad_stats st;
	assert_int_equal(vad_stats(c, &st), VAD_OK);
	assert_int_equal(st.held_ranges, 0);
	vad_close(c);
	fake_stop(f);
}

struct doomed {
	vad_client *c;
	int last_err;
};

static void *doomed_worker(void *arg)
{
	struct doomed *d = arg;
	for (;;) {
		struct vad_stats st;
		int err = vad_stats(d->c, &st);
		if (err != VAD_OK) {
			d->last_err = err;
			return NULL;
		}
	}
}

static void test_connection_dies(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	vad_client *c;
	assert_int_equal(vad_connect(f->path, "doomed", &c), VAD_OK);
	void *p;
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	enum { THREADS = 4 };
	pthread_t t[THREADS];
	struct doomed d[THREADS];
	for (int i = 0; i < THREADS; i++) {
		d[i] = (struct doomed){c, 0};
		pthread_create(&t[i], NULL, doomed_worker, &d[i]);
	}
	void *z;
	assert_int_equal(vad_alloc(c, DIE_SIZE, 0, &z), VAD_EGONE);
	assert_string_equal(vad_last_error(c), "the daemon closed the connection");
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(d[i].last_err, VAD_EGONE);
	}
	/* Later calls fail at once; local bookkeeping still answers. */
	assert_int_equal(vad_alloc(c, 4096, 0, &z), VAD_EGONE);
	assert_int_equal(vad_free(c, p), VAD_EGONE);
	assert_int_equal(vad_size(c, p), 4096);
	vad_close(c);
	fake_stop(f);
}

/* Replies libvad cannot use: the wrong kind (that call fails, the connection lives on), a
 * map reply without its fd (the granted range is given back), and an undecodable frame
 * (the stream is broken: every later call fails). */
static void test_bad_replies(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	vad_client *c;
	assert_int_equal(vad_connect(f->path, "bad", &c), VAD_OK);
	void *p;
	assert_int_equal(vad_alloc(c, WRONG_SIZE, 0, &p), VAD_EPROTO);
	assert_non_null(strstr(vad_last_error(c), "reply of kind"));
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	assert_int_equal(vad_free(c, p), VAD_OK);

	pthread_mutex_lock(&f->lock);
	f->map_without_fd = true;
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(vad_alloc_in(c, "second", 4096, 0, &p), VAD_EPROTO);
	assert_non_null(strstr(vad_last_error(c), "no file descriptor"));
	struct vad_stats st;
	assert_int_equal(vad_stats(c, &st), VAD_OK);
	assert_int_equal(st.held_ranges, 0); /* given back */
	pthread_mutex_lock(&f->lock);
	f->map_without_fd = false;
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(vad_alloc_in(c, "second", 4096, 0, &p), VAD_OK);

	assert_int_equal(vad_alloc(c, JUNK_SIZE, 0, &p), VAD_EPROTO);
	assert_int_equal(vad_stats(c, &st), VAD_EPROTO);
	vad_close(c);
	fake_stop(f);
}

/* A reply much larger than the usual receive buffer, between ordinary ones. */
static void test_large_reply(void **state)
{
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	vad_client *c;
	assert_int_equal(vad_connect(f->path, "big", &c), VAD_OK);
	pthread_mutex_lock(&f->lock);
	f->many_clients = true;
	pthread_mutex_unlock(&f->lock);
	for (int round = 0; round < 3; round++) {
		struct vad_client_info *ci;
		size_t n;
		assert_int_equal(vad_clients(c, &ci, &n), VAD_OK);
		assert_int_equal(n, MANY_CLIENTS);
		assert_string_equal(ci[MANY_CLIENTS - 1].name, "test-client");
		assert_int_equal(ci[MANY_CLIENTS / 2].held_ranges, 3);
		free(ci);
		void *p;
		assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
		assert_int_equal(vad_free(c, p), VAD_OK);
	}
	vad_close(c);
	fake_stop(f);
}

/* ---- replies libvad refuses, one by one --------------------------------------------------- */

/* Open file descriptors of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void assert_refused(vad_client *c, int rc, const char *needle)
{
	if (rc != VAD_EPROTO)
		fail_msg("expected VAD_EPROTO, got %d (%s): %s", rc, vad_strerror(rc),
			 vad_last_error(c));
	if (!strstr(vad_last_error(c), needle))
		fail_msg("expected '%s' in the sentence: %s", needle, vad_last_error(c));
}

/* What the fake counts as held by this client. */
static uint64_t fake_held(vad_client *c)
{
	struct vad_stats st;
	assert_int_equal(vad_stats(c, &st), VAD_OK);
	return st.held_ranges;
}

/* A client on a fresh fake; *fds0 is the fd count before both (checked by finish). */
static struct fake *start(vad_client **c, int *fds0)
{
	*fds0 = count_fds();
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	assert_int_equal(vad_connect(f->path, "lied-to", c), VAD_OK);
	return f;
}

/* Close both; every fd the fake passed (stray ones included) must be closed by then. */
static void finish(struct fake *f, vad_client *c, int fds0)
{
	vad_close(c);
	fake_stop(f);
	assert_int_equal(count_fds(), fds0);
}

static void test_refuses_short_grant(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	set_trick(f, TRICK_SHORT_GRANT, VAD__REQUEST__OP_ALLOC);
	void *p;
	assert_refused(c, vad_alloc(c, 1u << 20, 0, &p),
		       "granted 4096 bytes for a request of 1048576 bytes");
	assert_int_equal(fake_held(c), 0); /* given back */
	assert_int_equal(vad_alloc(c, 1u << 20, 0, &p), VAD_OK);
	assert_int_equal(vad_size(c, p), 1u << 20);
	finish(f, c, fds0);
}

static void test_refuses_wrong_count(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	size_t sizes[3] = {4096, 8192, 4096};
	void *v[3];
	set_trick(f, TRICK_FEWER_RANGES, VAD__REQUEST__OP_ALLOC);
	assert_refused(c, vad_alloc_batch(c, 3, sizes, 0, v),
		       "asked for 3 ranges, the daemon granted 2");
	assert_int_equal(fake_held(c), 1); /* the two it listed went back; the third it hid */
	assert_int_equal(vad_alloc_batch(c, 3, sizes, 0, v), VAD_OK);
	finish(f, c, fds0);
}

static void test_refuses_ranges_outside_the_arena(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	void *p;
	set_trick(f, TRICK_OFFSET_OUTSIDE, VAD__REQUEST__OP_ALLOC);
	assert_refused(c, vad_alloc(c, 4096, 0, &p), "not inside arena 'default'");
	set_trick(f, TRICK_PAST_END, VAD__REQUEST__OP_ALLOC);
	assert_refused(c, vad_alloc(c, 4096, 0, &p), "not inside arena 'default'");
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	finish(f, c, fds0);
}

static void test_refuses_misaligned_offset(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	void *p;
	set_trick(f, TRICK_MISALIGNED, VAD__REQUEST__OP_ALLOC);
	assert_refused(c, vad_alloc(c, 4096, 65536, &p), "not aligned to 65536 bytes");
	assert_int_equal(fake_held(c), 0);
	finish(f, c, fds0);
}

static void test_refuses_a_range_granted_twice(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	void *p, *q;
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	set_trick(f, TRICK_HELD_AGAIN, VAD__REQUEST__OP_ALLOC);
	assert_refused(c, vad_alloc(c, 4096, 0, &q), "this client holds that range already");
	/* The range held before is kept, on both sides. */
	assert_int_equal(vad_size(c, p), 4096);
	size_t sizes[2] = {4096, 4096};
	void *v[2];
	set_trick(f, TRICK_DUP_IN_BATCH, VAD__REQUEST__OP_ALLOC);
	assert_refused(c, vad_alloc_batch(c, 2, sizes, 0, v), "twice in one reply");
	assert_int_equal(vad_free(c, p), VAD_OK);
	finish(f, c, fds0);
}

static void test_refuses_another_arena(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	void *p;
	set_trick(f, TRICK_OTHER_ARENA, VAD__REQUEST__OP_ALLOC);
	assert_refused(c, vad_alloc(c, 4096, 0, &p),
		       "asked for ranges in arena 'default', the daemon granted them in 'second'");
	set_trick(f, TRICK_MAP_OTHER_NAME, VAD__REQUEST__OP_MAP_ARENA);
	assert_refused(c, vad_pointer(c, "second", 0, &p), "describes arena 'default' instead");
	assert_int_equal(vad_pointer(c, "second", 0, &p), VAD_OK); /* asked again: fine */
	finish(f, c, fds0);
}

static void test_refuses_bad_map_replies(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	void *p;
	set_trick(f, TRICK_MAP_BAD_QUANTUM, VAD__REQUEST__OP_MAP_ARENA);
	assert_refused(c, vad_alloc(c, 4096, 0, &p), "quantum of 12288 bytes");
	set_trick(f, TRICK_MAP_SMALL_FILE, VAD__REQUEST__OP_MAP_ARENA);
	assert_refused(c, vad_alloc(c, 4096, 0, &p), "not a file as large as the arena");
	assert_int_equal(fake_held(c), 0); /* both ranges given back */
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	finish(f, c, fds0);
}

static void test_refuses_a_short_free(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	void *p;
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	set_trick(f, TRICK_FREE_SHORT, VAD__REQUEST__OP_FREE);
	assert_refused(c, vad_free(c, p), "with success and 0 freed");
	assert_int_equal(vad_size(c, p), 4096); /* it said none went: the record stays */
	finish(f, c, fds0);
}

/* The stream cannot be trusted after these: the call and every later one fail. */
static void test_refuses_unknown_ids(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	struct vad_stats st;
	set_trick(f, TRICK_UNKNOWN_ID, 0);
	assert_refused(c, vad_stats(c, &st), "which this client never sent");
	assert_refused(c, vad_stats(c, &st), "which this client never sent");
	finish(f, c, fds0);

	f = start(&c, &fds0);
	set_trick(f, TRICK_TWICE, 0);
	assert_int_equal(vad_stats(c, &st), VAD_OK); /* the first copy answers it */
	assert_refused(c, vad_stats(c, &st), "it was answered already");
	finish(f, c, fds0);
}

static void test_refuses_stray_fds(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	struct vad_stats st;
	set_trick(f, TRICK_STRAY_FD, VAD__REQUEST__OP_STATS);
	assert_refused(c, vad_stats(c, &st), "no arena map request was waiting for");
	finish(f, c, fds0);

	/* An fd on a map reply that is an error: a map is in flight, but not for it. */
	f = start(&c, &fds0);
	void *p;
	set_trick(f, TRICK_MAP_ERROR_FD, VAD__REQUEST__OP_MAP_ARENA);
	assert_refused(c, vad_pointer(c, "second", 0, &p), "a reply that is not an arena map");
	finish(f, c, fds0);

	f = start(&c, &fds0);
	set_trick(f, TRICK_TWO_FDS, VAD__REQUEST__OP_MAP_ARENA);
	assert_refused(c, vad_pointer(c, "second", 0, &p), "passed 2 file descriptors");
	finish(f, c, fds0);

	/* One fd per byte: the queue of fds holds one per map in flight, no more. */
	f = start(&c, &fds0);
	set_trick(f, TRICK_FD_FLOOD, VAD__REQUEST__OP_MAP_ARENA);
	assert_refused(c, vad_pointer(c, "second", 0, &p), "no arena map request was waiting");
	finish(f, c, fds0);
}

/* Tickets (vad_alloc_submit) meet the same checks as blocking calls: a stray fd on a
 * ticket's reply, a range granted again, an unknown id and a death mid-reply each end the
 * tickets in flight with the refusal or VAD_EGONE, close every fd and crash nothing. */
static void test_tickets_refuse_lies(void **state)
{
	int fds0;
	vad_client *c;
	vad_ticket t[3];
	void *p, *q;
	struct fake *f = start(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK); /* maps the default arena */
	set_trick(f, TRICK_STRAY_FD, VAD__REQUEST__OP_ALLOC);
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, 0, &t[0]), VAD_OK);
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, 0, &t[1]), VAD_OK);
	assert_refused(c, vad_wait(c, t[0], &q), "no arena map request was waiting for");
	assert_refused(c, vad_wait(c, t[1], &q), "no arena map request was waiting for");
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, 0, &t[2]), VAD_EPROTO);
	finish(f, c, fds0);

	f = start(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	set_trick(f, TRICK_HELD_AGAIN, VAD__REQUEST__OP_ALLOC);
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, 0, &t[0]), VAD_OK);
	assert_refused(c, vad_wait(c, t[0], &q), "this client holds that range already");
	assert_int_equal(vad_size(c, p), 4096); /* the range held before is kept */
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, 0, &t[0]), VAD_OK);
	assert_int_equal(vad_wait(c, t[0], &q), VAD_OK); /* the connection lives on */
	assert_int_equal(vad_free(c, q), VAD_OK);
	finish(f, c, fds0);

	f = start(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	set_trick(f, TRICK_UNKNOWN_ID, VAD__REQUEST__OP_FREE);
	assert_int_equal(vad_free_submit(c, p, 0, &t[0]), VAD_OK);
	assert_refused(c, vad_wait(c, t[0], NULL), "which this client never sent");
	assert_int_equal(vad_size(c, p), 4096); /* not freed: its record is back */
	finish(f, c, fds0);

	f = start(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	set_trick(f, TRICK_DIE_MID_REPLY, VAD__REQUEST__OP_ALLOC);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, i < 2 ? VAD_MORE : 0, &t[i]),
				 VAD_OK);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vad_wait(c, t[i], &q), VAD_EGONE);
	assert_int_equal(vad_progress(c), VAD_EGONE);
	memset(p, 1, 4096); /* the mapping stays usable until vad_close */
	finish(f, c, fds0);
}

/* ---- tickets across a cut that the session survives (resume) ------------------------------ */

/* A client of a resumable fake, reconnecting whatever $VAD_RECONNECT_MS says. */
static struct fake *start_resumable(vad_client **c, int *fds0)
{
	*fds0 = count_fds();
	struct fake *f = fake_start(VAD_PROTOCOL_VERSION);
	pthread_mutex_lock(&f->lock);
	f->resumable = true;
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(vad_connect(f->path, "resumer", c), VAD_OK);
	assert_int_equal(vad_set_reconnect(*c, 20000), VAD_OK);
	return f;
}

/* Wait until the fake's connection conn (0: the first) has ended on its side. */
static void fake_wait_departed(struct fake *f, int conn)
{
	pthread_mutex_lock(&f->lock);
	while (conn >= f->n_conns || !f->departed[conn])
		pthread_cond_wait(&f->departure, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

/* The most times the fake received one request id, over all its connections. */
static unsigned fake_most_frames(struct fake *f)
{
	unsigned most = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < MAX_IDS; i++)
		most = f->frames[i] > most ? f->frames[i] : most;
	pthread_mutex_unlock(&f->lock);
	return most;
}

/* Requests the fake received, over all its connections. */
static unsigned fake_frames(struct fake *f)
{
	unsigned n = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < MAX_IDS; i++)
		n += f->frames[i];
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* A ticket whose frame never left (queued with VAD_MORE when the connection dropped) is sent
 * again, once, after the session is resumed, and completes; one the daemon read before it
 * hung up reports VAD_EINTERRUPTED and is never sent again. */
static void test_tickets_unsent_survive_a_cut(void **state)
{
	int fds0;
	vad_client *c;
	vad_ticket ts, tq;
	void *p, *q, *z;
	struct fake *f = start_resumable(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK); /* maps the arena */
	/* Sent: the fake reads it and hangs up without a word. */
	set_trick(f, TRICK_HANG_UP, VAD__REQUEST__OP_ALLOC);
	assert_int_equal(vad_alloc_submit(c, NULL, 8192, 0, 0, &ts), VAD_OK);
	fake_wait_departed(f, 0);
	unsigned before = fake_frames(f);
	/* Queued after the cut (nobody has read it yet): its send fails, nothing left. */
	assert_int_equal(vad_alloc_submit(c, NULL, 3 * 4096, 0, VAD_MORE, &tq), VAD_OK);
	assert_int_equal(vad_wait(c, tq, &q), VAD_OK);
	assert_int_equal(vad_size(c, q), 3 * 4096);
	assert_int_equal(vad_wait(c, ts, &z), VAD_EINTERRUPTED);
	/* Hello, Resume and the queued alloc on the new connection; nothing twice. */
	assert_int_equal(fake_frames(f), before + 3);
	assert_int_equal(fake_most_frames(f), 1);
	assert_int_equal(fake_held(c), 2); /* p came along with the session, and q */
	assert_int_equal(vad_free(c, p), VAD_OK);

	/* Queued before the cut; a blocking call finds the cut first and resumes (its own
	 * frame never left either); the ticket then goes out on the new connection. */
	vad_ticket tf;
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, VAD_MORE, &tq), VAD_OK);
	assert_int_equal(vad_free_submit(c, q, VAD_MORE, &tf), VAD_OK);
	fake_hang_up(f);
	fake_wait_departed(f, 1);
	struct vad_stats st;
	assert_int_equal(vad_stats(c, &st), VAD_OK);
	assert_int_equal(vad_test(c, tq), 1);		 /* failed with the connection... */
	assert_int_equal(vad_wait(c, tf, NULL), VAD_OK); /* ...and sent again by vad_wait */
	assert_int_equal(vad_size(c, q), 0);
	assert_int_equal(vad_wait(c, tq, &z), VAD_OK);
	assert_int_equal(vad_size(c, z), 4096);
	assert_int_equal(fake_most_frames(f), 1);
	assert_int_equal(fake_held(c), 1);
	assert_int_equal(vad_free(c, z), VAD_OK);
	finish(f, c, fds0);
}

/* A batch free ticket (two Frees, two arenas) queued when the connection drops: both go
 * again after the resume, once each; both sent when the fake hangs up: interrupted. */
static void test_free_batch_ticket_across_a_cut(void **state)
{
	int fds0;
	vad_client *c;
	void *v[4];
	vad_ticket t;
	struct fake *f = start_resumable(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &v[0]), VAD_OK);
	assert_int_equal(vad_alloc_in(c, "second", 4096, 0, &v[1]), VAD_OK);
	assert_int_equal(vad_alloc(c, 4096, 0, &v[2]), VAD_OK);
	assert_int_equal(vad_alloc_in(c, "second", 4096, 0, &v[3]), VAD_OK);
	assert_int_equal(vad_free_batch_submit(c, 2, v, VAD_MORE, &t), VAD_OK);
	fake_hang_up(f);
	fake_wait_departed(f, 0);
	assert_int_equal(vad_wait(c, t, NULL), VAD_OK);
	assert_int_equal(vad_size(c, v[0]) + vad_size(c, v[1]), 0);
	assert_int_equal(fake_held(c), 2);
	assert_int_equal(fake_most_frames(f), 1);
	/* Both Frees sent in one send, the fake hangs up on reading one: both interrupted,
	 * neither sent again, the records back (the fake freed nothing). */
	set_trick(f, TRICK_HANG_UP, VAD__REQUEST__OP_FREE);
	assert_int_equal(vad_free_batch_submit(c, 2, v + 2, 0, &t), VAD_OK);
	assert_int_equal(vad_wait(c, t, NULL), VAD_EINTERRUPTED);
	assert_int_equal(vad_size(c, v[2]) + vad_size(c, v[3]), 2 * 4096);
	assert_int_equal(fake_held(c), 2);
	assert_int_equal(fake_most_frames(f), 1);
	finish(f, c, fds0);
}

struct waiter {
	vad_client *c;
	vad_ticket t;
	int err;
	void *out;
};

static void *wait_one(void *arg)
{
	struct waiter *w = arg;
	w->err = vad_wait(w->c, w->t, &w->out);
	return NULL;
}

/* A resumable fake and its client, one range allocated (*p), then an alloc ticket (*stall) the
 * fake reads and never answers (it reads nothing more), and the client's send buffer made
 * small: what is queued next leaves a few KB at a time, then waits for room. */
static struct fake *start_stalled(vad_client **c, int *fds0, void **p, vad_ticket *stall)
{
	struct fake *f = start_resumable(c, fds0);
	assert_int_equal(vad_alloc(*c, 4096, 0, p), VAD_OK);
	set_trick(f, TRICK_STALL, VAD__REQUEST__OP_ALLOC);
	assert_int_equal(vad_alloc_submit(*c, NULL, 4096, 0, 0, stall), VAD_OK);
	pthread_mutex_lock(&f->lock);
	while (!f->stalled)
		pthread_cond_wait(&f->departure, &f->lock);
	pthread_mutex_unlock(&f->lock);
	int sndbuf = 4096;
	assert_int_equal(setsockopt(vad_fd(*c), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
	return f;
}
/* A send cut in the middle: the frames before the cut, the one it split included, are sent
 * (VAD_EINTERRUPTED, though this fake read none of them), the frames after it are sent
 * again after the resume and complete; none reaches the fake twice. */
static void test_tickets_cut_mid_send(void **state)
{
	enum { N = 1000 };
	int fds0;
	vad_client *c;
	void *p;
	static vad_ticket t[N];
	vad_ticket stall;
	struct fake *f = start_stalled(&c, &fds0, &p, &stall);
	/* (the small send buffer: the queue, about 20 KB, leaves a few KB at a time) */
	for (int i = 0; i < N; i++)
		assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, VAD_MORE, &t[i]), VAD_OK);
	/* vad_wait sends the queue: what fits goes, then it waits for room that never comes. */
	struct waiter w = {c, t[N - 1], 0, NULL};
	pthread_t th;
	pthread_create(&th, NULL, wait_one, &w);
	int unread = 0;
	for (time_t end = time(NULL) + 60; unread == 0 && time(NULL) < end;) {
		assert_int_equal(ioctl(f->conn_fds[0], FIONREAD, &unread), 0);
		sched_yield();
	}
	assert_true(unread > 0 && unread < 20000);
	pthread_mutex_lock(&f->lock);
	f->released = true;
	pthread_cond_broadcast(&f->departure);
	pthread_mutex_unlock(&f->lock);
	pthread_join(th, NULL);
	assert_int_equal(w.err, VAD_OK);
	void *z;
	assert_int_equal(vad_wait(c, stall, &z), VAD_EINTERRUPTED);
	int interrupted = 0, done = 1;
	for (int i = 0; i + 1 < N; i++) {
		int err = vad_wait(c, t[i], &z);
		if (err == VAD_EINTERRUPTED) {
			assert_int_equal(done, 1); /* every sent frame precedes every unsent one */
			interrupted++;
		} else {
			assert_int_equal(err, VAD_OK);
			done++;
		}
	}
	assert_true(interrupted > 0 && done > 1);
	assert_int_equal(fake_most_frames(f), 1);
	assert_int_equal(fake_held(c), (uint64_t)done + 1);
	finish(f, c, fds0);
}

/* A thread blocked in a call of libvad: its kernel thread id, once it has one, and the call's
 * outcome. */
struct blocker {
	vad_client *c;
	size_t size;
	pid_t tid; /* atomic */
	int err;
	void *p;
};

static void *alloc_blocking(void *arg)
{
	struct blocker *b = arg;
	__atomic_store_n(&b->tid, gettid(), __ATOMIC_RELEASE);
	b->err = vad_alloc(b->c, b->size, 0, &b->p);
	return NULL;
}

/* Wait until thread b sleeps in a poll (libvad waits for its socket there), or in a futex
 * wait of a waiter (FUTEX_WAIT_BITSET: a lock's wait is a plain FUTEX_WAIT). */
static void wait_until_polling(struct blocker *b)
{
	pid_t tid;
	while (!(tid = __atomic_load_n(&b->tid, __ATOMIC_ACQUIRE)))
		sched_yield();
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	for (time_t end = time(NULL) + 60; time(NULL) < end; sched_yield()) {
		FILE *fp = fopen(path, "r");
		assert_non_null(fp);
		long nr = -1;
		unsigned long a0, op;
		bool got = fgets(line, sizeof(line), fp) &&
			   sscanf(line, "%ld %lx %lx", &nr, &a0, &op) == 3;
		fclose(fp);
		if (got && (nr == SYS_poll || nr == SYS_ppoll ||
			    (nr == SYS_futex && (op & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET)))
			return;
	}
	fail_msg("thread %d never waited in poll", (int)tid);
}

/* A blocking call whose frame waits in the queue behind another thread's send when the
 * connection is cut (none of it left) is sent again after the resume, once, and completes;
 * the sender's own call, whose frame left before the cut, reports VAD_EINTERRUPTED. Many
 * rounds, each on a fresh fake. */
static void test_blocking_queued_survives_a_cut(void **state)
{
	enum { N = 1000 };
	static vad_ticket t[N];
	int rounds = scaled(20);
	for (int round = 0; round < rounds; round++) {
		int fds0;
		vad_client *c;
		void *p, *z;
		vad_ticket stall;
		struct fake *f = start_stalled(&c, &fds0, &p, &stall);
		/* About 20 KB queued: the thread that sends them blocks, the fake reading none. */
		for (int i = 0; i < N; i++)
			assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, VAD_MORE, &t[i]),
					 VAD_OK);
		/* The sender: its own frame leaves, then it sends the queue and blocks. */
		struct blocker sender = {.c = c, .size = 4096};
		pthread_t ts, tq;
		pthread_create(&ts, NULL, alloc_blocking, &sender);
		wait_until_polling(&sender);
		/* Queued behind it: it finds the sender role taken and waits for its reply. */
		struct blocker queued = {.c = c, .size = 8192};
		pthread_create(&tq, NULL, alloc_blocking, &queued);
		wait_until_polling(&queued);
		pthread_mutex_lock(&f->lock);
		f->released = true; /* the fake hangs up */
		pthread_cond_broadcast(&f->departure);
		pthread_mutex_unlock(&f->lock);
		pthread_join(ts, NULL);
		pthread_join(tq, NULL);
		if (queued.err != VAD_OK)
			fail_msg("round %d: the queued call got %d (%s): %s", round, queued.err,
				 vad_strerror(queued.err), vad_last_error(c));
		assert_int_equal(vad_size(c, queued.p), 8192);
		assert_int_equal(sender.err, VAD_EINTERRUPTED);
		assert_int_equal(vad_wait(c, stall, &z), VAD_EINTERRUPTED);
		int done = 0;
		for (int i = 0; i < N; i++) {
			int err = vad_wait(c, t[i], &z);
			assert_true(err == VAD_OK || err == VAD_EINTERRUPTED);
			done += err == VAD_OK;
		}
		assert_int_equal(fake_most_frames(f), 1);
		/* p, the queued call's range and the tickets sent again; never the sender's. */
		assert_int_equal(fake_held(c), (uint64_t)done + 2);
		finish(f, c, fds0);
	}
}

/* Tickets of a session the daemon does not take back: every ticket from before the loss
 * reports VAD_ERESUME, whether it was sent, never left, or answered before the loss and
 * waited for after it (its ranges were the lost session's: never handed out as this
 * client's). The lost session's arenas are retired: their records are not put back by a
 * free that fails, old pointers belong to no mapping (VAD_ENOTHELD) though they stay
 * mapped, and the arena is mapped again, elsewhere, for the new session. */
static void test_tickets_lost_session(void **state)
{
	int fds0;
	vad_client *c;
	void *p, *q, *z;
	vad_ticket tdone, tshort, tf, tq;
	struct fake *f = start_resumable(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK); /* offset 0: the mapping's base */
	assert_int_equal(vad_alloc(c, 4096, 0, &q), VAD_OK);
	/* Answered before the loss, waited for after it. */
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, 0, &tdone), VAD_OK);
	set_trick(f, TRICK_FREE_SHORT, VAD__REQUEST__OP_FREE);
	assert_int_equal(vad_free_submit(c, q, 0, &tshort), VAD_OK);
	for (time_t end = time(NULL) + 60;
	     (vad_test(c, tdone) == 0 || vad_test(c, tshort) == 0) && time(NULL) < end;)
		assert_int_equal(vad_progress(c), VAD_OK);
	/* Sent: the fake reads it and hangs up. */
	set_trick(f, TRICK_HANG_UP, VAD__REQUEST__OP_FREE);
	assert_int_equal(vad_free_submit(c, p, 0, &tf), VAD_OK);
	fake_wait_departed(f, 0);
	/* Never left. */
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, VAD_MORE, &tq), VAD_OK);
	pthread_mutex_lock(&f->lock);
	f->refuse_resume = true;
	pthread_mutex_unlock(&f->lock);
	struct vad_stats st;
	assert_int_equal(vad_stats(c, &st), VAD_ERESUME);
	assert_int_equal(vad_wait(c, tf, NULL), VAD_ERESUME);
	assert_int_equal(vad_wait(c, tq, &z), VAD_ERESUME);
	assert_int_equal(vad_wait(c, tdone, &z), VAD_ERESUME);
	assert_non_null(strstr(vad_last_error(c), "restarted without this client's session"));
	assert_int_equal(vad_wait(c, tshort, NULL), VAD_ERESUME);
	assert_int_equal(vad_size(c, p), 0);
	assert_int_equal(vad_size(c, q), 0); /* the failed free did not put its record back */
	assert_int_equal(vad_free(c, q), VAD_ENOTHELD);
	assert_non_null(strstr(vad_last_error(c), "not inside any mapped arena"));
	vad_ticket t;
	assert_int_equal(vad_free_submit(c, p, 0, &t), VAD_ENOTHELD);
	memset(p, 1, 4096); /* the old mapping stays until vad_close */
	/* The client goes on as a new session: tickets work, the arena is mapped anew. */
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, 0, &t), VAD_OK);
	assert_int_equal(vad_wait(c, t, &z), VAD_OK);
	void *base;
	assert_int_equal(vad_pointer(c, NULL, 0, &base), VAD_OK);
	assert_ptr_not_equal(base, p);
	assert_int_equal(fake_held(c), 1);
	assert_int_equal(vad_free_submit(c, z, 0, &t), VAD_OK);
	assert_int_equal(vad_wait(c, t, NULL), VAD_OK);
	assert_int_equal(fake_held(c), 0);
	/* The new session is resumable in its turn: a later cut resumes it. */
	pthread_mutex_lock(&f->lock);
	f->refuse_resume = false;
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(vad_alloc(c, 4096, 0, &z), VAD_OK);
	fake_hang_up(f);
	fake_wait_departed(f, 1);
	assert_int_equal(vad_alloc_submit(c, NULL, 4096, 0, VAD_MORE, &t), VAD_OK);
	assert_int_equal(vad_wait(c, t, &q), VAD_OK);
	assert_int_equal(fake_held(c), 2);
	assert_int_equal(vad_size(c, z), 4096);
	assert_int_equal(fake_most_frames(f), 1);
	finish(f, c, fds0);
}

/* After a session the fake does not take back, the calls that meet the loss say why with
 * the reconnect's sentence, not the generic one: a blocking free (the call that reconnects),
 * a free ticket from before the loss, a blocking call of another kind. */
static void test_lost_session_sentences(void **state)
{
	int fds0;
	vad_client *c;
	void *p, *q, *r;
	vad_ticket tf;
	struct fake *f = start_resumable(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	assert_int_equal(vad_alloc(c, 4096, 0, &q), VAD_OK);
	assert_int_equal(vad_alloc(c, 4096, 0, &r), VAD_OK);
	assert_int_equal(vad_free_submit(c, q, VAD_MORE, &tf), VAD_OK);
	fake_hang_up(f);
	fake_wait_departed(f, 0);
	pthread_mutex_lock(&f->lock);
	f->refuse_resume = true;
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(vad_free(c, p), VAD_ERESUME);
	assert_non_null(strstr(vad_last_error(c), "restarted without this client's session"));
	assert_int_equal(vad_wait(c, tf, NULL), VAD_ERESUME);
	assert_non_null(strstr(vad_last_error(c), "restarted without this client's session"));
	assert_int_equal(vad_free(c, r), VAD_ENOTHELD); /* its arena went with the session */
	/* A blocking call of another kind, on a second loss. */
	fake_hang_up(f);
	fake_wait_departed(f, 1);
	struct vad_stats st;
	assert_int_equal(vad_stats(c, &st), VAD_ERESUME);
	assert_non_null(strstr(vad_last_error(c), "restarted without this client's session"));
	finish(f, c, fds0);
}

/* A session lost while an arena is being mapped: the mapping thread holds the lock that
 * keeps one MapArena at a time, and is the one that reconnects and finds the session gone.
 * That hung the client (the forget waited for that lock); the call now reports VAD_ERESUME,
 * the client goes on as the new session and maps the arena again. With two threads, the
 * other one blocked in its own call meanwhile, likewise. */
static void test_session_lost_while_mapping(void **state)
{
	int fds0;
	vad_client *c;
	void *p, *q;
	struct fake *f = start_resumable(&c, &fds0);
	assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_OK);
	pthread_mutex_lock(&f->lock);
	f->refuse_resume = true;
	pthread_mutex_unlock(&f->lock);
	set_trick(f, TRICK_HANG_UP, VAD__REQUEST__OP_MAP_ARENA);
	assert_int_equal(vad_alloc_in(c, "second", 4096, 0, &q), VAD_ERESUME);
	assert_non_null(strstr(vad_last_error(c), "restarted without this client's session"));
	set_trick(f, TRICK_NONE, VAD__REQUEST__OP_MAP_ARENA);
	assert_int_equal(vad_free(c, p), VAD_ENOTHELD); /* its arena went with the session */
	assert_int_equal(vad_alloc_in(c, "second", 4096, 0, &q), VAD_OK);
	assert_int_equal(vad_free(c, q), VAD_OK);
	finish(f, c, fds0);
}

/* A walk that pages on past what the arena can hold is cut off, not followed forever. */
static void test_refuses_an_endless_walk(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	struct vad_arena_map *m = NULL;
	assert_refused(c, vad_walk(c, NULL, 0, &m), "walk of arena 'default' is inconsistent");
	assert_null(m);
	finish(f, c, fds0);
}

/* A walk's owners are taken as named; a name longer than any daemon sends is refused. */
static void test_walk_owners(void **state)
{
	int fds0;
	vad_client *c;
	struct fake *f = start(&c, &fds0);
	struct vad_arena_map *m = NULL;
	set_trick(f, TRICK_WALK_OWNER, VAD__REQUEST__OP_WALK);
	assert_int_equal(VAD_OK, vad_walk(c, NULL, 0, &m));
	assert_int_equal(1, m->n_blocks);
	assert_string_equal("fake-owner", m->owners[0].name);
	assert_int_equal(7, m->owners[0].session);
	assert_int_equal(2, m->owners[0].holders);
	free(m);
	m = NULL;
	set_trick(f, TRICK_WALK_LONG_OWNER, VAD__REQUEST__OP_WALK);
	assert_refused(c, vad_walk(c, NULL, 0, &m), "names an owner of over 255 bytes");
	assert_null(m);
	finish(f, c, fds0);
}

/* ---- the daemon dying in every state ------------------------------------------------------ */

static void test_dies_in_every_state(void **state)
{
	static const struct {
		enum trick trick;
		Vad__Request__OpCase op;
	} deaths[] = {
	    {TRICK_DIE_MID_REPLY, VAD__REQUEST__OP_ALLOC},
	    {TRICK_DIE_AFTER_HEADER, VAD__REQUEST__OP_ALLOC},
	    {TRICK_DIE_MID_FD, VAD__REQUEST__OP_MAP_ARENA},
	    {TRICK_NONE, 0}, /* between calls */
	};
	for (size_t i = 0; i < sizeof(deaths) / sizeof(deaths[0]); i++) {
		int fds0;
		vad_client *c;
		struct fake *f = start(&c, &fds0);
		void *held;
		assert_int_equal(vad_alloc(c, 4096, 0, &held), VAD_OK);
		void *p;
		if (deaths[i].trick == TRICK_NONE) {
			fake_hang_up(f);
		} else {
			set_trick(f, deaths[i].trick, deaths[i].op);
			assert_int_equal(vad_alloc_in(c, "second", 4096, 0, &p), VAD_EGONE);
		}
		struct vad_stats st;
		assert_int_equal(vad_stats(c, &st), VAD_EGONE);
		assert_int_equal(vad_alloc(c, 4096, 0, &p), VAD_EGONE);
		assert_int_equal(vad_free(c, held), VAD_EGONE);
		memset(held, 1, 4096); /* the mapping stays usable until vad_close */
		finish(f, c, fds0);
	}
}

struct mixed {
	vad_client *c;
	int id;
	unsigned long calls; /* atomic */
	int last_err;	     /* atomic */
	const int *armed;    /* atomic: the death is set; until then a worker stops at 3 calls */
};

/* Mixed calls (allocs and frees in two arenas, batches, stats) until one fails. */
static void *mixed_worker(void *arg)
{
	struct mixed *m = arg;
	for (unsigned i = 0;; i++) {
		/* The fake's bump allocation never reuses: on a loaded machine a worker left to
		 * run while the others reach 3 calls would fill the arena (ENOSPC). */
		while (i >= 3 && !__atomic_load_n(m->armed, __ATOMIC_ACQUIRE))
			sched_yield();
		const char *arena = (i + (unsigned)m->id) % 2 ? "second" : NULL;
		void *v[2];
		size_t sizes[2] = {4096, 8192};
		int err = vad_alloc_batch_in(m->c, arena, 1 + i % 2, sizes, 0, v);
		if (err == VAD_OK)
			err = vad_free_batch(m->c, 1 + i % 2, v);
		if (err == VAD_OK && i % 4 == 0) {
			struct vad_stats st;
			err = vad_stats(m->c, &st);
		}
		if (err != VAD_OK) {
			__atomic_store_n(&m->last_err, err, __ATOMIC_RELAXED);
			return NULL;
		}
		__atomic_add_fetch(&m->calls, 1, __ATOMIC_RELAXED);
	}
}

/* Many threads inside calls when the daemon dies mid-reply or between replies: every call
 * returns VAD_EGONE, nothing crashes, nothing leaks (run under ASan and TSan). */
static void test_dies_under_threads(void **state)
{
	static const enum trick deaths[] = {TRICK_DIE_MID_REPLY, TRICK_DIE_AFTER_HEADER,
					    TRICK_NONE};
	enum { THREADS = 8 };
	for (size_t k = 0; k < sizeof(deaths) / sizeof(deaths[0]); k++) {
		for (int round = 0; round < scaled(10); round++) {
			int fds0;
			vad_client *c;
			struct fake *f = start(&c, &fds0);
			struct mixed m[THREADS];
			pthread_t t[THREADS];
			int armed = 0;
			for (int i = 0; i < THREADS; i++) {
				m[i] = (struct mixed){.c = c, .id = i, .armed = &armed};
				pthread_create(&t[i], NULL, mixed_worker, &m[i]);
			}
			/* Bump allocation never reuses: a few calls each, then the death. */
			for (int i = 0; i < THREADS; i++)
				while (__atomic_load_n(&m[i].calls, __ATOMIC_RELAXED) < 3 &&
				       !__atomic_load_n(&m[i].last_err, __ATOMIC_RELAXED))
					sched_yield();
			if (deaths[k] == TRICK_NONE)
				fake_hang_up(f);
			else
				set_trick(f, deaths[k], 0);
			__atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
			for (int i = 0; i < THREADS; i++) {
				pthread_join(t[i], NULL);
				assert_int_equal(m[i].last_err, VAD_EGONE);
			}
			finish(f, c, fds0);
		}
	}
}

static void test_strerror(void **state)
{
	for (int e = 0; e >= VAD_ENOHELLO; e--) {
		const char *s = vad_strerror(e);
		assert_non_null(s);
		assert_true(strlen(s) > 4);
		assert_string_not_equal(s, vad_strerror(-999));
	}
	assert_string_equal(vad_strerror(-999), "unknown vad error code");
	assert_string_equal(vad_strerror(5), "unknown vad error code");
	assert_string_equal(vad_strerror(VAD_EQUOTA),
			    "a per-client or per-uid quota would be exceeded");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_strerror),
	    cmocka_unit_test(test_connect_refused),
	    cmocka_unit_test(test_version_mismatch),
	    cmocka_unit_test(test_alloc_write_free),
	    cmocka_unit_test(test_share_attach),
	    cmocka_unit_test(test_admin_calls),
	    cmocka_unit_test(test_pipelined_threads),
	    cmocka_unit_test(test_connection_dies),
	    cmocka_unit_test(test_bad_replies),
	    cmocka_unit_test(test_large_reply),
	    cmocka_unit_test(test_refuses_short_grant),
	    cmocka_unit_test(test_refuses_wrong_count),
	    cmocka_unit_test(test_refuses_ranges_outside_the_arena),
	    cmocka_unit_test(test_refuses_misaligned_offset),
	    cmocka_unit_test(test_refuses_a_range_granted_twice),
	    cmocka_unit_test(test_refuses_another_arena),
	    cmocka_unit_test(test_refuses_bad_map_replies),
	    cmocka_unit_test(test_refuses_a_short_free),
	    cmocka_unit_test(test_refuses_unknown_ids),
	    cmocka_unit_test(test_refuses_stray_fds),
	    cmocka_unit_test(test_tickets_refuse_lies),
	    cmocka_unit_test(test_tickets_unsent_survive_a_cut),
	    cmocka_unit_test(test_tickets_cut_mid_send),
	    cmocka_unit_test(test_blocking_queued_survives_a_cut),
	    cmocka_unit_test(test_free_batch_ticket_across_a_cut),
	    cmocka_unit_test(test_tickets_lost_session),
	    cmocka_unit_test(test_lost_session_sentences),
	    cmocka_unit_test(test_session_lost_while_mapping),
	    cmocka_unit_test(test_refuses_an_endless_walk),
	    cmocka_unit_test(test_walk_owners),
	    cmocka_unit_test(test_dies_in_every_state),
	    cmocka_unit_test(test_dies_under_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
