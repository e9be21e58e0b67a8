/*
 * test_hostile_inflight.c - a client that asks for the arena fd over and over and never
 * reads the replies. Every MapArena reply carries the arena fd by SCM_RIGHTS; until the
 * client reads it, the kernel counts it as "in flight" against the SENDER's user, and once
 * a user has more fds in flight than its RLIMIT_NOFILE, sendmsg fails with ETOOMANYREFS
 * (unless the sender has CAP_SYS_RESOURCE/CAP_SYS_ADMIN, which a packaged vad running as
 * its own user does not). So unread fds of one client could make every other client's first
 * allocation fail. The daemon runs here the way it does in production: not root (nobody,
 * when the test is root) and with a small soft RLIMIT_NOFILE (256).
 *
 * What must hold: while attackers sit on thousands of unread MapArena replies, a new
 * well-behaved client still maps the arena and allocates, and afterwards the daemon returns
 * to its baseline.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "hostile_util.h"
#include "vtassert.h"

#define PAGE	      4096u
#define ATTACKERS     6
#define NOFILE_SOFT   256
#define REPLY_TIMEOUT vt_timeout_ms(10000)

struct inflight {
	struct vt_daemon d;
	struct vt_baseline base;
	struct vt_raw att[ATTACKERS]; /* here so a failed assertion still closes them */
	int n_att;
	vad_client *newcomer;
};

static int group_setup(void **state)
{
	struct inflight *t = calloc(1, sizeof(*t));
	if (!t)
		return -1;
	*state = t;
	if (vt_daemon_init(&t->d) != 0 ||
	    vt_daemon_wrap_unprivileged(&t->d, NOFILE_SOFT, false) != 0 ||
	    vt_daemon_write_config(&t->d, "stats_interval = 1h\n", NULL) != 0 ||
	    vt_daemon_start(&t->d) != 0)
		return -1;
	return vt_baseline_take(&t->d, &t->base);
}

static int group_teardown(void **state)
{
	struct inflight *t = *state;
	for (int i = 0; i < t->n_att; i++)
		vt_raw_close(&t->att[i]);
	if (t->newcomer)
		vad_close(t->newcomer);
	return vt_group_daemon_stop(state);
}

/* Pipeline MapArena requests without reading until the daemon takes no more. */
static size_t flood_map_requests(struct vt_raw *r)
{
	uint8_t frame[64];
	struct vt_req q;
	size_t n = vt_frame_request(vt_req_map_arena(&q, NULL), 1000, frame, sizeof(frame));
	assert_true(n > 0);
	size_t sent = 0;
	uint64_t last = vt_now_ns();
	while ((vt_now_ns() - last) / 1000000u < 300 && sent < 20000) {
		ssize_t w = send(r->fd, frame, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w == (ssize_t)n) {
			sent++;
			last = vt_now_ns();
			continue;
		}
		if (w > 0) { /* partial: finish this frame blocking */
			assert_int_equal(0, vt_raw_send(r, frame + w, n - (size_t)w));
			sent++;
			last = vt_now_ns();
			continue;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break; /* the daemon dropped us: fine */
		struct pollfd p = {.fd = r->fd, .events = POLLOUT};
		poll(&p, 1, 20);
	}
	return sent;
}

static void test_unread_arena_fds(void **state)
{
	struct inflight *t = *state;
	struct vt_raw *att = t->att;
	size_t total = 0;
	for (int i = 0; i < ATTACKERS; i++) {
		assert_int_equal(0, vt_raw_connect(&att[i], t->d.socket_path));
		t->n_att = i + 1;
		assert_int_equal(0, vt_raw_hello(&att[i], "fd-hoarder"));
		total += flood_map_requests(&att[i]);
	}
	printf("%d attackers sent %zu MapArena requests and read no reply\n", ATTACKERS, total);

	/* A newcomer must still get its arena mapped. */
	for (int k = 0; k < 3; k++) {
		assert_int_equal(0, vt_connect(&t->d, "newcomer", &t->newcomer));
		vad_client *c = t->newcomer;
		void *p = NULL;
		int rc = vad_alloc(c, 16 * PAGE, 0, &p);
		if (rc != 0)
			fail_msg("a well-behaved client cannot allocate while others hoard unread "
				 "arena fds: %d (%s): %s",
				 rc, vad_strerror(rc), vad_last_error(c));
		memset(p, 0x11, 16 * PAGE);
		VT_ASSERT_OK(c, vad_free(c, p));
		vad_close(c);
		t->newcomer = NULL;
	}
	for (int i = 0; i < ATTACKERS; i++)
		vt_raw_close(&att[i]);
	t->n_att = 0;
	if (vt_baseline_check(&t->d, &t->base, vt_timeout_ms(10000)) != 0)
		fail_msg("the daemon did not return to its baseline");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unread_arena_fds),
	};
	return cmocka_run_group_tests_name("hostile_inflight", tests, group_setup, group_teardown);
}
