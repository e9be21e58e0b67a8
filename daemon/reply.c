/* reply.c - a handler's reply and the pieces every handler builds it from: errors, the
 * session's scratch arrays, the arena a request names. See reply.h and handler_internal.h. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commit.h"
#include "handler_internal.h"
#include "log.h"
#include "session.h"

void vad_reply_init(struct vad_reply *r, uint64_t id)
{
	vad__response__init(&r->resp);
	r->resp.id = id;
	r->fd = -1;
	r->deferred = false;
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

/* The arena a request names (see vad_session_arena); NULL after an error reply. */
static struct vad_arena *lookup_arena(struct vad_session *s, const char *name, bool open,
				      unsigned *index, struct vad_reply *r)
{
	struct vad_arena *a = NULL;
	char why[512];
	switch (vad_session_arena(s, name, open, &a, index, why, sizeof(why))) {
	case VAD_LOOKUP_OK:
		return a;
	case VAD_LOOKUP_UNKNOWN:
		no_such_arena(r, name);
		return NULL;
	case VAD_LOOKUP_DENIED:
		vad_reply_error(r, VAD__ERROR__EPERM, "%s", why);
		return NULL;
	case VAD_LOOKUP_NOT_OPEN: {
		char e[VAD_ESCAPE_BUF];
		vad_reply_error(r, VAD__ERROR__ENOTHELD,
				"this client holds no range in arena '%s': its tenant arena is "
				"not open",
				ESC(e, name && name[0] ? name : "default"));
		return NULL;
	}
	case VAD_LOOKUP_LIMIT:
		vad_reply_error(r, VAD__ERROR__EQUOTA, "%s", why);
		return NULL;
	case VAD_LOOKUP_FAILED:
	default:
		log_err("%s", why);
		vad_reply_error(r, VAD__ERROR__EINTERNAL, "%s", why);
		return NULL;
	}
}

struct vad_arena *use_arena(struct vad_session *s, const char *name, unsigned *index,
			    struct vad_reply *r)
{
	return lookup_arena(s, name, true, index, r);
}

struct vad_arena *held_arena(struct vad_session *s, const char *name, unsigned *index,
			     struct vad_reply *r)
{
	return lookup_arena(s, name, false, index, r);
}

const char *reply_arena_name(const struct vad_arena *a, const char *asked)
{
	return a->tenant && asked && strchr(asked, '@') ? a->conf.name : a->client_name;
}

void fill_info(Vad__ArenaInfo *info, const struct vad_arena *a, const char *name, bool allowed)
{
	vad__arena_info__init(info);
	info->name = (char *)name;
	info->size = a->conf.size;
	info->quantum = a->conf.quantum;
	info->backing = (char *)(a->conf.backing[0]	? a->conf.backing
				 : a->conf.hugetlb_page ? "hugetlb"
							: "memfd");
	info->allowed = allowed;
	info->unsealed = a->unsealed;
	vad_commit_fill_info(info, &a->conf);
	if (a->tenant)
		info->tenancy = (char *)vad_tenancy_name(a->conf.tenancy);
}

void fill_section_info(Vad__ArenaInfo *info, const struct vad_arena_conf *c, unsigned tenants,
		       bool allowed)
{
	vad__arena_info__init(info);
	info->name = (char *)c->name;
	info->size = c->size;
	info->quantum = c->quantum;
	info->backing = (char *)(c->backing[0]	   ? c->backing
				 : c->hugetlb_page ? "hugetlb"
						   : "memfd");
	info->allowed = allowed;
	info->tenancy = (char *)vad_tenancy_name(c->tenancy);
	info->tenants = tenants;
	vad_commit_fill_info(info, c);
}
