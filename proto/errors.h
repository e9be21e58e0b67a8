/*
 * errors.h - every vad error code once: its vad.Error name and number (proto/vad.proto),
 * libvad's sentence (vad_strerror) and vactl's short label. libvad's public codes are the
 * negated numbers (VAD_<name> in vad.h, checked against this table); the wire enum is checked
 * in errors.c.
 */
#ifndef VAD_ERRORS_H
#define VAD_ERRORS_H

#include <stdbool.h>

/* X(name, number, sentence, label) */
#define VAD_ERROR_TABLE(X)                                                                         \
	X(OK, 0, "success", "ok")                                                                  \
	X(EINVAL, 1, "a malformed or missing argument", "invalid argument")                        \
	X(ENOMEM, 2, "out of memory", "out of memory")                                             \
	X(ECONNECT, 3, "cannot connect to the vad daemon (is it running?)", "cannot connect")      \
	X(EGONE, 4, "the daemon closed the connection", "connection lost")                         \
	X(EPROTO, 5,                                                                               \
	  "protocol error: an undecodable message, broken framing, or a reply that does "          \
	  "not fit its request",                                                                   \
	  "protocol error")                                                                        \
	X(EVERSION, 6, "client and daemon speak different protocol versions",                      \
	  "protocol version mismatch")                                                             \
	X(ENOSPC, 7, "the arena has no free range that large", "no space")                         \
	X(EQUOTA, 8, "a per-client or per-uid quota would be exceeded", "quota exceeded")          \
	X(EPERM, 9, "not allowed (arena allow-list or admin operation)", "permission denied")      \
	X(ENOARENA, 10, "no such arena", "no such arena")                                          \
	X(ENOTHELD, 11, "this client holds no reference to that range", "not held")                \
	X(ETOKEN, 12, "unknown or malformed share token", "bad token")                             \
	X(ESIZE, 13, "size is 0 or too large for the arena", "bad size")                           \
	X(EALIGN, 14, "alignment is not a power of two or is too large", "bad alignment")          \
	X(ETOOBIG, 15, "request larger than the daemon's maximum frame or batch",                  \
	  "request too big")                                                                       \
	X(EBUSY, 16, "the daemon has too many clients", "daemon busy")                             \
	X(EINTERNAL, 17, "the daemon failed internally", "daemon internal error")                  \
	X(EMAP, 18, "mapping the arena into this process failed", "cannot map arena")              \
	X(EUNSUPPORTED, 19, "the daemon does not know that operation", "unsupported")              \
	X(ENOHELLO, 20, "the first request must be hello", "no hello")                             \
	X(EREVOKED, 21, "the share token was revoked", "token revoked")                            \
	X(EEXPIRED, 22, "the share token has expired", "token expired")                            \
	X(ETOKENUSED, 23, "the single-use share token was already used", "token used")             \
	X(EREADONLY, 24, "this client may only read that arena (it is one of its readers)",        \
	  "read-only")                                                                             \
	X(ECOMMIT, 26,                                                                             \
	  "the arena's memory could not be committed for the range (commit = reserve)",            \
	  "cannot commit")                                                                         \
	X(ETIMEDOUT, 27,                                                                           \
	  "the allocation waited for room until its timeout and none was freed in time",           \
	  "wait timed out")                                                                        \
	X(EKILLED, 28, "an administrator disconnected this client (vactl kill)", "killed")         \
	X(ERESUME, 29, "the session cannot be resumed (unknown, expired or wrong secret)",         \
	  "cannot resume")                                                                         \
	X(EINTERRUPTED, 30,                                                                        \
	  "the daemon restarted during the call; the session was resumed and the call may be "     \
	  "retried",                                                                               \
	  "interrupted")

/* The largest error number. Numbers below it may be unused (not in the table). */
#define VAD_ERROR_MAX 30

/* Is number a code of the table? */
bool vad_error_known(int number);

/* The symbolic name ("EQUOTA") of an error number, or NULL when it is not in the table. */
const char *vad_error_name(int number);

/* The sentence of an error number ("a per-client or per-uid quota would be exceeded"), or
 * NULL when it is not in the table. */
const char *vad_error_sentence(int number);

/* The short label ("quota exceeded") of an error number, or NULL when it is not in the table. */
const char *vad_error_label(int number);

#endif
