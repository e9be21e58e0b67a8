/* handler.c - the operations every client uses: hello, alloc, free, map-arena, share, unshare
 * and attach; the admin ones are handler_admin.c, the dispatch dispatch.c. See handler.h. */
#include "handler.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commit.h"
#include "frame.h"
#include "wire.h"
#include "log.h"
#include "saturate.h"
#include "handler_internal.h"
#include "ranges.h"
#include "session.h"
#include "waitq.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* Room for exact_size's longest form. */
#define EXACT_BUF 64

static const char *const size_units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

/* The largest binary unit not above v (index into size_units; 0 below 1 KiB). */
static unsigned size_unit(uint64_t v, uint64_t *unit)
{
	unsigned i = 0;
	*unit = 1;
	while (i + 1 < sizeof(size_units) / sizeof(size_units[0]) && v / *unit >= 1024) {
		*unit <<= 10;
		i++;
	}
	return i;
}

static const char *exact_size_as(uint64_t v, bool bytes, char *buf, size_t len);

/* Is v a whole number of its largest unit ("16 GiB", "512 B"), so the short form is exact? */
static bool size_is_round(uint64_t v)
{
	uint64_t unit;
	size_unit(v, &unit);
	return v % unit == 0;
}

/* v for a message that compares sizes: "16 GiB" when that is exact (or bytes is false and it
 * is), otherwise the bytes and a breakdown, "17179873280 B (16 GiB + 4 KiB)", so a rounded
 * form never hides a difference. */
static const char *exact_size_as(uint64_t v, bool bytes, char *buf, size_t len)
{
	uint64_t unit;
	unsigned i = size_unit(v, &unit);
	char rest[40] = "", part[32];
	if (v % unit)
		snprintf(rest, sizeof(rest), " + %s",
			 size_is_round(v % unit)
			     ? exact_size_as(v % unit, false, part, sizeof(part))
			     : vad_format_size(v % unit, part, sizeof(part)));
	if (!bytes && !rest[0])
		snprintf(buf, len, "%" PRIu64 " %s", v / unit, size_units[i]);
	else if (i == 0)
		snprintf(buf, len, "%" PRIu64 " B", v);
	else
		snprintf(buf, len, "%" PRIu64 " B (%" PRIu64 " %s%s)", v, v / unit, size_units[i],
			 rest);
	return buf;
}

static const char *exact_size(uint64_t v, char *buf, size_t len)
{
	return exact_size_as(v, false, buf, len);
}

/* Two sizes one message compares: both short when both are exact, otherwise both with their
 * bytes, so the reader compares like with like. */
static void exact_pair(uint64_t a, char *ba, uint64_t b, char *bb)
{
	bool bytes = !size_is_round(a) || !size_is_round(b);
	exact_size_as(a, bytes, ba, EXACT_BUF);
	exact_size_as(b, bytes, bb, EXACT_BUF);
}

/* The refusal of a request that needs want_bytes more bytes in want_ranges more ranges; held
 * is what the broken limit counts now (bytes, or ranges for the range limits). */
static void quota_error(struct vad_session *s, struct vad_reply *r, enum vad_quota_kind kind,
			uint64_t held, uint64_t want_bytes, uint64_t want_ranges)
{
	bool counts_ranges = kind == VAD_QUOTA_RANGES_CLIENT || kind == VAD_QUOTA_RANGES_UID;
	uint64_t want = counts_ranges ? want_ranges : want_bytes;
	struct vad_limits l = vad_service_limits(s->svc);
	char h[EXACT_BUF], q[EXACT_BUF], w[EXACT_BUF];
	switch (kind) {
	case VAD_QUOTA_OK:
	case VAD_QUOTA_CLIENT:
		exact_pair(held, h, l.quota_client, q);
		vad_reply_error(r, VAD__ERROR__EQUOTA,
				"quota exceeded: client '%s' holds %s of %s; this request needs %s "
				"more",
				s->name, h, q, exact_size(want, w, sizeof(w)));
		break;
	case VAD_QUOTA_UID:
		exact_pair(held, h, l.quota_uid, q);
		vad_reply_error(r, VAD__ERROR__EQUOTA,
				"quota exceeded: uid %u holds %s of %s; this request needs %s more",
				(unsigned)s->peer.uid, h, q, exact_size(want, w, sizeof(w)));
		break;
	case VAD_QUOTA_RANGES_CLIENT:
		vad_reply_error(r, VAD__ERROR__EQUOTA,
				"range limit exceeded: client '%s' holds %" PRIu64
				" ranges of max_ranges_client %" PRIu64
				"; this request needs %" PRIu64 " more",
				s->name, held, l.max_ranges_client, want);
		break;
	case VAD_QUOTA_RANGES_UID:
		vad_reply_error(r, VAD__ERROR__EQUOTA,
				"range limit exceeded: uid %u holds %" PRIu64
				" ranges of max_ranges_uid %" PRIu64 "; this request needs %" PRIu64
				" more (sessions still being torn down count until their ranges "
				"are back)",
				(unsigned)s->peer.uid, held, l.max_ranges_uid, want);
		break;
	case VAD_QUOTA_COUNTER:
		vad_reply_error(r, VAD__ERROR__EQUOTA,
				"refused: %" PRIu64 " bytes are held already and this request "
				"needs %s more, which would exceed 2^64 - 1 bytes, the most the "
				"daemon can count",
				held, SZ(w, want));
		break;
	}
	/* Operators look for refusals in vactl history; the session's event rate is bounded. */
	vad_session_event(s, "quota-refused", r->text);
}

/* ---- hello ------------------------------------------------------------------------------ */

void handle_hello(struct vad_session *s, const Vad__Hello *m, struct vad_reply *r)
{
	if (s->hello_done) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"this connection already said hello as '%s'; hello is sent once",
				s->name);
		return;
	}
	if (m->version != VAD_PROTOCOL_VERSION) {
		vad_reply_error(r, VAD__ERROR__EVERSION,
				"the client speaks vad protocol version %u but this daemon speaks "
				"version %d; use a libvad that matches the daemon",
				m->version, VAD_PROTOCOL_VERSION);
		vad_session_log(
		    s, VAD_LOG_INFO, "session %llu (pid %d, uid %u): refused protocol version %u",
		    (unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid, m->version);
		return;
	}
	char name[VAD_NAME_MAX + 1];
	vad_escape(m->name, name, sizeof(name)); /* listings, logs and replies stay printable */
	if (!name[0])
		snprintf(name, sizeof(name), "pid %d", (int)s->peer.pid);

	pthread_mutex_lock(&s->svc->reg->holders_lock); /* listings read the name under it */
	memcpy(s->name, name, sizeof(name));
	pthread_mutex_unlock(&s->svc->reg->holders_lock);
	s->hello_done = true;
	log_debug("session %llu: hello from '%s' (pid %d, uid %u, gid %u%s)",
		  (unsigned long long)s->id, s->name, (int)s->peer.pid, (unsigned)s->peer.uid,
		  (unsigned)s->peer.gid, s->admin ? ", admin" : "");

	struct vad_registry *reg = s->svc->reg;
	if (vad_random_bytes(s->secret, sizeof(s->secret)) == 0 && reg->state &&
	    !__atomic_load_n(&reg->state_frozen, __ATOMIC_RELAXED))
		s->secret_rec = vad_state_put_session(reg->state, s->holder.state_holder,
						      (uint32_t)s->peer.uid, s->secret);

	Vad__HelloReply *h = &r->u.hello;
	vad__hello_reply__init(h);
	h->version = VAD_PROTOCOL_VERSION;
	h->server = (char *)"vad " VAD_DAEMON_VERSION;
	h->session_id = s->id;
	h->default_arena = (char *)vad_section_conf(s->svc->tenants, s->svc->default_arena)->name;
	h->admin = s->admin;
	if (s->secret_rec) { /* resumable only when a restarted daemon can check the secret */
		h->resume_id = s->holder.state_holder;
		h->resume_secret.data = s->secret;
		h->resume_secret.len = sizeof(s->secret);
	}
	r->resp.result_case = VAD__RESPONSE__RESULT_HELLO;
	r->resp.hello = h;
}

/* ---- alloc / free ----------------------------------------------------------------------- */

static void alloc_failed(struct vad_session *s, struct vad_reply *r, const struct vad_arena *a,
			 int rc, uint64_t size, uint64_t align, size_t i, size_t n)
{
	char b1[EXACT_BUF], b2[EXACT_BUF], which[80] = "";
	if (n > 1)
		snprintf(which, sizeof(which), " (range %zu of %zu; none kept)", i + 1, n);
	switch (rc) {
	case VA_ENOSPC: {
		struct va_stats st;
		va_get_stats(a->vs, &st);
		exact_pair(size, b1, st.largest_free, b2);
		vad_reply_error(r, VAD__ERROR__ENOSPC,
				"arena '%s' has no free range of %s (largest free block %s)%s",
				a->conf.name, b1, b2, which);
		vad_session_event(s, "alloc-failed", r->text);
		break;
	}
	case VA_EALIGN:
		vad_reply_error(r, VAD__ERROR__EALIGN, "alignment %" PRIu64 " is not usable%s",
				align, which);
		break;
	case VA_ESIZE:
	case VA_EOVERFLOW:
		exact_pair(size, b1, a->conf.size, b2);
		vad_reply_error(r, VAD__ERROR__ESIZE,
				"size %s with alignment %" PRIu64
				" does not fit arena '%s' of %s%s",
				b1, align, a->conf.name, b2, which);
		break;
	case VA_ENOMEM:
		out_of_memory(r, "allocating range bookkeeping");
		break;
	default:
		vad_reply_error(r, VAD__ERROR__EINTERNAL, "the allocator failed: %s%s",
				va_strerror(rc), which);
		vad_session_log(
		    s, VAD_LOG_ERR, "session %llu: va_alloc(%" PRIu64 ", %" PRIu64 ") in '%s': %s",
		    (unsigned long long)s->id, size, align, a->conf.name, va_strerror(rc));
		break;
	}
}

/* How many ranges an alloc asks for (count, or one per entry of sizes: never both readings at
 * once), within max_batch; 0 after an error reply. */
static size_t alloc_batch_count(const Vad__Alloc *m, const struct vad_limits *l,
				struct vad_reply *r)
{
	if (m->n_sizes && m->count && m->count != m->n_sizes) {
		vad_reply_error(
		    r, VAD__ERROR__EINVAL,
		    "count %u does not match the %zu sizes given; send count 0 (or %zu) "
		    "with a list of sizes",
		    m->count, m->n_sizes, m->n_sizes);
		return 0;
	}
	if (m->n_sizes && m->size) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"size %" PRIu64 " and a list of %zu sizes were both given; send "
				"one or the other",
				m->size, m->n_sizes);
		return 0;
	}
	size_t n = m->n_sizes ? m->n_sizes : (m->count ? m->count : 1);
	if (n > l->max_batch) {
		vad_reply_error(r, VAD__ERROR__ETOOBIG,
				"a batch of %zu ranges exceeds max_batch %u; split it into smaller "
				"batches",
				n, l->max_batch);
		return 0;
	}
	return n;
}

/* Is align a power of two no larger than the arena? Otherwise an error reply. */
static bool alloc_align_ok(const struct vad_arena *a, uint64_t align, struct vad_reply *r)
{
	char b1[EXACT_BUF], b2[EXACT_BUF];
	if (align & (align - 1)) {
		vad_reply_error(r, VAD__ERROR__EALIGN,
				"alignment %" PRIu64 " is not a power of two", align);
		return false;
	}
	if (align > a->conf.size) {
		exact_pair(align, b1, a->conf.size, b2);
		vad_reply_error(r, VAD__ERROR__EALIGN,
				"alignment %s exceeds the size of arena '%s' (%s)", b1,
				a->conf.name, b2);
		return false;
	}
	return true;
}

/* The n requested sizes rounded up to the arena's quantum, with their total and the bytes
 * they take as varints; false after an error reply (a size of 0, or past the arena). */
static bool alloc_sizes(const struct vad_arena *a, const Vad__Alloc *m, size_t n, uint64_t *sizes,
			uint64_t *total, size_t *size_bytes, struct vad_reply *r)
{
	char b1[EXACT_BUF], b2[EXACT_BUF];
	uint64_t q = a->conf.quantum;
	*total = 0;
	*size_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t size = m->n_sizes ? m->sizes[i] : m->size;
		if (size == 0 || size > a->conf.size) {
			char which[64] = ""; /* formatted only on failure: batches stay cheap */
			if (n > 1)
				snprintf(which, sizeof(which), " (range %zu of %zu)", i + 1, n);
			if (size == 0)
				vad_reply_error(r, VAD__ERROR__ESIZE,
						"size 0 cannot be allocated%s", which);
			else {
				exact_pair(size, b1, a->conf.size, b2);
				vad_reply_error(r, VAD__ERROR__ESIZE,
						"size %s exceeds arena '%s' of %s%s", b1,
						a->conf.name, b2, which);
			}
			return false;
		}
		sizes[i] = (size + q - 1) & ~(q - 1); /* size <= arena size: no wrap */
		*size_bytes += vad_varint_len(sizes[i]);
		/* Checked: however many sizes a batch has, the total never wraps to a small one. */
		if (__builtin_add_overflow(*total, sizes[i], total) || *total > a->conf.size) {
			vad_reply_error(
			    r, VAD__ERROR__ESIZE,
			    "the batch totals more than arena '%s' holds (%s) by range %zu "
			    "of %zu; ask for less",
			    a->conf.name, exact_size(a->conf.size, b2, sizeof(b2)), i + 1, n);
			return false;
		}
	}
	return true;
}

/* Do the reply to a batch of n, and the request that frees it again, fit max_frame? Otherwise
 * the client could allocate what it cannot free in one request. n is at most max_batch, so
 * these sums are far from wrapping. */
static bool alloc_reply_fits(const struct vad_arena *a, size_t n, size_t size_bytes,
			     const struct vad_limits *l, struct vad_reply *r)
{
	if (n <= 1)
		return true;
	size_t per_offset = vad_varint_len(a->conf.size - 1);
	size_t need =
	    VAD_ALLOC_REPLY_FRAME_OVERHEAD + strlen(a->conf.name) + n * per_offset + size_bytes;
	if (need <= l->max_frame)
		return true;
	char b1[EXACT_BUF], b2[EXACT_BUF];
	exact_pair(need, b1, l->max_frame, b2);
	vad_reply_error(r, VAD__ERROR__ETOOBIG,
			"a batch of %zu ranges needs a reply (and a free request) of "
			"up to %s, more than max_frame %s; split it into smaller batches",
			n, b1, b2);
	return false;
}

/* Is the session only a reader of arena ai? Then r is the EREADONLY refusal of what (its
 * writers allocate, and share and revoke tokens: a reader could otherwise revoke or replace
 * the token a writer handed its other readers). */
static bool refused_to_reader(struct vad_session *s, unsigned ai, const struct vad_arena *a,
			      const char *what, struct vad_reply *r)
{
	if (!s->reader[ai])
		return false;
	vad_reply_error(r, VAD__ERROR__EREADONLY,
			"uid %u may only read arena '%s' (its reader_uids/reader_gids in vad.conf "
			"admit it, its allow_uids/allow_gids do not): it may attach, read and free "
			"ranges a writer shares, not %s",
			(unsigned)s->peer.uid, a->conf.name, what);
	return true;
}

/* Did an alloc fail only for want of room (the case a request may wait out)? */
static bool no_room(const struct vad_alloc_refusal *why)
{
	return why->quota == VAD_QUOTA_OK && !why->commit_errno && why->rc == VA_ENOSPC;
}

/* r: the refusal of an alloc of n ranges of sizes (total bytes) that vad_ranges_alloc
 * refused for why. */
static void alloc_refused(struct vad_session *s, struct vad_reply *r, struct vad_arena *a,
			  const struct vad_alloc_refusal *why, const uint64_t *sizes,
			  uint64_t total, uint64_t align, size_t n)
{
	if (why->quota != VAD_QUOTA_OK)
		quota_error(s, r, why->quota, why->held, total, n);
	else if (why->commit_errno)
		vad_commit_refusal(r, a, sizes[why->failed], why->commit_errno, why->failed, n);
	else
		alloc_failed(s, r, a, why->rc, why->failed < n ? sizes[why->failed] : total, align,
			     why->failed, n);
}

/* r: the grant of n ranges at offsets of sizes, in the arena named name. */
static void alloc_granted(struct vad_reply *r, const struct vad_arena *a, const char *name,
			  size_t n, uint64_t *offsets, uint64_t *sizes)
{
	Vad__AllocReply *ar = &r->u.alloc;
	vad__alloc_reply__init(ar);
	ar->arena = (char *)name;
	ar->n_offsets = n;
	ar->offsets = offsets;
	ar->n_sizes = n;
	ar->sizes = sizes;
	r->resp.result_case = VAD__RESPONSE__RESULT_ALLOC;
	r->resp.alloc = ar;
}

/* Queue the alloc m (n ranges of sizes, total bytes, in arena a at slot ai) to wait for room,
 * its reply deferred; or r the refusal when the waiter limits are reached or memory is out. */
static void wait_for_room(struct vad_session *s, struct vad_reply *r, struct vad_arena *a,
			  unsigned ai, const Vad__Alloc *m, size_t n, const uint64_t *sizes,
			  uint64_t total)
{
	struct vad_limits l = vad_service_limits(s->svc);
	char b[EXACT_BUF];
	exact_size(total, b, sizeof(b));
	if (s->n_waiting >= l.max_waiters_client) {
		vad_reply_error(r, VAD__ERROR__EBUSY,
				"arena '%s' has no room for %s now and this client already has %u "
				"allocations waiting, its limit (max_waiters_client %u); wait for "
				"their replies before asking for more",
				a->conf.name, b, s->n_waiting, l.max_waiters_client);
		vad_session_event(s, "wait-refused", r->text);
		return;
	}
	/* Taken before it is checked, so workers queueing at once never pass the limit. */
	unsigned all = __atomic_add_fetch(&s->svc->n_waiters, 1, __ATOMIC_RELAXED);
	if (all > l.max_waiters) {
		__atomic_sub_fetch(&s->svc->n_waiters, 1, __ATOMIC_RELAXED);
		vad_reply_error(
		    r, VAD__ERROR__EBUSY,
		    "arena '%s' has no room for %s now and %u allocations are waiting in "
		    "the daemon, its limit (max_waiters %u); try again later",
		    a->conf.name, b, all - 1, l.max_waiters);
		vad_session_event(s, "wait-refused", r->text);
		return;
	}
	if (vad_waitq_push(s, ai, r->resp.id, reply_arena_name(a, m->arena), n, sizes, m->align,
			   total, m->wait_ms) < 0) {
		__atomic_sub_fetch(&s->svc->n_waiters, 1, __ATOMIC_RELAXED);
		out_of_memory(r, "queueing an alloc to wait for room");
		return;
	}
	r->deferred = true;
}

void handle_alloc(struct vad_session *s, const Vad__Alloc *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = use_arena(s, m->arena, &ai, r);
	if (!a)
		return;
	if (refused_to_reader(s, ai, a, "allocate", r))
		return;
	struct vad_limits l = vad_service_limits(s->svc);
	size_t n = alloc_batch_count(m, &l, r);
	if (n == 0 || !alloc_align_ok(a, m->align, r))
		return;
	uint64_t *offsets = scratch_array(s, n, sizeof(uint64_t));
	uint64_t *sizes = scratch_array(s, n, sizeof(uint64_t));
	if (!offsets || !sizes) {
		out_of_memory(r, "decoding an alloc batch");
		return;
	}
	uint64_t total;
	size_t size_bytes;
	if (!alloc_sizes(a, m, n, sizes, &total, &size_bytes, r) ||
	    !alloc_reply_fits(a, n, size_bytes, &l, r))
		return;
	uint32_t wait_ms = s->worker ? m->wait_ms : 0; /* no event loop: nothing waits */
	struct vad_alloc_refusal why;
	/* First come first served: while others wait in this arena, a request that may wait
	 * goes behind them untried, however small (strict FCFS: the head may block it). */
	if (wait_ms && __atomic_load_n(&s->svc->waitqs[ai].n, __ATOMIC_ACQUIRE)) {
		if (vad_ranges_quota_check(s, total, n, &why) < 0) {
			quota_error(s, r, why.quota, why.held, total, n);
			return;
		}
		wait_for_room(s, r, a, ai, m, n, sizes, total);
		return;
	}
	if (vad_ranges_alloc(s, ai, n, sizes, m->align, total, offsets, &why) < 0) {
		if (wait_ms && no_room(&why))
			wait_for_room(s, r, a, ai, m, n, sizes, total);
		else
			alloc_refused(s, r, a, &why, sizes, total, m->align, n);
		return;
	}
	alloc_granted(r, a, reply_arena_name(a, m->arena), n, offsets, sizes);
}

bool vad_alloc_retry(struct vad_session *s, const struct vad_waiter *wt, struct vad_reply *r)
{
	struct vad_arena *a = s->svc->arenas[wt->ai]; /* pinned by the session */
	uint64_t *offsets = scratch_array(s, wt->n, sizeof(uint64_t));
	if (!offsets) {
		out_of_memory(r, "granting a waiting alloc");
		return true;
	}
	struct vad_alloc_refusal why;
	if (vad_ranges_alloc(s, wt->ai, wt->n, wt->sizes, wt->align, wt->total, offsets, &why) <
	    0) {
		if (no_room(&why))
			return false;
		alloc_refused(s, r, a, &why, wt->sizes, wt->total, wt->align, wt->n);
		return true;
	}
	alloc_granted(r, a, wt->arena, wt->n, offsets, wt->sizes);
	return true;
}

void handle_free(struct vad_session *s, const Vad__Free *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = held_arena(s, m->arena, &ai, r);
	if (!a)
		return;
	struct vad_limits l = vad_service_limits(s->svc);
	if (m->n_offsets == 0) {
		vad_reply_error(r, VAD__ERROR__EINVAL, "free needs at least one offset");
		return;
	}
	if (m->n_offsets > l.max_batch) {
		vad_reply_error(r, VAD__ERROR__ETOOBIG,
				"a batch of %zu ranges exceeds max_batch %u; split it into smaller "
				"batches",
				m->n_offsets, l.max_batch);
		return;
	}
	Vad__FreeReply *fr = &r->u.free;
	vad__free_reply__init(fr);
	size_t i = vad_ranges_release(s, ai, m->offsets, m->n_offsets);
	if (i < m->n_offsets) {
		if (m->n_offsets > 1)
			vad_reply_error(r, VAD__ERROR__ENOTHELD,
					"range 0x%" PRIx64
					" in arena '%s' is not held by this client "
					"(freed %zu of %zu; the rest were not tried)",
					m->offsets[i], a->conf.name, i, m->n_offsets);
		else
			vad_reply_error(r, VAD__ERROR__ENOTHELD,
					"range 0x%" PRIx64
					" in arena '%s' is not held by this client",
					m->offsets[i], a->conf.name);
	}
	fr->freed = (uint32_t)i;
	r->resp.result_case = VAD__RESPONSE__RESULT_FREE;
	r->resp.free = fr;
}

/* ---- map / share / attach --------------------------------------------------------------- */

void handle_map_arena(struct vad_session *s, const Vad__MapArena *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = use_arena(s, m->arena, &ai, r);
	if (!a)
		return;
	if (a->fd < 0) {
		vad_reply_error(r, VAD__ERROR__EINTERNAL, "arena '%s' has no file to map",
				a->conf.name);
		return;
	}
	/* Every fd sent counts against the daemon user's fds in flight (RLIMIT_NOFILE) until the
	 * client reads it: a client that asks and never reads must not exhaust that for all. */
	if (s->fds_unconfirmed >= VAD_FDS_UNREAD_MAX) {
		if (s->peer_read_all && s->peer_read_all(s->io_ctx))
			s->fds_unconfirmed = (unsigned)vad_session_fds_queued(s);
		if (s->fds_unconfirmed >= VAD_FDS_UNREAD_MAX) {
			vad_reply_error(r, VAD__ERROR__EBUSY,
					"%u arena fds sent on this connection are still unread; "
					"read the replies before asking for arena '%s' again",
					s->fds_unconfirmed, a->conf.name);
			vad_session_log(s, VAD_LOG_INFO,
					"session %llu (pid %d, uid %u, '%s'): refused a map-arena "
					"with %u arena fds unread",
					(unsigned long long)s->id, (int)s->peer.pid,
					(unsigned)s->peer.uid, s->name, s->fds_unconfirmed);
			return;
		}
	}
	/* A reader gets the read-only fd: the kernel, not libvad, keeps it from writing. */
	int fd = s->reader[ai] ? a->ro_fd : a->fd;
	if (fd < 0) {
		vad_reply_error(r, VAD__ERROR__EINTERNAL, "arena '%s' has no read-only file to map",
				a->conf.name);
		return;
	}
	s->fds_unconfirmed++;
	fill_info(&r->info, a, reply_arena_name(a, m->arena), true);
	r->info.read_only = s->reader[ai];
	vad__map_arena_reply__init(&r->u.map_arena);
	r->u.map_arena.arena = &r->info;
	r->resp.result_case = VAD__RESPONSE__RESULT_MAP_ARENA;
	r->resp.map_arena = &r->u.map_arena;
	r->fd = fd;
}

/* Make r the ENOTHELD reply for the range at offset of a, which only a holder may act on. */
static void not_held(struct vad_reply *r, uint64_t offset, const struct vad_arena *a,
		     const char *what)
{
	vad_reply_error(r, VAD__ERROR__ENOTHELD,
			"range 0x%" PRIx64 " in arena '%s' is not held by this client; only a "
			"holder can %s",
			offset, a->conf.name, what);
}

void handle_share(struct vad_session *s, const Vad__Share *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = held_arena(s, m->arena, &ai, r);
	if (!a || refused_to_reader(s, ai, a, "share them", r))
		return;
	struct vad_token_terms terms = {.single_use = m->single_use, .ttl_ms = m->ttl_ms};
	int rc = vad_registry_share_with(s->svc->reg, &s->holder, ai, m->offset, &terms, r->token);
	if (rc == -1) {
		not_held(r, m->offset, a, "share it");
		return;
	}
	if (rc == -2) {
		out_of_memory(r, "recording the share token");
		return;
	}
	if (rc < 0) {
		vad_reply_error(r, VAD__ERROR__EINTERNAL,
				"could not read randomness for a share token (getrandom failed); "
				"try again");
		return;
	}
	vad__share_reply__init(&r->u.share);
	r->u.share.token = r->token;
	r->resp.result_case = VAD__RESPONSE__RESULT_SHARE;
	r->resp.share = &r->u.share;
}

void handle_unshare(struct vad_session *s, const Vad__Unshare *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = held_arena(s, m->arena, &ai, r);
	if (!a || refused_to_reader(s, ai, a, "revoke their tokens", r))
		return;
	int rc = vad_registry_unshare(s->svc->reg, &s->holder, ai, m->offset);
	if (rc < 0) {
		not_held(r, m->offset, a, "revoke its token");
		return;
	}
	vad__unshare_reply__init(&r->u.unshare);
	r->u.unshare.revoked = rc == 1;
	r->resp.result_case = VAD__RESPONSE__RESULT_UNSHARE;
	r->resp.unshare = &r->u.unshare;
}

/* Make r the refusal of an attach whose token does not attach (st), counted against s. */
static void token_refused(struct vad_session *s, const Vad__Attach *m, enum vad_attach_status st,
			  struct vad_reply *r)
{
	switch (st) {
	case VAD_ATTACH_MALFORMED:
		vad_reply_error(r, VAD__ERROR__ETOKEN,
				"the share token is malformed (%zu characters); a token is %d "
				"letters and digits",
				strlen(m->token), VAD_TOKEN_CHARS);
		break;
	case VAD_ATTACH_FREED:
		vad_reply_error(r, VAD__ERROR__ETOKEN,
				"the share token's range has been freed by every holder");
		break;
	case VAD_ATTACH_REVOKED:
		vad_reply_error(r, VAD__ERROR__EREVOKED,
				"the share token was revoked by a holder of its range (unshare); "
				"ask a holder for a new one");
		break;
	case VAD_ATTACH_REPLACED:
		vad_reply_error(r, VAD__ERROR__EREVOKED,
				"the share token was revoked: its range was shared again since, "
				"and the newer token replaced it; ask a holder for the new one");
		break;
	case VAD_ATTACH_EXPIRED:
		vad_reply_error(r, VAD__ERROR__EEXPIRED,
				"the share token has expired (it was made with a time to live); "
				"ask a holder for a new one");
		break;
	case VAD_ATTACH_USED:
		vad_reply_error(r, VAD__ERROR__ETOKENUSED,
				"the share token was for a single attach, which has happened; ask "
				"a holder for a new one");
		break;
	default:
		vad_reply_error(r, VAD__ERROR__ETOKEN,
				"no shared range has that token, nor had it lately; it was "
				"mistyped, or it died long ago (revoked, used up, expired, or its "
				"range freed by every holder)");
		break;
	}
	vad_session_attach_failed(s, st == VAD_ATTACH_MALFORMED || st == VAD_ATTACH_UNKNOWN,
				  r->text);
}

void handle_attach(struct vad_session *s, const Vad__Attach *m, struct vad_reply *r)
{
	struct vad_limits l = vad_service_limits(s->svc);
	struct vad_quota quota = vad_limits_quota(&l);
	struct vad_attach_result res;
	vad_session_pin_tenants(s); /* the token may name this peer's own tenant arena */
	enum vad_attach_status st =
	    vad_registry_attach(s->svc->reg, &s->holder, m->token, s->allowed, &quota, &res);
	switch (st) {
	case VAD_ATTACH_OK:
		break;
	case VAD_ATTACH_MALFORMED:
	case VAD_ATTACH_UNKNOWN:
	case VAD_ATTACH_REVOKED:
	case VAD_ATTACH_REPLACED:
	case VAD_ATTACH_EXPIRED:
	case VAD_ATTACH_USED:
	case VAD_ATTACH_FREED:
		token_refused(s, m, st, r);
		return;
	case VAD_ATTACH_DENIED:
		if (res.arena >= s->svc->n_arenas) /* not pinned by us: never look inside */
			vad_reply_error(
			    r, VAD__ERROR__EPERM,
			    "the token's range lies in another tenant's arena; tenants "
			    "of an arena with tenancy cannot attach each other's ranges");
		else
			vad_reply_error(
			    r, VAD__ERROR__EPERM,
			    "the token's range lies in arena '%s', which does not allow "
			    "uid %u (gid %u)",
			    s->svc->arenas[res.arena]->conf.name, (unsigned)s->peer.uid,
			    (unsigned)s->peer.gid);
		return;
	case VAD_ATTACH_QUOTA:
		quota_error(s, r, res.quota, res.held, res.size, 1);
		return;
	case VAD_ATTACH_NOMEM:
		out_of_memory(r, "recording the new reference");
		return;
	}
	Vad__AttachReply *ar = &r->u.attach;
	vad__attach_reply__init(ar);
	ar->arena = s->svc->arenas[res.arena]->client_name;
	ar->offset = res.offset;
	ar->size = res.size;
	r->resp.result_case = VAD__RESPONSE__RESULT_ATTACH;
	r->resp.attach = ar;
}
