/*
 * rawclient.h - a protocol-level client for tests: a plain Unix socket that sends
 * arbitrary bytes or framed protobuf requests and reads framed responses (closing any
 * file descriptors the daemon passes by SCM_RIGHTS). No libvad involved, so tests can
 * send what libvad never would. Requests come from the builders of wire.h.
 */
#ifndef VAD_TEST_RAWCLIENT_H
#define VAD_TEST_RAWCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "vad.pb-c.h"
#include "wire.h"

struct vt_raw {
	int fd;
	uint8_t *buf; /* received, not yet consumed bytes */
	size_t len;
	size_t cap;
	uint64_t next_id;
	int fds_received; /* SCM_RIGHTS descriptors received so far */
	bool keep_fd;	  /* keep the next received descriptor in kept_fd instead of closing */
	int kept_fd;	  /* -1 until one was kept; the caller closes it */
};

/* Results of vt_raw_recv. */
enum vt_raw_result {
	VT_RAW_RESPONSE = 1, /* *out holds a decoded response */
	VT_RAW_CLOSED = 0,   /* the daemon closed the connection */
	VT_RAW_TIMEOUT = -1, /* nothing complete arrived in time */
	VT_RAW_ERROR = -2,   /* socket error or an undecodable frame from the daemon */
};

/* Connect to the socket at path. */
int vt_raw_connect(struct vt_raw *r, const char *path);

/* Close the connection and free the buffer. */
void vt_raw_close(struct vt_raw *r);

/* Send len raw bytes (all of them). */
int vt_raw_send(struct vt_raw *r, const void *bytes, size_t len);

/* Frame and send req; if req->id is 0 it gets the next id. Returns the id used, or 0
 * on failure. */
uint64_t vt_raw_send_request(struct vt_raw *r, Vad__Request *req);

/* Wait up to timeout_ms for one whole response frame. */
enum vt_raw_result vt_raw_recv(struct vt_raw *r, Vad__Response **out, int timeout_ms);

/* Wait up to timeout_ms for the daemon to close the connection, discarding anything it
 * sends first. Returns 1 if closed, 0 if still open at the deadline. */
int vt_raw_wait_closed(struct vt_raw *r, int timeout_ms);

/* Send hello and check the reply is OK; 0 on success. */
int vt_raw_hello(struct vt_raw *r, const char *name);

/* Send req and wait for its response (checking the echoed id); NULL on failure. */
Vad__Response *vt_raw_call(struct vt_raw *r, Vad__Request *req, int timeout_ms);

/* Allocate one range of size in the default arena; returns the error code (0 = OK) and
 * the offset in *offset; -1 if no response came. */
int vt_raw_alloc(struct vt_raw *r, uint64_t size, uint64_t *offset);

/* Free one offset in the default arena; returns the error code, -1 if no response. */
int vt_raw_free(struct vt_raw *r, uint64_t offset);

/* Free a response from vt_raw_recv/vt_raw_call. */
void vt_raw_response_free(Vad__Response *resp);

/* The name of a vad.Error value, for messages. */
const char *vt_error_name(int code);

#endif
