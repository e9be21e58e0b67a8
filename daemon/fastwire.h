/*
 * fastwire.h - a hand-written codec for the hot path: Alloc and Free requests in, their
 * replies out. protobuf-c's generic, descriptor-driven unpack, get_packed_size and pack cost
 * about 3,000 instructions for a 20-byte exchange, two thirds of what the daemon spends on
 * an unpipelined alloc (callgrind). These functions produce exactly what protobuf-c would
 * (same structures in, byte-identical frames out) for the messages they know, and decline
 * everything else, so the caller falls back to protobuf-c: they are an optimisation, never a
 * second definition of the protocol.
 */
#ifndef VAD_FASTWIRE_H
#define VAD_FASTWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "vad.pb-c.h"

/* Decode a Request that is a plain Alloc or Free (fields in any order, packed or unpacked
 * lists) into objects from alloc. NULL when the message is anything else, is malformed, or
 * alloc fails: decode it with vad__request__unpack instead. */
Vad__Request *vad_fast_unpack_request(ProtobufCAllocator *alloc, size_t len, const uint8_t *data);

/* The lengths vad_fast_response_size measured, which vad_fast_pack_response writes (a batch's
 * reply measured once: its 2 x n varints are the codec's hot loop). */
struct vad_fast_layout {
	size_t size;	     /* the whole encoded Response */
	size_t reply_body;   /* the AllocReply or FreeReply submessage's body */
	size_t arena_len;    /* AllocReply: the arena name's bytes */
	size_t offsets_body; /* AllocReply: the packed offsets' bytes */
	size_t sizes_body;   /* AllocReply: the packed sizes' bytes */
};

/* Encoded size of resp if it is a successful Alloc or Free reply (no error, no message), with
 * its lengths in *lay; else 0: use vad__response__get_packed_size and vad__response__pack
 * instead. */
size_t vad_fast_response_size(const Vad__Response *resp, struct vad_fast_layout *lay);

/* Encode resp, unchanged since vad_fast_response_size measured it into lay, into
 * out[0..lay->size). */
void vad_fast_pack_response(const Vad__Response *resp, const struct vad_fast_layout *lay,
			    uint8_t *out);

#endif
