/* walk.c - an arena's block layout, paged through the Walk request (for vactl map). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "transport.h"

/* One Walk page from `from`; on success the caller owns *resp. */
static int walk_page(vad_client *c, const char *arena, uint64_t from, Vad__Response **resp)
{
	Vad__Walk w = VAD__WALK__INIT;
	w.arena = (char *)libvad_arena_arg(arena);
	w.from = from;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_WALK;
	req.walk = &w;
	return libvad_rpc(c, &req, VAD__RESPONSE__RESULT_WALK, resp, NULL);
}

/* The blocks gathered so far over the pages of one walk. */
struct walk_acc {
	struct vad_block *v;
	size_t n, cap;
	uint64_t size, quantum; /* of the arena, from the first page */
	char *name;
	bool left; /* blocks remain that this call does not return */
};

/* Room for extra more blocks in acc; VAD_OK or VAD_ENOMEM reported on c. */
static int acc_reserve(vad_client *c, struct walk_acc *acc, size_t extra)
{
	if (acc->n + extra <= acc->cap)
		return VAD_OK;
	size_t ncap = acc->cap ? acc->cap * 2 : 256;
	while (ncap < acc->n + extra)
		ncap *= 2;
	struct vad_block *nv = realloc(acc->v, ncap * sizeof(*nv));
	if (!nv)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	acc->v = nv;
	acc->cap = ncap;
	return VAD_OK;
}

/* Take one page's blocks (at most max_blocks in all, 0 = no limit) after checking it describes
 * the arena the first page did. */
static int acc_take_page(vad_client *c, struct walk_acc *acc, const Vad__WalkReply *w,
			 size_t max_blocks)
{
	if (!acc->name) {
		acc->size = w->size;
		acc->quantum = w->quantum;
		if (!(acc->name = strdup(w->arena)))
			return libvad_fail(c, VAD_ENOMEM, NULL);
	}
	/* Every page describes the same arena, and an arena of size bytes has at most
	 * size / quantum blocks: a daemon paging on past that would grow this list
	 * without end. */
	if (w->size != acc->size || w->quantum != acc->quantum || acc->quantum == 0 ||
	    acc->n + w->n_blocks > acc->size / acc->quantum + 1)
		return libvad_failf(c, VAD_EPROTO,
				    "the daemon's walk of arena '%s' is inconsistent (%zu "
				    "blocks in %llu bytes of %llu-byte quanta)",
				    acc->name, acc->n + w->n_blocks, (unsigned long long)w->size,
				    (unsigned long long)w->quantum);
	size_t take = w->n_blocks;
	if (max_blocks && take > max_blocks - acc->n)
		take = max_blocks - acc->n;
	int err = acc_reserve(c, acc, take);
	if (err != VAD_OK)
		return err;
	for (size_t i = 0; i < take; i++) {
		const Vad__Block *b = w->blocks[i];
		acc->v[acc->n++] = (struct vad_block){b->offset, b->size, (int)b->kind, b->node};
	}
	acc->left = w->more || take < w->n_blocks;
	return VAD_OK;
}

/* The caller's map: one allocation holding the header, the blocks and the arena's name. */
static int acc_to_map(vad_client *c, const struct walk_acc *acc, struct vad_arena_map **out)
{
	size_t bytes = sizeof(**out) + acc->n * sizeof(struct vad_block) + strlen(acc->name) + 1;
	struct vad_arena_map *m = malloc(bytes);
	if (!m)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	m->blocks = (struct vad_block *)(m + 1);
	if (acc->n)
		memcpy(m->blocks, acc->v, acc->n * sizeof(*acc->v));
	char *nm = (char *)&m->blocks[acc->n];
	strcpy(nm, acc->name);
	m->arena = nm;
	m->size = acc->size;
	m->quantum = acc->quantum;
	m->n_blocks = acc->n;
	m->truncated = acc->left;
	*out = m;
	return VAD_OK;
}

int vad_walk(vad_client *c, const char *arena, size_t max_blocks, struct vad_arena_map **out)
{
	if (!c || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_walk: client or out is NULL");
	struct walk_acc acc = {0};
	uint64_t from = 0;
	int err;
	for (;;) {
		Vad__Response *r;
		if ((err = walk_page(c, arena, from, &r)) != VAD_OK)
			break;
		const Vad__WalkReply *w = r->walk;
		err = acc_take_page(c, &acc, w, max_blocks);
		bool again = err == VAD_OK && w->more && !(max_blocks && acc.n >= max_blocks);
		/* A page that does not move forward would loop forever. */
		if (again && w->next <= from)
			err = libvad_failf(c, VAD_EPROTO,
					   "the daemon's walk did not advance past %llu",
					   (unsigned long long)from);
		from = w->next;
		vad__response__free_unpacked(r, NULL);
		if (err != VAD_OK || !again)
			break;
	}
	if (err == VAD_OK)
		err = acc_to_map(c, &acc, out);
	free(acc.v);
	free(acc.name);
	return err;
}
