/* fastwire.c - hand-written codec for Alloc/Free requests and replies; see fastwire.h. */
#include "fastwire.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "wire.h"

/* Wire types and the tags this codec knows (field number << 3 | wire type). */
#define WT_VARINT 0
#define WT_LEN	  2

/* ---- decoding ----------------------------------------------------------------------------- */

/* A varint value (up to 10 bytes). */
static bool get_varint(struct vad_wire_cursor *c, uint64_t *out)
{
	return vad_wire_get_varint(c, out, 10);
}

/* A field's tag and wire type (up to 5 bytes, as protobuf-c's parse_tag_and_wiretype). */
static bool get_key(struct vad_wire_cursor *c, uint64_t *out)
{
	return vad_wire_get_varint(c, out, 5);
}

static void *get_mem(ProtobufCAllocator *a, size_t len)
{
	return a->alloc(a->allocator_data, len ? len : 1);
}

/* A string field as protobuf-c returns it: a NUL-terminated copy. */
static char *get_string(ProtobufCAllocator *a, const struct vad_wire_cursor *s)
{
	size_t len = (size_t)(s->end - s->p);
	char *str = get_mem(a, len + 1);
	if (str) {
		memcpy(str, s->p, len);
		str[len] = '\0';
	}
	return str;
}

/* A packed repeated uint64 field; false when malformed or out of memory. */
static bool get_packed(ProtobufCAllocator *a, const struct vad_wire_cursor *s, size_t *n,
		       uint64_t **vals)
{
	/* Varints = bytes without the continuation bit, counted 8 bytes at a time: each byte's
	 * clear top bit becomes a 1 in that byte, and the multiply sums the bytes into the top
	 * one. */
	size_t count = 0;
	const uint8_t *w8 = s->p;
	for (; s->end - w8 >= 8; w8 += 8) {
		uint64_t w;
		memcpy(&w, w8, 8);
		count +=
		    (size_t)((((~w & 0x8080808080808080ull) >> 7) * 0x0101010101010101ull) >> 56);
	}
	for (; w8 < s->end; w8++)
		count += !(*w8 & 0x80);
	if (s->p < s->end && (s->end[-1] & 0x80))
		return false; /* the last varint is cut off */
	uint64_t *v = count ? get_mem(a, count * sizeof(*v)) : NULL;
	if (count && !v)
		return false;
	/* count terminating bytes and the last byte one of them: every varint ends inside the
	 * field, so this loop needs no bounds check (one pass, a batch's hot loop). */
	const uint8_t *q = s->p;
	for (size_t i = 0; i < count; i++) {
		uint64_t x = *q & 0x7f;
		for (unsigned shift = 7; *q++ & 0x80; shift += 7) {
			if (shift >= 70)
				return false; /* longer than 10 bytes, as get_varint refuses */
			x |= (uint64_t)(*q & 0x7f) << shift;
		}
		v[i] = x;
	}
	*n = count;
	*vals = v;
	return true;
}

static Vad__Alloc *get_alloc(ProtobufCAllocator *a, struct vad_wire_cursor c)
{
	Vad__Alloc *m = get_mem(a, sizeof(*m));
	if (!m)
		return NULL;
	vad__alloc__init(m);
	bool have_sizes = false;
	while (c.p < c.end) {
		uint64_t key, v;
		struct vad_wire_cursor s;
		if (!get_key(&c, &key))
			return NULL;
		switch (key) {
		case 1 << 3 | WT_VARINT:
			if (!get_varint(&c, &m->size))
				return NULL;
			break;
		case 2 << 3 | WT_VARINT:
			if (!get_varint(&c, &m->align))
				return NULL;
			break;
		case 3 << 3 | WT_LEN:
			if (!vad_wire_get_bytes(&c, &s) || !(m->arena = get_string(a, &s)))
				return NULL;
			break;
		case 4 << 3 | WT_VARINT:
			if (!get_varint(&c, &v))
				return NULL;
			m->count = (uint32_t)v;
			break;
		case 5 << 3 | WT_LEN:
			if (have_sizes || !vad_wire_get_bytes(&c, &s) ||
			    !get_packed(a, &s, &m->n_sizes, &m->sizes))
				return NULL;
			have_sizes = true;
			break;
		case 40 << 3 | WT_VARINT:
			if (!get_varint(&c, &v))
				return NULL;
			m->wait_ms = (uint32_t)v; /* protobuf-c keeps the low 32 bits too */
			break;
		default:
			return NULL; /* unpacked lists, unknown fields: protobuf-c decides */
		}
	}
	return m;
}

static Vad__Free *get_free(ProtobufCAllocator *a, struct vad_wire_cursor c)
{
	Vad__Free *m = get_mem(a, sizeof(*m));
	if (!m)
		return NULL;
	vad__free__init(m);
	bool have_offsets = false;
	while (c.p < c.end) {
		uint64_t key;
		struct vad_wire_cursor s;
		if (!get_key(&c, &key))
			return NULL;
		switch (key) {
		case 1 << 3 | WT_LEN:
			if (!vad_wire_get_bytes(&c, &s) || !(m->arena = get_string(a, &s)))
				return NULL;
			break;
		case 2 << 3 | WT_LEN:
			if (have_offsets || !vad_wire_get_bytes(&c, &s) ||
			    !get_packed(a, &s, &m->n_offsets, &m->offsets))
				return NULL;
			have_offsets = true;
			break;
		default:
			return NULL;
		}
	}
	return m;
}

Vad__Request *vad_fast_unpack_request(ProtobufCAllocator *alloc, size_t len, const uint8_t *data)
{
	struct vad_wire_cursor c = {data, data + len};
	Vad__Request *req = get_mem(alloc, sizeof(*req));
	if (!req)
		return NULL;
	vad__request__init(req);
	while (c.p < c.end) {
		uint64_t key;
		struct vad_wire_cursor s;
		if (!get_key(&c, &key))
			return NULL;
		if (key == (1 << 3 | WT_VARINT)) {
			if (!get_varint(&c, &req->id))
				return NULL;
			continue;
		}
		/* One operation, once: anything else (merging, other ops) is protobuf-c's. */
		if (req->op_case != VAD__REQUEST__OP__NOT_SET || !vad_wire_get_bytes(&c, &s))
			return NULL;
		if (key == (3 << 3 | WT_LEN)) {
			if (!(req->alloc = get_alloc(alloc, s)))
				return NULL;
			req->op_case = VAD__REQUEST__OP_ALLOC;
		} else if (key == (4 << 3 | WT_LEN)) {
			if (!(req->free = get_free(alloc, s)))
				return NULL;
			req->op_case = VAD__REQUEST__OP_FREE;
		} else {
			return NULL;
		}
	}
	return req->op_case == VAD__REQUEST__OP__NOT_SET ? NULL : req;
}

/* ---- encoding ----------------------------------------------------------------------------- */

/* Bytes of v as a varint without a loop: 7 bits a byte, so ceil(significant bits / 7), one
 * for 0 ((bits * 9 + 64) / 64 is that for 1 to 64 bits). A batch's reply sizes its 2n values
 * once (vad_fast_layout keeps the lengths for the encoding). */
static size_t varint_len(uint64_t v)
{
	unsigned bits = 64 - (unsigned)__builtin_clzll(v | 1);
	return (bits * 9 + 64) / 64;
}

static size_t packed_body(size_t n, const uint64_t *v)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += varint_len(v[i]);
	return len;
}

/* Size of a length-delimited field with a body of len bytes (tag < 16: one byte). */
static size_t field_len(size_t len)
{
	return 1 + vad_varint_len(len) + len;
}

/* The AllocReply's body, its parts' lengths set in lay. */
static size_t alloc_reply_body(const Vad__AllocReply *a, struct vad_fast_layout *lay)
{
	size_t len = 0;
	lay->arena_len = a->arena ? strlen(a->arena) : 0;
	lay->offsets_body = packed_body(a->n_offsets, a->offsets);
	lay->sizes_body = packed_body(a->n_sizes, a->sizes);
	if (lay->arena_len)
		len += field_len(lay->arena_len);
	if (a->n_offsets)
		len += field_len(lay->offsets_body);
	if (a->n_sizes)
		len += field_len(lay->sizes_body);
	return len;
}

static size_t free_reply_body(const Vad__FreeReply *f)
{
	return f->freed ? 1 + vad_varint_len(f->freed) : 0;
}

/* Is resp one this codec encodes: OK, no message, an Alloc or Free result? */
static bool fast_response(const Vad__Response *r)
{
	if (r->error != VAD__ERROR__OK || (r->message && r->message[0]))
		return false;
	if (r->base.n_unknown_fields)
		return false;
	return (r->result_case == VAD__RESPONSE__RESULT_ALLOC && r->alloc) ||
	       (r->result_case == VAD__RESPONSE__RESULT_FREE && r->free);
}

size_t vad_fast_response_size(const Vad__Response *r, struct vad_fast_layout *lay)
{
	if (!fast_response(r))
		return 0;
	size_t len = r->id ? 1 + vad_varint_len(r->id) : 0;
	if (r->result_case == VAD__RESPONSE__RESULT_ALLOC) {
		if (r->alloc->base.n_unknown_fields)
			return 0;
		lay->reply_body = alloc_reply_body(r->alloc, lay);
	} else {
		if (r->free->base.n_unknown_fields)
			return 0;
		lay->reply_body = free_reply_body(r->free);
	}
	lay->size = len + field_len(lay->reply_body);
	return lay->size;
}

static uint8_t *put_packed(uint8_t *p, unsigned field, size_t body, size_t n, const uint64_t *v)
{
	*p++ = (uint8_t)(field << 3 | WT_LEN);
	p = vad_wire_put_varint(p, body);
	for (size_t i = 0; i < n; i++)
		p = vad_wire_put_varint(p, v[i]);
	return p;
}

void vad_fast_pack_response(const Vad__Response *r, const struct vad_fast_layout *lay, uint8_t *out)
{
	uint8_t *p = out;
	if (r->id) {
		*p++ = 1 << 3 | WT_VARINT;
		p = vad_wire_put_varint(p, r->id);
	}
	if (r->result_case == VAD__RESPONSE__RESULT_ALLOC) {
		const Vad__AllocReply *a = r->alloc;
		*p++ = 5 << 3 | WT_LEN;
		p = vad_wire_put_varint(p, lay->reply_body);
		if (lay->arena_len) {
			*p++ = 1 << 3 | WT_LEN;
			p = vad_wire_put_varint(p, lay->arena_len);
			memcpy(p, a->arena, lay->arena_len);
			p += lay->arena_len;
		}
		if (a->n_offsets)
			p = put_packed(p, 2, lay->offsets_body, a->n_offsets, a->offsets);
		if (a->n_sizes)
			p = put_packed(p, 3, lay->sizes_body, a->n_sizes, a->sizes);
	} else {
		*p++ = 6 << 3 | WT_LEN;
		p = vad_wire_put_varint(p, lay->reply_body);
		if (r->free->freed) {
			*p++ = 1 << 3 | WT_VARINT;
			p = vad_wire_put_varint(p, r->free->freed);
		}
	}
}
