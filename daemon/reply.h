/* reply.h - everything one response needs, and how a handler makes it an error (reply.c). */
#ifndef VAD_REPLY_H
#define VAD_REPLY_H

#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "registry.h"
#include "units.h"
#include "vad.pb-c.h"

/* A size for a message ("64 MiB"), in buffer b. */
#define SZ(b, v) vad_format_size((v), (b), sizeof(b))

/* An arena name (or any string) a client sent, escaped for a reply or a log line. */
#define ESC(b, str) vad_escape((str), (b), sizeof(b))

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
		Vad__UnshareReply unshare;
		Vad__MetricsReply metrics;
		Vad__RangesReply ranges;
		Vad__TokensReply tokens;
		Vad__KillReply kill;
		Vad__ConfigReply config;
		Vad__RestartReply restart;
		Vad__ResumeReply resume;
	} u;
	Vad__ArenaInfo info; /* map_arena's arena */
	int fd;		     /* >= 0: send this fd with the reply */
	bool deferred;	     /* no reply now: the request waits (waitq.h), answered later */
	char token[VAD_TOKEN_CHARS + 1];
	char text[1024]; /* message or detail sentence */
};

/* Start a reply for request id: OK, no result, no fd. */
void vad_reply_init(struct vad_reply *r, uint64_t id);

/* Make r an error reply with a sentence (printf format). */
void vad_reply_error(struct vad_reply *r, Vad__Error code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
