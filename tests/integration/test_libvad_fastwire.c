/*
 * test_libvad_fastwire.c - libvad's hand-written Alloc/Free codec against protobuf-c:
 *   - random Alloc and Free request frames decode with protobuf-c to the fields encoded;
 *   - random Alloc and Free replies packed by protobuf-c decode to the same fields;
 *   - error replies, replies with a message, other results and lists above the storage are
 *     declined, so protobuf-c decides them;
 *   - truncations and random bytes: whenever the fast decoder accepts, protobuf-c accepts
 *     and agrees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "libvad/fastwire.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t rnd_value(void)
{
	unsigned bits = (unsigned)(rnd() % 65);
	return bits == 0 ? 0 : rnd() >> (64 - bits);
}

static const char *arenas[] = {"", "default", "big", "a-name-of-some-length"};

#define N_MAX 80

static void test_requests(void **state)
{
	(void)state;
	uint8_t buf[4096];
	for (int it = 0; it < 5000; it++) {
		size_t n = 1 + rnd() % N_MAX;
		size_t sizes[N_MAX];
		uint64_t offs[N_MAX];
		for (size_t i = 0; i < n; i++) {
			sizes[i] = (size_t)rnd_value();
			offs[i] = rnd_value();
		}
		const char *arena = arenas[rnd() % 4];
		uint64_t id = rnd_value(), align = rnd() % 2 ? rnd_value() : 0;
		uint32_t wait = rnd() % 2 ? (uint32_t)rnd_value() : 0; /* Alloc.wait_ms */
		bool alloc = rnd() % 2;
		size_t len = alloc ? libvad_fast_alloc_frame(buf, sizeof(buf), id, arena, align, n,
							     sizes, wait)
				   : libvad_fast_free_frame(buf, sizeof(buf), id, arena, n, offs);
		assert_true(len > VAD_FRAME_HEADER);
		size_t plen;
		assert_int_equal(vad_frame_peek(buf, len, 1u << 20, &plen), VAD_FRAME_READY);
		assert_int_equal(plen + VAD_FRAME_HEADER, len);
		Vad__Request *r = vad__request__unpack(NULL, plen, buf + VAD_FRAME_HEADER);
		assert_non_null(r);
		assert_int_equal(r->id, id);
		if (alloc) {
			assert_int_equal(r->op_case, VAD__REQUEST__OP_ALLOC);
			assert_string_equal(r->alloc->arena, arena);
			assert_int_equal(r->alloc->align, align);
			assert_int_equal(r->alloc->wait_ms, wait);
			if (n == 1) {
				assert_int_equal(r->alloc->size, sizes[0]);
				assert_int_equal(r->alloc->n_sizes, 0);
			} else {
				assert_int_equal(r->alloc->n_sizes, n);
				for (size_t i = 0; i < n; i++)
					assert_int_equal(r->alloc->sizes[i], sizes[i]);
			}
		} else {
			assert_int_equal(r->op_case, VAD__REQUEST__OP_FREE);
			assert_string_equal(r->free->arena, arena);
			assert_int_equal(r->free->n_offsets, n);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(r->free->offsets[i], offs[i]);
		}
		vad__request__free_unpacked(r, NULL);
		/* Too small a buffer: refused, nothing written past it. */
		assert_int_equal(
		    alloc ? libvad_fast_alloc_frame(buf, len - 1, id, arena, align, n, sizes, wait)
			  : libvad_fast_free_frame(buf, len - 1, id, arena, n, offs),
		    0);
	}
}

/* Does the fast decode f of a payload agree with protobuf-c's decode p? */
static void check_same_reply(const Vad__Response *p, const Vad__Response *f)
{
	assert_int_equal(p->id, f->id);
	assert_int_equal(p->error, VAD__ERROR__OK);
	assert_int_equal(p->result_case, f->result_case);
	if (p->result_case == VAD__RESPONSE__RESULT_ALLOC) {
		assert_string_equal(p->alloc->arena, f->alloc->arena);
		assert_int_equal(p->alloc->n_offsets, f->alloc->n_offsets);
		assert_int_equal(p->alloc->n_sizes, f->alloc->n_sizes);
		for (size_t i = 0; i < p->alloc->n_offsets; i++)
			assert_int_equal(p->alloc->offsets[i], f->alloc->offsets[i]);
		for (size_t i = 0; i < p->alloc->n_sizes; i++)
			assert_int_equal(p->alloc->sizes[i], f->alloc->sizes[i]);
	} else {
		assert_int_equal(p->result_case, VAD__RESPONSE__RESULT_FREE);
		assert_int_equal(p->free->freed, f->free->freed);
	}
}

/* Fast-decode data[0..len) with storage for cap entries; if it accepts, protobuf-c must
 * accept and agree. Returns whether it accepted. */
static bool fast_agrees(const uint8_t *data, size_t len, size_t cap)
{
	uint64_t offs[N_MAX], sizes[N_MAX];
	struct libvad_fast_reply f = {.offsets = offs, .sizes = sizes, .cap = cap};
	uint64_t id;
	bool scan = libvad_fast_scan_reply(data, len, &id);
	bool ok = libvad_fast_decode_reply(data, len, &f);
	if (ok) {
		assert_true(scan);
		assert_int_equal(id, f.resp.id);
		Vad__Response *p = vad__response__unpack(NULL, len, data);
		assert_non_null(p);
		check_same_reply(p, &f.resp);
		vad__response__free_unpacked(p, NULL);
	}
	return ok;
}

static void test_replies(void **state)
{
	(void)state;
	uint8_t buf[4096];
	for (int it = 0; it < 5000; it++) {
		Vad__Response r = VAD__RESPONSE__INIT;
		Vad__AllocReply ar = VAD__ALLOC_REPLY__INIT;
		Vad__FreeReply fr = VAD__FREE_REPLY__INIT;
		uint64_t offs[N_MAX], sizes[N_MAX];
		size_t n = rnd() % N_MAX;
		for (size_t i = 0; i < n; i++) {
			offs[i] = rnd_value();
			sizes[i] = rnd_value();
		}
		r.id = rnd_value();
		unsigned kind = (unsigned)(rnd() % 5);
		if (kind <= 2) {
			ar.arena = (char *)arenas[rnd() % 4];
			ar.n_offsets = ar.n_sizes = n;
			ar.offsets = offs;
			ar.sizes = sizes;
			r.result_case = VAD__RESPONSE__RESULT_ALLOC;
			r.alloc = &ar;
		} else {
			fr.freed = (uint32_t)rnd();
			r.result_case = VAD__RESPONSE__RESULT_FREE;
			r.free = &fr;
		}
		bool declined = false;
		if (kind == 2) { /* an error with its sentence: protobuf-c's path */
			r.error = VAD__ERROR__ENOSPC;
			r.message = "no room";
			declined = true;
		}
		size_t len = vad__response__pack(&r, buf);
		assert_true(len <= sizeof(buf));
		assert_true(fast_agrees(buf, len, N_MAX) != declined);
		if (r.result_case == VAD__RESPONSE__RESULT_ALLOC && n > 0 && !declined)
			assert_false(fast_agrees(buf, len, n - 1)); /* lists above the storage */
		for (size_t cut = 0; cut < len; cut++)
			fast_agrees(buf, cut, N_MAX);
		for (int k = 0; k < 4; k++) {
			buf[rnd() % len] = (uint8_t)rnd();
			fast_agrees(buf, len, N_MAX);
		}
	}
	/* Other results are declined. */
	Vad__Response r = VAD__RESPONSE__INIT;
	Vad__UnshareReply ur = VAD__UNSHARE_REPLY__INIT;
	r.id = 7;
	r.result_case = VAD__RESPONSE__RESULT_UNSHARE;
	r.unshare = &ur;
	size_t len = vad__response__pack(&r, buf);
	assert_false(fast_agrees(buf, len, N_MAX));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests),
	    cmocka_unit_test(test_replies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
