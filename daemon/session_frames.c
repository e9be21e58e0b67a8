/* session_frames.c - one connection's bytes to frames, requests (to the handlers) and replies
 * back to bytes, with no socket inside, so tests and the fuzzer drive it directly; see
 * session.h. */
#include "session.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastwire.h"
#include "frame.h"
#include "handler.h"
#include "log.h"
#include "op_stats.h"
#include "service.h"

#define IN_START (16u * 1024u) /* an idle session costs little */
#define IN_BUSY	 (64u * 1024u) /* a pipelining client gets reads this large */
#define OUT_KEEP (64u * 1024u) /* an empty output buffer larger than this is given back */

/* ---- input ------------------------------------------------------------------------------ */

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint8_t *vad_session_input_space(struct vad_session *s, size_t *cap)
{
	size_t max_cap = (size_t)vad_service_max_frame(s->svc) + VAD_FRAME_HEADER;
	size_t want = s->in_cap ? s->in_cap : IN_START;
	if (s->in_filled && want < IN_BUSY)
		want = IN_BUSY; /* the last read filled the buffer: the client pipelines */
	if (s->in_len >= VAD_FRAME_HEADER) {
		/* Unhandled bytes start with a partial frame (process() keeps it at the front). */
		size_t frame = (size_t)le32(s->in) + VAD_FRAME_HEADER;
		if (frame <= max_cap && frame > want)
			want = frame;
	}
	if (want > s->in_cap) {
		uint8_t *n = realloc(s->in, want);
		if (n) {
			s->in = n;
			s->in_cap = want;
		}
	}
	*cap = s->in_cap - s->in_len;
	return s->in ? s->in + s->in_len : NULL;
}

void vad_session_input_commit(struct vad_session *s, size_t n)
{
	s->in_len += n;
	s->in_filled = s->in_len == s->in_cap;
}

/* ---- output ----------------------------------------------------------------------------- */

/* Room for need more bytes at out_len; false when out of memory. */
static bool out_reserve(struct vad_session *s, size_t need)
{
	if (s->out_cap - s->out_len >= need)
		return true;
	if (s->out_head) {
		memmove(s->out, s->out + s->out_head, s->out_len - s->out_head);
		s->out_len -= s->out_head;
		s->out_head = 0;
		if (s->out_cap - s->out_len >= need)
			return true;
	}
	size_t cap = s->out_cap ? s->out_cap * 2 : 16384;
	while (cap - s->out_len < need)
		cap *= 2;
	uint8_t *n = realloc(s->out, cap);
	if (!n)
		return false;
	s->out = n;
	s->out_cap = cap;
	return true;
}

static bool push_mark(struct vad_session *s, uint64_t pos, int fd)
{
	if (s->n_marks == s->marks_cap) {
		if (s->marks_head) {
			memmove(s->marks, s->marks + s->marks_head,
				(s->n_marks - s->marks_head) * sizeof(*s->marks));
			s->n_marks -= s->marks_head;
			s->marks_head = 0;
		}
		if (s->n_marks == s->marks_cap) {
			size_t cap = s->marks_cap ? s->marks_cap * 2 : 8;
			struct vad_fd_mark *n = realloc(s->marks, cap * sizeof(*n));
			if (!n)
				return false;
			s->marks = n;
			s->marks_cap = cap;
		}
	}
	s->marks[s->n_marks].pos = pos;
	s->marks[s->n_marks].fd = fd;
	s->n_marks++;
	return true;
}

/* Append r as one frame; a failure to find memory breaks the stream, so the session closes. */
static void emit(struct vad_session *s, struct vad_reply *r)
{
	struct vad_fast_layout lay;
	size_t fast = vad_fast_response_size(&r->resp, &lay); /* 0: not one fastwire encodes */
	size_t body = fast ? fast : vad__response__get_packed_size(&r->resp);
	if (body > UINT32_MAX || !out_reserve(s, VAD_FRAME_HEADER + body)) {
		vad_session_log(s, VAD_LOG_ERR,
				"session %llu: out of memory for a reply of %zu bytes; closing it",
				(unsigned long long)s->id, body);
		s->closing = true;
		return;
	}
	if (r->fd >= 0 && !push_mark(s, s->out_sent + (s->out_len - s->out_head), r->fd)) {
		vad_session_log(s, VAD_LOG_ERR,
				"session %llu: out of memory queueing an arena fd; closing it",
				(unsigned long long)s->id);
		s->closing = true;
		return;
	}
	vad_frame_put_header(s->out + s->out_len, (uint32_t)body);
	if (fast)
		vad_fast_pack_response(&r->resp, &lay, s->out + s->out_len + VAD_FRAME_HEADER);
	else
		vad__response__pack(&r->resp, s->out + s->out_len + VAD_FRAME_HEADER);
	s->out_len += VAD_FRAME_HEADER + body;
}

bool vad_session_next_output(struct vad_session *s, const uint8_t **data, size_t *len, int *fd)
{
	size_t avail = s->out_len - s->out_head;
	if (!avail)
		return false;
	*data = s->out + s->out_head;
	*len = avail;
	*fd = -1;
	if (s->marks_head < s->n_marks) {
		const struct vad_fd_mark *m = &s->marks[s->marks_head];
		if (m->pos == s->out_sent) {
			*fd = m->fd;
			if (s->marks_head + 1 < s->n_marks)
				*len = (size_t)(m[1].pos - s->out_sent);
		} else {
			*len = (size_t)(m->pos - s->out_sent);
		}
	}
	return true;
}

void vad_session_output_done(struct vad_session *s, size_t n)
{
	s->out_head += n;
	s->out_sent += n;
	while (s->marks_head < s->n_marks && s->marks[s->marks_head].pos < s->out_sent)
		s->marks_head++;
	if (s->marks_head == s->n_marks)
		s->marks_head = s->n_marks = 0;
	if (s->out_head == s->out_len) {
		s->out_head = s->out_len = 0;
		if (s->out_cap > OUT_KEEP) {
			/* A burst is over: do not keep its buffer for the life of the session. */
			free(s->out);
			s->out = NULL;
			s->out_cap = 0;
		}
	}
}

void vad_session_reply(struct vad_session *s, struct vad_reply *r)
{
	emit(s, r);
	vad_scratch_reset(&s->scratch);
	/* Counted as an alloc's error, not as another request: it was counted when queued. */
	if (r->resp.error != VAD__ERROR__OK)
		vad_op_stats_error(s->svc->ops, VAD_OPI_ALLOC, (int)r->resp.error);
	if (s->replied)
		s->replied(s->io_ctx);
}

void vad_session_scratch_reset(struct vad_session *s)
{
	vad_scratch_reset(&s->scratch);
}

/* ---- frames ----------------------------------------------------------------------------- */

/* Handle one frame; returns the operation's index in the per-operation counters, and the
 * reply's error code in *error. */
static enum vad_op_index handle_frame(struct vad_session *s, const uint8_t *payload, size_t len,
				      int *error)
{
	enum vad_op_index op = VAD_OPI_OTHER;
	struct vad_reply r;
	vad_reply_init(&r, 0);
	/* Plain Alloc and Free go through the hand-written codec; anything it declines (other
	 * operations, unusual encodings, garbage) is protobuf-c's to decode or refuse. */
	Vad__Request *req = vad_fast_unpack_request(&s->scratch.pb, len, payload);
	if (!req)
		req = vad__request__unpack(&s->scratch.pb, len, payload);
	if (!req && s->scratch.failed) {
		vad_reply_error(&r, VAD__ERROR__ENOMEM,
				"the daemon ran out of memory decoding a request of %zu bytes; try "
				"again later",
				len);
	} else if (!req) {
		vad_reply_error(&r, VAD__ERROR__EPROTO,
				"could not decode a request of %zu bytes; the client does not "
				"speak vad protocol %d",
				len, VAD_PROTOCOL_VERSION);
	} else {
		r.resp.id = req->id;
		op = vad_op_index_of(req->op_case);
		if (!s->hello_done && req->op_case != VAD__REQUEST__OP_HELLO)
			vad_reply_error(&r, VAD__ERROR__ENOHELLO,
					"the first request must be hello; send Hello{name, "
					"version} before '%s'",
					vad_op_name(req->op_case));
		else
			vad_handle_request(s, req, &r);
	}
	*error = (int)r.resp.error;
	if (!r.deferred)
		emit(s, &r);
	vad_scratch_reset(&s->scratch);
	s->requests++;
	return op;
}

/* Answer a frame that breaks the stream, then let the connection close. */
static void broken_framing(struct vad_session *s, Vad__Error code, const char *fmt, uint32_t a,
			   uint32_t b)
{
	struct vad_reply r;
	vad_reply_init(&r, 0);
	vad_reply_error(&r, code, fmt, a, b);
	vad_session_log(
	    s, VAD_LOG_INFO, "session %llu (pid %d, uid %u, '%s'): %s; closing the connection",
	    (unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid, s->name, r.text);
	emit(s, &r);
	s->closing = true;
}

void vad_session_process(struct vad_session *s)
{
	uint32_t max = vad_service_max_frame(s->svc);
	size_t high = vad_service_high_watermark(s->svc);
	s->requests_counted = s->requests;
	size_t pos = 0;
	if (!s->in)
		return; /* nothing received yet */
	/* A request's latency runs from the end of the one before it in this pass (or the pass's
	 * start): one clock read per request. */
	uint64_t t0 = 0;
	bool serving = vad_service_serve_begin(s->svc);

	while (!s->closing && !s->pause_ms && vad_session_output_pending(s) < high) {
		size_t plen = 0;
		enum vad_frame_status st = vad_frame_peek(s->in + pos, s->in_len - pos, max, &plen);
		if (st == VAD_FRAME_NEED_MORE)
			break;
		if (st == VAD_FRAME_TOO_BIG) {
			broken_framing(
			    s, VAD__ERROR__ETOOBIG,
			    "a frame of %u bytes exceeds max_frame %u; the daemon cannot "
			    "find the next frame and closes the connection",
			    le32(s->in + pos), max);
			break;
		}
		if (st == VAD_FRAME_EMPTY) {
			broken_framing(s, VAD__ERROR__EPROTO,
				       "an empty frame (length %u) is not a request (max %u); the "
				       "stream is broken and the connection closes",
				       0, max);
			break;
		}
		if (!serving) {
			/* What the daemon does now its state file would not keep (polite stop):
			 * the request goes unanswered, its caller sees the connection close and
			 * resumes with the next daemon, which has the holds as they were. */
			s->closing = true;
			s->closing_why = "the daemon is stopping";
			break;
		}
		if (!t0)
			t0 = vad_now_ns();
		int error;
		enum vad_op_index op =
		    handle_frame(s, s->in + pos + VAD_FRAME_HEADER, plen, &error);
		uint64_t t1 = vad_now_ns();
		vad_op_stats_record(s->svc->ops, op, t1 - t0, error);
		t0 = t1;
		pos += VAD_FRAME_HEADER + plen;
	}
	vad_service_serve_end(s->svc);
	if (s->closing) {
		s->in_len = 0; /* nothing after broken framing is trustworthy */
	} else if (pos) {
		memmove(s->in, s->in + pos, s->in_len - pos);
		s->in_len -= pos;
	}
	if (s->requests != s->requests_counted)
		__atomic_add_fetch(&s->svc->requests, s->requests - s->requests_counted,
				   __ATOMIC_RELAXED);
	s->requests_counted = s->requests;
}

size_t vad_session_feed(struct vad_session *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t taken = 0;
	while (taken < len && !vad_session_input_blocked(s)) {
		size_t cap;
		uint8_t *space = vad_session_input_space(s, &cap);
		if (!cap || !space)
			break;
		size_t n = len - taken < cap ? len - taken : cap;
		memcpy(space, p + taken, n);
		vad_session_input_commit(s, n);
		taken += n;
		vad_session_process(s);
	}
	return taken;
}

void vad_session_kill_notice(struct vad_session *s)
{
	uint32_t by = (uint32_t)__atomic_load_n(&s->killed_by, __ATOMIC_ACQUIRE);
	struct vad_reply r;
	vad_reply_init(&r, 0);
	vad_reply_error(&r, VAD__ERROR__EKILLED,
			"disconnected by an administrator (vactl kill from uid %u); the ranges "
			"this client held are given back: connect again to go on",
			(unsigned)by);
	emit(s, &r);
	s->closing = true;
	s->closing_why = "disconnected by an administrator (vactl kill)";
}

size_t vad_encode_error_frame(uint8_t *buf, size_t cap, uint64_t id, Vad__Error code,
			      const char *message)
{
	Vad__Response resp = VAD__RESPONSE__INIT;
	resp.id = id;
	resp.error = code;
	resp.message = (char *)message;
	return vad_frame_encode_response(&resp, buf, cap);
}
