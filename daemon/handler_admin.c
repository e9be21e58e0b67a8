/* handler_admin.c - the operations behind vactl: stats, arenas, clients, and the admin-only
 * purge, reload, check and walk. See handler.h. */
#include "handler.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit.h"
#include "frame.h"
#include "handler_internal.h"
#include "log.h"
#include "op_stats.h"
#include "saturate.h"
#include "session.h"
#include "units.h"
#include "waitq.h"

/* May this session run admin operation op? Otherwise an EPERM reply that says who may. */
bool admin_allowed(struct vad_session *s, const char *op, struct vad_reply *r)
{
	if (s->admin)
		return true;
	if (s->svc->has_admin_group)
		vad_reply_error(r, VAD__ERROR__EPERM,
				"admin operation '%s' needs root or group '%s'", op,
				s->svc->admin_group);
	else
		vad_reply_error(
		    r, VAD__ERROR__EPERM,
		    "admin operation '%s' needs root or the daemon's user (uid %u); set "
		    "admin_group in vad.conf to allow a group",
		    op, (unsigned)s->svc->daemon_uid);
	vad_session_log(
	    s, VAD_LOG_INFO, "session %llu (pid %d, uid %u, '%s'): refused admin operation '%s'",
	    (unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid, s->name, op);
	return false;
}

/* ---- stats / arenas / clients ----------------------------------------------------------- */

/* Arena a's figures into o, its name copied to the session's scratch (a tenant arena may
 * close once unpinned, before the reply is sent). */
static void fill_stats(struct vad_session *s, Vad__ArenaStats *o, const struct vad_arena *a)
{
	struct va_stats st;
	va_get_stats(a->vs, &st);
	vad__arena_stats__init(o);
	o->name = scratch_strdup(s, a->conf.name);
	if (!o->name)
		o->name = (char *)"";
	o->size = st.size;
	o->quantum = st.quantum;
	o->busy_bytes = st.busy_bytes;
	o->free_bytes = st.free_bytes;
	o->lazy_bytes = st.lazy_bytes;
	o->pooled_bytes = st.pooled_bytes;
	o->busy_blocks = st.busy_blocks;
	o->free_blocks = st.free_blocks;
	o->largest_free = st.largest_free;
	o->allocs = st.allocs;
	o->frees = st.frees;
	o->fails = st.fails;
	o->drains = st.drains;
	o->released_bytes = st.released_bytes;
	o->free_released_bytes = st.free_released_bytes;
	o->release_calls = st.release_calls;
	o->pool_hits = st.pool_hits;
	o->lazy_blocks = st.lazy_blocks;
	o->pooled_blocks = st.pooled_blocks;
	o->resident_bytes = vad_arena_resident_bytes(a);
	vad_commit_fill_stats(o, a, &st);
	vad_waitq_fill_stats(o, s->svc, a->index);
}

/* Which arenas a stats, purge or check request means: every one (no name), a configured
 * arena, every tenant arena of a section with tenancy, or one tenant arena by NAME@ID. */
struct arena_filter {
	bool all;
	bool full; /* by NAME@ID */
	const char *name;
	unsigned sec; /* otherwise: the section */
};

/* Read name into f; false after an ENOARENA reply. */
static bool arena_filter_parse(struct vad_session *s, const char *name, struct arena_filter *f,
			       struct vad_reply *r)
{
	memset(f, 0, sizeof(*f));
	f->name = name;
	if (!name[0]) {
		f->all = true;
		return true;
	}
	if (strchr(name, '@')) {
		f->full = true;
		return true;
	}
	if (vad_section_find(s->svc->tenants, name, &f->sec) != 0) {
		no_such_arena(r, name);
		return false;
	}
	return true;
}

static bool arena_filter_match(const struct arena_filter *f, const struct vad_arena *a)
{
	if (f->all)
		return true;
	if (f->full)
		return strcmp(a->conf.name, f->name) == 0;
	return a->section == f->sec;
}

bool stats_visible(struct vad_session *s, const struct vad_arena *a)
{
	return s->allowed[a->index] || (a->tenant && s->admin);
}

/* Pin every arena f matches that visible (NULL: every one) accepts into out (n_slots of
 * room); returns how many. Give them back with unpin_all. */
static size_t pin_matching(struct vad_session *s, const struct arena_filter *f,
			   bool (*visible)(struct vad_session *, const struct vad_arena *),
			   struct vad_arena **out)
{
	size_t n = 0;
	for (size_t i = 0; i < s->svc->n_slots; i++) {
		struct vad_arena *a = vad_arena_pin(s->svc->tenants, i);
		if (!a)
			continue;
		if (arena_filter_match(f, a) && (!visible || visible(s, a)))
			out[n++] = a;
		else
			vad_arena_unpin(s->svc->tenants, a);
	}
	return n;
}

static void unpin_all(struct vad_session *s, struct vad_arena **arenas, size_t n)
{
	for (size_t i = 0; i < n; i++)
		vad_arena_unpin(s->svc->tenants, arenas[i]);
}

/* Arena rows one stats reply carries at most: an ArenaStats row is under 256 bytes. */
static size_t stats_rows_max(const struct vad_service *svc)
{
	size_t frame = vad_service_max_frame(svc);
	return frame > 1024 ? (frame - 1024) / 256 : 1;
}

/* One operation's histogram into o at a resolution of step buckets (1: every bucket of
 * latency.h, 4: powers of two, 0: none); only bounds where the count grows. */
static bool fill_op_histogram(struct vad_session *s, Vad__OpStats *o,
			      const struct vad_latency_sum *h, unsigned step)
{
	o->n_bucket_below_ns = o->n_bucket_count = 0;
	if (!step)
		return true;
	size_t n = 0;
	for (unsigned b = 0; b < VAD_LAT_BUCKETS; b += step) {
		uint64_t in = 0;
		for (unsigned k = b; k < b + step; k++)
			in += h->counts[k];
		n += in != 0;
	}
	uint64_t *below = scratch_array(s, n ? n : 1, sizeof(*below));
	uint64_t *count = scratch_array(s, n ? n : 1, sizeof(*count));
	if (!below || !count)
		return false;
	uint64_t cum = 0;
	size_t i = 0;
	for (unsigned b = 0; b < VAD_LAT_BUCKETS; b += step) {
		uint64_t in = 0;
		for (unsigned k = b; k < b + step; k++)
			in += h->counts[k];
		if (!in)
			continue;
		cum += in;
		below[i] = vad_latency_bucket_upper(b + step - 1);
		count[i++] = cum;
	}
	o->bucket_below_ns = below;
	o->bucket_count = count;
	o->n_bucket_below_ns = o->n_bucket_count = n;
	return true;
}

/* The per-operation and per-error-code counters into o, the histograms as fine as fit in
 * budget bytes. Returns the bytes they take, or SIZE_MAX when out of memory. */
static size_t fill_op_stats(struct vad_session *s, Vad__StatsReply *o, size_t budget)
{
	struct vad_op_stats_sum *sum = scratch_array(s, 1, sizeof(*sum));
	Vad__OpStats *ops = scratch_array(s, VAD_OPI_COUNT, sizeof(*ops));
	Vad__OpStats **op_ptrs = scratch_array(s, VAD_OPI_COUNT, sizeof(*op_ptrs));
	Vad__ErrorCount *errs = scratch_array(s, VAD_ERROR_MAX + 1, sizeof(*errs));
	Vad__ErrorCount **err_ptrs = scratch_array(s, VAD_ERROR_MAX + 1, sizeof(*err_ptrs));
	if (!sum || !ops || !op_ptrs || !errs || !err_ptrs)
		return SIZE_MAX;
	vad_op_stats_sum(s->svc->ops, sum);
	size_t bytes = 0;
	size_t n_errs = 0;
	for (int c = 1; c <= VAD_ERROR_MAX; c++) {
		if (!sum->codes[c] || !vad_error_known(c))
			continue;
		Vad__ErrorCount *e = &errs[n_errs];
		vad__error_count__init(e);
		e->code = (char *)vad_error_name(c);
		e->number = (uint32_t)c;
		e->count = sum->codes[c];
		bytes += vad__error_count__get_packed_size(e) + 3;
		err_ptrs[n_errs++] = e;
	}
	static const unsigned steps[] = {1, 4, 0};
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		size_t op_bytes = 0;
		for (unsigned i = 0; i < VAD_OPI_COUNT; i++) {
			Vad__OpStats *op = &ops[i];
			vad__op_stats__init(op);
			op->name = (char *)vad_op_index_name((enum vad_op_index)i);
			op->count = sum->count[i];
			op->errors = sum->errors[i];
			if (!fill_op_histogram(s, op, &sum->lat[i], steps[k]))
				return SIZE_MAX;
			op_bytes += vad__op_stats__get_packed_size(op) + 3;
			op_ptrs[i] = op;
		}
		if (bytes + op_bytes <= budget || !steps[k]) {
			bytes += op_bytes;
			break;
		}
	}
	o->ops = op_ptrs;
	o->n_ops = VAD_OPI_COUNT;
	o->errors = err_ptrs;
	o->n_errors = n_errs;
	return bytes;
}

void handle_stats(struct vad_session *s, const Vad__StatsRequest *m, struct vad_reply *r)
{
	struct vad_service *svc = s->svc;
	struct arena_filter f;
	if (!arena_filter_parse(s, m->arena, &f, r))
		return;
	if (!f.all && !f.full && !s->allowed[f.sec]) {
		unsigned ai; /* the sentence of a refused use */
		use_arena(s, m->arena, &ai, r);
		return;
	}
	vad_session_pin_tenants(s);
	struct vad_arena **pinned = scratch_array(s, svc->n_slots, sizeof(*pinned));
	Vad__StatsReply *o = &r->u.stats;
	vad__stats_reply__init(o);
	/* The operations' counters first: what they take (a quarter of the frame at most, their
	 * histograms coarser if need be) leaves fewer arena rows. */
	size_t ops_bytes = pinned ? fill_op_stats(s, o, vad_service_max_frame(svc) / 4) : 0;
	if (!pinned || ops_bytes == SIZE_MAX) {
		out_of_memory(r, "building stats");
		return;
	}
	size_t n = pin_matching(s, &f, stats_visible, pinned);
	size_t rows_max = stats_rows_max(svc);
	rows_max = rows_max > ops_bytes / 256 + 1 ? rows_max - ops_bytes / 256 - 1 : 1;
	size_t rows = n < rows_max ? n : rows_max;
	if (rows < n)
		log_warn("stats: %zu arena%s left out to stay within max_frame", n - rows,
			 vad_plural(n - rows));
	Vad__ArenaStats *all = scratch_array(s, rows ? rows : 1, sizeof(*all));
	Vad__ArenaStats **ptrs = scratch_array(s, rows ? rows : 1, sizeof(*ptrs));
	if (!all || !ptrs) {
		unpin_all(s, pinned, n);
		out_of_memory(r, "building stats");
		return;
	}
	for (size_t i = 0; i < rows; i++) {
		fill_stats(s, &all[i], pinned[i]);
		ptrs[i] = &all[i];
	}
	unpin_all(s, pinned, n);
	if (f.full && n == 0) {
		no_such_arena(r, m->arena);
		return;
	}
	o->n_arenas = rows;
	o->arenas = ptrs;
	o->clients = __atomic_load_n(&svc->reg->n_holders, __ATOMIC_RELAXED);
	o->uptime_ms = vad_service_uptime_ms(svc);
	o->held_bytes = __atomic_load_n(&s->holder.held_bytes, __ATOMIC_RELAXED);
	o->held_ranges = __atomic_load_n(&s->holder.held_refs, __ATOMIC_RELAXED);
	/* The service total grows once per batch: add this batch's requests, this one too. */
	o->requests = __atomic_load_n(&svc->requests, __ATOMIC_RELAXED) + s->requests -
		      s->requests_counted + 1;
	o->shares = vad_registry_tokens(svc->reg);
	r->resp.result_case = VAD__RESPONSE__RESULT_STATS;
	r->resp.stats = o;
}

/* May the session see tenant arena a in the arenas listing: its own, or any for an admin. */
static bool listing_visible(struct vad_session *s, const struct vad_arena *a)
{
	return a->tenant && (s->admin || s->allowed[a->index]);
}

void handle_arenas(struct vad_session *s, struct vad_reply *r)
{
	struct vad_service *svc = s->svc;
	vad_session_pin_tenants(s);
	struct vad_arena **pinned = scratch_array(s, svc->n_slots, sizeof(*pinned));
	struct arena_filter every = {.all = true};
	size_t n_tenants = pinned ? pin_matching(s, &every, listing_visible, pinned) : 0;
	size_t room = stats_rows_max(svc);
	if (svc->n_arenas + n_tenants > room) {
		log_warn("arenas listing: %zu tenant arenas left out to stay within max_frame",
			 svc->n_arenas + n_tenants - room);
		unpin_all(s, pinned + (room > svc->n_arenas ? room - svc->n_arenas : 0),
			  n_tenants - (room > svc->n_arenas ? room - svc->n_arenas : 0));
		n_tenants = room > svc->n_arenas ? room - svc->n_arenas : 0;
	}
	size_t n = svc->n_arenas + n_tenants;
	Vad__ArenaInfo *all = scratch_array(s, n, sizeof(*all));
	Vad__ArenaInfo **ptrs = scratch_array(s, n, sizeof(*ptrs));
	char **names = scratch_array(s, n_tenants ? n_tenants : 1, sizeof(*names));
	if (!pinned || !all || !ptrs || !names) {
		if (pinned)
			unpin_all(s, pinned, n_tenants);
		out_of_memory(r, "listing arenas");
		return;
	}
	for (size_t i = 0; i < svc->n_arenas; i++) {
		if (svc->arenas[i])
			fill_info(&all[i], svc->arenas[i], svc->arenas[i]->conf.name,
				  s->allowed[i]);
		else
			fill_section_info(&all[i], vad_section_conf(svc->tenants, (unsigned)i),
					  vad_section_tenants(svc->tenants, (unsigned)i),
					  s->allowed[i]);
		all[i].read_only = s->reader[i];
		ptrs[i] = &all[i];
	}
	for (size_t k = 0; k < n_tenants; k++) {
		struct vad_arena *a = pinned[k];
		names[k] = scratch_strdup(s, a->conf.name); /* it may close once unpinned */
		Vad__ArenaInfo *info = &all[svc->n_arenas + k];
		fill_info(info, a, names[k] ? names[k] : "", s->allowed[a->index]);
		info->backing =
		    (char *)(a->conf.backing[0] ? scratch_strdup(s, a->conf.backing) : "memfd");
		if (!info->backing)
			info->backing = (char *)"";
		ptrs[svc->n_arenas + k] = info;
	}
	unpin_all(s, pinned, n_tenants);
	vad__arenas_reply__init(&r->u.arenas);
	r->u.arenas.n_arenas = n;
	r->u.arenas.arenas = ptrs;
	r->resp.result_case = VAD__RESPONSE__RESULT_ARENAS;
	r->resp.arenas = &r->u.arenas;
}

struct clients_ctx {
	struct vad_session *s;
	Vad__ClientInfo **list;
	size_t n, cap;
	size_t budget; /* bytes left before the reply would pass max_frame */
	size_t dropped;
	struct vad_limits limits;
	bool oom;
};

/* Called with holders_lock held: copy what the listing needs. */
static void collect_client(void *arg, struct vad_holder *h)
{
	struct clients_ctx *c = arg;
	struct vad_session *o = h->owner;
	if (c->oom || !o)
		return; /* no session: holds restored from the state file (persist.h) */
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		Vad__ClientInfo **list = scratch_array(c->s, cap, sizeof(*list));
		if (!list) {
			c->oom = true;
			return;
		}
		if (c->n)
			memcpy(list, c->list, c->n * sizeof(*list));
		c->list = list;
		c->cap = cap;
	}
	Vad__ClientInfo *ci = vad_scratch_alloc(&c->s->scratch, sizeof(*ci));
	char *name = scratch_strdup(c->s, o->name[0] ? o->name : "(no hello yet)");
	if (!ci || !name) {
		c->oom = true;
		return;
	}
	vad__client_info__init(ci);
	ci->session_id = o->id;
	ci->pid = (uint32_t)o->peer.pid;
	ci->uid = (uint32_t)o->peer.uid;
	ci->gid = (uint32_t)o->peer.gid;
	ci->name = name;
	ci->held_bytes = __atomic_load_n(&h->held_bytes, __ATOMIC_RELAXED);
	ci->held_ranges = __atomic_load_n(&h->held_refs, __ATOMIC_RELAXED);
	ci->allocs = __atomic_load_n(&o->allocs, __ATOMIC_RELAXED);
	ci->frees = __atomic_load_n(&o->frees, __ATOMIC_RELAXED);
	ci->connected_ms = o->connected_ms;
	ci->failed_attaches = __atomic_load_n(&o->attach_failures, __ATOMIC_RELAXED);
	/* The uid's use against its limits: what an operator compares when one uid crowds out
	 * the others (reservations included, as quotas count them). */
	ci->uid_held_bytes = __atomic_load_n(&h->uid->held, __ATOMIC_RELAXED);
	ci->uid_held_ranges = __atomic_load_n(&h->uid->refs, __ATOMIC_RELAXED);
	ci->uid_quota_bytes = c->limits.quota_uid;
	ci->uid_max_ranges = c->limits.max_ranges_uid;
	size_t size = vad__client_info__get_packed_size(ci) + 4; /* tag and length */
	if (size > c->budget) {
		c->dropped++;
		return;
	}
	c->budget -= size;
	c->list[c->n++] = ci;
}

void handle_clients(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "clients", r))
		return;
	struct clients_ctx c = {.s = s, .limits = vad_service_limits(s->svc)};
	size_t max = vad_service_max_frame(s->svc);
	c.budget = max > 256 ? max - 256 : 0; /* room for the response's own fields */
	vad_registry_for_each_holder(s->svc->reg, collect_client, &c);
	if (c.oom) {
		out_of_memory(r, "listing clients");
		return;
	}
	if (c.dropped)
		log_warn("clients listing: %zu session%s left out to stay within max_frame",
			 c.dropped, vad_plural(c.dropped));
	vad__clients_reply__init(&r->u.clients);
	r->u.clients.n_clients = c.n;
	r->u.clients.clients = c.list;
	r->resp.result_case = VAD__RESPONSE__RESULT_CLIENTS;
	r->resp.clients = &r->u.clients;
}

/* ---- admin: purge / reload / check ------------------------------------------------------ */

void handle_purge(struct vad_session *s, const Vad__Purge *m, struct vad_reply *r)
{
	if (!admin_allowed(s, "purge", r))
		return;
	struct vad_service *svc = s->svc;
	struct arena_filter f;
	if (!arena_filter_parse(s, m->arena, &f, r))
		return;
	struct vad_arena **pinned = scratch_array(s, svc->n_slots, sizeof(*pinned));
	if (!pinned) {
		out_of_memory(r, "purging");
		return;
	}
	size_t n = pin_matching(s, &f, NULL, pinned);
	if (f.full && n == 0) {
		no_such_arena(r, m->arena);
		return;
	}
	/* Lazy and pooled ranges first (va_drain), then every free block (va_release_free):
	 * free space a client wrote into is memory too. What went back is the drop in resident
	 * bytes, per arena (a client may write elsewhere meanwhile: never below 0). */
	uint64_t released = 0, resident_before = 0, resident_after = 0, scanned = 0;
	uint64_t t0 = vad_now_ns();
	for (size_t i = 0; i < n; i++) {
		struct vad_arena *a = pinned[i];
		uint64_t before = vad_arena_resident_bytes(a);
		va_drain(a->vs);
		uint64_t passed = va_release_free(a->vs);
		uint64_t after = vad_arena_resident_bytes(a);
		vad_sat_add_into(&scanned, passed);
		vad_sat_add_into(&resident_before, before);
		vad_sat_add_into(&resident_after, after);
		if (before > after)
			vad_sat_add_into(&released, before - after);
	}
	unpin_all(s, pinned, n);
	uint64_t ms = (vad_now_ns() - t0) / 1000000;
	char b[32], rb[32], ra[32], sc[32];
	log_notice("purge by '%s' (uid %u): released %s (resident %s -> %s; %s of free space "
		   "looked at) in %" PRIu64 " ms",
		   s->name, (unsigned)s->peer.uid, SZ(b, released), SZ(rb, resident_before),
		   SZ(ra, resident_after), SZ(sc, scanned), ms);
	char detail[256];
	snprintf(detail, sizeof(detail),
		 "by '%s' (uid %u): released %" PRIu64 " bytes (resident %" PRIu64 " -> %" PRIu64
		 ") in %" PRIu64 " ms",
		 s->name, (unsigned)s->peer.uid, released, resident_before, resident_after, ms);
	vad_service_client_event(svc, "purge",
				 detail); /* only admins; never a daemon event's place */
	vad__purge_reply__init(&r->u.purge);
	r->u.purge.released_bytes = released;
	r->resp.result_case = VAD__RESPONSE__RESULT_PURGE;
	r->resp.purge = &r->u.purge;
}

void handle_reload(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "reload", r))
		return;
	char detail[sizeof(r->text)];
	if (vad_service_reload(s->svc, detail, sizeof(detail)) < 0) {
		log_warn("reload by '%s' (uid %u): %s", s->name, (unsigned)s->peer.uid, detail);
		vad_service_event(s->svc, "reload-failed", detail);
		vad_reply_error(r, VAD__ERROR__EINVAL, "%s", detail);
		return;
	}
	log_notice("reload by '%s' (uid %u): %s", s->name, (unsigned)s->peer.uid, detail);
	vad_service_event(s->svc, "reload", detail);
	memcpy(r->text, detail, sizeof(detail));
	vad__reload_reply__init(&r->u.reload);
	r->u.reload.detail = r->text;
	r->resp.result_case = VAD__RESPONSE__RESULT_RELOAD;
	r->resp.reload = &r->u.reload;
}

void handle_check(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "check", r))
		return;
	struct vad_service *svc = s->svc;
	bool ok = true;
	size_t used = 0;
	char msg[512];
	r->text[0] = '\0';
	size_t n_checked = 0;
	for (size_t i = 0; i < svc->n_slots; i++) {
		struct vad_arena *a = vad_arena_pin(svc->tenants, i);
		if (!a)
			continue;
		n_checked++;
		if (va_check(a->vs, msg, sizeof(msg)) != 0) {
			ok = false;
			used += (size_t)snprintf(r->text + used, sizeof(r->text) - used,
						 "%sarena '%s': %s", used ? "; " : "", a->conf.name,
						 msg);
			if (used >= sizeof(r->text))
				used = sizeof(r->text) - 1;
		}
		vad_arena_unpin(svc->tenants, a);
	}
	if (vad_registry_check(svc->reg, msg, sizeof(msg)) < 0) {
		ok = false;
		used += (size_t)snprintf(r->text + used, sizeof(r->text) - used, "%sregistry: %s",
					 used ? "; " : "", msg);
	}
	unsigned sessions = __atomic_load_n(&svc->reg->n_holders, __ATOMIC_RELAXED);
	uint64_t tokens = vad_registry_tokens(svc->reg);
	if (ok)
		snprintf(r->text, sizeof(r->text),
			 "%zu arena%s and the registry are consistent (%u session%s, %" PRIu64
			 " share token%s)",
			 n_checked, vad_plural(n_checked), sessions, vad_plural(sessions), tokens,
			 vad_plural(tokens));
	else
		log_err("check requested by '%s' found a problem: %s", s->name, r->text);
	vad__check_reply__init(&r->u.check);
	r->u.check.ok = ok;
	r->u.check.detail = r->text;
	r->resp.result_case = VAD__RESPONSE__RESULT_CHECK;
	r->resp.check = &r->u.check;
}

/* ---- admin: walk ------------------------------------------------------------------------ */

struct walk_item {
	uint64_t offset, size;
	unsigned kind, node;
};

struct walk_ctx {
	uint64_t from;
	struct walk_item *heap; /* max-heap by offset: the lowest `cap` eligible blocks */
	size_t n, cap;
	uint64_t eligible; /* blocks ending after from */
};

static void heap_sift_down(struct walk_item *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, top = i;
		if (l < n && h[l].offset > h[top].offset)
			top = l;
		if (r < n && h[r].offset > h[top].offset)
			top = r;
		if (top == i)
			return;
		struct walk_item t = h[i];
		h[i] = h[top];
		h[top] = t;
		i = top;
	}
}

/* Called with the whole space frozen: only keep the lowest blocks, no allocation. */
static int walk_block(void *arg, const struct va_block_info *b)
{
	struct walk_ctx *w = arg;
	if (b->start + b->size <= w->from)
		return 0;
	w->eligible++;
	struct walk_item it = {b->start, b->size, (unsigned)b->kind, b->node};
	if (w->n < w->cap) {
		size_t i = w->n++;
		w->heap[i] = it;
		while (i > 0 && w->heap[(i - 1) / 2].offset < w->heap[i].offset) {
			struct walk_item t = w->heap[i];
			w->heap[i] = w->heap[(i - 1) / 2];
			w->heap[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
	} else if (w->cap && it.offset < w->heap[0].offset) {
		w->heap[0] = it;
		heap_sift_down(w->heap, w->n, 0);
	}
	return 0;
}

static Vad__BlockKind block_kind(unsigned k)
{
	switch (k) {
	case VA_BLOCK_FREE:
		return VAD__BLOCK_KIND__FREE;
	case VA_BLOCK_LAZY:
		return VAD__BLOCK_KIND__LAZY;
	case VA_BLOCK_POOLED:
		return VAD__BLOCK_KIND__POOLED;
	default:
		return VAD__BLOCK_KIND__BUSY;
	}
}

/* A session that holds blocks of the page: its name goes with the first of them only. */
struct walk_session {
	const char *name; /* in the asker's scratch */
	uint64_t id;
	bool named; /* its name is in the reply already */
};

/* Who holds each busy block of a page: one session named, and how many hold it. */
struct walk_owner {
	struct walk_session *who; /* NULL: none listed */
	uint32_t holders;
};

struct walk_owners {
	struct vad_session *asker;
	struct walk_owner *o;	  /* per busy block of the page */
	struct vad_session *last; /* the holder seen last, and its record */
	struct walk_session *last_who;
};

/* Called with the registry's holders_lock and owner's holder lock held. */
static void walk_owner_seen(void *arg, size_t i, struct vad_session *owner)
{
	struct walk_owners *wo = arg;
	struct walk_owner *o = &wo->o[i];
	if (o->holders < UINT32_MAX)
		o->holders++;
	if (o->who)
		return;
	if (owner != wo->last) { /* holds come holder by holder: one record per holder */
		wo->last = owner;
		wo->last_who = scratch_array(wo->asker, 1, sizeof(*wo->last_who));
		if (wo->last_who)
			*wo->last_who = (struct walk_session){
			    .name = scratch_strdup(wo->asker, owner->name), .id = owner->id};
		if (wo->last_who && !wo->last_who->name)
			wo->last_who = NULL;
	}
	o->who = wo->last_who;
}

/* The owners of the page's busy blocks (heap sorted by offset); NULL when out of scratch
 * (the page goes without owners). */
static struct walk_owner *walk_owners(struct vad_session *s, struct vad_arena *a,
				      const struct walk_ctx *w, size_t **busy_of)
{
	size_t n_busy = 0;
	for (size_t i = 0; i < w->n; i++)
		n_busy += w->heap[i].kind == VA_BLOCK_BUSY;
	uint64_t *offsets = scratch_array(s, n_busy ? n_busy : 1, sizeof(*offsets));
	size_t *busy = scratch_array(s, w->n ? w->n : 1, sizeof(*busy));
	struct walk_owner *o = scratch_array(s, n_busy ? n_busy : 1, sizeof(*o));
	if (!offsets || !busy || !o)
		return NULL;
	memset(o, 0, (n_busy ? n_busy : 1) * sizeof(*o));
	for (size_t i = 0, k = 0; i < w->n; i++) {
		busy[i] = SIZE_MAX;
		if (w->heap[i].kind == VA_BLOCK_BUSY) {
			busy[i] = k;
			offsets[k++] = w->heap[i].offset;
		}
	}
	struct walk_owners wo = {.asker = s, .o = o};
	vad_registry_holders_of(s->svc->reg, a->index, offsets, n_busy, walk_owner_seen, &wo);
	*busy_of = busy;
	return o;
}

/* The walk of one arena, pinned by the caller. */
static void walk_arena(struct vad_session *s, const Vad__Walk *m, struct vad_arena *a,
		       struct vad_reply *r)
{
	/* A block costs at least 6 bytes on the wire: never keep more than one frame holds. */
	size_t max_frame = vad_service_max_frame(s->svc);
	size_t budget =
	    max_frame > 256 + strlen(a->conf.name) ? max_frame - 256 - strlen(a->conf.name) : 0;
	size_t cap = budget / 6;
	if (m->max_blocks && m->max_blocks < cap)
		cap = m->max_blocks;
	struct walk_ctx w = {.from = m->from, .cap = cap};
	w.heap = scratch_array(s, cap ? cap : 1, sizeof(*w.heap));
	if (!w.heap) {
		out_of_memory(r, "walking the arena");
		return;
	}
	va_walk(a->vs, walk_block, &w);

	/* Heap sort into ascending offsets. */
	for (size_t end = w.n; end > 1; end--) {
		struct walk_item t = w.heap[0];
		w.heap[0] = w.heap[end - 1];
		w.heap[end - 1] = t;
		heap_sift_down(w.heap, end - 1, 0);
	}
	size_t *busy_of = NULL;
	const struct walk_owner *owners = walk_owners(s, a, &w, &busy_of);
	Vad__Block *blocks = scratch_array(s, w.n ? w.n : 1, sizeof(*blocks));
	Vad__Block **ptrs = scratch_array(s, w.n ? w.n : 1, sizeof(*ptrs));
	if (!blocks || !ptrs) {
		out_of_memory(r, "walking the arena");
		return;
	}
	size_t taken = 0, used = 0;
	for (; taken < w.n; taken++) {
		Vad__Block *b = &blocks[taken];
		vad__block__init(b);
		b->offset = w.heap[taken].offset;
		b->size = w.heap[taken].size;
		b->kind = block_kind(w.heap[taken].kind);
		b->node = w.heap[taken].kind == VA_BLOCK_FREE ? 0 : w.heap[taken].node;
		if (owners && busy_of[taken] != SIZE_MAX && owners[busy_of[taken]].who) {
			/* The name once per session and page, its id on every block: a page of
			 * one session's ranges costs 3 bytes a block more, not its name each. */
			const struct walk_owner *ow = &owners[busy_of[taken]];
			if (!ow->who->named)
				b->owner = (char *)ow->who->name;
			ow->who->named = true;
			b->owner_session = ow->who->id;
			b->other_holders = ow->holders - 1;
		}
		size_t len = vad__block__get_packed_size(b) + 3; /* tag and length */
		if (used + len > budget)
			break;
		used += len;
		ptrs[taken] = b;
	}
	if (taken == 0 && w.eligible > 0) {
		vad_reply_error(r, VAD__ERROR__ETOOBIG,
				"max_frame %zu is too small to carry even one block of a walk",
				max_frame);
		return;
	}
	Vad__WalkReply *o = &r->u.walk;
	vad__walk_reply__init(o);
	o->arena = scratch_strdup(s, a->conf.name); /* a tenant arena may close once unpinned */
	if (!o->arena)
		o->arena = (char *)"";
	o->size = a->conf.size;
	o->quantum = a->conf.quantum;
	o->n_blocks = taken;
	o->blocks = ptrs;
	o->more = w.eligible > taken;
	if (o->more)
		o->next = blocks[taken - 1].offset + blocks[taken - 1].size;
	r->resp.result_case = VAD__RESPONSE__RESULT_WALK;
	r->resp.walk = o;
}

void handle_walk(struct vad_session *s, const Vad__Walk *m, struct vad_reply *r)
{
	if (!admin_allowed(s, "walk", r))
		return;
	struct arena_filter f;
	if (!arena_filter_parse(s, m->arena, &f, r))
		return;
	if (!f.full && vad_section_tenancy(s->svc->tenants, f.all ? s->svc->default_arena
								  : f.sec) != VAD_TENANCY_NONE) {
		const char *sec =
		    vad_section_conf(s->svc->tenants, f.all ? s->svc->default_arena : f.sec)->name;
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"arena '%s' has one arena per tenant: name one, like %s@1000 "
				"('vactl arenas' lists those open)",
				sec, sec);
		return;
	}
	if (f.all) { /* no name: the default arena */
		f.all = false;
		f.sec = s->svc->default_arena;
	}
	struct vad_arena *a = NULL;
	for (size_t i = 0; !a && i < s->svc->n_slots; i++) {
		struct vad_arena *c = vad_arena_pin(s->svc->tenants, i);
		if (c && arena_filter_match(&f, c))
			a = c;
		else
			vad_arena_unpin(s->svc->tenants, c);
	}
	if (!a) {
		no_such_arena(r, m->arena);
		return;
	}
	walk_arena(s, m, a, r);
	vad_arena_unpin(s->svc->tenants, a);
}
