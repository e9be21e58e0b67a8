/*
 * wire.h - requests as the wire carries them, for tests that speak the protocol without
 * libvad (rawclient.h sends them): one builder per operation filling a struct vt_req, and
 * the frame encoder. A builder leaves every field it does not take at its default and the
 * id at 0 (vt_raw_send_request then gives the next one); a test that wants something no
 * client would send sets it in q->op afterwards.
 */
#ifndef VAD_TEST_WIRE_H
#define VAD_TEST_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "vad.pb-c.h"

/* A request and its operation in one place (protobuf-c messages point to their parts). */
struct vt_req {
	Vad__Request req;
	union {
		Vad__Hello hello;
		Vad__Alloc alloc;
		Vad__Free free;
		Vad__MapArena map_arena;
		Vad__Share share;
		Vad__Attach attach;
		Vad__StatsRequest stats;
		Vad__ArenasRequest arenas;
		Vad__ClientsRequest clients;
		Vad__Purge purge;
		Vad__Reload reload;
		Vad__Check check;
		Vad__Walk walk;
	} op;
};

/* In the builders, arena NULL is the default arena (the empty name). Each returns &q->req. */

/* hello as name with this build's protocol version. */
Vad__Request *vt_req_hello(struct vt_req *q, const char *name);

/* alloc of count ranges (0: one) of size bytes aligned to align (0: the arena's quantum);
 * a list of sizes goes in q->op.alloc.sizes afterwards. */
Vad__Request *vt_req_alloc(struct vt_req *q, const char *arena, uint64_t size, uint64_t align,
			   uint32_t count);

/* free of offsets[0..n) (not copied: they must outlive the request). */
Vad__Request *vt_req_free(struct vt_req *q, const char *arena, const uint64_t *offsets, size_t n);

/* map_arena: the arena's fd comes with the reply. */
Vad__Request *vt_req_map_arena(struct vt_req *q, const char *arena);

/* share of the range at offset. */
Vad__Request *vt_req_share(struct vt_req *q, const char *arena, uint64_t offset);

/* attach of token (not copied). */
Vad__Request *vt_req_attach(struct vt_req *q, const char *token);

/* stats of arena (NULL: every arena the peer may use). */
Vad__Request *vt_req_stats(struct vt_req *q, const char *arena);

/* The operations without arguments. */
Vad__Request *vt_req_arenas(struct vt_req *q);
Vad__Request *vt_req_clients(struct vt_req *q);
Vad__Request *vt_req_reload(struct vt_req *q);
Vad__Request *vt_req_check(struct vt_req *q);

/* purge of arena (NULL: every arena). */
Vad__Request *vt_req_purge(struct vt_req *q, const char *arena);

/* walk of arena's blocks from offset from, at most max_blocks of them (0: as many as fit). */
Vad__Request *vt_req_walk(struct vt_req *q, const char *arena, uint64_t from, uint32_t max_blocks);

/* Encode req with id as one frame into buf[0..cap); its length, or 0 if it does not fit. */
size_t vt_frame_request(Vad__Request *req, uint64_t id, uint8_t *buf, size_t cap);

#endif
