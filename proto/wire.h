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

#endif
