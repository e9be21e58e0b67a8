/*
 * transport.c - sending requests and matching responses, pipelined across threads.
 *
 * Every call registers itself as pending, sends its frame under send_lock, then waits.
 * One waiting thread at a time is the reader (leader/follower): it reads from the socket
 * with recvmsg, queues any SCM_RIGHTS fds in arrival order, decodes every whole frame
 * and hands each response to the waiter with that id. When its own response has arrived
 * it gives up the reader role and wakes one other waiter to take it over. A dead
 * connection fails every waiter, and every later call, at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"
#include "internal.h"

/* Wake one waiter that still needs a response so it can become the reader. */
static void wake_successor(vad_client *c)
{
	for (struct libvad_pending *p = c->pending; p; p = p->next) {
		if (!p->done) {
			pthread_cond_signal(&p->cond);
			return;
		}
	}
}

/* Mark the connection dead with err and fail every waiter. Called with c->lock held. */
static void fail_all_locked(vad_client *c, int err)
{
	if (!c->dead_err) {
		c->dead_err = err;
		/* A broken stream may have a half-read frame in it; stop the daemon too. */
		shutdown(c->sock, SHUT_RDWR);
	}
	for (struct libvad_pending *p = c->pending; p; p = p->next) {
		if (!p->done) {
			p->done = true;
			p->err = c->dead_err;
			pthread_cond_signal(&p->cond);
		}
	}
}

static void unlink_pending(vad_client *c, struct libvad_pending *me)
{
	for (struct libvad_pending **pp = &c->pending; *pp; pp = &(*pp)->next) {
		if (*pp == me) {
			*pp = me->next;
			return;
		}
	}
}

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

static void close_fds(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/* Queue received fds; on allocation failure they are closed and VAD_ENOMEM returned. */
static int queue_fds(vad_client *c, const int *fds, size_t n)
{
	if (c->fdq_len + n > c->fdq_cap) {
		size_t cap = c->fdq_cap ? c->fdq_cap * 2 : 8;
		while (cap < c->fdq_len + n)
			cap *= 2;
		int *q = realloc(c->fdq, cap * sizeof(*q));
		if (!q) {
			close_fds(fds, n);
			return VAD_ENOMEM;
		}
		c->fdq = q;
		c->fdq_cap = cap;
	}
	memcpy(c->fdq + c->fdq_len, fds, n * sizeof(*fds));
	c->fdq_len += n;
	return VAD_OK;
}

static int pop_fd(vad_client *c)
{
	if (c->fdq_len == 0)
		return -1;
	int fd = c->fdq[0];
	memmove(c->fdq, c->fdq + 1, (c->fdq_len - 1) * sizeof(*c->fdq));
	c->fdq_len--;
	return fd;
}

/* One receive into the buffer, collecting fds (proto/fdpass). Returns VAD_OK, or the
 * error that kills the connection. Runs without c->lock: only the reader touches rbuf and
 * fdq. */
static int read_some(vad_client *c, const char **why)
{
	if (c->rcap - c->rlen < 4096) {
		size_t cap = c->rcap ? c->rcap * 2 : LIBVAD_RBUF_KEEP;
		uint8_t *b = realloc(c->rbuf, cap);
		if (!b)
			return VAD_ENOMEM;
		c->rbuf = b;
		c->rcap = cap;
	}
	int fds[LIBVAD_FDS_PER_READ];
	size_t nfds = 0;
	ssize_t n = vad_recv_with_fds(c->sock, c->rbuf + c->rlen, c->rcap - c->rlen, fds,
				      LIBVAD_FDS_PER_READ, &nfds);
	if (n < 0) {
		if (errno == EMSGSIZE) {
			/* The kernel could not install a passed fd (usually RLIMIT_NOFILE): the
			 * fd order no longer matches the replies, so the connection is over. */
			*why = "a file descriptor the daemon passed (an arena's fd) could not be "
			       "received: this process may be out of file descriptors "
			       "(RLIMIT_NOFILE); the connection is closed";
			return VAD_EPROTO;
		}
		return errno == ENOMEM || errno == ENOBUFS ? VAD_ENOMEM : VAD_EGONE;
	}
	if (nfds > 0) {
		int err = queue_fds(c, fds, nfds);
		if (err != VAD_OK)
			return err;
	}
	if (n == 0)
		return VAD_EGONE;
	c->rlen += (size_t)n;
	return VAD_OK;
}

/* Daemon error codes are vad.Error values; libvad's are their negations. */
static int code_from_wire(Vad__Error e)
{
	if ((int)e <= 0 || (int)e > VAD__ERROR__ENOHELLO)
		return VAD_EPROTO;
	return -(int)e;
}

/* Decode every whole frame in rbuf and deliver it. Called with c->lock held. */
static int deliver_frames_locked(vad_client *c)
{
	size_t off = 0;
	int err = VAD_OK;
	for (;;) {
		size_t len;
		enum vad_frame_status st =
		    vad_frame_peek(c->rbuf + off, c->rlen - off, LIBVAD_RESPONSE_MAX, &len);
		if (st == VAD_FRAME_NEED_MORE)
			break;
		if (st != VAD_FRAME_READY) {
			err = VAD_EPROTO;
			break;
		}
		Vad__Response *r =
		    vad__response__unpack(NULL, len, c->rbuf + off + VAD_FRAME_HEADER);
		off += VAD_FRAME_HEADER + len;
		if (!r) {
			err = VAD_EPROTO;
			break;
		}
		if (r->id == 0 && r->error != VAD__ERROR__OK) {
			/* Unasked (id 0): the daemon refuses the whole connection (EBUSY, a
			 * broken frame) and is closing it. Every waiter gets its reason. */
			err = code_from_wire(r->error);
			if (!c->dead_msg && *r->message)
				c->dead_msg = strdup(r->message);
			vad__response__free_unpacked(r, NULL);
			break;
		}
		int fd = -1;
		if (r->result_case == VAD__RESPONSE__RESULT_MAP_ARENA && r->error == VAD__ERROR__OK)
			fd = pop_fd(c);
		struct libvad_pending *p = c->pending;
		while (p && (p->id != r->id || p->done))
			p = p->next;
		if (!p) {
			/* Nobody asked (e.g. an unsolicited error before a close): drop it. */
			if (fd >= 0)
				close(fd);
			vad__response__free_unpacked(r, NULL);
			continue;
		}
		p->resp = r;
		p->fd = fd;
		p->err = VAD_OK;
		p->done = true;
		pthread_cond_signal(&p->cond);
	}
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
	/* A huge reply (a long client list) grew the buffer: give the memory back. */
	if (c->rcap > LIBVAD_RBUF_KEEP && c->rlen <= LIBVAD_RBUF_KEEP / 2) {
		uint8_t *b = realloc(c->rbuf, LIBVAD_RBUF_KEEP);
		if (b) {
			c->rbuf = b;
			c->rcap = LIBVAD_RBUF_KEEP;
		}
	}
	return err;
}

int libvad_call(vad_client *c, Vad__Request *req, Vad__Response **resp, int *fd)
{
	struct libvad_pending me = {.fd = -1};
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
	pthread_cond_init(&me.cond, NULL);

	/* Register before sending so a fast reply always finds its waiter. */
	pthread_mutex_lock(&c->lock);
	if (c->dead_err) {
		int dead = c->dead_err;
		pthread_mutex_unlock(&c->lock);
		pthread_cond_destroy(&me.cond);
		if (frame != stackbuf)
			free(frame);
		return dead;
	}
	me.next = c->pending;
	c->pending = &me;
	pthread_mutex_unlock(&c->lock);

	pthread_mutex_lock(&c->send_lock);
	int serr = send_all(c, frame, flen);
	pthread_mutex_unlock(&c->send_lock);
	if (frame != stackbuf)
		free(frame);

	pthread_mutex_lock(&c->lock);
	/* A send that fails because the daemon hung up is not fatal yet: read what it said
	 * before it left (an EBUSY reply, say); the reader fails every waiter at the end of
	 * the stream. Any other send failure may leave a partial frame on the wire. */
	if (serr != VAD_OK && serr != VAD_EGONE && !me.done) {
		fail_all_locked(c, VAD_EPROTO);
		me.err = serr;
	}
	while (!me.done) {
		if (c->reading) {
			pthread_cond_wait(&me.cond, &c->lock);
			continue;
		}
		c->reading = true;
		pthread_mutex_unlock(&c->lock);
		const char *why = NULL;
		int rerr = read_some(c, &why);
		pthread_mutex_lock(&c->lock);
		if (why && !c->dead_msg)
			c->dead_msg = strdup(why);
		if (rerr == VAD_OK)
			rerr = deliver_frames_locked(c);
		c->reading = false;
		if (rerr != VAD_OK)
			fail_all_locked(c, rerr);
		else
			wake_successor(c);
	}
	unlink_pending(c, &me);
	/* We may have been woken to read after our response came in: pass the role on. */
	if (!c->reading)
		wake_successor(c);
	pthread_mutex_unlock(&c->lock);
	pthread_cond_destroy(&me.cond);

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

int libvad_response_error(vad_client *c, const Vad__Response *r, Vad__Response__ResultCase expect)
{
	if (r->error != VAD__ERROR__OK) {
		int err = code_from_wire(r->error);
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
	close_fds(c->fdq, c->fdq_len);
	free(c->fdq);
	c->fdq = NULL;
	c->fdq_len = c->fdq_cap = 0;
	free(c->rbuf);
	c->rbuf = NULL;
	free(c->dead_msg);
	c->dead_msg = NULL;
	c->rlen = c->rcap = 0;
}
