/*
 * frame.h - the length-prefixed framing shared by the daemon and libvad.
 *
 * A frame is a 4-byte little-endian payload length followed by the payload (one
 * protobuf-c encoded vad.Request or vad.Response). Pure functions over buffers:
 * no I/O here, so the fuzzers can drive them directly.
 */
#ifndef VAD_FRAME_H
#define VAD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "vad.pb-c.h"

#define VAD_PROTOCOL_VERSION  1
#define VAD_FRAME_HEADER      4
#define VAD_FRAME_MAX_DEFAULT (64u * 1024u)

/* Result of looking at the front of a receive buffer. */
enum vad_frame_status {
	VAD_FRAME_NEED_MORE = 0, /* not a whole frame yet */
	VAD_FRAME_READY = 1,	 /* a whole frame: payload at buf + 4, *payload_len bytes */
	VAD_FRAME_TOO_BIG = -1,	 /* declared length exceeds max: the stream is unusable */
	VAD_FRAME_EMPTY = -2,	 /* declared length 0: no message can be that short here */
};

/* Inspect buf[0..avail): is a whole frame there, and how long is its payload. */
enum vad_frame_status vad_frame_peek(const uint8_t *buf, size_t avail, size_t max_payload,
				     size_t *payload_len);

/* Write the 4-byte little-endian header for a payload of len bytes. */
void vad_frame_put_header(uint8_t *out, uint32_t len);

/* Encode a request as a whole frame into out (capacity cap); returns the frame length
 * or 0 if it does not fit. */
size_t vad_frame_encode_request(const Vad__Request *req, uint8_t *out, size_t cap);

/* Encode a response as a whole frame into out (capacity cap); returns the frame length
 * or 0 if it does not fit. */
size_t vad_frame_encode_response(const Vad__Response *resp, uint8_t *out, size_t cap);

/* Size of the whole frame that would carry resp. */
size_t vad_frame_response_size(const Vad__Response *resp);

/* Size of the whole frame that would carry req. */
size_t vad_frame_request_size(const Vad__Request *req);

#endif
