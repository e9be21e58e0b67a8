/* rawclient.c - protocol-level test client over a plain Unix socket; see rawclient.h. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "rawclient.h"

/* Responses larger than this are a daemon bug, not something to buffer. */
#define RAW_MAX_RESPONSE (16u * 1024u * 1024u)

int vt_raw_connect(struct vt_raw *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->kept_fd = -1;
	r->next_id = 1;
	/* A daemon that closes on us must not kill the test with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "raw: socket: %s\n", strerror(errno));
		return -1;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t plen = strlen(path);
	if (plen >= sizeof(sa.sun_path)) {
		fprintf(stderr, "harness: socket path too long: %s\n", path);
		close(fd);
		return -1;
	}
	memcpy(sa.sun_path, path, plen + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "raw: connect %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	r->fd = fd;
	return 0;
}

void vt_raw_close(struct vt_raw *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	free(r->buf);
	r->buf = NULL;
	r->len = r->cap = 0;
}

int vt_raw_send(struct vt_raw *r, const void *bytes, size_t len)
{
	const uint8_t *p = bytes;
	while (len > 0) {
		ssize_t w = send(r->fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "raw: send: %s\n", strerror(errno));
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

uint64_t vt_raw_send_request(struct vt_raw *r, Vad__Request *req)
{
	if (req->id == 0)
		req->id = r->next_id++;
	size_t n = vad_frame_request_size(req);
	uint8_t *frame = malloc(n);
	if (!frame)
		return 0;
	size_t got = vad_frame_encode_request(req, frame, n);
	int rc = got == n ? vt_raw_send(r, frame, n) : -1;
	free(frame);
	return rc == 0 ? req->id : 0;
}

/* Read whatever is available (waiting at most timeout_ms for the first byte); closes any
 * passed descriptors. Returns bytes read, 0 on EOF, -1 on timeout, -2 on error. */
static ssize_t raw_fill(struct vt_raw *r, int timeout_ms)
{
	struct pollfd p = {.fd = r->fd, .events = POLLIN};
	int n = poll(&p, 1, timeout_ms);
	if (n < 0)
		return errno == EINTR ? -1 : -2;
	if (n == 0)
		return -1;
	if (r->cap - r->len < 65536) {
		size_t cap = r->cap ? r->cap * 2 : 131072;
		uint8_t *b = realloc(r->buf, cap);
		if (!b)
			return -2;
		r->buf = b;
		r->cap = cap;
	}
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} ctrl;
	struct iovec iov = {.iov_base = r->buf + r->len, .iov_len = r->cap - r->len};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctrl.buf,
			     .msg_controllen = sizeof(ctrl.buf)};
	ssize_t got = recvmsg(r->fd, &msg, MSG_CMSG_CLOEXEC);
	if (got < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return -1;
		/* A reset from a daemon that dropped us counts as closed. */
		if (errno == ECONNRESET)
			return 0;
		fprintf(stderr, "raw: recvmsg: %s\n", strerror(errno));
		return -2;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int fds[16];
			memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
			for (size_t i = 0; i < nfds; i++) {
				if (r->keep_fd && r->kept_fd < 0)
					r->kept_fd = fds[i];
				else
					close(fds[i]);
				r->fds_received++;
			}
		}
	}
	r->len += (size_t)got;
	return got;
}

enum vt_raw_result vt_raw_recv(struct vt_raw *r, Vad__Response **out, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		size_t payload = 0;
		enum vad_frame_status st =
		    vad_frame_peek(r->buf, r->len, RAW_MAX_RESPONSE, &payload);
		if (st == VAD_FRAME_READY) {
			Vad__Response *resp =
			    vad__response__unpack(NULL, payload, r->buf + VAD_FRAME_HEADER);
			size_t used = VAD_FRAME_HEADER + payload;
			memmove(r->buf, r->buf + used, r->len - used);
			r->len -= used;
			if (!resp) {
				fprintf(stderr, "raw: the daemon sent an undecodable response\n");
				return VT_RAW_ERROR;
			}
			*out = resp;
			return VT_RAW_RESPONSE;
		}
		if (st != VAD_FRAME_NEED_MORE) {
			fprintf(stderr, "raw: the daemon sent a bad frame header (%d)\n", (int)st);
			return VT_RAW_ERROR;
		}
		uint64_t now = vt_now_ns();
		if (now >= deadline)
			return VT_RAW_TIMEOUT;
		ssize_t got = raw_fill(r, (int)((deadline - now) / 1000000u) + 1);
		if (got == 0) {
			if (r->len)
				fprintf(stderr,
					"raw: connection closed inside a frame (%zu bytes)\n",
					r->len);
			return VT_RAW_CLOSED;
		}
		if (got == -2)
			return VT_RAW_ERROR;
	}
}

int vt_raw_wait_closed(struct vt_raw *r, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		uint64_t now = vt_now_ns();
		if (now >= deadline)
			return 0;
		ssize_t got = raw_fill(r, (int)((deadline - now) / 1000000u) + 1);
		if (got == 0 || got == -2)
			return 1;
		r->len = 0; /* discard */
	}
}

Vad__Response *vt_raw_call(struct vt_raw *r, Vad__Request *req, int timeout_ms)
{
	uint64_t id = vt_raw_send_request(r, req);
	if (!id)
		return NULL;
	Vad__Response *resp = NULL;
	enum vt_raw_result res = vt_raw_recv(r, &resp, timeout_ms);
	if (res != VT_RAW_RESPONSE) {
		fprintf(stderr, "raw: no response to request %llu (%s)\n", (unsigned long long)id,
			res == VT_RAW_CLOSED	? "connection closed"
			: res == VT_RAW_TIMEOUT ? "timeout"
						: "error");
		return NULL;
	}
	if (resp->id != id) {
		fprintf(stderr, "raw: response id %llu, expected %llu\n",
			(unsigned long long)resp->id, (unsigned long long)id);
		vad__response__free_unpacked(resp, NULL);
		return NULL;
	}
	return resp;
}

int vt_raw_hello(struct vt_raw *r, const char *name)
{
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(r, vt_req_hello(&q, name), vt_timeout_ms(5000));
	if (!resp)
		return -1;
	int rc = 0;
	if (resp->error != VAD__ERROR__OK || resp->result_case != VAD__RESPONSE__RESULT_HELLO) {
		fprintf(stderr, "raw: hello refused: %s %s\n", vt_error_name(resp->error),
			resp->message ? resp->message : "");
		rc = -1;
	}
	vad__response__free_unpacked(resp, NULL);
	return rc;
}

int vt_raw_alloc(struct vt_raw *r, uint64_t size, uint64_t *offset)
{
	struct vt_req q;
	Vad__Response *resp =
	    vt_raw_call(r, vt_req_alloc(&q, NULL, size, 0, 0), vt_timeout_ms(5000));
	if (!resp)
		return -1;
	int rc = resp->error;
	if (rc == VAD__ERROR__OK) {
		if (resp->result_case != VAD__RESPONSE__RESULT_ALLOC || !resp->alloc ||
		    resp->alloc->n_offsets != 1) {
			fprintf(stderr, "raw: alloc reply without exactly one offset\n");
			rc = -1;
		} else {
			*offset = resp->alloc->offsets[0];
		}
	}
	vad__response__free_unpacked(resp, NULL);
	return rc;
}

int vt_raw_free(struct vt_raw *r, uint64_t offset)
{
	struct vt_req q;
	Vad__Response *resp =
	    vt_raw_call(r, vt_req_free(&q, NULL, &offset, 1), vt_timeout_ms(5000));
	if (!resp)
		return -1;
	int rc = resp->error;
	vad__response__free_unpacked(resp, NULL);
	return rc;
}

void vt_raw_response_free(Vad__Response *resp)
{
	if (resp)
		vad__response__free_unpacked(resp, NULL);
}

const char *vt_error_name(int code)
{
	const ProtobufCEnumValue *v =
	    protobuf_c_enum_descriptor_get_value(&vad__error__descriptor, code);
	return v ? v->name : "(unknown error code)";
}
