/*
 * ranges.c - allocating, freeing, sharing and attaching ranges.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Send one Free for offsets of arena. The held records are dropped before the request
 * goes out: once the daemon has freed a range it may hand the same address to another
 * thread of this process, whose record must not meet the old one. The daemon frees in
 * order and stops at the first range it refuses (its reply then carries both the error
 * and how many it freed); the records of what it did not free are put back. */
static int free_offsets(vad_client *c, struct libvad_arena *a, size_t n, const uint64_t *offsets)
{
	struct libvad_held one;
	struct libvad_held *taken = n == 1 ? &one : malloc(n * sizeof(*taken));
	if (!taken)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	libvad_held_take_many(c, a, n, offsets, taken); /* refs 0: not held, the daemon says so */

	Vad__Free f = VAD__FREE__INIT;
	f.arena = a->name;
	f.n_offsets = n;
	f.offsets = (uint64_t *)offsets;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_FREE;
	req.free = &f;
	Vad__Response *r;
	size_t freed = 0;
	int err = libvad_call(c, &req, &r, NULL);
	if (err == VAD_OK) {
		if (r->result_case == VAD__RESPONSE__RESULT_FREE && r->free)
			freed = r->free->freed < n ? r->free->freed : n;
		if (r->error == VAD__ERROR__OK)
			freed = n;
	}
	for (size_t i = freed; i < n; i++)
		if (taken[i].refs > 0)
			libvad_held_add(c, a, taken[i].offset, taken[i].size);
	if (taken != &one)
		free(taken);
	if (err != VAD_OK)
		return libvad_fail(c, err, NULL);
	err = libvad_response_error(c, r, VAD__RESPONSE__RESULT_FREE);
	vad__response__free_unpacked(r, NULL);
	return err;
}

/* Bytes of v as a protobuf varint. */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Give back ranges the daemon granted but this process cannot use (the mapping or the
 * bookkeeping failed); the caller reports its own error, so this one is not recorded. */
static void give_back(vad_client *c, const char *arena, size_t n, const uint64_t *offsets)
{
	Vad__Free f = VAD__FREE__INIT;
	f.arena = (char *)arena;
	f.n_offsets = n;
	f.offsets = (uint64_t *)offsets;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_FREE;
	req.free = &f;
	Vad__Response *r;
	if (libvad_call(c, &req, &r, NULL) == VAD_OK)
		vad__response__free_unpacked(r, NULL);
}

/* Turn an AllocReply into pointers and held records; all or nothing. */
static int take_ranges(vad_client *c, Vad__AllocReply *ar, size_t n, void **out)
{
	if (ar->n_offsets != n || ar->n_sizes != n) {
		give_back(c, ar->arena, ar->n_offsets, ar->offsets);
		return libvad_failf(c, VAD_EPROTO, "asked for %zu ranges, the daemon granted %zu",
				    n, ar->n_offsets);
	}
	struct libvad_arena *a;
	int err = libvad_arena_get(c, ar->arena, &a);
	if (err != VAD_OK) {
		give_back(c, ar->arena, n, ar->offsets);
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		if (ar->offsets[i] >= a->size || ar->sizes[i] > a->size - ar->offsets[i]) {
			give_back(c, ar->arena, n, ar->offsets);
			return libvad_failf(c, VAD_EPROTO,
					    "the daemon granted a range past the end of arena '%s'",
					    a->name);
		}
	}
	if (libvad_held_add_many(c, a, n, ar->offsets, ar->sizes) != VAD_OK) {
		give_back(c, ar->arena, n, ar->offsets);
		return libvad_fail(c, VAD_ENOMEM, NULL);
	}
	for (size_t i = 0; i < n; i++)
		out[i] = a->base + ar->offsets[i];
	return VAD_OK;
}

int vad_alloc_batch_in(vad_client *c, const char *arena, size_t n, const size_t *sizes,
		       size_t align, void **out)
{
	if (!c || !out || !sizes || n == 0)
		return libvad_fail(c, VAD_EINVAL,
				   "alloc: client, sizes or out is NULL, or the count is 0");
	if (n > SIZE_MAX / sizeof(uint64_t))
		return libvad_fail(c, VAD_ETOOBIG, "alloc: too many ranges in one batch");
	Vad__Alloc al = VAD__ALLOC__INIT;
	al.align = align;
	al.arena = (char *)libvad_arena_arg(arena);
	uint64_t *wire = NULL; /* a single size goes in al.size: no allocation per call */
	if (n == 1) {
		al.size = sizes[0];
	} else {
		wire = malloc(n * sizeof(*wire));
		if (!wire)
			return libvad_fail(c, VAD_ENOMEM, NULL);
		for (size_t i = 0; i < n; i++)
			wire[i] = sizes[i];
		al.n_sizes = n;
		al.sizes = wire;
	}
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_ALLOC;
	req.alloc = &al;
	Vad__Response *r;
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_ALLOC, &r, NULL);
	free(wire);
	if (err != VAD_OK)
		return err;
	err = take_ranges(c, r->alloc, n, out);
	vad__response__free_unpacked(r, NULL);
	return err;
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
	struct libvad_arena **owner = malloc(n * sizeof(*owner));
	uint64_t *offsets = malloc(n * sizeof(*offsets));
	bool *sent = calloc(n, sizeof(*sent));
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
		size_t budget = LIBVAD_SAFE_FRAME - LIBVAD_FREE_OVERHEAD - strlen(a->name);
		for (size_t start = 0; start < k && err == VAD_OK;) {
			size_t end = start, bytes = 0;
			while (end < k && bytes + varint_len(offsets[end]) <= budget)
				bytes += varint_len(offsets[end++]);
			err = free_offsets(c, a, end - start, offsets + start);
			start = end;
		}
	}
out:
	free(owner);
	free(offsets);
	free(sent);
	return err;
}

int vad_share(vad_client *c, void *ptr, char token[VAD_TOKEN_LEN + 1])
{
	if (!c || !token)
		return libvad_fail(c, VAD_EINVAL, "vad_share: client or token is NULL");
	struct libvad_arena *a = libvad_arena_find(c, ptr);
	if (!a)
		return libvad_fail(c, VAD_ENOTHELD, "the pointer is not inside any mapped arena");
	Vad__Share sh = VAD__SHARE__INIT;
	sh.arena = a->name;
	sh.offset = (uint64_t)((uint8_t *)ptr - a->base);
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
	void *p;
	err = take_ranges(c, &as_alloc, 1, &p);
	if (err == VAD_OK) {
		*out = p;
		if (size)
			*size = (size_t)r->attach->size;
	}
	vad__response__free_unpacked(r, NULL);
	return err;
}
