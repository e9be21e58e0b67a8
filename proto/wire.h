/*
 * wire.h - protobuf wire-format sizes shared by the daemon's hand-written codec, its batch
 * limits and libvad's frame budgets, so all of them count the same bytes.
 */
#ifndef VAD_WIRE_H
#define VAD_WIRE_H

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
