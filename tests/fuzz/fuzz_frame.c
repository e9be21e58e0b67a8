/*
 * fuzz_frame.c - libFuzzer target for the frame decoder: a receive buffer holding any bytes
 * is cut into frames with vad_frame_peek (under two limits: the default and a small one) and
 * each payload decoded as a Request, as the daemon does, and as a Response, as libvad does.
 * What decodes must re-encode to a frame that decodes to the same encoding again (protobuf
 * encoding is canonical for one message), and the header must announce the payload exactly.
 *
 * Differentially, the daemon's hand-written hot-path codec (daemon/fastwire.h) must agree
 * with protobuf-c: a request it decodes, protobuf-c decodes to the same operation and
 * fields; a reply it encodes is byte for byte what protobuf-c encodes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastwire.h"
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

/* A bump allocator for fastwire's objects, released all at once. */
struct bump {
	void *blocks[4096];
	size_t n;
};

static void *bump_alloc(void *data, size_t size)
{
	struct bump *b = data;
	if (b->n == sizeof(b->blocks) / sizeof(b->blocks[0]))
		return NULL; /* fastwire must cope: it declines */
	void *p = malloc(size);
	if (p)
		b->blocks[b->n++] = p;
	return p;
}

static void bump_free(void *data, void *p)
{
	(void)data;
	(void)p; /* released with the rest */
}

static bool same_string(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool same_u64s(size_t na, const uint64_t *a, size_t nb, const uint64_t *b)
{
	return na == nb && (na == 0 || memcmp(a, b, na * sizeof(*a)) == 0);
}

/* fastwire's request against protobuf-c's, field by field. */
static void compare_fast_request(const uint8_t *payload, size_t len, const Vad__Request *pb)
{
	struct bump b = {.n = 0};
	ProtobufCAllocator alloc = {.alloc = bump_alloc, .free = bump_free, .allocator_data = &b};
	Vad__Request *fast = vad_fast_unpack_request(&alloc, len, payload);
	if (fast) {
		if (!pb)
			die("fastwire decoded a request that protobuf-c refuses");
		if (fast->id != pb->id || fast->op_case != pb->op_case)
			die("fastwire and protobuf-c disagree on the id or the operation");
		if (fast->op_case == VAD__REQUEST__OP_ALLOC) {
			const Vad__Alloc *x = fast->alloc, *y = pb->alloc;
			if (x->size != y->size || x->align != y->align || x->count != y->count ||
			    !same_string(x->arena, y->arena) ||
			    !same_u64s(x->n_sizes, x->sizes, y->n_sizes, y->sizes))
				die("fastwire and protobuf-c decode an Alloc differently");
		} else if (fast->op_case == VAD__REQUEST__OP_FREE) {
			const Vad__Free *x = fast->free, *y = pb->free;
			if (!same_string(x->arena, y->arena) ||
			    !same_u64s(x->n_offsets, x->offsets, y->n_offsets, y->offsets))
				die("fastwire and protobuf-c decode a Free differently");
		} else {
			die("fastwire decoded an operation other than Alloc or Free");
		}
		/* What it built must be a well-formed protobuf-c message too. */
		if (vad__request__get_packed_size(fast) != vad__request__get_packed_size(pb) &&
		    !has_unknown(&pb->base))
			die("fastwire's request packs to another size than protobuf-c's");
	}
	for (size_t i = 0; i < b.n; i++)
		free(b.blocks[i]);
}

/* fastwire's reply encoding against protobuf-c's. */
static void compare_fast_response(const Vad__Response *resp)
{
	struct vad_fast_layout lay;
	size_t n = vad_fast_response_size(resp, &lay);
	if (!n)
		return;
	if (has_unknown(&resp->base))
		return; /* fastwire encodes the known fields only */
	size_t want = vad__response__get_packed_size(resp);
	if (n != want)
		die("fastwire's reply size differs from protobuf-c's");
	uint8_t *a = malloc(n), *b = malloc(n);
	if (!a || !b)
		die("out of memory");
	vad_fast_pack_response(resp, &lay, a);
	vad__response__pack(resp, b);
	if (memcmp(a, b, n) != 0)
		die("fastwire encodes a reply differently from protobuf-c");
	free(a);
	free(b);
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
		compare_fast_request(payload, plen, req);
		if (req) {
			roundtrip_request(req);
			vad__request__free_unpacked(req, NULL);
		}
		Vad__Response *resp = vad__response__unpack(NULL, plen, payload);
		if (resp) {
			compare_fast_response(resp);
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
