/* holds.c - who holds what: one session's ranges (vactl ranges) and the live share tokens
 * (vactl tokens), each fetched a page at a time, and an administrator's kill of a session.
 * A list comes back as one malloc'd block: the header, the entries, then their strings. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "transport.h"

/* Entries a listing gathers at most: a daemon that pages on without end (or a broken one)
 * must not grow this process without bound. */
#define LIST_MAX (64u * 1024u * 1024u)

/* Distinct strings of a listing (arena names, token strings), each entry naming one by
 * index. */
struct strings {
	char **v;
	size_t n, cap, bytes;
};

/* The index of s in st, added if new (arena names repeat: the last one is tried first).
 * -1 when out of memory. */
static long strings_add(struct strings *st, const char *s, bool dedup)
{
	if (dedup)
		for (size_t i = st->n; i-- > 0 && i + 8 >= st->n;)
			if (strcmp(st->v[i], s) == 0)
				return (long)i;
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 16;
		char **v = realloc(st->v, cap * sizeof(*v));
		if (!v)
			return -1;
		st->v = v;
		st->cap = cap;
	}
	if (!(st->v[st->n] = strdup(s)))
		return -1;
	st->bytes += strlen(s) + 1;
	return (long)st->n++;
}

static void strings_free(struct strings *st)
{
	for (size_t i = 0; i < st->n; i++)
		free(st->v[i]);
	free(st->v);
}

/* Copy every string of st after the entries at area; *ptrs[i] gets string i's copy. */
static void strings_place(const struct strings *st, char *area, const char **copies)
{
	for (size_t i = 0; i < st->n; i++) {
		size_t len = strlen(st->v[i]) + 1;
		memcpy(area, st->v[i], len);
		copies[i] = area;
		area += len;
	}
}

/* Room for extra more items of size bytes in *v (cap items now). */
static int grow(vad_client *c, void **v, size_t *cap, size_t n, size_t extra, size_t size)
{
	if (n + extra <= *cap)
		return VAD_OK;
	if (n + extra > LIST_MAX)
		return libvad_failf(c, VAD_EPROTO,
				    "the daemon's listing passed %u entries; stopped there",
				    LIST_MAX);
	size_t ncap = *cap ? *cap * 2 : 256;
	while (ncap < n + extra)
		ncap *= 2;
	void *nv = realloc(*v, ncap * size);
	if (!nv)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	*v = nv;
	*cap = ncap;
	return VAD_OK;
}

/* ---- ranges --------------------------------------------------------------------------------- */

static int ranges_page(vad_client *c, const char *client, uint64_t cursor, Vad__Response **r)
{
	Vad__RangesRequest m = VAD__RANGES_REQUEST__INIT;
	m.client = (char *)client;
	m.cursor = cursor;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_RANGES;
	req.ranges = &m;
	return libvad_rpc(c, &req, VAD__RESPONSE__RESULT_RANGES, r, NULL);
}

int vad_session_ranges(vad_client *c, const char *client, size_t max, struct vad_held_list **out)
{
	if (!c || !client || !out)
		return libvad_fail(c, VAD_EINVAL,
				   "vad_session_ranges: client, name or out is NULL");
	struct vad_held_range *v = NULL;
	size_t n = 0, cap = 0;
	size_t *name_of = NULL, name_cap = 0;
	struct strings names = {0};
	uint64_t cursor = 0, session = 0, total = 0;
	bool left = false;
	int err;
	for (;;) {
		Vad__Response *r;
		if ((err = ranges_page(c, client, cursor, &r)) != VAD_OK)
			break;
		const Vad__RangesReply *p = r->ranges;
		session = p->session_id;
		total = p->total;
		size_t take = p->n_ranges;
		if (max && take > max - n)
			take = max - n;
		if ((err = grow(c, (void **)&v, &cap, n, take, sizeof(*v))) == VAD_OK)
			err = grow(c, (void **)&name_of, &name_cap, n, take, sizeof(*name_of));
		for (size_t i = 0; err == VAD_OK && i < take; i++) {
			const Vad__HeldRange *h = p->ranges[i];
			long k = strings_add(&names, h->arena, true);
			if (k < 0) {
				err = libvad_fail(c, VAD_ENOMEM, NULL);
				break;
			}
			name_of[n] = (size_t)k;
			v[n++] = (struct vad_held_range){.offset = h->offset,
							 .size = h->size,
							 .refs = h->refs,
							 .holders = h->holders,
							 .shared = h->shared,
							 .age_ms = h->age_ms};
		}
		left = p->more || take < p->n_ranges;
		bool again = err == VAD_OK && p->more && !(max && n >= max);
		/* The cursor is a slot of the session's table: it only moves forward. */
		if (again && p->next <= cursor)
			err = libvad_failf(c, VAD_EPROTO,
					   "the daemon's ranges listing did not advance past %llu",
					   (unsigned long long)cursor);
		cursor = p->next;
		vad__response__free_unpacked(r, NULL);
		if (err != VAD_OK || !again)
			break;
	}
	struct vad_held_list *l = NULL;
	const char **copies = NULL;
	if (err == VAD_OK) {
		l = malloc(sizeof(*l) + n * sizeof(*v) + names.n * sizeof(*copies) + names.bytes);
		if (!l)
			err = libvad_fail(c, VAD_ENOMEM, NULL);
	}
	if (err == VAD_OK) {
		l->ranges = (struct vad_held_range *)(l + 1);
		copies = (const char **)&l->ranges[n];
		strings_place(&names, (char *)&copies[names.n], copies);
		for (size_t i = 0; i < n; i++) {
			l->ranges[i] = v[i];
			l->ranges[i].arena = copies[name_of[i]];
		}
		l->session_id = session;
		l->total = total;
		l->n = n;
		l->truncated = left;
		*out = l;
	}
	free(v);
	free(name_of);
	strings_free(&names);
	return err;
}

/* ---- tokens --------------------------------------------------------------------------------- */

static int tokens_page(vad_client *c, bool show, uint64_t cursor, Vad__Response **r)
{
	Vad__TokensRequest m = VAD__TOKENS_REQUEST__INIT;
	m.cursor = cursor;
	m.show_tokens = show;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_TOKENS;
	req.tokens = &m;
	return libvad_rpc(c, &req, VAD__RESPONSE__RESULT_TOKENS, r, NULL);
}

int vad_tokens(vad_client *c, int show_tokens, size_t max, struct vad_token_list **out)
{
	if (!c || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_tokens: client or out is NULL");
	struct vad_token_info *v = NULL;
	size_t n = 0, cap = 0;
	size_t *name_of = NULL, *token_of = NULL, name_cap = 0, token_cap = 0;
	struct strings strs = {0};
	uint64_t cursor = 0, total = 0;
	bool left = false;
	int err;
	if (strings_add(&strs, "", false) < 0) /* index 0: no token string */
		return libvad_fail(c, VAD_ENOMEM, NULL);
	for (;;) {
		Vad__Response *r;
		if ((err = tokens_page(c, show_tokens != 0, cursor, &r)) != VAD_OK)
			break;
		const Vad__TokensReply *p = r->tokens;
		total = p->total;
		size_t take = p->n_tokens;
		if (max && take > max - n)
			take = max - n;
		if ((err = grow(c, (void **)&v, &cap, n, take, sizeof(*v))) == VAD_OK &&
		    (err = grow(c, (void **)&name_of, &name_cap, n, take, sizeof(size_t))) ==
			VAD_OK)
			err = grow(c, (void **)&token_of, &token_cap, n, take, sizeof(size_t));
		for (size_t i = 0; err == VAD_OK && i < take; i++) {
			const Vad__TokenInfo *t = p->tokens[i];
			long k = strings_add(&strs, t->arena, true);
			long tk = t->token[0] ? strings_add(&strs, t->token, false) : 0;
			if (k < 0 || tk < 0) {
				err = libvad_fail(c, VAD_ENOMEM, NULL);
				break;
			}
			name_of[n] = (size_t)k;
			token_of[n] = (size_t)tk;
			v[n++] = (struct vad_token_info){.offset = t->offset,
							 .size = t->size,
							 .age_ms = t->age_ms,
							 .ttl_left_ms = t->ttl_left_ms,
							 .expires = t->expires,
							 .single_use = t->single_use,
							 .holders = t->holders,
							 .uid = t->uid};
		}
		left = p->more || take < p->n_tokens;
		bool again = err == VAD_OK && p->more && !(max && n >= max);
		/* The cursor is a token's number in share order: it only moves forward. */
		if (again && p->next <= cursor)
			err = libvad_failf(c, VAD_EPROTO,
					   "the daemon's token listing did not advance past %llu",
					   (unsigned long long)cursor);
		cursor = p->next;
		vad__response__free_unpacked(r, NULL);
		if (err != VAD_OK || !again)
			break;
	}
	struct vad_token_list *l = NULL;
	if (err == VAD_OK) {
		l = malloc(sizeof(*l) + n * sizeof(*v) + strs.n * sizeof(char *) + strs.bytes);
		if (!l)
			err = libvad_fail(c, VAD_ENOMEM, NULL);
	}
	if (err == VAD_OK) {
		l->tokens = (struct vad_token_info *)(l + 1);
		const char **copies = (const char **)&l->tokens[n];
		strings_place(&strs, (char *)&copies[strs.n], copies);
		for (size_t i = 0; i < n; i++) {
			l->tokens[i] = v[i];
			l->tokens[i].arena = copies[name_of[i]];
			l->tokens[i].token = copies[token_of[i]];
		}
		l->total = total;
		l->n = n;
		l->truncated = left;
		*out = l;
	}
	free(v);
	free(name_of);
	free(token_of);
	strings_free(&strs);
	return err;
}

/* ---- kill ----------------------------------------------------------------------------------- */

int vad_kill(vad_client *c, const char *client, struct vad_killed *out)
{
	if (!c || !client)
		return libvad_fail(c, VAD_EINVAL, "vad_kill: client or name is NULL");
	Vad__Kill m = VAD__KILL__INIT;
	m.client = (char *)client;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_KILL;
	req.kill = &m;
	Vad__Response *r;
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_KILL, &r, NULL);
	if (err != VAD_OK)
		return err;
	if (out) {
		const Vad__KillReply *k = r->kill;
		memset(out, 0, sizeof(*out));
		out->session_id = k->session_id;
		out->pid = k->pid;
		out->uid = k->uid;
		strncpy(out->name, k->name, sizeof(out->name) - 1);
		out->held_bytes = k->held_bytes;
		out->held_ranges = k->held_ranges;
	}
	vad__response__free_unpacked(r, NULL);
	return VAD_OK;
}

/* ---- config --------------------------------------------------------------------------------- */

int vad_config(vad_client *c, struct vad_config_list **out)
{
	if (!c || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_config: client or out is NULL");
	Vad__ConfigRequest m = VAD__CONFIG_REQUEST__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_CONFIG;
	req.config = &m;
	Vad__Response *r;
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_CONFIG, &r, NULL);
	if (err != VAD_OK)
		return err;
	const Vad__ConfigReply *p = r->config;
	size_t bytes = sizeof(struct vad_config_list) + p->n_keys * sizeof(struct vad_config_key) +
		       strlen(p->path) + 1;
	for (size_t i = 0; i < p->n_keys; i++)
		bytes += strlen(p->keys[i]->section) + strlen(p->keys[i]->key) +
			 strlen(p->keys[i]->value) + strlen(p->keys[i]->source) + 4;
	struct vad_config_list *l = malloc(bytes);
	if (!l) {
		vad__response__free_unpacked(r, NULL);
		return libvad_fail(c, VAD_ENOMEM, NULL);
	}
	l->keys = (struct vad_config_key *)(l + 1);
	char *area = (char *)&l->keys[p->n_keys];
	l->n = p->n_keys;
	l->truncated = p->truncated;
	for (size_t i = 0; i < p->n_keys; i++) {
		const char *src[4] = {p->keys[i]->section, p->keys[i]->key, p->keys[i]->value,
				      p->keys[i]->source};
		const char *dst[4];
		for (int k = 0; k < 4; k++) {
			size_t len = strlen(src[k]) + 1;
			memcpy(area, src[k], len);
			dst[k] = area;
			area += len;
		}
		l->keys[i] = (struct vad_config_key){dst[0], dst[1], dst[2], dst[3]};
	}
	memcpy(area, p->path, strlen(p->path) + 1);
	l->path = area;
	*out = l;
	vad__response__free_unpacked(r, NULL);
	return VAD_OK;
}
