/*
 * fuzz_frame.c - libFuzzer target for the frame decoder: a receive buffer holding any bytes
 * is cut into frames with vad_frame_peek (under two limits: the default and a small one) and
 * each payload decoded as a Request, as the daemon does, and as a Response, as libvad does.
 * What decodes must re-encode to a frame that decodes to the same encoding again (protobuf
 * encoding is canonical for one message), and the header must announce the payload exactly.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_frame: %s\n", what);
	abort();
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Does m or any message inside it carry unknown fields? protobuf-c keeps them and writes
 * them back verbatim, and its decoder accepts an over-long varint for field number 0
 * (80 80 00) that it refuses in the short form it re-encodes (00): such input is not
 * expected to survive a round trip, the rest is. */
static bool has_unknown(const ProtobufCMessage *m)
{
	if (!m)
		return false;
	if (m->n_unknown_fields)
		return true;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		const char *base = (const char *)m;
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)(base + f->quantifier_offset) != f->id)
			continue; /* another member of the oneof is set */
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			ProtobufCMessage *const *arr =
			    *(ProtobufCMessage *const *const *)(base + f->offset);
			for (size_t j = 0; j < n; j++)
				if (has_unknown(arr[j]))
					return true;
		} else if (has_unknown(*(const ProtobufCMessage *const *)(base + f->offset))) {
			return true;
		}
	}
	return false;
}

/* A request that decoded must survive encode -> peek -> decode -> encode unchanged. */
static void roundtrip_request(const Vad__Request *req)
{
	if (has_unknown(&req->base))
		return;
	size_t want = vad_frame_request_size(req);
	uint8_t *a = malloc(want + 1), *b = malloc(want + 1);
	if (!a || !b)
		die("out of memory");
	if (vad_frame_encode_request(req, a, want - 1) != 0)
		die("a request was encoded into a buffer too small for it");
	size_t n = vad_frame_encode_request(req, a, want);
	if (n != want)
		die("vad_frame_request_size disagrees with vad_frame_encode_request");
	if (le32(a) != n - VAD_FRAME_HEADER)
		die("the header does not announce the payload length");
	size_t plen;
	enum vad_frame_status st = vad_frame_peek(a, n, UINT32_MAX, &plen);
	if (n == VAD_FRAME_HEADER) {
		/* An all-default request encodes to nothing: peek must call it empty. */
		if (st != VAD_FRAME_EMPTY)
			die("an empty payload was not reported as VAD_FRAME_EMPTY");
	} else {
		if (st != VAD_FRAME_READY || plen != n - VAD_FRAME_HEADER)
			die("peek does not see the frame just encoded");
		if (vad_frame_peek(a, n - 1, UINT32_MAX, &plen) != VAD_FRAME_NEED_MORE)
			die("peek accepted a frame one byte short");
		Vad__Request *again = vad__request__unpack(NULL, plen, a + VAD_FRAME_HEADER);
		if (!again)
			die("a re-encoded request does not decode");
		size_t m = vad_frame_encode_request(again, b, want);
		if (m != n || memcmp(a, b, n) != 0)
			die("a request changed across decode and encode");
		vad__request__free_unpacked(again, NULL);
	}
	free(a);
	free(b);
}

static void roundtrip_response(const Vad__Response *resp)
{
	if (has_unknown(&resp->base))
		return;
	size_t want = vad_frame_response_size(resp);
	uint8_t *a = malloc(want);
	if (!a)
		die("out of memory");
	size_t n = vad_frame_encode_response(resp, a, want);
	if (n != want || le32(a) != n - VAD_FRAME_HEADER)
		die("a response frame is not the size announced");
	if (n > VAD_FRAME_HEADER) {
		Vad__Response *again =
		    vad__response__unpack(NULL, n - VAD_FRAME_HEADER, a + VAD_FRAME_HEADER);
		if (!again)
			die("a re-encoded response does not decode");
		if (vad_frame_response_size(again) != n)
			die("a response changed size across decode and encode");
		vad__response__free_unpacked(again, NULL);
	}
	free(a);
}

/* Walk buf as a stream of frames under max, like a receiver does. */
static void walk(const uint8_t *buf, size_t len, size_t max)
{
	size_t pos = 0;
	for (;;) {
		size_t plen = (size_t)-1;
		enum vad_frame_status st = vad_frame_peek(buf + pos, len - pos, max, &plen);
		if (st == VAD_FRAME_NEED_MORE) {
			if (len - pos >= VAD_FRAME_HEADER &&
			    (size_t)le32(buf + pos) + VAD_FRAME_HEADER <= len - pos)
				die("peek wants more although the whole frame is there");
			return;
		}
		if (st == VAD_FRAME_TOO_BIG) {
			if (le32(buf + pos) <= max)
				die("peek refused a frame within the limit");
			return;
		}
		if (st == VAD_FRAME_EMPTY) {
			if (le32(buf + pos) != 0)
				die("peek called a non-empty frame empty");
			return;
		}
		if (st != VAD_FRAME_READY)
			die("peek returned an unknown status");
		if (plen != le32(buf + pos) || plen == 0 || plen > max ||
		    plen > len - pos - VAD_FRAME_HEADER)
			die("peek reported a payload length that is not the header's");
		const uint8_t *payload = buf + pos + VAD_FRAME_HEADER;
		Vad__Request *req = vad__request__unpack(NULL, plen, payload);
		if (req) {
			roundtrip_request(req);
			vad__request__free_unpacked(req, NULL);
		}
		Vad__Response *resp = vad__response__unpack(NULL, plen, payload);
		if (resp) {
			roundtrip_response(resp);
			vad__response__free_unpacked(resp, NULL);
		}
		pos += VAD_FRAME_HEADER + plen;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	walk(data, size, VAD_FRAME_MAX_DEFAULT);
	walk(data, size, 16);
	return 0;
}
