/*
 * test_daemon_fastwire.c - the hand-written Alloc/Free codec against protobuf-c:
 *   - random Alloc and Free requests (protobuf-c encoded) decode to the same fields;
 *   - every other request, unknown fields, unpacked lists and repeated operations are
 *     declined (NULL), so protobuf-c decides them;
 *   - random byte strings and truncations of valid requests: whenever the fast decoder
 *     accepts, protobuf-c accepts too and agrees on every field;
 *   - random Alloc and Free replies encode to exactly protobuf-c's bytes; error replies and
 *     other results are declined (size 0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fastwire.h"
#include "scratch.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Values of every varint length, zero included. */
static uint64_t rnd_value(void)
{
	unsigned bits = (unsigned)(rnd() % 65);
	return bits == 0 ? 0 : rnd() >> (64 - bits);
}

static unsigned iterations(void)
{
	const char *m = getenv("VAD_TEST_MODE");
	return m && strcmp(m, "normal") != 0 ? 3000 : 20000;
}

static const char *arenas[] = {"", "default", "big", "a-name-of-some-length"};

static void check_same_request(const Vad__Request *a, const Vad__Request *b)
{
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->op_case, b->op_case);
	if (a->op_case == VAD__REQUEST__OP_ALLOC) {
		assert_int_equal(a->alloc->size, b->alloc->size);
		assert_int_equal(a->alloc->align, b->alloc->align);
		assert_int_equal(a->alloc->count, b->alloc->count);
		assert_int_equal(a->alloc->wait_ms, b->alloc->wait_ms);
		assert_string_equal(a->alloc->arena, b->alloc->arena);
		assert_int_equal(a->alloc->n_sizes, b->alloc->n_sizes);
		for (size_t i = 0; i < a->alloc->n_sizes; i++)
			assert_int_equal(a->alloc->sizes[i], b->alloc->sizes[i]);
	} else {
		assert_int_equal(a->op_case, VAD__REQUEST__OP_FREE);
		assert_string_equal(a->free->arena, b->free->arena);
		assert_int_equal(a->free->n_offsets, b->free->n_offsets);
		for (size_t i = 0; i < a->free->n_offsets; i++)
			assert_int_equal(a->free->offsets[i], b->free->offsets[i]);
	}
}

/* A random Alloc or Free request encoded by protobuf-c into buf; returns its length. */
static size_t random_request(uint8_t *buf, size_t cap, uint64_t *list)
{
	Vad__Request req = VAD__REQUEST__INIT;
	Vad__Alloc a = VAD__ALLOC__INIT;
	Vad__Free f = VAD__FREE__INIT;
	size_t n = rnd() % 4 == 0 ? 0 : rnd() % 70;
	for (size_t i = 0; i < n; i++)
		list[i] = rnd_value();
	req.id = rnd_value();
	if (rnd() & 1) {
		a.size = rnd_value();
		a.align = rnd_value();
		a.count = (uint32_t)rnd_value();
		a.wait_ms = rnd() % 2 ? (uint32_t)rnd_value() : 0; /* field 40: a 2-byte key */
		a.arena = (char *)arenas[rnd() % 4];
		a.n_sizes = rnd() % 2 ? n : 0;
		a.sizes = list;
		req.op_case = VAD__REQUEST__OP_ALLOC;
		req.alloc = &a;
	} else {
		f.arena = (char *)arenas[rnd() % 4];
		f.n_offsets = n;
		f.offsets = list;
		req.op_case = VAD__REQUEST__OP_FREE;
		req.free = &f;
	}
	size_t len = vad__request__get_packed_size(&req);
	assert_true(len <= cap);
	vad__request__pack(&req, buf);
	return len;
}

static void test_requests_match_protobuf_c(void **state)
{
	struct vad_scratch s;
	uint8_t buf[2048];
	uint64_t list[80];
	vad_scratch_init(&s);
	for (unsigned it = 0; it < iterations(); it++) {
		size_t len = random_request(buf, sizeof(buf), list);
		Vad__Request *slow = vad__request__unpack(&s.pb, len, buf);
		Vad__Request *fast = vad_fast_unpack_request(&s.pb, len, buf);
		assert_non_null(slow);
		assert_non_null(fast);
		check_same_request(fast, slow);
		vad_scratch_reset(&s);
	}
	vad_scratch_fini(&s);
}

/* Prefixes and random corruptions: fast accepts only what protobuf-c accepts alike. */
static void test_malformed_never_disagrees(void **state)
{
	struct vad_scratch s;
	uint8_t buf[2048], bad[2048];
	uint64_t list[80];
	unsigned accepted = 0;
	vad_scratch_init(&s);
	for (unsigned it = 0; it < iterations(); it++) {
		size_t len = random_request(buf, sizeof(buf), list);
		size_t blen = len ? rnd() % (len + 1) : 0;
		memcpy(bad, buf, blen);
		if (blen && rnd() % 2)
			bad[rnd() % blen] = (uint8_t)rnd();
		if (rnd() % 8 == 0) { /* pure noise */
			blen = rnd() % 64;
			for (size_t i = 0; i < blen; i++)
				bad[i] = (uint8_t)rnd();
		}
		Vad__Request *fast = vad_fast_unpack_request(&s.pb, blen, bad);
		if (fast) {
			Vad__Request *slow = vad__request__unpack(&s.pb, blen, bad);
			assert_non_null(slow);
			check_same_request(fast, slow);
			accepted++;
		}
		vad_scratch_reset(&s);
	}
	assert_true(accepted > 0); /* some truncations are still whole messages */
	vad_scratch_fini(&s);
}

static void test_declines_other_messages(void **state)
{
	struct vad_scratch s;
	uint8_t buf[512];
	vad_scratch_init(&s);

	/* Other operations. */
	Vad__Request req = VAD__REQUEST__INIT;
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = (char *)"x";
	h.version = 1;
	req.id = 7;
	req.op_case = VAD__REQUEST__OP_HELLO;
	req.hello = &h;
	size_t len = vad__request__pack(&req, buf);
	assert_null(vad_fast_unpack_request(&s.pb, len, buf));
	Vad__StatsRequest st = VAD__STATS_REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_STATS;
	req.stats = &st;
	len = vad__request__pack(&req, buf);
	assert_null(vad_fast_unpack_request(&s.pb, len, buf));

	/* No operation at all. */
	req.op_case = VAD__REQUEST__OP__NOT_SET;
	len = vad__request__pack(&req, buf);
	assert_null(vad_fast_unpack_request(&s.pb, len, buf));

	/* Empty input. */
	assert_null(vad_fast_unpack_request(&s.pb, 0, buf));

	/* A Free, then an unknown field 100 after it (a varint: tag 800 is 0xA0 0x06). */
	Vad__Free f = VAD__FREE__INIT;
	uint64_t offs[2] = {4096, 8192};
	f.n_offsets = 2;
	f.offsets = offs;
	req.op_case = VAD__REQUEST__OP_FREE;
	req.free = &f;
	len = vad__request__pack(&req, buf);
	assert_non_null(vad_fast_unpack_request(&s.pb, len, buf));
	buf[len] = 0xA0;
	buf[len + 1] = 0x06;
	buf[len + 2] = 1;
	assert_null(vad_fast_unpack_request(&s.pb, len + 3, buf));
	assert_non_null(vad__request__unpack(&s.pb, len + 3, buf)); /* protobuf-c keeps it */

	/* The operation twice (protobuf-c merges them). */
	memcpy(buf + len, buf, len);
	assert_null(vad_fast_unpack_request(&s.pb, 2 * len, buf));

	/* An unpacked list: Free{offsets: 5, 6} as two varint fields 2. */
	const uint8_t unpacked[] = {0x08, 0x01, 0x22, 0x04, 0x10, 0x05, 0x10, 0x06};
	assert_null(vad_fast_unpack_request(&s.pb, sizeof(unpacked), unpacked));
	Vad__Request *slow = vad__request__unpack(&s.pb, sizeof(unpacked), unpacked);
	assert_non_null(slow);
	assert_int_equal(slow->free->n_offsets, 2);

	/* A length prefix of 6 bytes (protobuf-c reads at most 5): Request{id 22, Alloc{size 0,
	 * size 23, arena: length 80 80 80 80 80 00}} (the fuzzer's service-bugs #8 input). */
	const uint8_t longlen[] = {0x08, 0x16, 0x1a, 0x0b, 0x08, 0x00, 0x08, 0x17,
				   0x1a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
	assert_null(vad__request__unpack(&s.pb, sizeof(longlen), longlen));
	assert_null(vad_fast_unpack_request(&s.pb, sizeof(longlen), longlen));

	/* A tag of 6 bytes (protobuf-c reads at most 5): id written as 88 80 80 80 80 00. */
	const uint8_t longtag[] = {0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, 0x22, 0x00};
	assert_null(vad__request__unpack(&s.pb, sizeof(longtag), longtag));
	assert_null(vad_fast_unpack_request(&s.pb, sizeof(longtag), longtag));

	/* The same tag in 5 bytes is fine for both. */
	const uint8_t tag5[] = {0x88, 0x80, 0x80, 0x80, 0x00, 0x01, 0x22, 0x00};
	assert_non_null(vad__request__unpack(&s.pb, sizeof(tag5), tag5));
	assert_non_null(vad_fast_unpack_request(&s.pb, sizeof(tag5), tag5));

	/* A varint of 11 bytes. */
	const uint8_t longvar[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
				   0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	assert_null(vad_fast_unpack_request(&s.pb, sizeof(longvar), longvar));
	vad_scratch_fini(&s);
}

static void test_responses_byte_identical(void **state)
{
	uint8_t slow[2048], fast[2048];
	uint64_t offs[80], sizes[80];
	for (unsigned it = 0; it < iterations(); it++) {
		Vad__Response r = VAD__RESPONSE__INIT;
		Vad__AllocReply a = VAD__ALLOC_REPLY__INIT;
		Vad__FreeReply f = VAD__FREE_REPLY__INIT;
		size_t n = rnd() % 70;
		for (size_t i = 0; i < n; i++) {
			offs[i] = rnd_value();
			sizes[i] = rnd_value();
		}
		r.id = rnd_value();
		if (rnd() & 1) {
			a.arena = (char *)arenas[rnd() % 4];
			a.n_offsets = n;
			a.offsets = offs;
			a.n_sizes = rnd() % 3 ? n : 0;
			a.sizes = sizes;
			r.result_case = VAD__RESPONSE__RESULT_ALLOC;
			r.alloc = &a;
		} else {
			f.freed = (uint32_t)rnd_value();
			r.result_case = VAD__RESPONSE__RESULT_FREE;
			r.free = &f;
		}
		size_t want = vad__response__get_packed_size(&r);
		struct vad_fast_layout lay;
		size_t got = vad_fast_response_size(&r, &lay);
		assert_int_equal(got, want);
		memset(fast, 0xee, sizeof(fast));
		vad__response__pack(&r, slow);
		vad_fast_pack_response(&r, &lay, fast);
		assert_memory_equal(fast, slow, want);
		assert_int_equal(fast[want], 0xee); /* nothing written past the end */
	}
}

static void test_declines_other_responses(void **state)
{
	Vad__Response r = VAD__RESPONSE__INIT;
	Vad__FreeReply f = VAD__FREE_REPLY__INIT;
	Vad__StatsReply st = VAD__STATS_REPLY__INIT;
	struct vad_fast_layout lay;
	r.id = 3;
	assert_int_equal(vad_fast_response_size(&r, &lay), 0); /* no result */
	r.result_case = VAD__RESPONSE__RESULT_FREE;
	r.free = &f;
	assert_true(vad_fast_response_size(&r, &lay) > 0);
	r.error = VAD__ERROR__ENOTHELD; /* a partial free carries an error and its sentence */
	r.message = (char *)"range 0x1000 is not held";
	assert_int_equal(vad_fast_response_size(&r, &lay), 0);
	r.error = VAD__ERROR__OK;
	r.message = (char *)"";
	r.result_case = VAD__RESPONSE__RESULT_STATS;
	r.stats = &st;
	assert_int_equal(vad_fast_response_size(&r, &lay), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests_match_protobuf_c),
	    cmocka_unit_test(test_malformed_never_disagrees),
	    cmocka_unit_test(test_declines_other_messages),
	    cmocka_unit_test(test_responses_byte_identical),
	    cmocka_unit_test(test_declines_other_responses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
