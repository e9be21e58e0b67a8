/*
 * transport.c - sending requests and waiting for their responses, pipelined across threads.
 *
 * Every call enters the table of calls in flight, then sends its frame. Sending is flat
 * combining: a call that finds another thread sending appends its frame to the out-queue
 * and goes on to wait; the sender, once its own send is done, sends everything queued
 * meanwhile in one send. Waiting is leader/follower (reader.c): one waiter reads and
 * answers the others, who sleep on their own futex word. A dead connection fails every
 * waiter, and every later call, at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "errors.h"
#include "internal.h"

static int send_all(vad_client *c, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(c->sock, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == ENOMEM || errno == ENOBUFS ? VAD_ENOMEM : VAD_EGONE;
		}
		buf += n;
		len -= (size_t)n;
	}
	return VAD_OK;
}

/* Append a frame to the out-queue. c->lock held. */
static int queue_frame(vad_client *c, const uint8_t *frame, size_t len)
{
	struct libvad_outbuf *q = &c->outq;
	if (q->cap - q->len < len) {
		size_t cap = q->cap ? q->cap : 4096;
		while (cap - q->len < len)
			cap *= 2;
		uint8_t *b = realloc(q->buf, cap);
		if (!b)
			return VAD_ENOMEM;
		q->buf = b;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, frame, len);
	q->len += len;
	return VAD_OK;
}

/* A send that fails because the daemon hung up is not fatal yet: the reader reads what it
 * said before it left (an EBUSY reply, say) and fails every waiter at the end of the
 * stream. Any other failure may leave a partial frame on the wire: the connection is
 * over. c->lock held. */
static void send_failed_locked(vad_client *c, int err)
{
	if (err != VAD_EGONE)
		libvad_fail_all_locked(c, VAD_EPROTO);
}

void libvad_flush_queue_locked(vad_client *c)
{
	while (c->outq.len > 0 && !c->dead_err) {
		struct libvad_outbuf fly = c->outq;
		c->outq = c->outfly;
		c->outfly = fly;
		pthread_mutex_unlock(&c->lock);
		int err = send_all(c, fly.buf, fly.len);
		pthread_mutex_lock(&c->lock);
		c->outfly.len = 0;
		if (c->outfly.cap > LIBVAD_OUTQ_KEEP) {
			free(c->outfly.buf);
			c->outfly = (struct libvad_outbuf){NULL, 0, 0};
		}
		if (err != VAD_OK) {
			send_failed_locked(c, err);
			/* Nothing more goes through; the waiters of what is queued learn it from
			 * the reader (end of stream) or have been failed already. */
			c->outq.len = 0;
		}
	}
	c->outq.len = 0; /* a dead connection sends nothing more */
	c->sending = false;
}

/* Wait for me's response, reading for everyone when nobody else does. Called with c->lock
 * held; returns without it. */
static void wait_reply(vad_client *c, struct libvad_pending *me)
{
	while (!libvad_pending_done(me)) {
		if (!c->reading) {
			if (libvad_read_round(c, me))
				return;
			continue;
		}
		if (libvad_pending_sleep(c, me))
			return;
	}
	pthread_mutex_unlock(&c->lock);
}

int libvad_call(vad_client *c, Vad__Request *req, Vad__Response **resp, int *fd)
{
	struct libvad_pending me = {.fd = -1, .wants_fd = fd != NULL};
	*resp = NULL;
	if (fd)
		*fd = -1;

	me.id = __atomic_add_fetch(&c->next_id, 1, __ATOMIC_RELAXED);
	req->id = me.id;
	size_t flen = vad_frame_request_size(req);
	uint8_t stackbuf[1024];
	uint8_t *frame = flen <= sizeof(stackbuf) ? stackbuf : malloc(flen);
	if (!frame)
		return VAD_ENOMEM;
	if (vad_frame_encode_request(req, frame, flen) != flen) {
		if (frame != stackbuf)
			free(frame);
		return VAD_EINVAL;
	}

	/* Enter the table before sending so a fast reply always finds its waiter. */
	pthread_mutex_lock(&c->lock);
	int err = c->dead_err;
	if (err == VAD_OK) {
		libvad_pending_add(c, &me);
		if (c->sending) {
			err = queue_frame(c, frame, flen);
			if (err != VAD_OK)
				libvad_pending_remove(c, &me);
		} else {
			c->sending = true;
			pthread_mutex_unlock(&c->lock);
			int serr = send_all(c, frame, flen);
			pthread_mutex_lock(&c->lock);
			if (serr != VAD_OK) {
				send_failed_locked(c, serr);
				/* The caller learns the local cause, not the connection's. */
				if (serr != VAD_EGONE)
					me.err = serr;
			}
			libvad_flush_queue_locked(c);
		}
	}
	if (frame != stackbuf)
		free(frame);
	if (err != VAD_OK) {
		pthread_mutex_unlock(&c->lock);
		return err;
	}
	int own_err = me.err;
	wait_reply(c, &me);

	if (own_err != VAD_OK)
		me.err = own_err;
	if (me.err != VAD_OK) {
		if (me.resp)
			vad__response__free_unpacked(me.resp, NULL);
		if (me.fd >= 0)
			close(me.fd);
		return me.err;
	}
	*resp = me.resp;
	if (fd)
		*fd = me.fd;
	else if (me.fd >= 0)
		close(me.fd);
	return VAD_OK;
}

/* Daemon error codes are vad.Error values; libvad's are their negations. */
int libvad_code_from_wire(Vad__Error e)
{
	if ((int)e <= 0 || !vad_error_known((int)e))
		return VAD_EPROTO;
	return -(int)e;
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

int libvad_rpc(vad_client *c, Vad__Request *req, Vad__Response__ResultCase expect,
	       Vad__Response **resp, int *fd)
{
	Vad__Response *r;
	int err = libvad_call(c, req, &r, fd);
	if (err != VAD_OK)
		return libvad_fail(c, err, libvad_dead_message(c));
	err = libvad_response_error(c, r, expect);
	if (err != VAD_OK) {
		vad__response__free_unpacked(r, NULL);
		if (fd && *fd >= 0) {
			close(*fd);
			*fd = -1;
		}
		return err;
	}
	*resp = r;
	return VAD_OK;
}

void libvad_transport_destroy(vad_client *c)
{
	libvad_reader_destroy(c);
	free(c->outq.buf);
	free(c->outfly.buf);
	c->outq = c->outfly = (struct libvad_outbuf){NULL, 0, 0};
	free(c->dead_msg);
	c->dead_msg = NULL;
}
