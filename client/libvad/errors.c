/*
 * errors.c - error sentences: vad_strerror and the thread-local vad_last_error.
 *
 * The last error is kept per (thread, client) in a small thread-local table keyed by the
 * client's generation number, so nothing is allocated, nothing leaks when a thread
 * exits, and a client freed and another allocated at the same address never share a slot.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define ERR_SLOTS   8
#define ERR_MSG_MAX 512

struct err_slot {
	uint64_t generation; /* 0: unused; the connect slot uses UINT64_MAX */
	uint64_t stamp;	     /* for replacing the least recently written slot */
	char msg[ERR_MSG_MAX];
};

static __thread struct err_slot err_slots[ERR_SLOTS];
static __thread uint64_t err_clock;

#define CONNECT_GENERATION UINT64_MAX

static const char *const sentences[] = {
    [0] = "success",
    [1] = "a malformed or missing argument",
    [2] = "out of memory",
    [3] = "cannot connect to the vad daemon (is it running?)",
    [4] = "the daemon closed the connection",
    [5] = "protocol error: an undecodable message, broken framing, or a reply that does "
	  "not fit its request",
    [6] = "client and daemon speak different protocol versions",
    [7] = "the arena has no free range that large",
    [8] = "a per-client or per-uid quota would be exceeded",
    [9] = "not allowed (arena allow-list or admin operation)",
    [10] = "no such arena",
    [11] = "this client holds no reference to that range",
    [12] = "unknown or malformed share token",
    [13] = "size is 0 or too large for the arena",
    [14] = "alignment is not a power of two or is too large",
    [15] = "request larger than the daemon's maximum frame or batch",
    [16] = "the daemon has too many clients",
    [17] = "the daemon failed internally",
    [18] = "mapping the arena into this process failed",
    [19] = "the daemon does not know that operation",
    [20] = "the first request must be hello",
};

const char *vad_strerror(int err)
{
	unsigned idx = err <= 0 ? (unsigned)-(long)err : 0;
	if (err > 0 || idx >= sizeof(sentences) / sizeof(sentences[0]))
		return "unknown vad error code";
	return sentences[idx];
}

static struct err_slot *slot_for(uint64_t generation, bool create)
{
	struct err_slot *oldest = &err_slots[0];
	for (size_t i = 0; i < ERR_SLOTS; i++) {
		if (err_slots[i].generation == generation)
			return &err_slots[i];
		if (err_slots[i].stamp < oldest->stamp)
			oldest = &err_slots[i];
	}
	if (!create)
		return NULL;
	oldest->generation = generation;
	oldest->msg[0] = '\0';
	return oldest;
}

static void record(vad_client *c, const char *msg)
{
	struct err_slot *s = slot_for(c ? c->generation : CONNECT_GENERATION, true);
	s->stamp = ++err_clock;
	snprintf(s->msg, sizeof(s->msg), "%s", msg);
}

int libvad_fail(vad_client *c, int err, const char *msg)
{
	record(c, msg && *msg ? msg : vad_strerror(err));
	return err;
}

int libvad_failf(vad_client *c, int err, const char *fmt, ...)
{
	char buf[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	record(c, buf);
	return err;
}

const char *vad_last_error(vad_client *c)
{
	struct err_slot *s = slot_for(c ? c->generation : CONNECT_GENERATION, false);
	if (!s)
		return c ? "no error recorded on this thread for this client"
			 : "no connection attempt has failed on this thread";
	return s->msg;
}
