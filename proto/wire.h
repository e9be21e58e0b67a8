/*
 * wire.h - protobuf wire-format sizes shared by the daemon's hand-written codec, its batch
 * limits and libvad's frame budgets, so all of them count the same bytes; and the varint
 * reader and writer both hand-written codecs (the daemon's and libvad's) use.
 */
#ifndef VAD_WIRE_H
#define VAD_WIRE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of v as a protobuf varint (1 to 10): 7 bits per byte. */
static inline size_t vad_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Unread bytes of a message being decoded. */
struct vad_wire_cursor {
	const uint8_t *p, *end;
};

/* Read one varint of at most max bytes; false when truncated or longer. protobuf-c reads
 * values of up to 10 bytes, but tags and length prefixes of at most 5. */
static inline bool vad_wire_get_varint(struct vad_wire_cursor *c, uint64_t *out, unsigned max)
{
	uint64_t v = 0;
	for (unsigned shift = 0, i = 0; i < max; i++, shift += 7) {
		if (c->p >= c->end)
			return false;
		uint8_t b = *c->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/* Read a length-delimited field's bytes into out; its length prefix is read the way
 * protobuf-c's scan_length_prefix does (at most 5 bytes, at most INT_MAX). */
static inline bool vad_wire_get_bytes(struct vad_wire_cursor *c, struct vad_wire_cursor *out)
{
	uint64_t len;
	if (!vad_wire_get_varint(c, &len, 5) || len > INT_MAX || len > (uint64_t)(c->end - c->p))
		return false;
	*out = (struct vad_wire_cursor){c->p, c->p + len};
	c->p += len;
	return true;
}

/* Write v as a varint at p; returns the byte after it. */
static inline uint8_t *vad_wire_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* The most bytes a whole Free request frame takes besides its arena name and its packed
 * offsets: the 4-byte length, the id (tag and a varint of up to 10 bytes), then a tag and a
 * length of up to 5 bytes (protobuf-c writes lengths as 32-bit varints) for each of the
 * free field, the arena name and the offsets: 4 + 11 + 3 x 6. */
#define VAD_FREE_FRAME_OVERHEAD 33u

/* The same for a whole Response frame carrying an AllocReply, besides its arena name and its
 * packed offsets and sizes: 4 + 11 + 4 x 6 (the alloc field, the name, the offsets, the
 * sizes; error OK and an empty message are not sent). It is the larger of the two and its
 * lists hold the Free's offsets and more, so a batch whose reply fits a frame can be freed
 * in one request too. */
#define VAD_ALLOC_REPLY_FRAME_OVERHEAD 39u

#endif
