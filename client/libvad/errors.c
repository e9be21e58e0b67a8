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

#include "errors.h"
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

/* vad.h's public codes are the table's numbers negated (proto/errors.h). */
#define CHECK_PUBLIC(name, number, sentence, label)                                                \
	_Static_assert(VAD_##name == -(number), "VAD_" #name " in vad.h differs from errors.h");
VAD_ERROR_TABLE(CHECK_PUBLIC)
#undef CHECK_PUBLIC

const char *vad_strerror(int err)
{
	const char *s = err <= 0 && err >= -VAD_ERROR_MAX ? vad_error_sentence(-err) : NULL;
	return s ? s : "unknown vad error code";
}

/* Daemon error codes are vad.Error values; libvad's are their negations. */
int libvad_code_from_wire(Vad__Error e)
{
	if ((int)e <= 0 || !vad_error_known((int)e))
		return VAD_EPROTO;
	return -(int)e;
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
