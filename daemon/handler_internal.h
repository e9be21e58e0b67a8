/*
 * handler_internal.h - what the handler files share (reply.c's helpers, every operation's
 * handler for dispatch.c); included by reply.c, handler.c, handler_admin.c, handler_restart.c
 * and dispatch.c only.
 */
#ifndef VAD_HANDLER_INTERNAL_H
#define VAD_HANDLER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "log.h"
#include "reply.h"

struct vad_arena;
struct vad_arena_conf;

/* ---- reply.c ---- */

/* Make r the ENOARENA reply for an arena name nobody configured. */
void no_such_arena(struct vad_reply *r, const char *name);

/* n elements of elem bytes from the session's scratch (freed after the reply); NULL on overflow
 * or when it is exhausted. */
void *scratch_array(struct vad_session *s, size_t n, size_t elem);

/* A copy of str in the session's scratch; NULL when it is exhausted. */
char *scratch_strdup(struct vad_session *s, const char *str);

/* Make r the ENOMEM reply, saying what the daemon was doing. */
void out_of_memory(struct vad_reply *r, const char *what);

/* The arena a request names (NULL: the default) that the peer may use, its tenant arena
 * opened if need be; NULL after an error reply. */
struct vad_arena *use_arena(struct vad_session *s, const char *name, unsigned *index,
			    struct vad_reply *r);

/* The same for a request about ranges already held (free, share): a tenant arena not open
 * holds none, so it is not opened for it. */
struct vad_arena *held_arena(struct vad_session *s, const char *name, unsigned *index,
			     struct vad_reply *r);

/* The name a reply gives arena a, asked for by the name `asked`: the one the client used
 * (a section's, or NAME@ID of its own tenant arena). */
const char *reply_arena_name(const struct vad_arena *a, const char *asked);

/* Describe arena a in info under name (allowed: whether this peer may use it). */
void fill_info(Vad__ArenaInfo *info, const struct vad_arena *a, const char *name, bool allowed);

/* Describe a section with tenancy (which has no arena of its own) in info, with the number
 * of its tenant arenas open. */
void fill_section_info(Vad__ArenaInfo *info, const struct vad_arena_conf *c, unsigned tenants,
		       bool allowed);

/* ---- the handlers: handler.c ---- */

#define VAD_HANDLER(name, msg)                                                                     \
	void handle_##name(struct vad_session *s, const msg *m, struct vad_reply *r);
VAD_HANDLER(hello, Vad__Hello)
VAD_HANDLER(alloc, Vad__Alloc)
VAD_HANDLER(free, Vad__Free)
VAD_HANDLER(map_arena, Vad__MapArena)
VAD_HANDLER(share, Vad__Share)
VAD_HANDLER(attach, Vad__Attach)
VAD_HANDLER(unshare, Vad__Unshare)
/* ---- handler_admin.c ---- */
VAD_HANDLER(stats, Vad__StatsRequest)
VAD_HANDLER(purge, Vad__Purge)
VAD_HANDLER(walk, Vad__Walk)
/* ---- handler_holds.c ---- */
VAD_HANDLER(ranges, Vad__RangesRequest)
VAD_HANDLER(tokens, Vad__TokensRequest)
VAD_HANDLER(kill, Vad__Kill)
#undef VAD_HANDLER
void handle_arenas(struct vad_session *s, struct vad_reply *r);
/* handler_config.c */
void handle_config(struct vad_session *s, struct vad_reply *r);
/* May this session run admin operation op? Otherwise an EPERM reply that says who may. */
bool admin_allowed(struct vad_session *s, const char *op, struct vad_reply *r);
void handle_clients(struct vad_session *s, struct vad_reply *r);
void handle_reload(struct vad_session *s, struct vad_reply *r);

/* Is s an admin? If not, r is the refusal of op (handler_admin.c). */
bool admin_allowed(struct vad_session *s, const char *op, struct vad_reply *r);

/* Admin: restart in place (handler_restart.c). */
void handle_restart(struct vad_session *s, struct vad_reply *r);

/* Take back a previous daemon's session (handler_resume.c). */
void handle_resume(struct vad_session *s, const Vad__Resume *m, struct vad_reply *r);
void handle_check(struct vad_session *s, struct vad_reply *r);
/* ---- handler_metrics.c ---- */
void handle_metrics(struct vad_session *s, struct vad_reply *r);

/* May the session see arena a in its stats and metrics: one it may use, and every tenant
 * arena for an admin (handler_admin.c). */
bool stats_visible(struct vad_session *s, const struct vad_arena *a);

#endif
