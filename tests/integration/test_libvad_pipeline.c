/*
 * test_libvad_pipeline.c - libvad's pipelined calls (vad_alloc_submit, vad_free_submit,
 * vad_wait, vad_test, vad_progress, vad_fd) against the real daemon.
 *
 * - 16 in flight from one thread, in two arenas (the second mapped by its first submit),
 *   waited for out of order, frees held back with VAD_MORE and sent in one go: every range
 *   is distinct, its own size, written through and read back intact.
 * - Batch tickets (vad_alloc_batch_submit) in two arenas, with VAD_POPULATE, waited for
 *   out of order; the bound counts their ranges; one never waited for is freed by
 *   vad_close.
 * - Batch free tickets (vad_free_batch_submit) over two arenas between alloc tickets; a bad
 *   pointer and a range freed already reported as vad_free_batch reports them; the bound;
 *   a refused Free that does not hold back the next.
 * - 50 clients driven by one thread as an event loop: poll on every vad_fd, vad_progress
 *   when readable, vad_test, vad_wait.
 * - Tickets on one thread (with vad_progress) while three threads make blocking calls on
 *   the same client, its socket in vad_fd's non-blocking mode.
 * - The bound: VAD_TICKETS_MAX in flight (sent without reading anything), one more is
 *   VAD_EQUOTA, all of them then complete.
 * - Bad tickets: 0, never issued, used up, another client's, an alloc waited without out:
 *   VAD_EINVAL, nothing lost.
 * - vad_close with tickets never waited for (answered and not): nothing leaks (ASan), the
 *   daemon frees what they got.
 * - The daemon killed (stopped first, so none is answered) with tickets in flight: every
 *   one completes with VAD_EGONE, a free's record comes back, later calls fail at once.
 * - An administrator's vad_kill with tickets in flight: each gets its reply or VAD_EKILLED.
 */
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "vtassert.h"

#define PAGE 4096u

static const char *const arenas_conf = "[arena default]\n"
				       "size = 256M\n"
				       "\n"
				       "[arena second]\n"
				       "size = 64M\n";

/* Write every byte of each range with its own pattern, then check them all. */
static void write_and_check(void *const *ptrs, const size_t *sizes, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		vt_fill_pattern(ptrs[i], sizes[i], seed + i);
	for (size_t i = 0; i < n; i++) {
		ssize_t bad = vt_check_pattern(ptrs[i], sizes[i], seed + i);
		if (bad >= 0)
			fail_msg("range %zu (%zu bytes): byte %zd overwritten", i, sizes[i], bad);
	}
}

static void test_sixteen_in_flight(void **state)
{
	struct vt_daemon *d = *state;
	enum { N = 16, ROUNDS = 50 };
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "pipeline16", &c));
	for (int round = 0; round < ROUNDS; round++) {
		vad_ticket t[N];
		size_t sizes[N];
		void *ptrs[N];
		for (int i = 0; i < N; i++) {
			sizes[i] = (size_t)(1 + (i + round) % 7) * PAGE;
			/* Half in the second arena: the first round's first one maps it. */
			VT_ASSERT_OK(
			    c, vad_alloc_submit(c, i % 2 ? "second" : NULL, sizes[i], 0, 0, &t[i]));
			assert_int_not_equal(0, t[i]);
		}
		/* Out of order: the last first. */
		for (int i = N - 1; i >= 0; i--)
			VT_ASSERT_OK(c, vad_wait(c, t[i], &ptrs[i]));
		for (int i = 0; i < N; i++) {
			assert_true(vad_size(c, ptrs[i]) >= sizes[i]);
			struct vad_range r;
			VT_ASSERT_OK(c, vad_range_info(c, ptrs[i], &r));
			assert_string_equal(r.arena, i % 2 ? "second" : "default");
			for (int j = 0; j < i; j++)
				assert_ptr_not_equal(ptrs[i], ptrs[j]);
		}
		write_and_check(ptrs, sizes, N, (uint64_t)round << 8);
		/* Frees held back and sent with the last one. */
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(c,
				     vad_free_submit(c, ptrs[i], i + 1 < N ? VAD_MORE : 0, &t[i]));
		for (int i = 0; i < N; i++)
			assert_int_equal(0, vad_size(c, ptrs[i])); /* no longer this client's */
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(c, vad_wait(c, t[i], NULL));
	}
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
}

static void test_batch_tickets(void **state)
{
	struct vt_daemon *d = *state;
	enum { T = 4, B = 8 };
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "pipelinebatch", &c));
	vad_ticket t[T];
	size_t sizes[T][B];
	void *ptrs[T][B];
	for (int k = 0; k < T; k++) {
		for (int i = 0; i < B; i++)
			sizes[k][i] = (size_t)(1 + (k + i) % 3) * PAGE;
		unsigned flags = (k + 1 < T ? VAD_MORE : 0) | (k % 2 ? VAD_POPULATE : 0);
		VT_ASSERT_OK(c, vad_alloc_batch_submit(c, k % 2 ? "second" : NULL, B, sizes[k], 0,
						       flags, &t[k]));
	}
	for (int k = T - 1; k >= 0; k--)
		VT_ASSERT_OK(c, vad_wait(c, t[k], ptrs[k]));
	for (int k = 0; k < T; k++) {
		for (int i = 0; i < B; i++) {
			assert_true(vad_size(c, ptrs[k][i]) >= sizes[k][i]);
			for (int j = 0; j < k * B + i; j++)
				assert_ptr_not_equal(ptrs[k][i], ptrs[j / B][j % B]);
		}
		write_and_check(ptrs[k], sizes[k], B, (uint64_t)k << 32);
	}
	for (int k = 0; k < T; k++)
		VT_ASSERT_OK(c, vad_free_batch(c, B, ptrs[k]));

	/* The bound counts ranges: a batch takes as many as it has. */
	static size_t many[VAD_TICKETS_MAX + 1];
	static void *got[VAD_TICKETS_MAX];
	for (size_t i = 0; i <= VAD_TICKETS_MAX; i++)
		many[i] = PAGE;
	vad_ticket big, small, extra = 0;
	VT_ASSERT_ERR(c, VAD_EQUOTA,
		      vad_alloc_batch_submit(c, NULL, VAD_TICKETS_MAX + 1, many, 0, 0, &extra));
	VT_ASSERT_OK(c, vad_alloc_batch_submit(c, NULL, VAD_TICKETS_MAX - 4, many, 0, 0, &big));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc_batch_submit(c, NULL, 5, many, 0, 0, &extra));
	assert_true(vt_contains(vad_last_error(c), "VAD_TICKETS_MAX"));
	VT_ASSERT_OK(c, vad_alloc_batch_submit(c, NULL, 4, many, 0, 0, &small));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc_submit(c, NULL, PAGE, 0, 0, &extra));
	assert_int_equal(0, extra);
	VT_ASSERT_OK(c, vad_wait(c, small, got));
	VT_ASSERT_OK(c, vad_free_batch(c, 4, got));
	VT_ASSERT_OK(c, vad_wait(c, big, got));
	for (size_t i = 0; i < VAD_TICKETS_MAX - 4; i++)
		*(volatile char *)got[i] = 1;
	VT_ASSERT_OK(c, vad_free_batch(c, VAD_TICKETS_MAX - 4, got));
	/* A batch ticket never waited for: vad_close frees its lists (ASan checks). */
	VT_ASSERT_OK(c, vad_alloc_batch_submit(c, NULL, 3, many, 0, 0, &extra));
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges - 3);
	vad_close(c);
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, vt_timeout_ms(10000), NULL));
}

/* vad_free_batch_submit, the pipelined vad_free_batch: a batch over two arenas (two Frees)
 * between alloc tickets; a pointer outside every arena and a range freed already, reported
 * as vad_free_batch reports them; the bound; a refused Free that does not hold back the
 * next one. */
static void test_free_batch_tickets(void **state)
{
	struct vt_daemon *d = *state;
	enum { B = 12 };
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "pipelinefreebatch", &c));
	size_t sizes[B];
	void *ptrs[B], *mixed[B];
	for (int i = 0; i < B; i++)
		sizes[i] = (size_t)(1 + i % 3) * PAGE;
	VT_ASSERT_OK(c, vad_alloc_batch(c, B / 2, sizes, 0, ptrs));
	VT_ASSERT_OK(c, vad_alloc_batch_in(c, "second", B / 2, sizes + B / 2, 0, ptrs + B / 2));
	for (int i = 0; i < B; i++)
		mixed[i] = ptrs[i % 2 ? B / 2 + i / 2 : i / 2];
	write_and_check(ptrs, sizes, B, 77);
	vad_ticket ta, tf, tb, x = 0;
	void *pa, *pb[2];
	VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, VAD_MORE, &ta));
	VT_ASSERT_OK(c, vad_free_batch_submit(c, B, mixed, VAD_MORE, &tf));
	for (int i = 0; i < B; i++)
		assert_int_equal(0, vad_size(c, mixed[i])); /* no longer this client's */
	VT_ASSERT_OK(c, vad_alloc_batch_submit(c, "second", 2, sizes, 0, 0, &tb));
	VT_ASSERT_OK(c, vad_wait(c, tb, pb));
	VT_ASSERT_OK(c, vad_wait(c, tf, NULL));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_wait(c, tf, NULL)); /* used up */
	VT_ASSERT_OK(c, vad_wait(c, ta, &pa));
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(3, st.held_ranges);

	/* A pointer outside every arena: refused before anything is sent, nothing freed. */
	int local;
	void *bad[3] = {pa, &local, pb[0]};
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free_batch(c, 3, bad));
	char said[256];
	snprintf(said, sizeof(said), "%s", vad_last_error(c));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free_batch_submit(c, 3, bad, 0, &x));
	assert_string_equal(said, vad_last_error(c));
	assert_int_equal(0, x);
	assert_int_equal(PAGE, vad_size(c, pa));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_free_batch_submit(c, 0, bad, 0, &x));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_free_batch_submit(c, 1, bad, 0x8000, &x));

	/* A range freed already, in the middle: the daemon frees the ranges before it and
	 * refuses it; the ranges after it stay held. The same through both calls. */
	void *q[3], *r[3];
	size_t three[3] = {PAGE, PAGE, PAGE};
	VT_ASSERT_OK(c, vad_alloc_batch(c, 3, three, 0, q));
	VT_ASSERT_OK(c, vad_alloc_batch(c, 3, three, 0, r));
	VT_ASSERT_OK(c, vad_free(c, q[1]));
	VT_ASSERT_OK(c, vad_free(c, r[1]));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free_batch(c, 3, q));
	VT_ASSERT_OK(c, vad_free_batch_submit(c, 3, r, 0, &x));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_wait(c, x, NULL));
	assert_int_equal(0, vad_size(c, q[0]));
	assert_int_equal(0, vad_size(c, r[0]));
	assert_int_equal(PAGE, vad_size(c, q[2]));
	assert_int_equal(PAGE, vad_size(c, r[2]));
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(5, st.held_ranges); /* pa, pb[0..1], q[2], r[2]: the daemon agrees */

	/* A refused Free does not hold back the next one (another arena's), as it would in
	 * vad_free_batch: both were sent at once. */
	void *s0, *d0;
	VT_ASSERT_OK(c, vad_alloc_in(c, "second", PAGE, 0, &s0));
	VT_ASSERT_OK(c, vad_free(c, s0));
	void *two[2] = {s0, q[2]};
	VT_ASSERT_OK(c, vad_free_batch_submit(c, 2, two, 0, &x));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_wait(c, x, NULL));
	assert_int_equal(0, vad_size(c, q[2]));
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &d0));
	two[1] = d0;
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free_batch(c, 2, two));
	assert_int_equal(PAGE, vad_size(c, d0));

	/* The bound counts each range, as for a batch alloc. */
	static void *many[VAD_TICKETS_MAX + 1];
	static size_t pages[VAD_TICKETS_MAX];
	for (size_t i = 0; i < VAD_TICKETS_MAX; i++)
		pages[i] = PAGE;
	VT_ASSERT_OK(c, vad_alloc_batch(c, VAD_TICKETS_MAX, pages, 0, many));
	many[VAD_TICKETS_MAX] = many[0];
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_free_batch_submit(c, VAD_TICKETS_MAX + 1, many, 0, &x));
	vad_ticket one;
	VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, 0, &one));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_free_batch_submit(c, VAD_TICKETS_MAX, many, 0, &x));
	assert_true(vt_contains(vad_last_error(c), "VAD_TICKETS_MAX"));
	assert_int_equal(PAGE, vad_size(c, many[0])); /* nothing taken */
	VT_ASSERT_OK(c, vad_free_batch_submit(c, VAD_TICKETS_MAX - 1, many, VAD_MORE, &tf));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc_submit(c, NULL, PAGE, 0, 0, &x));
	VT_ASSERT_OK(c, vad_progress(c));
	void *last;
	VT_ASSERT_OK(c, vad_wait(c, one, &last));
	VT_ASSERT_OK(c, vad_wait(c, tf, NULL));
	void *rest[8] = {last, many[VAD_TICKETS_MAX - 1], pa, pb[0], pb[1], r[2], d0};
	VT_ASSERT_OK(c, vad_free_batch(c, 7, rest));
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
}

/* Poll every client's fd, move replies along, until each ticket of ts is in. */
static void event_loop_until_done(vad_client **cs, const vad_ticket *ts, int n)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	struct pollfd pfd[64];
	assert_true(n <= 64);
	for (;;) {
		int left = 0;
		for (int i = 0; i < n; i++) {
			int done = vad_test(cs[i], ts[i]);
			assert_true(done == 0 || done == 1);
			left += !done;
			pfd[i] = (struct pollfd){.fd = vad_fd(cs[i]), .events = POLLIN};
			assert_true(pfd[i].fd >= 0);
		}
		if (!left)
			return;
		assert_true(vt_now_ns() < deadline);
		int rc = poll(pfd, (nfds_t)n, 1000);
		assert_true(rc >= 0);
		for (int i = 0; i < n; i++)
			if (pfd[i].revents)
				VT_ASSERT_OK(cs[i], vad_progress(cs[i]));
	}
}

static void test_fifty_clients_one_thread(void **state)
{
	struct vt_daemon *d = *state;
	enum { N = 50, ROUNDS = 20 };
	vad_client *cs[N];
	for (int i = 0; i < N; i++)
		assert_int_equal(0, vt_connect(d, "pipeline50", &cs[i]));
	for (int round = 0; round < ROUNDS; round++) {
		vad_ticket t[N];
		size_t sizes[N];
		void *ptrs[N];
		for (int i = 0; i < N; i++) {
			sizes[i] = (size_t)(1 + (i + round) % 5) * PAGE;
			VT_ASSERT_OK(cs[i], vad_alloc_submit(cs[i], NULL, sizes[i], 0,
							     round % 2 ? VAD_POPULATE : 0, &t[i]));
		}
		event_loop_until_done(cs, t, N);
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(cs[i], vad_wait(cs[i], t[i], &ptrs[i]));
		write_and_check(ptrs, sizes, N, (uint64_t)round << 16);
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(cs[i], vad_free_submit(cs[i], ptrs[i], 0, &t[i]));
		event_loop_until_done(cs, t, N);
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(cs[i], vad_wait(cs[i], t[i], NULL));
	}
	for (int i = 0; i < N; i++)
		vad_close(cs[i]);
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, vt_timeout_ms(10000), NULL));
}

struct blocker {
	vad_client *c;
	int iters;
	int failures;
	char why[256];
};

/* Blocking calls on the shared client, sizes of 9 to 12 pages (the tickets ask for 1-8). */
static void *blocking_worker(void *arg)
{
	struct blocker *b = arg;
	for (int i = 0; i < b->iters && !b->failures; i++) {
		size_t size = (size_t)(9 + i % 4) * PAGE;
		void *p;
		int rc = vad_alloc(b->c, size, 0, &p);
		if (rc == VAD_OK) {
			vt_fill_pattern(p, size, (uint64_t)i + 7777);
			if (vad_size(b->c, p) < size ||
			    vt_check_pattern(p, size, (uint64_t)i + 7777) >= 0)
				rc = VAD_EPROTO;
			int frc = vad_free(b->c, p);
			if (rc == VAD_OK)
				rc = frc;
		}
		if (rc != VAD_OK) {
			b->failures++;
			snprintf(b->why, sizeof(b->why), "call %d: %s: %s", i, vad_strerror(rc),
				 vad_last_error(b->c));
		}
	}
	return NULL;
}

static void test_mixed_with_blocking_threads(void **state)
{
	struct vt_daemon *d = *state;
	enum { THREADS = 3, N = 8 };
	int rounds = vt_scale(300);
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "pipelinemix", &c));
	/* The event loop's mode: the blocking threads' reads and sends then meet EAGAIN. */
	assert_true(vad_fd(c) >= 0);
	struct blocker b[THREADS];
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++) {
		b[i] = (struct blocker){.c = c, .iters = rounds * 2};
		assert_int_equal(0, pthread_create(&th[i], NULL, blocking_worker, &b[i]));
	}
	for (int round = 0; round < rounds; round++) {
		vad_ticket t[N];
		size_t sizes[N];
		void *ptrs[N];
		for (int i = 0; i < N; i++) {
			sizes[i] = (size_t)(1 + i) * PAGE;
			VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, sizes[i], 0,
							 i + 1 < N ? VAD_MORE : 0, &t[i]));
		}
		VT_ASSERT_OK(c, vad_progress(c)); /* reads beside the blocking threads' reader */
		for (int i = 0; i < N; i++) {
			VT_ASSERT_OK(c, vad_wait(c, t[i], &ptrs[i]));
			assert_true(vad_size(c, ptrs[i]) >= sizes[i]);
			assert_true(vad_size(c, ptrs[i]) < 9 * PAGE);
		}
		write_and_check(ptrs, sizes, N, (uint64_t)round << 20);
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(c, vad_free_submit(c, ptrs[i], 0, &t[i]));
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(c, vad_wait(c, t[i], NULL));
	}
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(0, pthread_join(th[i], NULL));
		if (b[i].failures)
			fail_msg("blocking thread %d: %s", i, b[i].why);
	}
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
}

static void test_ticket_bound(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "pipelinebound", &c));
	static vad_ticket t[VAD_TICKETS_MAX];
	static void *ptrs[VAD_TICKETS_MAX];
	/* Every one sent at once, no reply read: the replies wait in the socket. */
	for (int i = 0; i < VAD_TICKETS_MAX; i++)
		VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, 0, &t[i]));
	vad_ticket extra = 0;
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc_submit(c, NULL, PAGE, 0, 0, &extra));
	assert_true(vt_contains(vad_last_error(c), "VAD_TICKETS_MAX"));
	assert_int_equal(0, extra);
	/* A blocking call still goes through meanwhile. */
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	for (int i = 0; i < VAD_TICKETS_MAX; i++) {
		VT_ASSERT_OK(c, vad_wait(c, t[i], &ptrs[i]));
		*(volatile uint64_t *)ptrs[i] = (uint64_t)i;
	}
	/* Room again: one more, then the frees, held back and sent in one go. */
	VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, 0, &extra));
	VT_ASSERT_OK(c, vad_wait(c, extra, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	for (int i = 0; i < VAD_TICKETS_MAX; i++) {
		assert_int_equal((uint64_t)i, *(volatile uint64_t *)ptrs[i]);
		VT_ASSERT_OK(c, vad_free_submit(c, ptrs[i], VAD_MORE, &t[i]));
	}
	VT_ASSERT_OK(c, vad_progress(c));
	for (int i = 0; i < VAD_TICKETS_MAX; i++)
		VT_ASSERT_OK(c, vad_wait(c, t[i], NULL));
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
}

static void test_bad_tickets(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c, *other;
	assert_int_equal(0, vt_connect(d, "pipelinebad", &c));
	assert_int_equal(0, vt_connect(d, "pipelineother", &other));
	void *p = NULL;
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_wait(c, 0, &p));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_wait(c, 0x123456789abcdefull, &p));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_test(c, 12345));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_alloc_submit(c, NULL, PAGE, 0, 0, NULL));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_alloc_submit(c, NULL, PAGE, 0, 0x8000, &(vad_ticket){0}));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free_submit(c, &p, 0, &(vad_ticket){0}));

	vad_ticket t, u;
	VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, 0, &t));
	VT_ASSERT_OK(other, vad_alloc_submit(other, NULL, PAGE, 0, 0, &u));
	/* An alloc ticket waited without out would lose its range: refused, still usable. */
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_wait(c, t, NULL));
	/* Another client's ticket (the same slot number): refused on both sides. */
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_wait(c, u, &p));
	VT_ASSERT_ERR(other, VAD_EINVAL, vad_wait(other, t, &p));
	VT_ASSERT_OK(c, vad_wait(c, t, &p));
	assert_int_equal(PAGE, vad_size(c, p));
	/* Used up: a second wait and a test are refused. */
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_wait(c, t, &p));
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_test(c, t));
	/* A failed request is the ticket's result, as for a blocking call. */
	vad_ticket big;
	VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, (size_t)1 << 40, 0, 0, &big));
	void *q = NULL;
	int rc = vad_wait(c, big, &q);
	assert_true(rc == VAD_ESIZE || rc == VAD_ENOSPC);
	assert_null(q);
	/* A free of a range already freed: the daemon's VAD_ENOTHELD through the ticket. */
	VT_ASSERT_OK(c, vad_free(c, p));
	VT_ASSERT_OK(c, vad_free_submit(c, p, 0, &t));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_wait(c, t, NULL));
	VT_ASSERT_OK(other, vad_wait(other, u, &p));
	VT_ASSERT_OK(other, vad_free(other, p));
	vad_close(other);
	vad_close(c);
}

static void test_close_with_tickets_out(void **state)
{
	struct vt_daemon *d = *state;
	enum { N = 100 };
	for (int round = 0; round < 3; round++) {
		vad_client *c;
		assert_int_equal(0, vt_connect(d, "pipelineclose", &c));
		vad_ticket t[N];
		for (int i = 0; i < N; i++)
			VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, 0, &t[i]));
		/* Round 0: none answered; 1: some read; 2: all read, some waited for. */
		if (round == 1)
			VT_ASSERT_OK(c, vad_progress(c));
		uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
		while (round == 2 && vad_test(c, t[N - 1]) != 1) {
			VT_ASSERT_OK(c, vad_progress(c));
			assert_true(vt_now_ns() < deadline);
		}
		if (round == 2) {
			void *p;
			for (int i = 0; i < N / 2; i++)
				VT_ASSERT_OK(c, vad_wait(c, t[i], &p));
		}
		vad_close(c);
		assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, vt_timeout_ms(10000), NULL));
	}
}

/* Whether every thread of pid is stopped (SIGSTOP reaches them one by one). */
static bool all_threads_stopped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return false;
	bool stopped = true;
	struct dirent *e;
	while (stopped && (e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char stat_path[384], buf[512];
		snprintf(stat_path, sizeof(stat_path), "%s/%s/stat", path, e->d_name);
		FILE *f = fopen(stat_path, "r");
		if (!f)
			continue; /* a thread that ended */
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		const char *close_paren = strrchr(buf, ')');
		stopped = close_paren && close_paren[1] == ' ' && close_paren[2] == 'T';
	}
	closedir(dir);
	return stopped;
}

/* The daemon stopped (no reply can come), tickets sent, then killed: each completes with
 * VAD_EGONE, as every blocking call in flight would, and later calls fail at once. */
static void test_daemon_killed_with_tickets_out(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, arenas_conf));
	enum { N = 32 };
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "pipelinekill", &c));
	VT_ASSERT_OK(c, vad_set_reconnect(c, 0));
	void *held;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &held)); /* maps the arena */
	assert_int_equal(0, vt_daemon_signal(d, SIGSTOP));
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (!all_threads_stopped(d->pid))
		assert_true(vt_now_ns() < deadline);
	vad_ticket t[N];
	for (int i = 0; i < N; i++)
		VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, i % 3 ? VAD_MORE : 0, &t[i]));
	vad_ticket f;
	VT_ASSERT_OK(c, vad_free_submit(c, held, 0, &f));
	assert_int_equal(0, vad_size(c, held)); /* its record goes with the request */
	VT_ASSERT_OK(c, vad_progress(c));	/* nothing to read; sends what VAD_MORE kept */
	for (int i = 0; i < N; i++)
		assert_int_equal(0, vad_test(c, t[i]));
	assert_int_equal(0, vt_daemon_signal(d, SIGKILL));
	vt_daemon_signal(d, SIGCONT);
	while (vt_daemon_alive(d))
		assert_true(vt_now_ns() < deadline);
	for (int i = 0; i < N; i++) {
		void *p = NULL;
		VT_ASSERT_ERR(c, VAD_EGONE, vad_wait(c, t[i], &p));
		assert_null(p);
		assert_true(vt_contains(vad_last_error(c), "daemon"));
	}
	/* The free's record came back: the daemon never freed the range. */
	VT_ASSERT_ERR(c, VAD_EGONE, vad_wait(c, f, NULL));
	assert_int_equal(PAGE, vad_size(c, held));
	vad_ticket late = 0;
	VT_ASSERT_ERR(c, VAD_EGONE, vad_alloc_submit(c, NULL, PAGE, 0, 0, &late));
	assert_int_equal(0, late);
	VT_ASSERT_ERR(c, VAD_EGONE, vad_progress(c));
	vad_close(c);
}

/* An administrator disconnects a client with tickets in flight (vad_kill): each ends with
 * its reply or VAD_EKILLED, never hangs, and the client stays down. */
static void test_killed_by_admin_with_tickets_out(void **state)
{
	struct vt_daemon *d = *state;
	enum { N = 64 };
	vad_client *c, *admin;
	assert_int_equal(0, vt_connect(d, "pipelinevictim", &c));
	assert_int_equal(0, vt_connect(d, "pipelineadmin", &admin));
	struct vad_session si;
	VT_ASSERT_OK(c, vad_session_info(c, &si));
	char id[32];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)si.session_id);
	vad_ticket t[N];
	for (int i = 0; i < N; i++)
		VT_ASSERT_OK(c, vad_alloc_submit(c, NULL, PAGE, 0, 0, &t[i]));
	VT_ASSERT_OK(admin, vad_kill(admin, id, NULL));
	for (int i = 0; i < N; i++) {
		void *p = NULL;
		int rc = vad_wait(c, t[i], &p);
		if (rc == VAD_OK) {
			assert_non_null(p);
			*(volatile char *)p = 1;
		} else {
			VT_ASSERT_ERR(c, VAD_EKILLED, rc);
		}
	}
	/* The kill's notice ends the connection: the next submit learns it at once. */
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	vad_ticket late;
	int rc;
	while ((rc = vad_alloc_submit(c, NULL, PAGE, 0, 0, &late)) == VAD_OK) {
		void *p;
		rc = vad_wait(c, late, &p);
		if (rc != VAD_OK)
			break;
		assert_true(vt_now_ns() < deadline);
	}
	VT_ASSERT_ERR(c, VAD_EKILLED, rc);
	vad_close(c);
	vad_close(admin);
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, vt_timeout_ms(10000), NULL));
}

VT_DAEMON_GROUP(group_setup, NULL, arenas_conf)

int main(void)
{
	const struct CMUnitTest shared[] = {
	    cmocka_unit_test(test_sixteen_in_flight),
	    cmocka_unit_test(test_batch_tickets),
	    cmocka_unit_test(test_free_batch_tickets),
	    cmocka_unit_test(test_fifty_clients_one_thread),
	    cmocka_unit_test(test_mixed_with_blocking_threads),
	    cmocka_unit_test(test_ticket_bound),
	    cmocka_unit_test(test_bad_tickets),
	    cmocka_unit_test(test_close_with_tickets_out),
	    cmocka_unit_test(test_killed_by_admin_with_tickets_out),
	};
	const struct CMUnitTest own[] = {
	    VT_OWN_DAEMON_TEST(test_daemon_killed_with_tickets_out),
	};
	int failed = cmocka_run_group_tests_name("libvad pipelined calls", shared, group_setup,
						 vt_group_daemon_stop);
	failed += cmocka_run_group_tests_name("libvad pipelined calls when the daemon dies", own,
					      NULL, NULL);
	return failed;
}
