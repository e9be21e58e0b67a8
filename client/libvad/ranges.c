/*
 * ranges.c - allocating, freeing, sharing (and revoking shares) and attaching ranges.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "transport.h"
#include "wire.h"

/* Encoded requests up to this size are built on the stack. */
#define FRAME_STACK 1024
/* Ranges up to this many per call keep their lists on the stack. */
#define STACK_RANGES 64
/* The same for an Alloc frame of n sizes: 4 + 11 (id) + 6 (alloc) + 11 (size) + 11
 * (align) + 6 (name) + 6 (sizes) + 7 (wait_ms) + 10 a size. */
#define ALLOC_FRAME_MAX(name_len, n) (62u + (name_len) + 10 * (n))

/* Send one Free for offsets of arena. The held records are dropped before the request
 * goes out: once the daemon has freed a range it may hand the same address to another
 * thread of this process, whose record must not meet the old one. */
static int free_offsets(vad_client *c, struct libvad_arena *a, size_t n, const uint64_t *offsets)
{
	struct libvad_held one;
	struct libvad_held *taken = n == 1 ? &one : malloc(n * sizeof(*taken));
	if (!taken)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	libvad_held_take_many(c, a, n, offsets, taken); /* refs 0: not held, the daemon says so */

	struct libvad_fast_reply fast = {.cap = 0};
	uint64_t id = libvad_next_id(c);
	uint8_t stackbuf[FRAME_STACK];
	size_t cap = LIBVAD_FREE_FRAME_MAX(strlen(a->name), n);
	uint8_t *frame = cap <= sizeof(stackbuf) ? stackbuf : malloc(cap);
	size_t flen = frame ? libvad_fast_free_frame(frame, cap, id, a->name, n, offsets) : 0;
	Vad__Response *r = NULL;
	int err = flen ? libvad_call_frame(c, id, frame, flen, &fast, &r, NULL) : VAD_ENOMEM;
	if (frame != stackbuf)
		free(frame);
	err = libvad_free_finish(c, a, n, taken, err, r, &fast);
	if (taken != &one)
		free(taken);
	return err;
}

int libvad_free_finish(vad_client *c, struct libvad_arena *a, size_t n,
		       const struct libvad_held *taken, int err, Vad__Response *r,
		       const struct libvad_fast_reply *fast)
{
	/* The daemon frees in order and stops at the first range it refuses (its reply then
	 * carries both the error and how many it freed); the records of what it did not free
	 * are put back. */
	size_t freed = 0;
	bool short_ok = false; /* success, but fewer freed than sent */
	if (err == VAD_OK) {
		if (r->result_case == VAD__RESPONSE__RESULT_FREE && r->free) {
			freed = r->free->freed < n ? r->free->freed : n;
			short_ok = r->error == VAD__ERROR__OK && r->free->freed != n;
		} else if (r->error == VAD__ERROR__OK) {
			freed = n;
		}
	}
	/* (an arena retired meanwhile belongs to a lost session: its records are gone too) */
	for (size_t i = freed; a && !__atomic_load_n(&a->retired, __ATOMIC_ACQUIRE) && i < n; i++)
		if (taken[i].refs > 0)
			libvad_held_add(c, a, taken[i].offset, taken[i].size);
	if (err != VAD_OK)
		return libvad_fail_unanswered(c, err);
	if (short_ok) {
		err = libvad_failf(c, VAD_EPROTO,
				   "the daemon answered a free of %zu ranges with success and %u "
				   "freed",
				   n, r->free->freed);
		libvad_reply_free(r, fast);
		return err;
	}
	err = libvad_response_error(c, r, VAD__RESPONSE__RESULT_FREE);
	libvad_reply_free(r, fast);
	return err;
}

size_t libvad_free_chunk(size_t name_len, size_t n, const uint64_t *offsets)
{
	size_t budget = LIBVAD_SAFE_FRAME - VAD_FREE_FRAME_OVERHEAD - name_len;
	size_t end = 0, bytes = 0;
	while (end < n && bytes + vad_varint_len(offsets[end]) <= budget)
		bytes += vad_varint_len(offsets[end++]);
	return end ? end : 1;
}

/* Names longer than this are not sent back in a Free (a sane arena name is far shorter). */
#define GIVE_BACK_NAME_MAX 256u

/* Whether a session was lost since connection gen (LIBVAD_GEN_ANY: never asked). */
static bool session_lost(vad_client *c, uint64_t gen)
{
	return gen != LIBVAD_GEN_ANY && __atomic_load_n(&c->lost_gen, __ATOMIC_ACQUIRE) > gen;
}

/* Give back ranges the daemon granted but this process cannot use (the mapping, the
 * bookkeeping or the reply's check failed); the caller reports its own error, so this one
 * is not recorded. A range this client held before the reply is kept: the reply's clash
 * with it must not free it. gen: the connection the reply came on (or LIBVAD_GEN_ANY). */
static void give_back(vad_client *c, uint64_t gen, const char *arena, size_t n,
		      const uint64_t *offsets)
{
	size_t name_len = strlen(arena);
	if (n == 0 || name_len > GIVE_BACK_NAME_MAX || session_lost(c, gen))
		return; /* (a lost session's ranges went with it: the new one never had them) */
	const struct libvad_arena *a = libvad_arena_peek(c, arena);
	uint64_t *back = malloc(n * sizeof(*back));
	if (!back)
		return;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!a || offsets[i] >= a->size ||
		    !libvad_held_has(c, (uintptr_t)(a->base + offsets[i])))
			back[k++] = offsets[i];
	for (size_t start = 0; start < k;) {
		size_t m = libvad_free_chunk(name_len, k - start, back + start);
		Vad__Free f = VAD__FREE__INIT;
		f.arena = (char *)arena;
		f.n_offsets = m;
		f.offsets = back + start;
		Vad__Request req = VAD__REQUEST__INIT;
		req.op_case = VAD__REQUEST__OP_FREE;
		req.free = &f;
		Vad__Response *r;
		if (libvad_call(c, &req, &r, NULL) != VAD_OK)
			break;
		vad__response__free_unpacked(r, NULL);
		start += m;
	}
	free(back);
}

/* What a reply that grants ranges must match: the request it answers. */
struct grant_check {
	const char *arena;   /* the arena asked for (resolved), or NULL (attach: any) */
	size_t n;	     /* ranges asked for */
	const size_t *sizes; /* their sizes, or NULL (attach: any size) */
	uint64_t align;	     /* alignment asked for (0: the quantum) */
	bool fresh;	     /* new allocations: none may be held already */
	uint64_t gen;	     /* the connection the reply came on, or LIBVAD_GEN_ANY */
};

/* Check each range of a reply against its request and the mapping a; VAD_OK or the
 * VAD_EPROTO refusal, recorded. */
static int check_ranges(vad_client *c, const struct grant_check *want, const Vad__AllocReply *ar,
			const struct libvad_arena *a)
{
	uint64_t align = want->align > a->quantum ? want->align : a->quantum;
	for (size_t i = 0; i < want->n; i++) {
		uint64_t off = ar->offsets[i], size = ar->sizes[i];
		if (off >= a->size || size == 0 || size > a->size - off)
			return libvad_failf(
			    c, VAD_EPROTO,
			    "the daemon granted %llu bytes at offset %llu, not inside "
			    "arena '%s' (%llu bytes)",
			    (unsigned long long)size, (unsigned long long)off, a->name,
			    (unsigned long long)a->size);
		if (want->sizes && size < want->sizes[i])
			return libvad_failf(c, VAD_EPROTO,
					    "the daemon granted %llu bytes for a request of %zu "
					    "bytes (range %zu of %zu)",
					    (unsigned long long)size, want->sizes[i], i, want->n);
		if (((uintptr_t)(a->base + off) & (uintptr_t)(align - 1)) != 0)
			return libvad_failf(c, VAD_EPROTO,
					    "the daemon granted offset %llu in arena '%s', not "
					    "aligned to %llu bytes",
					    (unsigned long long)off, a->name,
					    (unsigned long long)align);
	}
	return VAD_OK;
}

/* The refusal of ranges granted by a session lost since the request went (recorded). */
static int lost_reply(vad_client *c)
{
	return libvad_failf(c, VAD_ERESUME,
			    "the daemon at %s restarted without this client's session after "
			    "this request: every range this client held is lost, the ranges it "
			    "granted too",
			    c->socket_path);
}

/* Turn a reply that grants ranges (alloc, or attach as one range) into pointers and held
 * records, after checking it against the request; all or nothing. */
static int take_ranges(vad_client *c, const Vad__AllocReply *ar, const struct grant_check *want,
		       void **out)
{
	/* A reply from a session lost since: not mapped in the new session nor given back to
	 * it (this first look spares a round trip; the recording decides). */
	if (session_lost(c, want->gen))
		return lost_reply(c);
	if (ar->n_offsets != want->n || ar->n_sizes != want->n) {
		give_back(c, want->gen, ar->arena, ar->n_offsets, ar->offsets);
		return libvad_failf(c, VAD_EPROTO,
				    "asked for %zu ranges, the daemon granted %zu (with %zu sizes)",
				    want->n, ar->n_offsets, ar->n_sizes);
	}
	if (want->arena && strcmp(ar->arena, want->arena) != 0) {
		give_back(c, want->gen, ar->arena, want->n, ar->offsets);
		return libvad_failf(c, VAD_EPROTO,
				    "asked for ranges in arena '%s', the daemon granted them in "
				    "'%.64s'",
				    want->arena, ar->arena);
	}
	struct libvad_arena *a;
	int err = libvad_arena_get(c, ar->arena, &a);
	if (err != VAD_OK) {
		give_back(c, want->gen, ar->arena, want->n, ar->offsets);
		return err;
	}
	err = check_ranges(c, want, ar, a);
	if (err == VAD_OK) {
		size_t clash = 0;
		err = libvad_held_add_many(c, a, want->n, ar->offsets, ar->sizes, want->fresh,
					   &clash, want->gen);
		if (err == VAD_ERESUME)
			return lost_reply(c);
		if (err == VAD_EPROTO)
			err = libvad_failf(
			    c, VAD_EPROTO, "the daemon granted offset %llu in arena '%s' %s",
			    (unsigned long long)ar->offsets[clash], a->name,
			    libvad_held_has(c, (uintptr_t)(a->base + ar->offsets[clash]))
				? "again: this client holds that range already"
				: "twice in one reply");
		else if (err == VAD_ENOMEM)
			err = libvad_fail(c, VAD_ENOMEM, NULL);
	}
	if (err != VAD_OK) {
		give_back(c, want->gen, ar->arena, want->n, ar->offsets);
		return err;
	}
	for (size_t i = 0; i < want->n; i++)
		out[i] = a->base + ar->offsets[i];
	return VAD_OK;
}

int libvad_alloc_check(vad_client *c, const char *arena, size_t n, const size_t *sizes,
		       size_t align, unsigned flags, unsigned known, const char **name)
{
	if (flags & ~known)
		return libvad_failf(c, VAD_EINVAL, "alloc: unknown flags 0x%x (known: 0x%x)",
				    flags & ~known, known);
	if (!c || !sizes || n == 0)
		return libvad_fail(c, VAD_EINVAL,
				   "alloc: client or sizes is NULL, or the count is 0");
	if (n > SIZE_MAX / sizeof(uint64_t))
		return libvad_fail(c, VAD_ETOOBIG, "alloc: too many ranges in one batch");
	if (align > VAD_MAX_ALIGN)
		return libvad_failf(c, VAD_EINVAL,
				    "alloc: alignment %zu is above the largest libvad gives "
				    "(VAD_MAX_ALIGN, %zu bytes)",
				    align, VAD_MAX_ALIGN);
	*name = arena && *arena ? arena : c->default_arena;
	if (flags & VAD_POPULATE) {
		const struct libvad_arena *ro = libvad_arena_peek(c, *name);
		if (ro && ro->read_only)
			return libvad_failf(c, VAD_EREADONLY,
					    "alloc: VAD_POPULATE writes the new ranges, and arena "
					    "'%s' is mapped read-only for this client (it is one "
					    "of its readers)",
					    *name);
	}
	/* Every mapping is aligned to at least a page: only a larger alignment needs the
	 * arena's own largest, which needs its mapping (made now rather than after the
	 * reply). */
	if (align > 4096) {
		struct libvad_arena *a;
		int err = libvad_arena_get(c, *name, &a);
		if (err != VAD_OK)
			return err;
		if (align > a->max_align)
			return libvad_failf(c, VAD_EINVAL,
					    "alloc: alignment %zu is above the largest arena '%s' "
					    "gives (%llu bytes: its size rounded up to a power of "
					    "two)",
					    align, a->name, (unsigned long long)a->max_align);
	}
	return VAD_OK;
}

int libvad_take_alloc(vad_client *c, const Vad__AllocReply *ar, const char *name, size_t n,
		      const size_t *sizes, size_t align, uint64_t granted_gen, void **out)
{
	struct grant_check want = {.arena = name,
				   .n = n,
				   .sizes = sizes,
				   .align = align,
				   .fresh = true,
				   .gen = granted_gen};
	return take_ranges(c, ar, &want, out);
}

/* Every alloc call: n ranges of sizes in arena, waiting up to wait_ms for room (0: not). */
static int alloc_batch(vad_client *c, const char *arena, size_t n, const size_t *sizes,
		       size_t align, unsigned flags, uint32_t wait_ms, void **out)
{
	const char *name;
	if (!out)
		return libvad_fail(c, VAD_EINVAL, "alloc: out is NULL");
	int cerr = libvad_alloc_check(c, arena, n, sizes, align, flags, VAD_ALLOC_FLAGS, &name);
	if (cerr != VAD_OK)
		return cerr;
	/* The request is encoded and the reply decoded by hand, lists on the stack for a
	 * usual batch: no heap work per call (protobuf-c takes over for error replies). */
	const char *wire_arena = libvad_arena_arg(arena);
	uint64_t id = libvad_next_id(c);
	uint8_t stackbuf[FRAME_STACK];
	uint64_t lists[2 * STACK_RANGES];
	struct libvad_fast_reply fast = {.cap = n};
	size_t cap = ALLOC_FRAME_MAX(strlen(wire_arena), n);
	uint8_t *frame = cap <= sizeof(stackbuf) ? stackbuf : malloc(cap);
	fast.offsets = n <= STACK_RANGES ? lists : malloc(2 * n * sizeof(uint64_t));
	fast.sizes = fast.offsets ? fast.offsets + n : NULL;
	size_t flen = frame && fast.offsets ? libvad_fast_alloc_frame(frame, cap, id, wire_arena,
								      align, n, sizes, wait_ms)
					    : 0;
	Vad__Response *r = NULL;
	int err = flen
		      ? libvad_rpc_frame(c, id, frame, flen, &fast, VAD__RESPONSE__RESULT_ALLOC, &r)
		      : libvad_fail(c, VAD_ENOMEM, NULL);
	if (frame != stackbuf)
		free(frame);
	if (err == VAD_OK) {
		err = libvad_take_alloc(c, r->alloc, name, n, sizes, align, fast.conn_gen, out);
		libvad_reply_free(r, &fast);
	}
	if (fast.offsets != lists)
		free(fast.offsets);
	if (err == VAD_OK && (flags & VAD_POPULATE))
		err = libvad_populate(c, n, sizes, out);
	return err;
}

int vad_alloc_batch_flags(vad_client *c, const char *arena, size_t n, const size_t *sizes,
			  size_t align, unsigned flags, void **out)
{
	return alloc_batch(c, arena, n, sizes, align, flags, 0, out);
}

int vad_alloc_batch_wait(vad_client *c, const char *arena, size_t n, const size_t *sizes,
			 size_t align, unsigned flags, uint32_t timeout_ms, void **out)
{
	return alloc_batch(c, arena, n, sizes, align, flags, timeout_ms, out);
}

int vad_alloc_wait(vad_client *c, size_t size, size_t align, uint32_t timeout_ms, void **out)
{
	return alloc_batch(c, NULL, 1, &size, align, 0, timeout_ms, out);
}

int vad_alloc_batch_in(vad_client *c, const char *arena, size_t n, const size_t *sizes,
		       size_t align, void **out)
{
	return vad_alloc_batch_flags(c, arena, n, sizes, align, 0, out);
}

int vad_alloc_flags(vad_client *c, const char *arena, size_t size, size_t align, unsigned flags,
		    void **out)
{
	return vad_alloc_batch_flags(c, arena, 1, &size, align, flags, out);
}

int vad_alloc_batch(vad_client *c, size_t n, const size_t *sizes, size_t align, void **out)
{
	return vad_alloc_batch_in(c, NULL, n, sizes, align, out);
}

int vad_alloc_in(vad_client *c, const char *arena, size_t size, size_t align, void **out)
{
	return vad_alloc_batch_in(c, arena, 1, &size, align, out);
}

int vad_alloc(vad_client *c, size_t size, size_t align, void **out)
{
	return vad_alloc_batch_in(c, NULL, 1, &size, align, out);
}

int vad_free(vad_client *c, void *ptr)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_free: client is NULL");
	struct libvad_arena *a = libvad_arena_find(c, ptr);
	if (!a)
		return libvad_fail(c, VAD_ENOTHELD, "the pointer is not inside any mapped arena");
	uint64_t off = (uint64_t)((uint8_t *)ptr - a->base);
	return free_offsets(c, a, 1, &off);
}

int vad_free_batch(vad_client *c, size_t n, void *const *ptrs)
{
	if (!c || (n && !ptrs))
		return libvad_fail(c, VAD_EINVAL, "vad_free_batch: client or ptrs is NULL");
	if (n == 0)
		return VAD_OK;
	if (n > SIZE_MAX / sizeof(uint64_t))
		return libvad_fail(c, VAD_ETOOBIG, "vad_free_batch: too many ranges in one batch");
	/* A usual batch keeps its lists on the stack. */
	struct libvad_arena *owner_st[STACK_RANGES];
	uint64_t offsets_st[STACK_RANGES];
	bool sent_st[STACK_RANGES] = {false};
	bool small = n <= STACK_RANGES;
	struct libvad_arena **owner = small ? owner_st : malloc(n * sizeof(*owner));
	uint64_t *offsets = small ? offsets_st : malloc(n * sizeof(*offsets));
	bool *sent = small ? sent_st : calloc(n, sizeof(*sent));
	int err = VAD_OK;
	if (!owner || !offsets || !sent) {
		err = libvad_fail(c, VAD_ENOMEM, NULL);
		goto out;
	}
	/* Check every pointer before freeing anything. */
	for (size_t i = 0; i < n; i++) {
		owner[i] = libvad_arena_find(c, ptrs[i]);
		if (!owner[i]) {
			err = libvad_failf(
			    c, VAD_ENOTHELD,
			    "pointer %zu of the batch is not inside any mapped arena", i);
			goto out;
		}
	}
	/* One Free per arena (arenas in order of first appearance), split so that no frame
	 * exceeds the smallest max_frame any daemon accepts: a daemon drops a connection
	 * that sends a longer frame, and offsets take more bytes than the sizes did. */
	for (size_t i = 0; i < n && err == VAD_OK; i++) {
		if (sent[i])
			continue;
		struct libvad_arena *a = owner[i];
		size_t k = 0;
		for (size_t j = i; j < n; j++) {
			if (owner[j] == a) {
				offsets[k++] = (uint64_t)((uint8_t *)ptrs[j] - a->base);
				sent[j] = true;
			}
		}
		for (size_t start = 0; start < k && err == VAD_OK;) {
			size_t m = libvad_free_chunk(strlen(a->name), k - start, offsets + start);
			err = free_offsets(c, a, m, offsets + start);
			start += m;
		}
	}
out:
	if (!small) {
		free(owner);
		free(offsets);
		free(sent);
	}
	return err;
}

/* Ask the daemon for a token of the range at ptr with opts (NULL: plain), into token. */
static int share(vad_client *c, const char *fn, void *ptr, const struct vad_share_opts *opts,
		 char token[VAD_TOKEN_LEN + 1])
{
	if (!c || !token)
		return libvad_failf(c, VAD_EINVAL, "%s: client or token is NULL", fn);
	struct libvad_arena *a = libvad_arena_find(c, ptr);
	if (!a)
		return libvad_fail(c, VAD_ENOTHELD, "the pointer is not inside any mapped arena");
	Vad__Share sh = VAD__SHARE__INIT;
	sh.arena = a->name;
	sh.offset = (uint64_t)((uint8_t *)ptr - a->base);
	if (opts) {
		sh.single_use = opts->single_use != 0;
		sh.ttl_ms = opts->ttl_ms;
	}
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_SHARE;
	req.share = &sh;
	Vad__Response *r;
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_SHARE, &r, NULL);
	if (err != VAD_OK)
		return err;
	size_t len = strlen(r->share->token);
	if (len == 0 || len > VAD_TOKEN_LEN) {
		vad__response__free_unpacked(r, NULL);
		return libvad_failf(c, VAD_EPROTO,
				    "the daemon sent a share token of %zu characters", len);
	}
	memcpy(token, r->share->token, len + 1);
	vad__response__free_unpacked(r, NULL);
	return VAD_OK;
}

int vad_share(vad_client *c, void *ptr, char token[VAD_TOKEN_LEN + 1])
{
	return share(c, "vad_share", ptr, NULL, token);
}

int vad_share_opts(vad_client *c, void *ptr, const struct vad_share_opts *opts,
		   char token[VAD_TOKEN_LEN + 1])
{
	return share(c, "vad_share_opts", ptr, opts, token);
}

int vad_unshare(vad_client *c, void *ptr)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_unshare: client is NULL");
	struct libvad_arena *a = libvad_arena_find(c, ptr);
	if (!a)
		return libvad_fail(c, VAD_ENOTHELD, "the pointer is not inside any mapped arena");
	Vad__Unshare un = VAD__UNSHARE__INIT;
	un.arena = a->name;
	un.offset = (uint64_t)((uint8_t *)ptr - a->base);
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_UNSHARE;
	req.unshare = &un;
	Vad__Response *r;
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_UNSHARE, &r, NULL);
	if (err != VAD_OK)
		return err;
	vad__response__free_unpacked(r, NULL); /* a range without a token is no failure */
	return VAD_OK;
}

int vad_attach(vad_client *c, const char *token, void **out, size_t *size)
{
	if (!c || !token || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_attach: client, token or out is NULL");
	Vad__Attach at = VAD__ATTACH__INIT;
	at.token = (char *)token;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_ATTACH;
	req.attach = &at;
	Vad__Response *r;
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_ATTACH, &r, NULL);
	if (err != VAD_OK)
		return err;
	Vad__AllocReply as_alloc = VAD__ALLOC_REPLY__INIT;
	as_alloc.arena = r->attach->arena;
	as_alloc.n_offsets = as_alloc.n_sizes = 1;
	as_alloc.offsets = &r->attach->offset;
	as_alloc.sizes = &r->attach->size;
	struct grant_check want = {.n = 1, .gen = LIBVAD_GEN_ANY};
	void *p;
	err = take_ranges(c, &as_alloc, &want, &p);
	if (err == VAD_OK) {
		*out = p;
		if (size)
			*size = (size_t)r->attach->size;
	}
	vad__response__free_unpacked(r, NULL);
	return err;
}
