/*
 * fastwire.h - libvad's hand-written codec for its hot path: Alloc and Free requests out,
 * their successful replies in. protobuf-c's generic get_packed_size, pack, unpack and
 * free_unpacked cost about 2,500 instructions and several heap allocations for a 20-byte
 * exchange, most of what libvad spends on a call besides the socket (callgrind). The
 * encoders write what protobuf-c would decode to the same request; the decoder fills a
 * Vad__Response in caller-owned storage and declines (false) anything it does not know
 * (errors, messages, other replies, lists too long for the storage), so the caller falls
 * back to protobuf-c: an optimisation, never a second definition of the protocol.
 */
#ifndef LIBVAD_FASTWIRE_H
#define LIBVAD_FASTWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vad.pb-c.h"

/* Longest arena name a fast reply holds; longer names take protobuf-c's path. */
#define LIBVAD_FAST_ARENA_MAX 127

/* Where a decoded Alloc or Free reply goes: resp points into the rest, and offsets/sizes
 * (cap entries each, the caller's) receive the lists. */
struct libvad_fast_reply {
	Vad__Response resp;
	Vad__AllocReply alloc;
	Vad__FreeReply free;
	char arena[LIBVAD_FAST_ARENA_MAX + 1];
	uint64_t *offsets, *sizes;
	size_t cap;
	uint64_t conn_gen; /* the connection the reply came on (libvad_call_frame sets it) */
};

/* Encode a whole Alloc request frame (id, arena "" = the default, align, one size in the
 * size field when n == 1, else the packed sizes, wait_ms when not 0) into out[0..cap); its
 * length, or 0 if it does not fit. */
size_t libvad_fast_alloc_frame(uint8_t *out, size_t cap, uint64_t id, const char *arena,
			       uint64_t align, size_t n, const size_t *sizes, uint32_t wait_ms);

/* Encode a whole Free request frame of n offsets in arena into out[0..cap); its length, or
 * 0 if it does not fit. */
size_t libvad_fast_free_frame(uint8_t *out, size_t cap, uint64_t id, const char *arena, size_t n,
			      const uint64_t *offsets);

/* The id of a Response payload whose top-level fields make it a successful Alloc or Free
 * reply; false for anything else. Its body is not looked at (the reader scans every reply
 * before it knows whose it is): libvad_fast_decode_reply checks it, and protobuf-c takes
 * what that declines. */
bool libvad_fast_scan_reply(const uint8_t *data, size_t len, uint64_t *id);

/* Decode such a payload into f (resp, alloc/free and the lists); false if it is not one or
 * its lists exceed f->cap. */
bool libvad_fast_decode_reply(const uint8_t *data, size_t len, struct libvad_fast_reply *f);

#endif
