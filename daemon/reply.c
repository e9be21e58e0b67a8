/* reply.c - a handler's reply and the pieces every handler builds it from: errors, the
 * session's scratch arrays, the arena a request names. See reply.h and handler_internal.h. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "handler_internal.h"
#include "log.h"
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

void no_such_arena(struct vad_reply *r, const char *name)
{
	char e[VAD_ESCAPE_BUF];
	vad_reply_error(r, VAD__ERROR__ENOARENA,
			"no arena named '%s'; 'vactl arenas' lists the arenas", ESC(e, name));
}

void *scratch_array(struct vad_session *s, size_t n, size_t elem)
{
	if (n && elem > SIZE_MAX / n)
		return NULL;
	return vad_scratch_alloc(&s->scratch, n * elem);
}

char *scratch_strdup(struct vad_session *s, const char *str)
{
	size_t len = strlen(str) + 1;
	char *p = vad_scratch_alloc(&s->scratch, len);
	if (p)
		memcpy(p, str, len);
	return p;
}

void out_of_memory(struct vad_reply *r, const char *what)
{
	vad_reply_error(r, VAD__ERROR__ENOMEM, "the daemon ran out of memory %s; try again later",
			what);
}

/* The arena a request names, checked against the peer's allow-list; NULL after an error
 * reply. */
struct vad_arena *use_arena(struct vad_session *s, const char *name, unsigned *index,
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

void fill_info(Vad__ArenaInfo *info, const struct vad_arena *a, bool allowed)
{
	vad__arena_info__init(info);
	info->name = (char *)a->conf.name;
	info->size = a->conf.size;
	info->quantum = a->conf.quantum;
	info->backing = (char *)(a->conf.backing[0] ? a->conf.backing : "memfd");
	info->allowed = allowed;
	info->unsealed = a->unsealed;
}
