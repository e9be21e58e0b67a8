/* wire.c - request builders and the frame encoder for raw-protocol tests; see wire.h. */
#include <string.h>

#include "frame.h"
#include "wire.h"

/* An arena name as the wire carries it: the default arena is the empty name. */
static char *arena_name(const char *arena)
{
	return (char *)(arena ? arena : "");
}

/* q emptied and set to carry op (its message still to be filled by the caller). */
static Vad__Request *start(struct vt_req *q, Vad__Request__OpCase op)
{
	memset(q, 0, sizeof(*q));
	vad__request__init(&q->req);
	q->req.op_case = op;
	return &q->req;
}

Vad__Request *vt_req_hello(struct vt_req *q, const char *name)
{
	start(q, VAD__REQUEST__OP_HELLO);
	vad__hello__init(&q->op.hello);
	q->op.hello.name = (char *)name;
	q->op.hello.version = VAD_PROTOCOL_VERSION;
	q->req.hello = &q->op.hello;
	return &q->req;
}

Vad__Request *vt_req_alloc(struct vt_req *q, const char *arena, uint64_t size, uint64_t align,
			   uint32_t count)
{
	start(q, VAD__REQUEST__OP_ALLOC);
	vad__alloc__init(&q->op.alloc);
	q->op.alloc.arena = arena_name(arena);
	q->op.alloc.size = size;
	q->op.alloc.align = align;
	q->op.alloc.count = count;
	q->req.alloc = &q->op.alloc;
	return &q->req;
}

Vad__Request *vt_req_free(struct vt_req *q, const char *arena, const uint64_t *offsets, size_t n)
{
	start(q, VAD__REQUEST__OP_FREE);
	vad__free__init(&q->op.free);
	q->op.free.arena = arena_name(arena);
	q->op.free.offsets = (uint64_t *)offsets;
	q->op.free.n_offsets = n;
	q->req.free = &q->op.free;
	return &q->req;
}

Vad__Request *vt_req_map_arena(struct vt_req *q, const char *arena)
{
	start(q, VAD__REQUEST__OP_MAP_ARENA);
	vad__map_arena__init(&q->op.map_arena);
	q->op.map_arena.arena = arena_name(arena);
	q->req.map_arena = &q->op.map_arena;
	return &q->req;
}

Vad__Request *vt_req_share(struct vt_req *q, const char *arena, uint64_t offset)
{
	start(q, VAD__REQUEST__OP_SHARE);
	vad__share__init(&q->op.share);
	q->op.share.arena = arena_name(arena);
	q->op.share.offset = offset;
	q->req.share = &q->op.share;
	return &q->req;
}

Vad__Request *vt_req_attach(struct vt_req *q, const char *token)
{
	start(q, VAD__REQUEST__OP_ATTACH);
	vad__attach__init(&q->op.attach);
	q->op.attach.token = (char *)token;
	q->req.attach = &q->op.attach;
	return &q->req;
}

Vad__Request *vt_req_stats(struct vt_req *q, const char *arena)
{
	start(q, VAD__REQUEST__OP_STATS);
	vad__stats_request__init(&q->op.stats);
	q->op.stats.arena = arena_name(arena);
	q->req.stats = &q->op.stats;
	return &q->req;
}

Vad__Request *vt_req_arenas(struct vt_req *q)
{
	start(q, VAD__REQUEST__OP_ARENAS);
	vad__arenas_request__init(&q->op.arenas);
	q->req.arenas = &q->op.arenas;
	return &q->req;
}

Vad__Request *vt_req_clients(struct vt_req *q)
{
	start(q, VAD__REQUEST__OP_CLIENTS);
	vad__clients_request__init(&q->op.clients);
	q->req.clients = &q->op.clients;
	return &q->req;
}

Vad__Request *vt_req_reload(struct vt_req *q)
{
	start(q, VAD__REQUEST__OP_RELOAD);
	vad__reload__init(&q->op.reload);
	q->req.reload = &q->op.reload;
	return &q->req;
}

Vad__Request *vt_req_check(struct vt_req *q)
{
	start(q, VAD__REQUEST__OP_CHECK);
	vad__check__init(&q->op.check);
	q->req.check = &q->op.check;
	return &q->req;
}

Vad__Request *vt_req_purge(struct vt_req *q, const char *arena)
{
	start(q, VAD__REQUEST__OP_PURGE);
	vad__purge__init(&q->op.purge);
	q->op.purge.arena = arena_name(arena);
	q->req.purge = &q->op.purge;
	return &q->req;
}

Vad__Request *vt_req_walk(struct vt_req *q, const char *arena, uint64_t from, uint32_t max_blocks)
{
	start(q, VAD__REQUEST__OP_WALK);
	vad__walk__init(&q->op.walk);
	q->op.walk.arena = arena_name(arena);
	q->op.walk.from = from;
	q->op.walk.max_blocks = max_blocks;
	q->req.walk = &q->op.walk;
	return &q->req;
}

size_t vt_frame_request(Vad__Request *req, uint64_t id, uint8_t *buf, size_t cap)
{
	req->id = id;
	return vad_frame_encode_request(req, buf, cap);
}
