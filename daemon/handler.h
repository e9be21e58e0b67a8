/*
 * handler.h - a decoded request to its reply (dispatch.c, from the operations table ops.h).
 * There is one handler per protocol operation (handler.c, handler_admin.c): it reads the
 * request, acts through the session, ranges and the registry, and fills a vad_reply
 * (reply.h); it never does I/O. Arrays a reply needs come from the session's scratch.
 */
#ifndef VAD_HANDLER_H
#define VAD_HANDLER_H

#include <stdbool.h>

#include "reply.h"
#include "vad.pb-c.h"

struct vad_session;

/* Handle one decoded request of a session (hello checked by the caller). */
void vad_handle_request(struct vad_session *s, const Vad__Request *req, struct vad_reply *r);

struct vad_waiter;

/* Try a waiting alloc (waitq.h) again, on its session's worker: false while the arena still
 * has no room (r unused); true with r its final reply (granted, or refused for another
 * reason, a quota say). */
bool vad_alloc_retry(struct vad_session *s, const struct vad_waiter *wt, struct vad_reply *r);

/* The protocol name of an operation ("alloc", "purge", ...), for messages. */
const char *vad_op_name(Vad__Request__OpCase op);

#endif
