/* handler_holds.c - who holds what: the ranges of one session (vactl ranges), the live share
 * tokens (vactl tokens) and an administrator's kill of a session (vactl kill). A non-admin
 * sees only sessions and tokens of its own uid, and never a token string; see
 * docs/SERVICE.md, Who holds what. */
#include "handler.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handler_internal.h"
#include "latency.h"
#include "log.h"
#include "session.h"

/* Bytes a reply keeps for its own fields besides its list. */
#define REPLY_SLACK 256

/* ---- naming a session: its id, or a pid or name only one session has -------------------- */

struct find_ctx {
	const char *client;
	bool numeric;
	uint64_t num;
	bool every; /* an admin: every session; else only those of uid */
	uint32_t uid;
	uint64_t by_id;	 /* the session with that id, 0 for none */
	uint64_t pid[3]; /* sessions with that pid (first three), and how many */
	size_t n_pid;
	uint64_t name[3];
	size_t n_name;
};

/* Called with holders_lock held: does this session answer to the name? */
static void find_one(void *arg, struct vad_holder *h)
{
	struct find_ctx *f = arg;
	const struct vad_session *o = h->owner;
	if (!o || (!f->every && (uint32_t)o->peer.uid != f->uid))
		return;
	if (f->numeric && o->id == f->num)
		f->by_id = o->id;
	/* A killed session stays listed until its worker closes it; it no longer answers to
	 * a pid or a name, so killing the last of two twins right after the first is not
	 * refused as ambiguous. */
	if (vad_session_killed(o))
		return;
	if (f->numeric && f->num <= UINT32_MAX && (uint64_t)o->peer.pid == f->num) {
		if (f->n_pid < 3)
			f->pid[f->n_pid] = o->id;
		f->n_pid++;
	}
	if (strcmp(o->name, f->client) == 0) {
		if (f->n_name < 3)
			f->name[f->n_name] = o->id;
		f->n_name++;
	}
}

/* "3, 7, 9 and 2 more" */
static void list_ids(char *buf, size_t len, const uint64_t *ids, size_t n)
{
	size_t used = 0;
	for (size_t i = 0; i < n && i < 3 && used < len; i++)
		used +=
		    (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, i ? ", " : "", ids[i]);
	if (n > 3 && used < len)
		snprintf(buf + used, len - used, " and %zu more", n - 3);
}

/* The id of the session `client` names that s may look at: a session id, else a pid or a name
 * only one such session has. 0 after an error reply. */
static uint64_t find_session(struct vad_session *s, const char *client, struct vad_reply *r)
{
	char esc[VAD_ESCAPE_BUF];
	if (!client[0]) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"name a session: its id (as 'vactl clients' shows), or a pid or "
				"name only one session has");
		return 0;
	}
	struct find_ctx f = {.client = client, .every = s->admin, .uid = (uint32_t)s->peer.uid};
	char *end;
	unsigned long long v = strtoull(client, &end, 10);
	f.numeric = client[0] >= '0' && client[0] <= '9' && !*end;
	f.num = v;
	vad_registry_for_each_holder(s->svc->reg, find_one, &f);
	if (f.by_id)
		return f.by_id;
	const uint64_t *ids = f.n_pid ? f.pid : f.name;
	size_t n = f.n_pid ? f.n_pid : f.n_name;
	if (n == 1)
		return ids[0];
	const char *whose = s->admin ? "" : " of your uid";
	if (n == 0) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"no session%s has the id, pid or name '%s' ('vactl clients' lists "
				"them)",
				whose, ESC(esc, client));
		return 0;
	}
	char list[96];
	list_ids(list, sizeof(list), ids, n);
	vad_reply_error(r, VAD__ERROR__EINVAL,
			"%zu sessions%s have the %s '%s' (sessions %s): name one by its id", n,
			whose, f.n_pid ? "pid" : "name", ESC(esc, client), list);
	return 0;
}

/* The name a listing gives arena slot i ("" if it closed): from the session's scratch. */
static char *slot_name(struct vad_session *s, unsigned i)
{
	struct vad_arena *a = vad_arena_pin(s->svc->tenants, i);
	char *name = scratch_strdup(s, a ? a->conf.name : "");
	if (a)
		vad_arena_unpin(s->svc->tenants, a);
	return name;
}

/* How many rows of at most row bytes fit one frame beside the reply's own fields. */
static size_t rows_fit(struct vad_session *s, size_t row, size_t asked)
{
	size_t frame = vad_service_max_frame(s->svc);
	size_t n = frame > REPLY_SLACK + row ? (frame - REPLY_SLACK) / row : 1;
	return asked && asked < n ? asked : n;
}

/* ---- ranges --------------------------------------------------------------------------------- */

struct ranges_ctx {
	uint64_t id;
	bool found;
	uint64_t cursor, total;
	struct vad_held_info *out;
	size_t max, n;
};

static void list_ranges(void *arg, struct vad_holder *h)
{
	struct ranges_ctx *c = arg;
	if (c->found || !h->owner || h->owner->id != c->id)
		return;
	c->found = true;
	c->n = vad_holder_list(h, &c->cursor, c->out, c->max, &c->total);
}

void handle_ranges(struct vad_session *s, const Vad__RangesRequest *m, struct vad_reply *r)
{
	uint64_t id = find_session(s, m->client, r);
	if (!id)
		return;
	/* A row: the arena's name, five numbers and a flag. */
	size_t max = rows_fit(s, VAD_NAME_MAX + 2 + 64, m->max_ranges);
	struct ranges_ctx c = {.id = id, .cursor = m->cursor, .max = max};
	c.out = scratch_array(s, max, sizeof(*c.out));
	Vad__HeldRange *rows = scratch_array(s, max, sizeof(*rows));
	Vad__HeldRange **ptrs = scratch_array(s, max, sizeof(*ptrs));
	if (!c.out || !rows || !ptrs) {
		out_of_memory(r, "listing ranges");
		return;
	}
	vad_registry_for_each_holder(s->svc->reg, list_ranges, &c);
	if (!c.found) {
		vad_reply_error(r, VAD__ERROR__EINVAL, "session %" PRIu64 " went away meanwhile",
				id);
		return;
	}
	uint64_t now_ms = vad_now_ns() / 1000000u;
	unsigned last = UINT32_MAX;
	char *name = NULL;
	for (size_t i = 0; i < c.n; i++) {
		const struct vad_held_info *x = &c.out[i];
		if (x->arena != last) {
			name = slot_name(s, x->arena);
			last = x->arena;
		}
		Vad__HeldRange *o = &rows[i];
		vad__held_range__init(o);
		o->arena = name ? name : (char *)"";
		o->offset = x->offset;
		o->size = x->size;
		o->refs = x->refs;
		o->holders = x->holders;
		o->shared = x->shared;
		o->age_ms = now_ms > x->born_ms ? now_ms - x->born_ms : 0;
		ptrs[i] = o;
	}
	Vad__RangesReply *o = &r->u.ranges;
	vad__ranges_reply__init(o);
	o->session_id = id;
	o->ranges = ptrs;
	o->n_ranges = c.n;
	o->more = c.cursor != 0;
	o->next = c.cursor;
	o->total = c.total;
	r->resp.result_case = VAD__RESPONSE__RESULT_RANGES;
	r->resp.ranges = o;
}

/* ---- tokens --------------------------------------------------------------------------------- */

void handle_tokens(struct vad_session *s, const Vad__TokensRequest *m, struct vad_reply *r)
{
	if (m->show_tokens && !s->admin) {
		vad_reply_error(r, VAD__ERROR__EPERM,
				"only an administrator may see token strings (--show-tokens); "
				"without it you see your own uid's tokens");
		return;
	}
	if (m->show_tokens && !m->cursor) /* who read the strings that let anyone attach */
		vad_session_log(s, VAD_LOG_NOTICE,
				"session %llu ('%s', pid %d, uid %u) lists share token strings",
				(unsigned long long)s->id, s->name, (int)s->peer.pid,
				(unsigned)s->peer.uid);
	/* A row: the arena's name, a token and eight numbers. */
	size_t max = rows_fit(s, VAD_NAME_MAX + 2 + (m->show_tokens ? VAD_TOKEN_CHARS + 2 : 0) + 72,
			      m->max_tokens);
	struct vad_token_info *out = scratch_array(s, max, sizeof(*out));
	Vad__TokenInfo *rows = scratch_array(s, max, sizeof(*rows));
	Vad__TokenInfo **ptrs = scratch_array(s, max, sizeof(*ptrs));
	if (!out || !rows || !ptrs) {
		out_of_memory(r, "listing tokens");
		return;
	}
	uint64_t next = 0;
	bool more = false;
	size_t n = vad_registry_list_tokens(s->svc->reg, m->cursor, s->admin, (uint32_t)s->peer.uid,
					    out, max, &next, &more);
	unsigned last = UINT32_MAX;
	char *name = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct vad_token_info *x = &out[i];
		if (x->arena != last) {
			name = slot_name(s, x->arena);
			last = x->arena;
		}
		Vad__TokenInfo *o = &rows[i];
		vad__token_info__init(o);
		o->arena = name ? name : (char *)"";
		o->offset = x->offset;
		o->size = x->size;
		o->age_ms = x->age_ms;
		o->ttl_left_ms = x->ttl_left_ms;
		o->expires = x->expires;
		o->single_use = x->single_use;
		o->holders = x->holders;
		o->uid = x->uid;
		if (m->show_tokens) {
			o->token = scratch_strdup(s, x->token);
			if (!o->token) {
				out_of_memory(r, "listing tokens");
				return;
			}
		}
		ptrs[i] = o;
	}
	Vad__TokensReply *o = &r->u.tokens;
	vad__tokens_reply__init(o);
	o->tokens = ptrs;
	o->n_tokens = n;
	o->more = more;
	o->next = next;
	o->total = s->admin ? vad_registry_tokens(s->svc->reg) : 0;
	r->resp.result_case = VAD__RESPONSE__RESULT_TOKENS;
	r->resp.tokens = o;
}

/* ---- kill ----------------------------------------------------------------------------------- */

struct kill_ctx {
	uint64_t id;
	uint32_t by;
	bool found, first; /* first: this kill is the one that marked it */
	uint32_t pid, uid;
	char name[VAD_NAME_MAX + 1];
	uint64_t bytes, refs;
};

static void kill_one(void *arg, struct vad_holder *h)
{
	struct kill_ctx *k = arg;
	struct vad_session *o = h->owner;
	if (k->found || !o || o->id != k->id)
		return;
	k->found = true;
	k->pid = (uint32_t)o->peer.pid;
	k->uid = (uint32_t)o->peer.uid;
	snprintf(k->name, sizeof(k->name), "%s", o->name[0] ? o->name : "(no hello yet)");
	k->bytes = __atomic_load_n(&h->held_bytes, __ATOMIC_RELAXED);
	k->refs = __atomic_load_n(&h->held_refs, __ATOMIC_RELAXED);
	k->first = vad_session_kill(o, k->by);
}

void handle_kill(struct vad_session *s, const Vad__Kill *m, struct vad_reply *r)
{
	if (!admin_allowed(s, "kill", r))
		return;
	uint64_t id = find_session(s, m->client, r);
	if (!id)
		return;
	if (id == s->id) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"session %" PRIu64 " is the one asking; a client ends its own "
				"session by disconnecting",
				id);
		return;
	}
	struct kill_ctx k = {.id = id, .by = (uint32_t)s->peer.uid};
	vad_registry_for_each_holder(s->svc->reg, kill_one, &k);
	if (k.first) /* after holders_lock: the workers' event bases have locks of their own */
		vad_service_wake_workers(s->svc);
	if (!k.found) {
		vad_reply_error(r, VAD__ERROR__EINVAL, "session %" PRIu64 " went away meanwhile",
				id);
		return;
	}
	if (k.first) {
		char b[32], detail[384];
		snprintf(detail, sizeof(detail),
			 "session %" PRIu64 " (pid %u, uid %u, '%s') disconnected by '%s' (uid %u, "
			 "session %" PRIu64 "); it held %s in %" PRIu64 " references",
			 id, k.pid, k.uid, k.name, s->name, (unsigned)s->peer.uid, s->id,
			 SZ(b, k.bytes), k.refs);
		log_notice("vactl kill: %s", detail);
		vad_service_client_event(s->svc, "session-killed", detail);
	}
	Vad__KillReply *o = &r->u.kill;
	vad__kill_reply__init(o);
	o->session_id = id;
	o->pid = k.pid;
	o->uid = k.uid;
	memcpy(r->text, k.name, sizeof(k.name));
	o->name = r->text;
	o->held_bytes = k.bytes;
	o->held_ranges = k.refs;
	r->resp.result_case = VAD__RESPONSE__RESULT_KILL;
	r->resp.kill = o;
}
