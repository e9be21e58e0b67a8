/* test_proto_frame.c - framing (peek, encode, round trips) and fd passing over a socketpair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdpass.h"
#include "frame.h"
#include "wire.h"

/* ---- framing --------------------------------------------------------------------- */

static void test_header_little_endian(void **state)
{
	(void)state;
	uint8_t h[4];
	vad_frame_put_header(h, 0x04030201u);
	assert_int_equal(h[0], 1);
	assert_int_equal(h[1], 2);
	assert_int_equal(h[2], 3);
	assert_int_equal(h[3], 4);
	vad_frame_put_header(h, 0xffffffffu);
	for (int i = 0; i < 4; i++)
		assert_int_equal(h[i], 0xff);
}

static void test_peek_partial_headers(void **state)
{
	(void)state;
	uint8_t buf[16];
	vad_frame_put_header(buf, 5);
	memcpy(buf + 4, "abcde", 5);
	size_t len = 999;
	for (size_t avail = 0; avail < VAD_FRAME_HEADER; avail++) {
		assert_int_equal(vad_frame_peek(buf, avail, 64, &len), VAD_FRAME_NEED_MORE);
		assert_int_equal(len, 999); /* untouched until the header is whole */
	}
	for (size_t avail = VAD_FRAME_HEADER; avail < 9; avail++) {
		assert_int_equal(vad_frame_peek(buf, avail, 64, &len), VAD_FRAME_NEED_MORE);
		assert_int_equal(len, 5); /* the length is known as soon as the header is */
	}
	assert_int_equal(vad_frame_peek(buf, 9, 64, &len), VAD_FRAME_READY);
	assert_int_equal(len, 5);
	/* bytes of the next frame behind it do not matter */
	assert_int_equal(vad_frame_peek(buf, sizeof(buf), 64, &len), VAD_FRAME_READY);
	assert_int_equal(len, 5);
}

static void test_peek_empty_and_too_big(void **state)
{
	(void)state;
	uint8_t buf[8] = {0};
	size_t len = 0;
	assert_int_equal(vad_frame_peek(buf, 4, 64, &len), VAD_FRAME_EMPTY);
	vad_frame_put_header(buf, 65);
	assert_int_equal(vad_frame_peek(buf, 4, 64, &len), VAD_FRAME_TOO_BIG);
	vad_frame_put_header(buf, 64);
	assert_int_equal(vad_frame_peek(buf, 4, 64, &len), VAD_FRAME_NEED_MORE);
	assert_int_equal(len, 64);
	vad_frame_put_header(buf, 0xffffffffu);
	assert_int_equal(vad_frame_peek(buf, 4, VAD_FRAME_MAX_DEFAULT, &len), VAD_FRAME_TOO_BIG);
	/* too big is known from the header alone, before any payload arrives */
	vad_frame_put_header(buf, VAD_FRAME_MAX_DEFAULT + 1);
	assert_int_equal(vad_frame_peek(buf, 4, VAD_FRAME_MAX_DEFAULT, &len), VAD_FRAME_TOO_BIG);
}

static void test_request_round_trip(void **state)
{
	(void)state;
	uint64_t sizes[] = {4096, 1u << 20, 12345};
	Vad__Alloc alloc = VAD__ALLOC__INIT;
	alloc.size = 8192;
	alloc.align = 65536;
	alloc.arena = "default";
	alloc.count = 3;
	alloc.n_sizes = 3;
	alloc.sizes = sizes;
	Vad__Request req = VAD__REQUEST__INIT;
	req.id = 0x1122334455667788ull;
	req.op_case = VAD__REQUEST__OP_ALLOC;
	req.alloc = &alloc;

	uint8_t buf[256];
	size_t want = vad_frame_request_size(&req);
	assert_true(want > VAD_FRAME_HEADER);
	/* one byte short does not fit; exactly enough does */
	assert_int_equal(vad_frame_encode_request(&req, buf, want - 1), 0);
	size_t n = vad_frame_encode_request(&req, buf, want);
	assert_int_equal(n, want);

	size_t len;
	assert_int_equal(vad_frame_peek(buf, n, VAD_FRAME_MAX_DEFAULT, &len), VAD_FRAME_READY);
	assert_int_equal(len + VAD_FRAME_HEADER, n);
	Vad__Request *got = vad__request__unpack(NULL, len, buf + VAD_FRAME_HEADER);
	assert_non_null(got);
	assert_int_equal(got->id, req.id);
	assert_int_equal(got->op_case, VAD__REQUEST__OP_ALLOC);
	assert_int_equal(got->alloc->size, 8192);
	assert_int_equal(got->alloc->align, 65536);
	assert_string_equal(got->alloc->arena, "default");
	assert_int_equal(got->alloc->count, 3);
	assert_int_equal(got->alloc->n_sizes, 3);
	assert_memory_equal(got->alloc->sizes, sizes, sizeof(sizes));
	vad__request__free_unpacked(got, NULL);
}

static void test_response_round_trip(void **state)
{
	(void)state;
	Vad__ArenaInfo info = VAD__ARENA_INFO__INIT;
	info.name = "default";
	info.size = 4ull << 30;
	info.quantum = 4096;
	info.backing = "memfd";
	info.allowed = 1;
	Vad__MapArenaReply map = VAD__MAP_ARENA_REPLY__INIT;
	map.arena = &info;
	Vad__Response resp = VAD__RESPONSE__INIT;
	resp.id = 42;
	resp.error = VAD__ERROR__EPERM;
	resp.message = "you may not";
	resp.result_case = VAD__RESPONSE__RESULT_MAP_ARENA;
	resp.map_arena = &map;

	uint8_t buf[256];
	size_t n = vad_frame_encode_response(&resp, buf, sizeof(buf));
	assert_int_equal(n, vad_frame_response_size(&resp));
	assert_int_equal(vad_frame_encode_response(&resp, buf, n - 1), 0);
	assert_int_equal(vad_frame_encode_response(&resp, buf, 3), 0);
	size_t len;
	assert_int_equal(vad_frame_peek(buf, n, VAD_FRAME_MAX_DEFAULT, &len), VAD_FRAME_READY);
	Vad__Response *got = vad__response__unpack(NULL, len, buf + VAD_FRAME_HEADER);
	assert_non_null(got);
	assert_int_equal(got->id, 42);
	assert_int_equal(got->error, VAD__ERROR__EPERM);
	assert_string_equal(got->message, "you may not");
	assert_int_equal(got->result_case, VAD__RESPONSE__RESULT_MAP_ARENA);
	assert_string_equal(got->map_arena->arena->name, "default");
	assert_int_equal(got->map_arena->arena->size, 4ull << 30);
	assert_int_equal(got->map_arena->arena->quantum, 4096);
	assert_true(got->map_arena->arena->allowed);
	vad__response__free_unpacked(got, NULL);
}

/* Even the emptiest request a client can send (an op with no fields) is a non-empty frame. */
static void test_smallest_request_is_not_empty(void **state)
{
	(void)state;
	Vad__ArenasRequest ar = VAD__ARENAS_REQUEST__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_ARENAS;
	req.arenas = &ar;
	uint8_t buf[16];
	size_t n = vad_frame_encode_request(&req, buf, sizeof(buf));
	assert_true(n > VAD_FRAME_HEADER);
	size_t len;
	assert_int_equal(vad_frame_peek(buf, n, 64, &len), VAD_FRAME_READY);
}

/* A stream of frames fed one byte at a time comes out frame by frame, intact. */
static void test_stream_of_frames(void **state)
{
	(void)state;
	uint8_t stream[4096];
	size_t total = 0;
	for (uint64_t i = 1; i <= 20; i++) {
		Vad__Free fr = VAD__FREE__INIT;
		uint64_t offs[8];
		for (unsigned k = 0; k < 8; k++)
			offs[k] = i * 4096 * (k + 1);
		fr.arena = "a";
		fr.n_offsets = i % 8 + 1;
		fr.offsets = offs;
		Vad__Request req = VAD__REQUEST__INIT;
		req.id = i;
		req.op_case = VAD__REQUEST__OP_FREE;
		req.free = &fr;
		size_t n = vad_frame_encode_request(&req, stream + total, sizeof(stream) - total);
		assert_true(n > 0);
		total += n;
	}
	uint8_t rx[4096];
	size_t have = 0, pos = 0;
	uint64_t next_id = 1;
	for (size_t fed = 0; fed < total; fed++) {
		rx[have++] = stream[fed];
		for (;;) {
			size_t len;
			enum vad_frame_status st =
			    vad_frame_peek(rx + pos, have - pos, VAD_FRAME_MAX_DEFAULT, &len);
			if (st == VAD_FRAME_NEED_MORE)
				break;
			assert_int_equal(st, VAD_FRAME_READY);
			Vad__Request *got = vad__request__unpack(NULL, len, rx + pos + 4);
			assert_non_null(got);
			assert_int_equal(got->id, next_id);
			assert_int_equal(got->op_case, VAD__REQUEST__OP_FREE);
			assert_int_equal(got->free->n_offsets, next_id % 8 + 1);
			assert_int_equal(got->free->offsets[0], next_id * 4096);
			vad__request__free_unpacked(got, NULL);
			next_id++;
			pos += VAD_FRAME_HEADER + len;
		}
	}
	assert_int_equal(next_id, 21);
	assert_int_equal(pos, total);
}

/* A request that encodes beyond the default maximum is refused by the receiving peek. */
static void test_encoded_frame_too_big(void **state)
{
	(void)state;
	size_t n_off = 10000; /* ten-byte varints: about 100 KB */
	uint64_t *offs = malloc(n_off * sizeof(*offs));
	assert_non_null(offs);
	for (size_t i = 0; i < n_off; i++)
		offs[i] = UINT64_MAX - i;
	Vad__Free fr = VAD__FREE__INIT;
	fr.n_offsets = n_off;
	fr.offsets = offs;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_FREE;
	req.free = &fr;
	size_t size = vad_frame_request_size(&req);
	assert_true(size > VAD_FRAME_MAX_DEFAULT + VAD_FRAME_HEADER);
	uint8_t *buf = malloc(size);
	assert_non_null(buf);
	assert_int_equal(vad_frame_encode_request(&req, buf, size), size);
	size_t len;
	assert_int_equal(vad_frame_peek(buf, size, VAD_FRAME_MAX_DEFAULT, &len), VAD_FRAME_TOO_BIG);
	assert_int_equal(vad_frame_peek(buf, size, size, &len), VAD_FRAME_READY);
	free(buf);
	free(offs);
}

/* ---- fd passing ---------------------------------------------------------------------- */

static int open_fd_count(void)
{
	int n = 0;
	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

/* A memfd whose size tells it apart from the others. */
static int marked_memfd(off_t size)
{
	int fd = memfd_create("vad-test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	return fd;
}

static off_t fd_size(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return st.st_size;
}

/* The overheads of wire.h bound what protobuf-c writes, at the largest id and offsets. */
static void test_frame_overheads_bound_encoding(void **state)
{
	(void)state;
	static uint64_t offsets[200], sizes[200];
	char name[64];
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	size_t packed = 0;
	for (size_t i = 0; i < 200; i++) {
		offsets[i] = UINT64_MAX - i;
		sizes[i] = 1ull << (i % 64);
		assert_int_equal(vad_varint_len(offsets[i]), 10);
		packed += vad_varint_len(sizes[i]);
	}
	assert_int_equal(vad_varint_len(0), 1);
	assert_int_equal(vad_varint_len(127), 1);
	assert_int_equal(vad_varint_len(128), 2);

	Vad__Free f = VAD__FREE__INIT;
	f.arena = name;
	f.n_offsets = 200;
	f.offsets = offsets;
	Vad__Request req = VAD__REQUEST__INIT;
	req.id = UINT64_MAX;
	req.op_case = VAD__REQUEST__OP_FREE;
	req.free = &f;
	assert_true(vad_frame_request_size(&req) <=
		    VAD_FREE_FRAME_OVERHEAD + strlen(name) + 200 * 10);

	Vad__AllocReply a = VAD__ALLOC_REPLY__INIT;
	a.arena = name;
	a.n_offsets = a.n_sizes = 200;
	a.offsets = offsets;
	a.sizes = sizes;
	Vad__Response resp = VAD__RESPONSE__INIT;
	resp.id = UINT64_MAX;
	resp.result_case = VAD__RESPONSE__RESULT_ALLOC;
	resp.alloc = &a;
	assert_true(vad_frame_response_size(&resp) <=
		    VAD_ALLOC_REPLY_FRAME_OVERHEAD + strlen(name) + 200 * 10 + packed);
	assert_true(VAD_ALLOC_REPLY_FRAME_OVERHEAD >= VAD_FREE_FRAME_OVERHEAD);
}

static void make_pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void test_fd_arrives(void **state)
{
	(void)state;
	int sv[2];
	make_pair(sv);
	int mfd = marked_memfd(12345);
	assert_int_equal(pwrite(mfd, "secret", 6, 100), 6);

	assert_int_equal(vad_send_with_fd(sv[0], "hello", 5, mfd), 5);
	char buf[16];
	int fds[4] = {-1, -1, -1, -1};
	size_t n_fds = 99;
	assert_int_equal(vad_recv_with_fds(sv[1], buf, sizeof(buf), fds, 4, &n_fds), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(n_fds, 1);
	assert_true(fds[0] >= 0);
	assert_int_not_equal(fds[0], mfd);
	assert_int_equal(fds[1], -1);
	/* the same file, received close-on-exec */
	assert_int_equal(fd_size(fds[0]), 12345);
	char got[6];
	assert_int_equal(pread(fds[0], got, 6, 100), 6);
	assert_memory_equal(got, "secret", 6);
	assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);

	close(fds[0]);
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

static void test_no_fd_and_bad_args(void **state)
{
	(void)state;
	int sv[2];
	make_pair(sv);
	assert_int_equal(vad_send_with_fd(sv[0], "abc", 3, -1), 3);
	char buf[8];
	int fds[2];
	size_t n_fds = 7;
	assert_int_equal(vad_recv_with_fds(sv[1], buf, sizeof(buf), fds, 2, &n_fds), 3);
	assert_int_equal(n_fds, 0);
	/* an fd must travel with at least one byte */
	errno = 0;
	assert_int_equal(vad_send_with_fd(sv[0], "", 0, sv[0]), -1);
	assert_int_equal(errno, EINVAL);
	/* nothing waiting on a non-blocking socket */
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	errno = 0;
	assert_int_equal(vad_recv_with_fds(sv[1], buf, sizeof(buf), fds, 2, &n_fds), -1);
	assert_int_equal(errno, EAGAIN);
	/* end of stream */
	close(sv[0]);
	assert_int_equal(vad_recv_with_fds(sv[1], buf, sizeof(buf), fds, 2, &n_fds), 0);
	assert_int_equal(n_fds, 0);
	close(sv[1]);
	/* a closed peer is EPIPE, never SIGPIPE (MSG_NOSIGNAL) */
	make_pair(sv);
	close(sv[1]);
	errno = 0;
	assert_int_equal(vad_send_with_fd(sv[0], "x", 1, -1), -1);
	assert_int_equal(errno, EPIPE);
	close(sv[0]);
}

/* Send raw: several fds on one message, as a misbehaving peer could. */
static void send_fds_raw(int sock, const int *fds, size_t n)
{
	char data = 'x';
	struct iovec iov = {.iov_base = &data, .iov_len = 1};
	char control[CMSG_SPACE(8 * sizeof(int))];
	memset(control, 0, sizeof(control));
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	msg.msg_control = control;
	msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	assert_int_equal(sendmsg(sock, &msg, 0), 1);
}

static void test_extra_fds_closed(void **state)
{
	(void)state;
	int sv[2];
	make_pair(sv);
	int m[3] = {marked_memfd(1000), marked_memfd(2000), marked_memfd(3000)};

	/* three fds, room for one: the first is kept, the rest closed */
	send_fds_raw(sv[0], m, 3);
	int before = open_fd_count();
	char buf[4];
	int fds[1] = {-1};
	size_t n_fds = 0;
	assert_int_equal(vad_recv_with_fds(sv[1], buf, sizeof(buf), fds, 1, &n_fds), 1);
	assert_int_equal(n_fds, 1);
	assert_int_equal(fd_size(fds[0]), 1000);
	assert_int_equal(open_fd_count(), before + 1);
	close(fds[0]);

	/* no room at all (NULL array): every fd is closed, the byte still arrives */
	send_fds_raw(sv[0], m, 3);
	before = open_fd_count();
	assert_int_equal(vad_recv_with_fds(sv[1], buf, sizeof(buf), NULL, 0, &n_fds), 1);
	assert_int_equal(n_fds, 0);
	assert_int_equal(open_fd_count(), before);

	for (int i = 0; i < 3; i++)
		close(m[i]);
	close(sv[0]);
	close(sv[1]);
}

/* Each fd arrives with the first byte it was attached to, in order; a short read of a frame
 * still delivers the fd, and the rest of the frame comes without one. */
static void test_fd_order_and_short_reads(void **state)
{
	(void)state;
	int sv[2];
	make_pair(sv);
	int a = marked_memfd(4096), b = marked_memfd(8192);
	assert_int_equal(vad_send_with_fd(sv[0], "AAAAAAAAAA", 10, a), 10);
	assert_int_equal(vad_send_with_fd(sv[0], "BBBBB", 5, b), 5);
	assert_int_equal(vad_send_with_fd(sv[0], "CCC", 3, -1), 3);

	char buf[64];
	int fds[4];
	size_t n_fds;
	int queue[4], queued = 0;
	size_t bytes = 0;
	/* read in small pieces, queueing fds in arrival order */
	while (bytes < 18) {
		ssize_t n = vad_recv_with_fds(sv[1], buf + bytes, 4, fds, 4, &n_fds);
		assert_true(n > 0);
		if (n_fds) {
			/* an fd comes with the first byte of the message it rode on */
			assert_true(buf[bytes] == 'A' || buf[bytes] == 'B');
		}
		for (size_t i = 0; i < n_fds; i++)
			queue[queued++] = fds[i];
		bytes += (size_t)n;
	}
	assert_memory_equal(buf, "AAAAAAAAAABBBBBCCC", 18);
	assert_int_equal(queued, 2);
	assert_int_equal(fd_size(queue[0]), 4096);
	assert_int_equal(fd_size(queue[1]), 8192);
	close(queue[0]);
	close(queue[1]);
	close(a);
	close(b);
	close(sv[0]);
	close(sv[1]);
}

/* Receive one message with plain recvmsg; true if the kernel truncated its fds. */
static bool probe_truncated(int sock)
{
	char data;
	struct iovec iov = {.iov_base = &data, .iov_len = 1};
	char control[CMSG_SPACE(8 * sizeof(int))];
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	msg.msg_control = control;
	msg.msg_controllen = sizeof(control);
	assert_int_equal(recvmsg(sock, &msg, MSG_CMSG_CLOEXEC), 1);
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
	return (msg.msg_flags & MSG_CTRUNC) != 0;
}

/* When the kernel cannot install every fd (here: the fd limit) it sets MSG_CTRUNC; the
 * receiver must not pretend all is well: EMSGSIZE, and nothing left open. */
static void test_ctrunc_reported(void **state)
{
	(void)state;
	int sv[2];
	make_pair(sv);
	int m[3] = {marked_memfd(1), marked_memfd(2), marked_memfd(3)};

	/* the smallest limit that leaves exactly one free descriptor number */
	struct rlimit old;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	rlim_t limit = 0;
	int free_slots = 0;
	while (free_slots < 1) {
		if (fcntl((int)limit, F_GETFD) < 0)
			free_slots++;
		limit++;
	}
	struct rlimit low = {.rlim_cur = limit, .rlim_max = old.rlim_max};
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	/* the limit must really bite in the kernel (valgrind, for one, only emulates it): probe
	 * with a plain recvmsg of two fds, which must come back truncated */
	send_fds_raw(sv[0], m, 2);
	if (!probe_truncated(sv[1])) {
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
		for (int i = 0; i < 3; i++)
			close(m[i]);
		close(sv[0]);
		close(sv[1]);
		skip();
	}
	send_fds_raw(sv[0], m, 3);
	int before = open_fd_count();
	char buf[4];
	int fds[4];
	size_t n_fds = 5;
	errno = 0;
	ssize_t n = vad_recv_with_fds(sv[1], buf, sizeof(buf), fds, 4, &n_fds);
	int e = errno;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(n, -1);
	assert_int_equal(e, EMSGSIZE);
	assert_int_equal(n_fds, 0);
	assert_int_equal(open_fd_count(), before);
	for (int i = 0; i < 3; i++)
		close(m[i]);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header_little_endian),
	    cmocka_unit_test(test_peek_partial_headers),
	    cmocka_unit_test(test_peek_empty_and_too_big),
	    cmocka_unit_test(test_request_round_trip),
	    cmocka_unit_test(test_response_round_trip),
	    cmocka_unit_test(test_smallest_request_is_not_empty),
	    cmocka_unit_test(test_stream_of_frames),
	    cmocka_unit_test(test_encoded_frame_too_big),
	    cmocka_unit_test(test_frame_overheads_bound_encoding),
	    cmocka_unit_test(test_fd_arrives),
	    cmocka_unit_test(test_no_fd_and_bad_args),
	    cmocka_unit_test(test_extra_fds_closed),
	    cmocka_unit_test(test_fd_order_and_short_reads),
	    cmocka_unit_test(test_ctrunc_reported),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
