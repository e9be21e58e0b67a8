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

int vad_walk(vad_client *c, const char *arena, size_t max_blocks, struct vad_arena_map **out)
{
	if (!c || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_walk: client or out is NULL");
	struct vad_block *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t from = 0, size = 0, quantum = 0;
	char *name = NULL;
	bool left = false; /* blocks remain that this call does not return */
	int err = VAD_OK;
	for (;;) {
		Vad__Response *r;
		err = walk_page(c, arena, from, &r);
		if (err != VAD_OK)
			break;
		Vad__WalkReply *w = r->walk;
		if (!name) {
			size = w->size;
			quantum = w->quantum;
			name = strdup(w->arena);
			if (!name) {
				vad__response__free_unpacked(r, NULL);
				err = libvad_fail(c, VAD_ENOMEM, NULL);
				break;
			}
		}
		/* Every page describes the same arena, and an arena of size bytes has at most
		 * size / quantum blocks: a daemon paging on past that would grow this list
		 * without end. */
		if (w->size != size || w->quantum != quantum || quantum == 0 ||
		    n + w->n_blocks > size / quantum + 1) {
			err = libvad_failf(c, VAD_EPROTO,
					   "the daemon's walk of arena '%s' is inconsistent (%zu "
					   "blocks in %llu bytes of %llu-byte quanta)",
					   name, n + w->n_blocks, (unsigned long long)w->size,
					   (unsigned long long)w->quantum);
			vad__response__free_unpacked(r, NULL);
			break;
		}
		size_t take = w->n_blocks;
		if (max_blocks && take > max_blocks - n)
			take = max_blocks - n;
		if (n + take > cap) {
			size_t ncap = cap ? cap * 2 : 256;
			while (ncap < n + take)
				ncap *= 2;
			struct vad_block *nv = realloc(v, ncap * sizeof(*nv));
			if (!nv) {
				vad__response__free_unpacked(r, NULL);
				err = libvad_fail(c, VAD_ENOMEM, NULL);
				break;
			}
			v = nv;
			cap = ncap;
		}
		for (size_t i = 0; i < take; i++) {
			Vad__Block *b = w->blocks[i];
			v[n++] = (struct vad_block){b->offset, b->size, (int)b->kind, b->node};
		}
		left = w->more || take < w->n_blocks;
		bool again = w->more && !(max_blocks && n >= max_blocks);
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
	if (err == VAD_OK) {
		size_t bytes = sizeof(**out) + n * sizeof(struct vad_block) + strlen(name) + 1;
		struct vad_arena_map *m = malloc(bytes);
		if (!m) {
			err = libvad_fail(c, VAD_ENOMEM, NULL);
		} else {
			m->blocks = (struct vad_block *)(m + 1);
			if (n)
				memcpy(m->blocks, v, n * sizeof(*v));
			char *nm = (char *)&m->blocks[n];
			strcpy(nm, name);
			m->arena = nm;
			m->size = size;
			m->quantum = quantum;
			m->n_blocks = n;
			m->truncated = left;
			*out = m;
		}
	}
	free(v);
	free(name);
	return err;
}
