/*
 * sender.h - the sender role (sender.c): sending a frame or queueing it behind the thread
 * that is sending. Used by transport.c (a call's request) and reader.c (a reader that
 * becomes the sender while it wakes the others).
 */
#ifndef LIBVAD_SENDER_H
#define LIBVAD_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* With c->lock held: send frame now (taking the sender role, then sending what others
 * queued meanwhile) or, when another thread is sending, append it to the out-queue. Returns
 * VAD_ENOMEM when it could not be queued, else VAD_OK; a local failure of this thread's own
 * send goes to *own_err: LIBVAD_UNSENT when the daemon hung up before the frame left. A
 * frame queued for the blocking call whose record is call (or NULL) marks it (call->marked):
 * the sender sets call->unsent if it never left, and the caller must not return (nor reuse
 * call) while it is marked: libvad_unmark_locked. */
int libvad_send_locked(vad_client *c, const uint8_t *frame, size_t len, int *own_err,
		       struct libvad_pending *call);

/* With c->lock held: make sure no queued frame's mark points at call any more (a blocking
 * call about to return or to reuse its record). Cheap when call is not marked. */
void libvad_unmark_locked(vad_client *c, struct libvad_pending *call);

/* The sender's loop, c->lock held and c->sending set by the caller: send what other calls
 * queued meanwhile, until nothing is left; then give up the role. */
void libvad_flush_queue_locked(vad_client *c);

/* With c->lock held: the frame of ticket k's request id. With more, only queued (sent by
 * the next send); else sent now with whatever is queued, in one send, or queued behind the
 * thread that is sending. VAD_ENOMEM when it could not be queued, else VAD_OK (a failed send
 * fails the calls in flight through the reader, as for blocking calls, and marks the
 * request unsent if its frame never left). */
int libvad_submit_locked(vad_client *c, const uint8_t *frame, size_t len, bool more,
			 struct libvad_ticket *k, uint64_t id);

/* With c->lock held: send what VAD_MORE left queued, unless another thread is sending (it
 * sends the queue before it stops). */
void libvad_send_queued_locked(vad_client *c);

/* With c->lock held, the connection dead and nobody sending: empty the out-queue, marking
 * its tickets' requests unsent (resume.c, before the connection is replaced). */
void libvad_drop_queued_locked(vad_client *c);

/* Free the out-queue's buffers. */
void libvad_sender_destroy(vad_client *c);

#endif
