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

/* A busy block's owner while the pages are gathered: its name is an offset in the pool. */
struct acc_owner {
	size_t name; /* offset + 1 in walk_acc.pool; 0: none */
	uint64_t session;
	uint32_t holders;
};

/* A session the walk named: the daemon sends a name once per page, then only the id. */
struct acc_session {
	uint64_t id;
	size_t name; /* offset + 1 in walk_acc.pool */
};

/* The blocks gathered so far over the pages of one walk. */
struct walk_acc {
	struct vad_block *v;
	struct acc_owner *ow; /* beside v, cap entries */
	size_t n, cap;
	uint64_t size, quantum; /* of the arena, from the first page */
	char *name;
	bool left;  /* blocks remain that this call does not return */
	char *pool; /* the distinct owner names, NUL-terminated, one after the other */
	size_t pool_len, pool_cap;
	size_t *names; /* hash set of pool offsets + 1 (0: empty), names_cap slots */
	size_t n_names, names_cap;
	struct acc_session *ids; /* session id -> its name, ids_cap slots (id 0: empty) */
	size_t n_ids, ids_cap;
};

/* Longest owner name taken from a daemon (its names are at most 63 bytes). */
#define OWNER_NAME_MAX 255

static size_t name_hash(const char *s)
{
	size_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Grow the set of names to twice its slots and rehash; VAD_OK or VAD_ENOMEM on c. */
static int names_grow(vad_client *c, struct walk_acc *acc)
{
	size_t ncap = acc->names_cap ? acc->names_cap * 2 : 64;
	size_t *nt = calloc(ncap, sizeof(*nt));
	if (!nt)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	for (size_t i = 0; i < acc->names_cap; i++) {
		size_t off = acc->names[i];
		if (!off)
			continue;
		size_t j = name_hash(acc->pool + off - 1) & (ncap - 1);
		while (nt[j])
			j = (j + 1) & (ncap - 1);
		nt[j] = off;
	}
	free(acc->names);
	acc->names = nt;
	acc->names_cap = ncap;
	return VAD_OK;
}

static size_t id_slot(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 7) & (cap - 1);
}

/* Remember session id's name (pool offset + 1); VAD_OK or VAD_ENOMEM on c. */
static int ids_put(vad_client *c, struct walk_acc *acc, uint64_t id, size_t name)
{
	if ((acc->n_ids + 1) * 2 > acc->ids_cap) {
		size_t ncap = acc->ids_cap ? acc->ids_cap * 2 : 64;
		struct acc_session *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return libvad_fail(c, VAD_ENOMEM, NULL);
		for (size_t i = 0; i < acc->ids_cap; i++) {
			if (!acc->ids[i].id)
				continue;
			size_t j = id_slot(acc->ids[i].id, ncap);
			while (nt[j].id)
				j = (j + 1) & (ncap - 1);
			nt[j] = acc->ids[i];
		}
		free(acc->ids);
		acc->ids = nt;
		acc->ids_cap = ncap;
	}
	size_t j = id_slot(id, acc->ids_cap);
	while (acc->ids[j].id && acc->ids[j].id != id)
		j = (j + 1) & (acc->ids_cap - 1);
	if (!acc->ids[j].id)
		acc->n_ids++;
	acc->ids[j] = (struct acc_session){id, name};
	return VAD_OK;
}

/* The name (pool offset + 1) the walk gave session id, 0 if none. */
static size_t ids_get(const struct walk_acc *acc, uint64_t id)
{
	if (!acc->ids_cap)
		return 0;
	for (size_t j = id_slot(id, acc->ids_cap); acc->ids[j].id; j = (j + 1) & (acc->ids_cap - 1))
		if (acc->ids[j].id == id)
			return acc->ids[j].name;
	return 0;
}

/* The pool offset + 1 of name, added once however many blocks it owns. */
static int acc_name(vad_client *c, struct walk_acc *acc, const char *name, size_t *out)
{
	size_t len = strnlen(name, OWNER_NAME_MAX + 1);
	if (len > OWNER_NAME_MAX)
		return libvad_failf(c, VAD_EPROTO,
				    "the daemon's walk names an owner of over %d bytes",
				    OWNER_NAME_MAX);
	if ((acc->n_names + 1) * 2 > acc->names_cap && names_grow(c, acc) != VAD_OK)
		return VAD_ENOMEM;
	size_t j = name_hash(name) & (acc->names_cap - 1);
	for (; acc->names[j]; j = (j + 1) & (acc->names_cap - 1))
		if (strcmp(acc->pool + acc->names[j] - 1, name) == 0) {
			*out = acc->names[j];
			return VAD_OK;
		}
	if (acc->pool_len + len + 1 > acc->pool_cap) {
		size_t ncap = acc->pool_cap ? acc->pool_cap * 2 : 1024;
		while (ncap < acc->pool_len + len + 1)
			ncap *= 2;
		char *np = realloc(acc->pool, ncap);
		if (!np)
			return libvad_fail(c, VAD_ENOMEM, NULL);
		acc->pool = np;
		acc->pool_cap = ncap;
	}
	memcpy(acc->pool + acc->pool_len, name, len + 1);
	acc->names[j] = acc->pool_len + 1;
	acc->pool_len += len + 1;
	acc->n_names++;
	*out = acc->names[j];
	return VAD_OK;
}

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
	struct acc_owner *no = realloc(acc->ow, ncap * sizeof(*no));
	if (!no)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	acc->ow = no;
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
		struct acc_owner o = {0};
		if (b->kind == VAD__BLOCK_KIND__BUSY && b->owner_session) {
			/* The name comes with a session's first block of a page, then the id. */
			if (b->owner && b->owner[0]) {
				if ((err = acc_name(c, acc, b->owner, &o.name)) != VAD_OK ||
				    (err = ids_put(c, acc, b->owner_session, o.name)) != VAD_OK)
					return err;
			} else {
				o.name = ids_get(acc, b->owner_session);
			}
			o.session = b->owner_session;
			o.holders =
			    b->other_holders < UINT32_MAX ? b->other_holders + 1 : UINT32_MAX;
		}
		acc->ow[acc->n] = o;
		acc->v[acc->n++] = (struct vad_block){b->offset, b->size, (int)b->kind, b->node};
	}
	acc->left = w->more || take < w->n_blocks;
	return VAD_OK;
}

/* The caller's map: one allocation holding the header, the blocks, their owners, the arena's
 * name and the owners' names. */
static int acc_to_map(vad_client *c, const struct walk_acc *acc, struct vad_arena_map **out)
{
	size_t bytes = sizeof(**out) + acc->n * sizeof(struct vad_block) +
		       acc->n * sizeof(struct vad_block_owner) + strlen(acc->name) + 1 +
		       acc->pool_len;
	struct vad_arena_map *m = malloc(bytes);
	if (!m)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	m->blocks = (struct vad_block *)(m + 1);
	if (acc->n)
		memcpy(m->blocks, acc->v, acc->n * sizeof(*acc->v));
	m->owners = (struct vad_block_owner *)&m->blocks[acc->n];
	char *pool = (char *)&m->owners[acc->n];
	if (acc->pool_len)
		memcpy(pool, acc->pool, acc->pool_len);
	for (size_t i = 0; i < acc->n; i++)
		m->owners[i] =
		    (struct vad_block_owner){acc->ow[i].name ? pool + acc->ow[i].name - 1 : NULL,
					     acc->ow[i].session, acc->ow[i].holders};
	char *nm = pool + acc->pool_len;
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
	free(acc.ow);
	free(acc.pool);
	free(acc.names);
	free(acc.ids);
	free(acc.name);
	return err;
}
