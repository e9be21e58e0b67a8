/* fastwire.c - libvad's hand-written codec for Alloc/Free; see fastwire.h. */
#include "fastwire.h"

#include <limits.h>
#include <string.h>

#include "frame.h"
#include "wire.h"

#define WT_VARINT      0
#define WT_LEN	       2
#define KEY(field, wt) ((uint64_t)(field) << 3 | (wt))

/* ---- encoding ----------------------------------------------------------------------------- */

/* Bytes of a length-delimited field (key, length, body) of len body bytes. */
static size_t len_field(size_t len)
{
	return 1 + vad_varint_len(len) + len;
}

size_t libvad_fast_alloc_frame(uint8_t *out, size_t cap, uint64_t id, const char *arena,
			       uint64_t align, size_t n, const size_t *sizes, uint32_t wait_ms)
{
	size_t name = strlen(arena), packed = 0;
	size_t body = (align ? 1 + vad_varint_len(align) : 0) + (name ? len_field(name) : 0) +
		      (wait_ms ? 2 + vad_varint_len(wait_ms) : 0); /* field 40: a 2-byte key */
	if (n == 1) {
		body += sizes[0] ? 1 + vad_varint_len(sizes[0]) : 0;
	} else {
		for (size_t i = 0; i < n; i++)
			packed += vad_varint_len(sizes[i]);
		body += len_field(packed);
	}
	size_t payload = 1 + vad_varint_len(id) + len_field(body);
	if (payload > UINT32_MAX || VAD_FRAME_HEADER + payload > cap)
		return 0;
	vad_frame_put_header(out, (uint32_t)payload);
	uint8_t *p = out + VAD_FRAME_HEADER;
	*p++ = KEY(1, WT_VARINT);
	p = vad_wire_put_varint(p, id);
	*p++ = KEY(3, WT_LEN);
	p = vad_wire_put_varint(p, body);
	if (n == 1 && sizes[0]) {
		*p++ = KEY(1, WT_VARINT);
		p = vad_wire_put_varint(p, sizes[0]);
	}
	if (align) {
		*p++ = KEY(2, WT_VARINT);
		p = vad_wire_put_varint(p, align);
	}
	if (name) {
		*p++ = KEY(3, WT_LEN);
		p = vad_wire_put_varint(p, name);
		memcpy(p, arena, name);
		p += name;
	}
	if (n != 1) {
		*p++ = KEY(5, WT_LEN);
		p = vad_wire_put_varint(p, packed);
		for (size_t i = 0; i < n; i++)
			p = vad_wire_put_varint(p, sizes[i]);
	}
	if (wait_ms) {
		p = vad_wire_put_varint(p, KEY(40, WT_VARINT));
		p = vad_wire_put_varint(p, wait_ms);
	}
	return (size_t)(p - out);
}

size_t libvad_fast_free_frame(uint8_t *out, size_t cap, uint64_t id, const char *arena, size_t n,
			      const uint64_t *offsets)
{
	size_t name = strlen(arena), packed = 0;
	for (size_t i = 0; i < n; i++)
		packed += vad_varint_len(offsets[i]);
	size_t body = (name ? len_field(name) : 0) + (n ? len_field(packed) : 0);
	size_t payload = 1 + vad_varint_len(id) + len_field(body);
	if (payload > UINT32_MAX || VAD_FRAME_HEADER + payload > cap)
		return 0;
	vad_frame_put_header(out, (uint32_t)payload);
	uint8_t *p = out + VAD_FRAME_HEADER;
	*p++ = KEY(1, WT_VARINT);
	p = vad_wire_put_varint(p, id);
	*p++ = KEY(4, WT_LEN);
	p = vad_wire_put_varint(p, body);
	if (name) {
		*p++ = KEY(1, WT_LEN);
		p = vad_wire_put_varint(p, name);
		memcpy(p, arena, name);
		p += name;
	}
	if (n) {
		*p++ = KEY(2, WT_LEN);
		p = vad_wire_put_varint(p, packed);
		for (size_t i = 0; i < n; i++)
			p = vad_wire_put_varint(p, offsets[i]);
	}
	return (size_t)(p - out);
}

/* ---- decoding ----------------------------------------------------------------------------- */

/* A repeated uint64 field, packed or not, appended to list (cap entries: false past it). */
static bool get_list(struct vad_wire_cursor *c, uint64_t wt, uint64_t *list, size_t cap, size_t *n)
{
	struct vad_wire_cursor s = *c;
	if (wt == WT_LEN) {
		if (!vad_wire_get_bytes(c, &s))
			return false;
	} else if (wt == WT_VARINT) {
		s.end = c->end;
	} else {
		return false;
	}
	do {
		uint64_t v;
		if (!vad_wire_get_varint(&s, &v, 10))
			return false;
		if (*n >= cap)
			return false;
		list[(*n)++] = v;
	} while (wt == WT_LEN && s.p < s.end);
	if (wt == WT_VARINT)
		c->p = s.p;
	return true;
}

static bool parse_alloc(struct vad_wire_cursor c, struct libvad_fast_reply *f)
{
	size_t no = 0, ns = 0;
	bool named = false;
	while (c.p < c.end) {
		uint64_t key;
		struct vad_wire_cursor s;
		if (!vad_wire_get_varint(&c, &key, 5))
			return false;
		switch (key >> 3) {
		case 1:
			if ((key & 7) != WT_LEN || !vad_wire_get_bytes(&c, &s) ||
			    (size_t)(s.end - s.p) > LIBVAD_FAST_ARENA_MAX)
				return false;
			memcpy(f->arena, s.p, (size_t)(s.end - s.p));
			f->arena[s.end - s.p] = '\0';
			named = true;
			break;
		case 2:
			if (!get_list(&c, key & 7, f->offsets, f->cap, &no))
				return false;
			break;
		case 3:
			if (!get_list(&c, key & 7, f->sizes, f->cap, &ns))
				return false;
			break;
		default:
			return false;
		}
	}
	if (!named)
		f->arena[0] = '\0';
	vad__alloc_reply__init(&f->alloc);
	f->alloc.arena = f->arena;
	f->alloc.n_offsets = no;
	f->alloc.offsets = f->offsets;
	f->alloc.n_sizes = ns;
	f->alloc.sizes = f->sizes;
	f->resp.result_case = VAD__RESPONSE__RESULT_ALLOC;
	f->resp.alloc = &f->alloc;
	return true;
}

static bool parse_free(struct vad_wire_cursor c, struct libvad_fast_reply *f)
{
	uint64_t freed = 0;
	while (c.p < c.end) {
		uint64_t key;
		if (!vad_wire_get_varint(&c, &key, 5) || key != KEY(1, WT_VARINT) ||
		    !vad_wire_get_varint(&c, &freed, 10))
			return false;
	}
	vad__free_reply__init(&f->free);
	f->free.freed = (uint32_t)freed;
	f->resp.result_case = VAD__RESPONSE__RESULT_FREE;
	f->resp.free = &f->free;
	return true;
}

/* Scan (f NULL: the top-level fields only, not the reply's body) or decode a Response
 * payload. */
static bool parse_reply(const uint8_t *data, size_t len, uint64_t *id_out,
			struct libvad_fast_reply *f)
{
	struct vad_wire_cursor c = {data, data + len}, body = {NULL, NULL};
	uint64_t id = 0, result = 0;
	while (c.p < c.end) {
		uint64_t key, v;
		struct vad_wire_cursor s;
		if (!vad_wire_get_varint(&c, &key, 5))
			return false;
		switch (key) {
		case KEY(1, WT_VARINT):
			if (!vad_wire_get_varint(&c, &id, 10))
				return false;
			break;
		case KEY(2, WT_VARINT): /* an error: protobuf-c's path with its sentence */
			if (!vad_wire_get_varint(&c, &v, 10) || v != 0)
				return false;
			break;
		case KEY(3, WT_LEN):
			if (!vad_wire_get_bytes(&c, &s) || s.p != s.end)
				return false;
			break;
		case KEY(5, WT_LEN):
		case KEY(6, WT_LEN):
			if (result || !vad_wire_get_bytes(&c, &body))
				return false;
			result = key >> 3;
			break;
		default:
			return false;
		}
	}
	if (result != 5 && result != 6)
		return false;
	if (f) {
		vad__response__init(&f->resp);
		if (result == 5 ? !parse_alloc(body, f) : !parse_free(body, f))
			return false;
		f->resp.id = id;
	}
	if (id_out)
		*id_out = id;
	return true;
}

bool libvad_fast_scan_reply(const uint8_t *data, size_t len, uint64_t *id)
{
	return parse_reply(data, len, id, NULL);
}

bool libvad_fast_decode_reply(const uint8_t *data, size_t len, struct libvad_fast_reply *f)
{
	return parse_reply(data, len, NULL, f);
}
