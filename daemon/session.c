/* session.c - one connection's session: its creation and end, and its rate-limited log lines
 * and events; its bytes, frames and replies are session_frames.c. See session.h. */
#include "session.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct vad_session *vad_session_new(struct vad_service *svc, const struct vad_peer *peer)
{
	struct vad_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->svc = svc;
	if (vad_peer_copy(&s->peer, peer) < 0)
		goto fail;
	s->allowed = calloc(svc->n_slots, sizeof(*s->allowed));
	s->reader = calloc(svc->n_slots, sizeof(*s->reader));
	s->tenant_slot = calloc(svc->n_arenas, sizeof(*s->tenant_slot));
	if (!s->allowed || !s->reader || !s->tenant_slot)
		goto fail;
	for (size_t i = 0; i < svc->n_arenas; i++) {
		const struct vad_arena_conf *c = vad_section_conf(svc->tenants, (unsigned)i);
		s->reader[i] = vad_arena_conf_reads_only(c, peer->uid, peer->gid, peer->groups,
							 peer->n_groups);
		s->allowed[i] = s->reader[i] || vad_arena_conf_allows(c, peer->uid, peer->gid,
								      peer->groups, peer->n_groups);
	}
	s->admin = vad_peer_is_admin(peer, svc->daemon_uid, svc->has_admin_group, svc->admin_gid);
	s->id = __atomic_fetch_add(&svc->next_session_id, 1, __ATOMIC_RELAXED);
	s->connected_ms = vad_realtime_ms();
	s->suppressed_level = VAD_LOG_DEBUG;
	vad_scratch_init(&s->scratch);
	LIST_INIT(&s->waiters);
	if (vad_holder_init(svc->reg, &s->holder, peer->uid, s) < 0) {
		vad_scratch_fini(&s->scratch);
		goto fail;
	}
	s->holder.state_holder = (uint32_t)s->id; /* what its records in the state file name */
	return s;
fail:
	vad_peer_free(&s->peer);
	free(s->allowed);
	free(s->tenant_slot);
	free(s->reader);
	free(s);
	return NULL;
}

/* ---- rate-limited log lines and events ------------------------------------------------ */

/* Report what the buckets suppressed since the last report: one line and one event row. */
static void report_suppressed(struct vad_session *s, uint64_t now)
{
	uint64_t span_log, span_ev;
	uint64_t lines = vad_rate_collect(&s->log_rate, now, &span_log);
	uint64_t events = vad_rate_collect(&s->event_rate, now, &span_ev);
	if (!lines && !events)
		return;
	uint64_t span = span_log > span_ev ? span_log : span_ev;
	char what[96];
	if (lines && events)
		snprintf(what, sizeof(what), "%" PRIu64 " similar log lines and %" PRIu64 " events",
			 lines, events);
	else if (lines)
		snprintf(what, sizeof(what), "%" PRIu64 " similar log lines", lines);
	else
		snprintf(what, sizeof(what), "%" PRIu64 " events", events);
	char text[384];
	snprintf(text, sizeof(text),
		 "session %llu ('%s', uid %u): %s suppressed in the last %" PRIu64 ".%" PRIu64
		 " s (rate limit: %u at once, then 1 per %u ms)",
		 (unsigned long long)s->id, s->name, (unsigned)s->peer.uid, what, span / 1000,
		 span % 1000 / 100, VAD_RATE_BURST, VAD_RATE_PERIOD_MS);
	int level = lines ? s->suppressed_level : VAD_LOG_INFO;
	if (vad_log_enabled(level) && vad_service_client_log(s->svc, level))
		vad_log(level, "%s", text);
	s->suppressed_level = VAD_LOG_DEBUG;
	vad_service_client_event(s->svc, "rate-limited", text);
}

void vad_session_log(struct vad_session *s, int level, const char *fmt, ...)
{
	if (!vad_log_enabled(level))
		return; /* a line nobody would see costs no token */
	uint64_t now = vad_rate_now_ms();
	if (!vad_rate_take(&s->log_rate, now)) {
		if (level < s->suppressed_level)
			s->suppressed_level = level;
		return;
	}
	report_suppressed(s, now);
	if (!vad_service_client_log(s->svc, level))
		return; /* counted by the daemon-wide bucket */
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	vad_log(level, "%s", line);
}

void vad_session_event(struct vad_session *s, const char *kind, const char *detail)
{
	uint64_t now = vad_rate_now_ms();
	if (!vad_rate_take(&s->event_rate, now))
		return;
	report_suppressed(s, now);
	vad_service_client_event(s->svc, kind, detail);
}

void vad_session_forget_secret(struct vad_session *s)
{
	struct vad_registry *reg = s->svc->reg;
	if (s->secret_rec && reg->state && !__atomic_load_n(&reg->state_frozen, __ATOMIC_RELAXED))
		vad_state_drop(reg->state, s->secret_rec);
	s->secret_rec = 0;
}

void vad_session_free(struct vad_session *s)
{
	if (!s)
		return;
	report_suppressed(s, vad_rate_now_ms());
	vad_waitq_cancel_session(s); /* before its holds go: their frees kick the others */
	vad_holder_fini(s->svc->reg, &s->holder);
	vad_session_forget_secret(s); /* after its holds: a crash between keeps both */
	/* After the holds are gone (or handed to the reaper, which the sweep waits for). */
	for (size_t i = 0; i < s->svc->n_arenas; i++)
		if (s->tenant_slot[i])
			vad_tenant_unpin(s->svc->tenants, s->tenant_slot[i] - 1);
	vad_scratch_fini(&s->scratch);
	vad_peer_free(&s->peer);
	free(s->allowed);
	free(s->tenant_slot);
	free(s->reader);
	free(s->in);
	free(s->out);
	free(s->marks);
	free(s);
}

/* ---- vactl kill --------------------------------------------------------------------------- */

bool vad_session_kill(struct vad_session *s, uint32_t by)
{
	uint64_t expected = 0;
	return __atomic_compare_exchange_n(&s->killed_by, &expected, (1ull << 32) | by, false,
					   __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

bool vad_session_killed(const struct vad_session *s)
{
	return __atomic_load_n(&s->killed_by, __ATOMIC_ACQUIRE) != 0;
}

/* ---- state the worker and the handlers ask about ------------------------------------------ */

size_t vad_session_output_pending(const struct vad_session *s)
{
	return s->out_len - s->out_head;
}

size_t vad_session_fds_queued(const struct vad_session *s)
{
	return s->n_marks - s->marks_head;
}

bool vad_session_closing(const struct vad_session *s)
{
	return s->closing;
}

bool vad_session_input_blocked(const struct vad_session *s)
{
	return s->closing || s->pause_ms ||
	       vad_session_output_pending(s) >= vad_service_high_watermark(s->svc);
}
