/* handler.c - one function per protocol operation; see handler.h. */
#include "handler.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "log.h"
#include "ops.h"
#include "saturate.h"
#include "session.h"

void vad_reply_init(struct vad_reply *r, uint64_t id)
{
	vad__response__init(&r->resp);
	r->resp.id = id;
	r->fd = -1;
	r->text[0] = '\0';
}

void vad_reply_error(struct vad_reply *r, Vad__Error code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->text, sizeof(r->text), fmt, ap);
	va_end(ap);
	r->resp.error = code;
	r->resp.message = r->text;
	r->resp.result_case = VAD__RESPONSE__RESULT__NOT_SET;
	r->fd = -1;
}

const char *vad_op_name(Vad__Request__OpCase op)
{
	switch (op) {
#define OP_NAME(op, name, call)                                                                    \
	case VAD__REQUEST__OP_##op:                                                                \
		return name;
		VAD_OPS(OP_NAME)
#undef OP_NAME
	default:
		return "an unknown operation";
	}
}

/* ---- helpers ---------------------------------------------------------------------------- */

#define SZ(b, v) vad_format_size((v), (b), sizeof(b))

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

/* An arena name (or any string) a client sent, escaped for a reply or a log line. */
#define ESC(b, str) vad_escape((str), (b), sizeof(b))

static void no_such_arena(struct vad_reply *r, const char *name)
{
	char e[VAD_ESCAPE_BUF];
	vad_reply_error(r, VAD__ERROR__ENOARENA,
			"no arena named '%s'; 'vactl arenas' lists the arenas", ESC(e, name));
}

/* Bytes of v as a protobuf varint. */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static void *scratch_array(struct vad_session *s, size_t n, size_t elem)
{
	if (n && elem > SIZE_MAX / n)
		return NULL;
	return vad_scratch_alloc(&s->scratch, n * elem);
}

static char *scratch_strdup(struct vad_session *s, const char *str)
{
	size_t len = strlen(str) + 1;
	char *p = vad_scratch_alloc(&s->scratch, len);
	if (p)
		memcpy(p, str, len);
	return p;
}

static void out_of_memory(struct vad_reply *r, const char *what)
{
	vad_reply_error(r, VAD__ERROR__ENOMEM, "the daemon ran out of memory %s; try again later",
			what);
}

/* The arena a request names, checked against the peer's allow-list; NULL after an error
 * reply. */
static struct vad_arena *use_arena(struct vad_session *s, const char *name, unsigned *index,
				   struct vad_reply *r)
{
	struct vad_arena *a = vad_service_arena(s->svc, name, index);
	if (!a) {
		no_such_arena(r, name);
		return NULL;
	}
	if (!s->allowed[*index]) {
		vad_reply_error(
		    r, VAD__ERROR__EPERM,
		    "arena '%s' does not allow uid %u (gid %u); its allow_uids/allow_gids "
		    "in vad.conf decide who may use it",
		    a->conf.name, (unsigned)s->peer.uid, (unsigned)s->peer.gid);
		return NULL;
	}
	return a;
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

static bool admin_allowed(struct vad_session *s, const char *op, struct vad_reply *r)
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

static void fill_info(Vad__ArenaInfo *info, const struct vad_arena *a, bool allowed)
{
	vad__arena_info__init(info);
	info->name = (char *)a->conf.name;
	info->size = a->conf.size;
	info->quantum = a->conf.quantum;
	info->backing = (char *)(a->conf.backing[0] ? a->conf.backing : "memfd");
	info->allowed = allowed;
	info->unsealed = a->unsealed;
}

/* ---- hello ------------------------------------------------------------------------------ */

static void handle_hello(struct vad_session *s, const Vad__Hello *m, struct vad_reply *r)
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

	Vad__HelloReply *h = &r->u.hello;
	vad__hello_reply__init(h);
	h->version = VAD_PROTOCOL_VERSION;
	h->server = (char *)"vad " VAD_DAEMON_VERSION;
	h->session_id = s->id;
	h->default_arena = s->svc->arenas[s->svc->default_arena]->conf.name;
	h->admin = s->admin;
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

static void handle_alloc(struct vad_session *s, const Vad__Alloc *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = use_arena(s, m->arena, &ai, r);
	if (!a)
		return;
	struct vad_limits l = vad_service_limits(s->svc);
	char b1[EXACT_BUF], b2[EXACT_BUF];
	/* Either count ranges of size, or one per entry of sizes: never both readings at once. */
	if (m->n_sizes && m->count && m->count != m->n_sizes) {
		vad_reply_error(
		    r, VAD__ERROR__EINVAL,
		    "count %u does not match the %zu sizes given; send count 0 (or %zu) "
		    "with a list of sizes",
		    m->count, m->n_sizes, m->n_sizes);
		return;
	}
	if (m->n_sizes && m->size) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"size %" PRIu64 " and a list of %zu sizes were both given; send "
				"one or the other",
				m->size, m->n_sizes);
		return;
	}
	size_t n = m->n_sizes ? m->n_sizes : (m->count ? m->count : 1);

	if (n > l.max_batch) {
		vad_reply_error(r, VAD__ERROR__ETOOBIG,
				"a batch of %zu ranges exceeds max_batch %u; split it into smaller "
				"batches",
				n, l.max_batch);
		return;
	}
	uint64_t align = m->align;
	if (align & (align - 1)) {
		vad_reply_error(r, VAD__ERROR__EALIGN,
				"alignment %" PRIu64 " is not a power of two", align);
		return;
	}
	if (align > a->conf.size) {
		exact_pair(align, b1, a->conf.size, b2);
		vad_reply_error(r, VAD__ERROR__EALIGN,
				"alignment %s exceeds the size of arena '%s' (%s)", b1,
				a->conf.name, b2);
		return;
	}

	uint64_t *offsets = scratch_array(s, n, sizeof(uint64_t));
	uint64_t *sizes = scratch_array(s, n, sizeof(uint64_t));
	struct vad_range **ranges = scratch_array(s, n, sizeof(*ranges));
	if (!offsets || !sizes || !ranges) {
		out_of_memory(r, "decoding an alloc batch");
		return;
	}
	uint64_t q = a->conf.quantum, total = 0;
	size_t size_bytes = 0;
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
			return;
		}
		sizes[i] = (size + q - 1) & ~(q - 1); /* size <= arena size: no wrap */
		size_bytes += varint_len(sizes[i]);
		/* Checked: however many sizes a batch has, the total never wraps to a small one. */
		if (__builtin_add_overflow(total, sizes[i], &total) || total > a->conf.size) {
			vad_reply_error(
			    r, VAD__ERROR__ESIZE,
			    "the batch totals more than arena '%s' holds (%s) by range %zu "
			    "of %zu; ask for less",
			    a->conf.name, exact_size(a->conf.size, b2, sizeof(b2)), i + 1, n);
			return;
		}
	}
	if (n > 1) {
		/* The reply and the request that frees the batch again must fit max_frame too,
		 * or the client could allocate what it cannot free in one request. n is at most
		 * max_batch, so these sums are far from wrapping. */
		size_t per_offset = varint_len(a->conf.size - 1);
		size_t fixed = 64 + strlen(a->conf.name); /* ids, tags, lengths, the name */
		size_t need = fixed + n * per_offset + size_bytes;
		if (need > l.max_frame) {
			exact_pair(need, b1, l.max_frame, b2);
			vad_reply_error(
			    r, VAD__ERROR__ETOOBIG,
			    "a batch of %zu ranges needs a reply (and a free request) of "
			    "up to %s, more than max_frame %s; split it into smaller batches",
			    n, b1, b2);
			return;
		}
	}

	uint64_t held;
	struct vad_quota quota = vad_limits_quota(&l);
	enum vad_quota_kind qk = vad_registry_reserve(&s->holder, total, n, &quota, &held);
	if (qk != VAD_QUOTA_OK) {
		quota_error(s, r, qk, held, total, n);
		return;
	}

	uint64_t t0 = vad_now_ns();
	size_t got = 0, failed = 0;
	int rc = 0;
	for (; got < n; got++) {
		ranges[got] = vad_range_get();
		if (!ranges[got]) {
			rc = VA_ENOMEM;
			failed = got;
			break;
		}
	}
	/* One call for the batch: the allocator takes each node lock once per run of areas.
	 * The range objects are the owner tags the consistency check compares against. */
	if (rc == 0)
		rc =
		    va_alloc_batch(a->vs, n, sizes, align, (void *const *)ranges, offsets, &failed);
	if (rc == 0) {
		for (size_t i = 0; i < n; i++) {
			ranges[i]->offset = offsets[i];
			ranges[i]->size = sizes[i];
		}
		int irc = vad_registry_insert(s->svc->reg, &s->holder, ai, ranges, n);
		if (irc < 0) {
			/* All or nothing: give back what this batch got. */
			size_t freed = 0;
			int frc = va_free_batch(a->vs, n, offsets, NULL, &freed);
			if (frc < 0)
				vad_session_log(s, VAD_LOG_ERR,
						"session %llu: giving back range 0x%" PRIx64
						" of an alloc batch in '%s' failed: %s",
						(unsigned long long)s->id, offsets[freed],
						a->conf.name, va_strerror(frc));
			if (irc == -2) {
				for (size_t i = 0; i < n; i++)
					vad_range_put(ranges[i]);
				vad_registry_unreserve(&s->holder, total, n);
				quota_error(s, r, VAD_QUOTA_COUNTER,
					    __atomic_load_n(&s->svc->reg->arenas[ai].ref_bytes,
							    __ATOMIC_RELAXED),
					    total, n);
				return;
			}
			rc = VA_ENOMEM;
			failed = n;
		}
	}
	if (rc < 0) {
		for (size_t i = 0; i < got; i++)
			vad_range_put(ranges[i]);
		vad_registry_unreserve(&s->holder, total, n);
		alloc_failed(s, r, a, rc, failed < n ? sizes[failed] : total, align, failed, n);
		return;
	}
	vad_latency_record(&s->svc->alloc_latency[ai], vad_now_ns() - t0);
	__atomic_add_fetch(&s->allocs, n, __ATOMIC_RELAXED);

	Vad__AllocReply *ar = &r->u.alloc;
	vad__alloc_reply__init(ar);
	ar->arena = a->conf.name;
	ar->n_offsets = n;
	ar->offsets = offsets;
	ar->n_sizes = n;
	ar->sizes = sizes;
	r->resp.result_case = VAD__RESPONSE__RESULT_ALLOC;
	r->resp.alloc = ar;
}

static void handle_free(struct vad_session *s, const Vad__Free *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = vad_service_arena(s->svc, m->arena, &ai);
	if (!a) {
		no_such_arena(r, m->arena);
		return;
	}
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
	size_t i =
	    vad_registry_release_batch(s->svc->reg, &s->holder, ai, m->offsets, m->n_offsets);
	__atomic_add_fetch(&s->frees, i, __ATOMIC_RELAXED);
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

static void handle_map_arena(struct vad_session *s, const Vad__MapArena *m, struct vad_reply *r)
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
	s->fds_unconfirmed++;
	fill_info(&r->info, a, true);
	vad__map_arena_reply__init(&r->u.map_arena);
	r->u.map_arena.arena = &r->info;
	r->resp.result_case = VAD__RESPONSE__RESULT_MAP_ARENA;
	r->resp.map_arena = &r->u.map_arena;
	r->fd = a->fd;
}

static void handle_share(struct vad_session *s, const Vad__Share *m, struct vad_reply *r)
{
	unsigned ai;
	struct vad_arena *a = vad_service_arena(s->svc, m->arena, &ai);
	if (!a) {
		no_such_arena(r, m->arena);
		return;
	}
	int rc = vad_registry_share(s->svc->reg, &s->holder, ai, m->offset, r->token);
	if (rc == -1) {
		vad_reply_error(r, VAD__ERROR__ENOTHELD,
				"range 0x%" PRIx64
				" in arena '%s' is not held by this client; only "
				"a holder can share it",
				m->offset, a->conf.name);
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

static void handle_attach(struct vad_session *s, const Vad__Attach *m, struct vad_reply *r)
{
	struct vad_limits l = vad_service_limits(s->svc);
	struct vad_quota quota = vad_limits_quota(&l);
	struct vad_attach_result res;
	enum vad_attach_status st =
	    vad_registry_attach(s->svc->reg, &s->holder, m->token, s->allowed, &quota, &res);
	switch (st) {
	case VAD_ATTACH_OK:
		break;
	case VAD_ATTACH_MALFORMED:
		vad_reply_error(r, VAD__ERROR__ETOKEN,
				"the share token is malformed (%zu characters); a token is %d "
				"letters and digits",
				strlen(m->token), VAD_TOKEN_CHARS);
		return;
	case VAD_ATTACH_UNKNOWN:
		vad_reply_error(r, VAD__ERROR__ETOKEN,
				"no shared range has that token; it was mistyped or its range has "
				"been freed by every holder");
		return;
	case VAD_ATTACH_DENIED:
		vad_reply_error(r, VAD__ERROR__EPERM,
				"the token's range lies in arena '%s', which does not allow uid %u "
				"(gid %u)",
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
	ar->arena = s->svc->arenas[res.arena]->conf.name;
	ar->offset = res.offset;
	ar->size = res.size;
	r->resp.result_case = VAD__RESPONSE__RESULT_ATTACH;
	r->resp.attach = ar;
}

/* ---- stats / arenas / clients ----------------------------------------------------------- */

static void fill_stats(Vad__ArenaStats *o, const struct vad_arena *a)
{
	struct va_stats st;
	va_get_stats(a->vs, &st);
	vad__arena_stats__init(o);
	o->name = (char *)a->conf.name;
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
}

static void handle_stats(struct vad_session *s, const Vad__StatsRequest *m, struct vad_reply *r)
{
	struct vad_service *svc = s->svc;
	size_t first = 0, end = svc->n_arenas;
	if (m->arena[0]) {
		unsigned ai;
		if (!use_arena(s, m->arena, &ai, r))
			return;
		first = ai;
		end = ai + 1;
	}
	Vad__ArenaStats *all = scratch_array(s, end - first, sizeof(*all));
	Vad__ArenaStats **ptrs = scratch_array(s, end - first, sizeof(*ptrs));
	if (!all || !ptrs) {
		out_of_memory(r, "building stats");
		return;
	}
	size_t n = 0;
	for (size_t i = first; i < end; i++) {
		if (!s->allowed[i])
			continue;
		fill_stats(&all[n], svc->arenas[i]);
		ptrs[n] = &all[n];
		n++;
	}
	Vad__StatsReply *o = &r->u.stats;
	vad__stats_reply__init(o);
	o->n_arenas = n;
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

static void handle_arenas(struct vad_session *s, struct vad_reply *r)
{
	struct vad_service *svc = s->svc;
	Vad__ArenaInfo *all = scratch_array(s, svc->n_arenas, sizeof(*all));
	Vad__ArenaInfo **ptrs = scratch_array(s, svc->n_arenas, sizeof(*ptrs));
	if (!all || !ptrs) {
		out_of_memory(r, "listing arenas");
		return;
	}
	for (size_t i = 0; i < svc->n_arenas; i++) {
		fill_info(&all[i], svc->arenas[i], s->allowed[i]);
		ptrs[i] = &all[i];
	}
	vad__arenas_reply__init(&r->u.arenas);
	r->u.arenas.n_arenas = svc->n_arenas;
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
	bool oom;
};

/* Called with holders_lock held: copy what the listing needs. */
static void collect_client(void *arg, struct vad_holder *h)
{
	struct clients_ctx *c = arg;
	struct vad_session *o = h->owner;
	if (c->oom)
		return;
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
	size_t size = vad__client_info__get_packed_size(ci) + 4; /* tag and length */
	if (size > c->budget) {
		c->dropped++;
		return;
	}
	c->budget -= size;
	c->list[c->n++] = ci;
}

static void handle_clients(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "clients", r))
		return;
	struct clients_ctx c = {.s = s};
	size_t max = vad_service_max_frame(s->svc);
	c.budget = max > 256 ? max - 256 : 0; /* room for the response's own fields */
	vad_registry_for_each_holder(s->svc->reg, collect_client, &c);
	if (c.oom) {
		out_of_memory(r, "listing clients");
		return;
	}
	if (c.dropped)
		log_warn("clients listing: %zu sessions left out to stay within max_frame",
			 c.dropped);
	vad__clients_reply__init(&r->u.clients);
	r->u.clients.n_clients = c.n;
	r->u.clients.clients = c.list;
	r->resp.result_case = VAD__RESPONSE__RESULT_CLIENTS;
	r->resp.clients = &r->u.clients;
}

/* ---- admin: purge / reload / check ------------------------------------------------------ */

static void handle_purge(struct vad_session *s, const Vad__Purge *m, struct vad_reply *r)
{
	if (!admin_allowed(s, "purge", r))
		return;
	struct vad_service *svc = s->svc;
	size_t first = 0, end = svc->n_arenas;
	if (m->arena[0]) {
		unsigned ai;
		if (!vad_service_arena(svc, m->arena, &ai)) {
			no_such_arena(r, m->arena);
			return;
		}
		first = ai;
		end = ai + 1;
	}
	/* Lazy and pooled ranges first (va_drain), then every free block (va_release_free):
	 * free space a client wrote into is memory too. What went back is the drop in resident
	 * bytes, per arena (a client may write elsewhere meanwhile: never below 0). */
	uint64_t released = 0, resident_before = 0, resident_after = 0, scanned = 0;
	uint64_t t0 = vad_now_ns();
	for (size_t i = first; i < end; i++) {
		struct vad_arena *a = svc->arenas[i];
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

static void handle_reload(struct vad_session *s, struct vad_reply *r)
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

static void handle_check(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "check", r))
		return;
	struct vad_service *svc = s->svc;
	bool ok = true;
	size_t used = 0;
	char msg[512];
	r->text[0] = '\0';
	for (size_t i = 0; i < svc->n_arenas; i++) {
		if (va_check(svc->arenas[i]->vs, msg, sizeof(msg)) == 0)
			continue;
		ok = false;
		used += (size_t)snprintf(r->text + used, sizeof(r->text) - used, "%sarena '%s': %s",
					 used ? "; " : "", svc->arenas[i]->conf.name, msg);
		if (used >= sizeof(r->text))
			used = sizeof(r->text) - 1;
	}
	if (vad_registry_check(svc->reg, msg, sizeof(msg)) < 0) {
		ok = false;
		used += (size_t)snprintf(r->text + used, sizeof(r->text) - used, "%sregistry: %s",
					 used ? "; " : "", msg);
	}
	if (ok)
		snprintf(r->text, sizeof(r->text),
			 "%zu arena%s and the registry are consistent (%u sessions, %" PRIu64
			 " share tokens)",
			 svc->n_arenas, svc->n_arenas == 1 ? "" : "s",
			 __atomic_load_n(&svc->reg->n_holders, __ATOMIC_RELAXED),
			 vad_registry_tokens(svc->reg));
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

static void handle_walk(struct vad_session *s, const Vad__Walk *m, struct vad_reply *r)
{
	if (!admin_allowed(s, "walk", r))
		return;
	unsigned ai;
	struct vad_arena *a = vad_service_arena(s->svc, m->arena, &ai);
	if (!a) {
		no_such_arena(r, m->arena);
		return;
	}
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
	o->arena = a->conf.name;
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

/* ---- dispatch --------------------------------------------------------------------------- */

void vad_handle_request(struct vad_session *s, const Vad__Request *req, struct vad_reply *r)
{
	r->resp.id = req->id;
	switch (req->op_case) {
#define OP_DISPATCH(op, name, call)                                                                \
	case VAD__REQUEST__OP_##op:                                                                \
		call;                                                                              \
		break;
		VAD_OPS(OP_DISPATCH)
#undef OP_DISPATCH
	default:
		vad_reply_error(r, VAD__ERROR__EUNSUPPORTED,
				"this daemon does not know that operation (it speaks vad protocol "
				"%d); upgrade the daemon or use an older client",
				VAD_PROTOCOL_VERSION);
		break;
	}
}
