/*
 * handler.h - one function per protocol operation. A handler reads a decoded request, acts on
 * the session, the registry and the allocators, and fills a vad_reply; it never does I/O.
 * Arrays a reply needs come from the session's scratch allocator.
 */
#ifndef VAD_HANDLER_H
#define VAD_HANDLER_H

#include "registry.h"
#include "vad.pb-c.h"

struct vad_session;

/* Everything one response needs, built on the caller's stack. */
struct vad_reply {
	Vad__Response resp;
	union {
		Vad__HelloReply hello;
		Vad__AllocReply alloc;
		Vad__FreeReply free;
		Vad__MapArenaReply map_arena;
		Vad__ShareReply share;
		Vad__AttachReply attach;
		Vad__StatsReply stats;
		Vad__ArenasReply arenas;
		Vad__ClientsReply clients;
		Vad__PurgeReply purge;
		Vad__ReloadReply reload;
		Vad__CheckReply check;
		Vad__WalkReply walk;
	} u;
	Vad__ArenaInfo info; /* map_arena's arena */
	int fd;		     /* >= 0: send this fd with the reply */
	char token[VAD_TOKEN_CHARS + 1];
	char text[1024]; /* message or detail sentence */
};

/* Start a reply for request id: OK, no result, no fd. */
void vad_reply_init(struct vad_reply *r, uint64_t id);

/* Make r an error reply with a sentence (printf format). */
void vad_reply_error(struct vad_reply *r, Vad__Error code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Handle one decoded request of a session (hello checked by the caller). */
void vad_handle_request(struct vad_session *s, const Vad__Request *req, struct vad_reply *r);

/* The protocol name of an operation ("alloc", "purge", ...), for messages. */
const char *vad_op_name(Vad__Request__OpCase op);

#endif
