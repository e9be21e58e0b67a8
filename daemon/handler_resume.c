/* handler_resume.c - a client takes back its session of the previous daemon after a restart
 * or crash: the holds kept for it (persist.h) become this connection's. */
#include <inttypes.h>
#include <string.h>

#include "handler_internal.h"
#include "persist.h"
#include "service.h"
#include "session.h"

void handle_resume(struct vad_session *s, const Vad__Resume *m, struct vad_reply *r)
{
	if (s->resumed || s->holder.used) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"resume comes right after hello, before this connection holds "
				"anything, and once");
		return;
	}
	struct vad_resumed got;
	if (vad_persist_resume(s->svc->persist, &s->holder, m->resume_id, s->peer.uid,
			       m->secret.data, m->secret.len, &got) != 0) {
		/* One answer for unknown, expired, another uid and a wrong secret. */
		vad_session_log(s, VAD_LOG_INFO,
				"session %llu (pid %d, uid %u): cannot resume session %" PRIu64,
				(unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid,
				m->resume_id);
		vad_reply_error(
		    r, VAD__ERROR__ERESUME,
		    "session %" PRIu64 " cannot be resumed: the daemon does not know it "
		    "(never, or resume_grace has passed) or the secret or uid is not its "
		    "own; its ranges are gone, start afresh",
		    m->resume_id);
		return;
	}
	/* The session is the old one now: its record (with the old secret) stays, the record
	 * this connection's hello made goes. */
	vad_session_forget_secret(s);
	s->secret_rec = got.secret_rec;
	memcpy(s->secret, m->secret.data, sizeof(s->secret));
	s->resumed = true;
	log_info("session %llu ('%s', uid %u) resumed session %" PRIu64 " of the previous daemon: "
		 "%" PRIu64 " ranges, %" PRIu64 " bytes",
		 (unsigned long long)s->id, s->name, (unsigned)s->peer.uid, m->resume_id, got.holds,
		 got.bytes);
	Vad__ResumeReply *rr = &r->u.resume;
	vad__resume_reply__init(rr);
	rr->holds = got.holds;
	rr->refs = got.refs;
	rr->bytes = got.bytes;
	r->resp.result_case = VAD__RESPONSE__RESULT_RESUME;
	r->resp.resume = rr;
}
