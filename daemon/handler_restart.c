/* handler_restart.c - the admin restart: the daemon stops politely and re-executes itself in
 * place with its arenas and state file (persist.h), as on SIGUSR2. */
#include <stdio.h>

#include "handler_internal.h"
#include "service.h"
#include "session.h"

void handle_restart(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "restart", r))
		return;
	if (!s->svc->request_restart) {
		vad_reply_error(r, VAD__ERROR__EINVAL,
				"this daemon cannot restart in place (no server runs it)");
		return;
	}
	log_notice("restart in place asked for by '%s' (uid %u)", s->name, (unsigned)s->peer.uid);
	vad_service_event(s->svc, "restart", s->name);
	/* The listener owns stopping: the same path as SIGUSR2. The reply leaves with this
	 * pass of the worker, before the workers are told to stop. */
	s->svc->request_restart();
	snprintf(r->text, sizeof(r->text),
		 "restarting in place: the live ranges are kept; clients reconnect to the "
		 "same socket");
	vad__restart_reply__init(&r->u.restart);
	r->u.restart.detail = r->text;
	r->resp.result_case = VAD__RESPONSE__RESULT_RESTART;
	r->resp.restart = &r->u.restart;
}
