/*
 * transport.c - sending requests and waiting for their responses, pipelined across threads.
 *
 * Every call enters the table of calls in flight, then sends its frame. Sending is flat
 * combining: a call that finds another thread sending appends its frame to the out-queue
 * and goes on to wait; the sender, once its own send is done, sends everything queued
 * meanwhile in one send (sender.c). Waiting is leader/follower (reader.c): one waiter reads and
 * answers the others, who sleep on their own futex word. A dead connection fails every
 * waiter, and every later call, at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "reader.h"
#include "sender.h"
#include "transport.h"

void libvad_wait_reply(vad_client *c, struct libvad_pending *me)
{
	while (!libvad_pending_done(me)) {
		if (!c->reading) {
			if (libvad_read_round(c, me, false))
				return;
			continue;
		}
		if (libvad_pending_sleep(c, me))
			return;
	}
	pthread_mutex_unlock(&c->lock);
}

uint64_t libvad_next_id(vad_client *c)
{
	return __atomic_add_fetch(&c->next_id, 1, __ATOMIC_RELAXED);
}

void libvad_reply_free(Vad__Response *r, const struct libvad_fast_reply *fast)
{
	if (r && (!fast || r != &fast->resp))
		vad__response__free_unpacked(r, NULL);
}

int libvad_call_frame(vad_client *c, uint64_t id, const uint8_t *frame, size_t flen,
		      struct libvad_fast_reply *fast, Vad__Response **resp, int *fd)
{
	struct libvad_pending me = {.id = id, .fd = -1, .wants_fd = fd != NULL, .fast = fast};
	/* The send's own outcome, apart from me.err: the reader may finish me (and set me.err)
	 * while the send is still returning. */
	int own_err;
	*resp = NULL;
	if (fd)
		*fd = -1;

	/* Enter the table before sending so a fast reply always finds its waiter. */
retry:
	pthread_mutex_lock(&c->lock);
	int err = c->dead_err;
	uint64_t gen = c->conn_gen;
	if (err != VAD_OK && libvad_may_reconnect(c, err)) {
		pthread_mutex_unlock(&c->lock);
		err = libvad_reconnect(c, gen);
		if (err == VAD_OK)
			goto retry; /* sent on the new connection, the session resumed */
		return err;
	}
	if (err == VAD_OK) {
		libvad_pending_add(c, &me);
		own_err = VAD_OK;
		err = libvad_send_locked(c, frame, flen, &own_err, &me);
		if (err != VAD_OK)
			libvad_pending_remove(c, &me);
		if (err != VAD_OK && libvad_may_reconnect(c, err)) {
			/* The daemon never got the whole frame: send it again once resumed. */
			pthread_mutex_unlock(&c->lock);
			err = libvad_reconnect(c, gen);
			if (err == VAD_OK)
				goto retry;
			return err;
		}
	}
	if (err != VAD_OK) {
		pthread_mutex_unlock(&c->lock);
		return err;
	}
	libvad_wait_reply(c, &me);

	if (own_err == LIBVAD_UNSENT) {
		/* The reader read what the daemon said before it hung up (EBUSY, EKILLED):
		 * that is the reason, and it decides whether to reconnect. */
		int why = me.err != VAD_OK ? me.err : VAD_EGONE;
		pthread_mutex_lock(&c->lock);
		bool may = libvad_may_reconnect(c, why);
		pthread_mutex_unlock(&c->lock);
		libvad_reply_free(me.resp, fast);
		if (me.fd >= 0)
			close(me.fd);
		if (!may)
			return why;
		int rerr = libvad_reconnect(c, gen);
		if (rerr != VAD_OK)
			return rerr;
		me = (struct libvad_pending){
		    .id = id, .fd = -1, .wants_fd = fd != NULL, .fast = fast};
		goto retry; /* the daemon never saw it: send it again */
	}
	if (own_err != VAD_OK)
		me.err = own_err;
	if (me.err == VAD_EGONE) {
		pthread_mutex_lock(&c->lock);
		bool may = libvad_may_reconnect(c, me.err);
		pthread_mutex_unlock(&c->lock);
		if (may) {
			/* Replacing the connection waits for its sender and drops its queue, so
			 * once reconnected the sender has said whether a frame queued behind
			 * another thread's send (marked) left. */
			int rerr = libvad_reconnect(c, gen);
			pthread_mutex_lock(&c->lock);
			libvad_unmark_locked(c, &me);
			bool unsent = rerr == VAD_OK && me.unsent;
			pthread_mutex_unlock(&c->lock);
			if (unsent) {
				libvad_reply_free(me.resp, fast);
				if (me.fd >= 0)
					close(me.fd);
				me = (struct libvad_pending){
				    .id = id, .fd = -1, .wants_fd = fd != NULL, .fast = fast};
				goto retry; /* none of it left: the daemon never saw it */
			}
			/* Sent, perhaps done by the daemon, the reply lost: the caller decides. */
			me.err = rerr == VAD_OK ? VAD_EINTERRUPTED : rerr;
		}
	}
	if (__atomic_load_n(&me.marked, __ATOMIC_ACQUIRE)) {
		/* Answered (or failed) before the sender was done with its mark: unhook it, as
		 * me goes with this call. */
		pthread_mutex_lock(&c->lock);
		libvad_unmark_locked(c, &me);
		pthread_mutex_unlock(&c->lock);
	}
	if (me.err != VAD_OK) {
		libvad_reply_free(me.resp, fast);
		if (me.fd >= 0)
			close(me.fd);
		return me.err;
	}
	*resp = me.resp;
	if (fast)
		fast->conn_gen = gen;
	if (fd)
		*fd = me.fd;
	else if (me.fd >= 0)
		close(me.fd);
	return VAD_OK;
}

int libvad_call(vad_client *c, Vad__Request *req, Vad__Response **resp, int *fd)
{
	*resp = NULL;
	if (fd)
		*fd = -1;
	uint64_t id = libvad_next_id(c);
	req->id = id;
	size_t flen = vad_frame_request_size(req);
	uint8_t stackbuf[1024];
	uint8_t *frame = flen <= sizeof(stackbuf) ? stackbuf : malloc(flen);
	if (!frame)
		return VAD_ENOMEM;
	int err = VAD_EINVAL;
	if (vad_frame_encode_request(req, frame, flen) == flen)
		err = libvad_call_frame(c, id, frame, flen, NULL, resp, fd);
	if (frame != stackbuf)
		free(frame);
	return err;
}

int libvad_response_error(vad_client *c, const Vad__Response *r, Vad__Response__ResultCase expect)
{
	if (r->error != VAD__ERROR__OK) {
		int err = libvad_code_from_wire(r->error);
		if (err == VAD_EPROTO && r->error != VAD__ERROR__EPROTO)
			return libvad_failf(c, err,
					    "the daemon answered with unknown error code %d: %s",
					    (int)r->error, r->message);
		return libvad_fail(c, err, r->message);
	}
	if (r->result_case != expect)
		return libvad_failf(c, VAD_EPROTO,
				    "the daemon answered with a reply of kind %d instead of %d",
				    (int)r->result_case, (int)expect);
	return VAD_OK;
}

const char *libvad_dead_message(vad_client *c)
{
	pthread_mutex_lock(&c->lock);
	const char *msg = c->dead_msg;
	pthread_mutex_unlock(&c->lock);
	return msg;
}

int libvad_fail_unanswered(vad_client *c, int err)
{
	if (err == VAD_ERESUME)
		return err; /* recorded with the reconnect's sentence */
	return libvad_fail(c, err, libvad_dead_message(c));
}

/* The checks of libvad_rpc on the outcome err, r of a call. */
static int rpc_check(vad_client *c, int err, Vad__Response *r, const struct libvad_fast_reply *fast,
		     Vad__Response__ResultCase expect, Vad__Response **resp, int *fd)
{
	if (err != VAD_OK)
		return libvad_fail_unanswered(c, err);
	err = libvad_response_error(c, r, expect);
	if (err != VAD_OK) {
		libvad_reply_free(r, fast);
		if (fd && *fd >= 0) {
			close(*fd);
			*fd = -1;
		}
		return err;
	}
	*resp = r;
	return VAD_OK;
}

int libvad_rpc(vad_client *c, Vad__Request *req, Vad__Response__ResultCase expect,
	       Vad__Response **resp, int *fd)
{
	Vad__Response *r;
	int err = libvad_call(c, req, &r, fd);
	return rpc_check(c, err, r, NULL, expect, resp, fd);
}

int libvad_rpc_frame(vad_client *c, uint64_t id, const uint8_t *frame, size_t flen,
		     struct libvad_fast_reply *fast, Vad__Response__ResultCase expect,
		     Vad__Response **resp)
{
	Vad__Response *r;
	int err = libvad_call_frame(c, id, frame, flen, fast, &r, NULL);
	return rpc_check(c, err, r, fast, expect, resp, NULL);
}

void libvad_transport_destroy(vad_client *c)
{
	libvad_reader_destroy(c);
	libvad_sender_destroy(c);
	free(c->dead_msg);
	c->dead_msg = NULL;
}
