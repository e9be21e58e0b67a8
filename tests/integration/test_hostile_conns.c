/*
 * test_hostile_conns.c - attacks on the daemon's connections and descriptors: a flood of
 * connections past max_clients and one past the daemon's own fd limit, a client that has exhausted
 * its own fds when the arena fd comes, and clients that push file descriptors at the daemon by
 * SCM_RIGHTS. Each time the offender gets a clear error or is dropped, others are served, and
 * afterwards the daemon holds no extra byte, range or fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "hostile_util.h"
#include "vtassert.h"

#define PAGE	      4096u
#define MAX_CLIENTS   24
#define REPLY_TIMEOUT vt_timeout_ms(10000)

struct conns {
	struct vt_daemon d;
	struct vt_baseline base;
};

static int group_setup(void **state)
{
	char extra[128];
	snprintf(extra, sizeof(extra), "stats_interval = 1h\nmax_clients = %d\n", MAX_CLIENTS);
	return VT_GROUP_FIXTURE_SETUP(state, struct conns, extra, NULL);
}

static int test_setup(void **state)
{
	struct conns *c = *state;
	return vt_baseline_take(&c->d, &c->base);
}

static void assert_back_to_baseline(struct conns *c)
{
	if (vt_baseline_check(&c->d, &c->base, vt_timeout_ms(5000)) != 0)
		fail_msg("the daemon did not return to its baseline");
}

/* ---- max_clients ------------------------------------------------------------------------- */

/* Connect raw; 1 if the daemon took us (hello answered), 0 if it refused with EBUSY and
 * closed, fails on anything else. */
static int raw_try(struct conns *c, struct vt_raw *r)
{
	assert_int_equal(0, vt_raw_connect(r, c->d.socket_path));
	struct vt_req q;
	/* The refusal may arrive before the hello is even sent; a send on a socket the
	 * daemon already closed fails, which is fine: read what came. */
	(void)vt_raw_send_request(r, vt_req_hello(&q, "flood"));
	Vad__Response *resp = NULL;
	enum vt_raw_result res = vt_raw_recv(r, &resp, REPLY_TIMEOUT);
	if (res != VT_RAW_RESPONSE)
		fail_msg("a flooding client got neither a hello reply nor a refusal (%d)", res);
	int took = 0;
	if (resp->error == VAD__ERROR__OK) {
		took = 1;
	} else if (resp->error == VAD__ERROR__EBUSY) {
		assert_true(vt_contains(resp->message, "max_clients"));
		took = 0;
	} else {
		fail_msg("a flooding client got %s: %s", vt_error_name(resp->error), resp->message);
	}
	vt_raw_response_free(resp);
	if (!took) {
		assert_int_equal(1, vt_raw_wait_closed(r, REPLY_TIMEOUT));
		vt_raw_close(r);
	}
	return took;
}

static void test_connection_flood(void **state)
{
	struct conns *c = *state;
	struct vt_raw held[MAX_CLIENTS];
	int n_held = 0, refused = 0;
	/* Every earlier connection is gone (only the polling one counts): all slots free. */
	assert_int_equal(0, vt_wait_busy(&c->d, c->base.busy, 1, vt_timeout_ms(5000), NULL));

	/* Fill every slot, then keep knocking. */
	for (int i = 0; i < MAX_CLIENTS + 40; i++) {
		struct vt_raw r;
		if (raw_try(c, &r)) {
			assert_true(n_held < MAX_CLIENTS);
			held[n_held++] = r;
		} else {
			refused++;
		}
	}
	printf("flood: %d connections held, %d refused with EBUSY\n", n_held, refused);
	assert_int_equal(MAX_CLIENTS, n_held);
	assert_int_equal(40, refused);

	/* libvad reports the refusal as EBUSY with the daemon's sentence. */
	vad_client *lc = NULL;
	int rc = vad_connect(c->d.socket_path, "flood-libvad", &lc);
	if (rc != VAD_EBUSY)
		fail_msg("vad_connect at max_clients returned %d (%s): %s", rc, vad_strerror(rc),
			 vad_last_error(NULL));
	assert_true(vt_contains(vad_last_error(NULL), "max_clients"));

	/* The held connections still work. */
	for (int i = 0; i < n_held; i += 5) {
		uint64_t off;
		assert_int_equal(0, vt_raw_alloc(&held[i], PAGE, &off));
		assert_int_equal(0, vt_raw_free(&held[i], off));
	}

	/* Half of them leave: newcomers get in (the daemon counts the departures as it
	 * notices them, so retry for a while). */
	for (int i = 0; i < MAX_CLIENTS / 2; i++)
		vt_raw_close(&held[--n_held]);
	uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
	int admitted = 0;
	while (admitted < MAX_CLIENTS / 2 && vt_now_ns() < deadline) {
		struct vt_raw r;
		if (raw_try(c, &r)) {
			held[n_held++] = r;
			admitted++;
		} else {
			vt_sleep_ms(20);
		}
	}
	assert_int_equal(MAX_CLIENTS / 2, admitted);
	for (int i = 0; i < n_held; i++)
		vt_raw_close(&held[i]);
	assert_back_to_baseline(c);
}

/* ---- a client out of fds ----------------------------------------------------------------- */

/* Child: connect, use up every fd below a small limit, then allocate (libvad maps the arena
 * on first use, so the arena fd arrives when no fd is left). Reports over out. */
static void exhausted_child(const char *socket_path, int out)
{
	vad_client *vc = NULL;
	VT_CHILD_CHECK(vad_connect(socket_path, "no-fds-left", &vc) == 0, "connect: %s",
		       vad_last_error(NULL));
	struct rlimit rl = {.rlim_cur = 64, .rlim_max = 64};
	VT_CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	int filled = 0;
	while (open("/dev/null", O_RDONLY) >= 0)
		filled++;
	VT_CHILD_CHECK(errno == EMFILE, "open stopped with %s", strerror(errno));

	void *p = NULL;
	int rc = vad_alloc(vc, 16 * PAGE, 0, &p);
	char line[512];
	snprintf(line, sizeof(line), "%d %s", rc, rc ? vad_last_error(vc) : "");
	vt_pipe_send(out, line);
	/* The daemon must not have been hurt: with fds back, a new connection works. */
	for (int fd = 3; fd < 64; fd++)
		if (fd != out)
			close(fd);
	vad_client *again = NULL;
	rc = vad_connect(socket_path, "fds-back", &again);
	VT_CHILD_CHECK(rc == 0, "reconnect: %s", vad_last_error(NULL));
	rc = vad_alloc(again, PAGE, 0, &p);
	VT_CHILD_CHECK(rc == 0, "alloc after fds came back: %s", vad_last_error(again));
	memset(p, 0x5a, PAGE);
	vt_pipe_send(out, "recovered");
	_exit(0);
}

static void test_client_out_of_fds(void **state)
{
	struct conns *c = *state;
	int pfd[2];
	assert_int_equal(0, pipe(pfd));
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		exhausted_child(c->d.socket_path, pfd[1]);
	}
	close(pfd[1]);
	/* Collect everything and reap the child before judging, so a failure here does not
	 * leave it running into the next test. */
	char line[512] = "", line2[64] = "";
	bool got = vt_pipe_recv(pfd[0], line, sizeof(line), REPLY_TIMEOUT) > 0;
	bool got2 = got && vt_pipe_recv(pfd[0], line2, sizeof(line2), REPLY_TIMEOUT) > 0;
	close(pfd[0]);
	int status = vt_wait_child(pid, REPLY_TIMEOUT);
	assert_true(got);
	int rc = atoi(line);
	const char *msg = strchr(line, ' ');
	printf("alloc with no fd left: %d (%s): %s\n", rc, vad_strerror(rc), msg ? msg + 1 : "");
	if (rc == 0)
		fail_msg("vad_alloc succeeded although the arena fd could not be received");
	assert_non_null(msg);
	assert_true(got2);
	assert_string_equal("recovered", line2);
	assert_int_equal(0, status);
	assert_back_to_baseline(c);
	/* A sentence that says what happened: the fd could not be received. */
	if (!vt_contains(msg, "descriptor") && !vt_contains(msg, "fd"))
		fail_msg("the error does not say the arena's fd could not be received: %s",
			 msg + 1);
}

/* ---- fds pushed at the daemon ------------------------------------------------------------ */

/* Send bytes with n fds attached (SCM_RIGHTS). */
static void send_with_fds(int sock, const void *buf, size_t len, const int *fds, int n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} ctrl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n) {
		msg.msg_control = ctrl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
	}
	ssize_t w = sendmsg(sock, &msg, MSG_NOSIGNAL);
	if (w != (ssize_t)len)
		fail_msg("sendmsg with %d fds: %zd (%s)", n, w, strerror(errno));
}

static void test_fds_sent_to_daemon(void **state)
{
	struct conns *c = *state;
	enum { N_FDS = 200, ROUNDS = 25 };
	int fds[N_FDS];
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(devnull >= 0);
	int pipes[2];
	assert_int_equal(0, pipe(pipes));

	struct vt_raw r;
	assert_int_equal(0, vt_raw_connect(&r, c->d.socket_path));
	/* Its own socket, a pipe, /dev/null: the daemon must install none of them. */
	for (int i = 0; i < N_FDS; i++)
		fds[i] = i % 3 == 0 ? r.fd : i % 3 == 1 ? pipes[i % 2] : devnull;

	/* The hello itself arrives with fds, then every request does, cut at odd places. */
	for (int round = 0; round < ROUNDS; round++) {
		uint8_t buf[128];
		struct vt_req q;
		Vad__Request *req =
		    round == 0 ? vt_req_hello(&q, "fd-pusher") : vt_req_alloc(&q, NULL, PAGE, 0, 0);
		size_t n = vt_frame_request(req, (uint64_t)round + 1, buf, sizeof(buf));
		assert_true(n > 3);
		size_t cut = 1 + (size_t)round % (n - 1);
		send_with_fds(r.fd, buf, cut, fds, N_FDS);
		send_with_fds(r.fd, buf + cut, n - cut, fds, round % 2 ? 1 : 0);
		Vad__Response *resp = NULL;
		assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&r, &resp, REPLY_TIMEOUT));
		assert_int_equal(req->id, resp->id);
		if (resp->error != VAD__ERROR__OK)
			fail_msg("request %d with fds attached: %s", round, resp->message);
		vt_raw_response_free(resp);
		int now = vt_fd_count(c->d.pid);
		/* The baseline, plus this connection. */
		if (now > c->base.fds + 1)
			fail_msg("round %d: the daemon has %d fds (baseline %d + 1 connection)",
				 round, now, c->base.fds);
	}
	vt_raw_close(&r);
	close(devnull);
	close(pipes[0]);
	close(pipes[1]);
	assert_back_to_baseline(c);
}

/* ---- a flood past the daemon's own fd limit --------------------------------------------- */

static void test_flood_past_fd_limit(void **state)
{
	(void)state;
	enum { NOFILE = 64, FLOOD = 150 };
	struct vt_daemon d;
	struct vt_baseline base;
	assert_int_equal(0, vt_daemon_init(&d));
	assert_int_equal(0, vt_daemon_wrap_unprivileged(&d, NOFILE, true));
	assert_int_equal(0, vt_daemon_write_config(&d, "stats_interval = 1h\n", NULL));
	assert_int_equal(0, vt_daemon_start(&d));
	assert_int_equal(0, vt_baseline_take(&d, &base));
	struct vt_probe probe;
	assert_int_equal(0, vt_probe_open(&probe, &d, "bystander", REPLY_TIMEOUT));

	/* More connections than the daemon has fds: the kernel queues them, the daemon's
	 * accept fails with EMFILE and it must pause accepting, not spin or die. */
	struct vt_raw *flood = calloc(FLOOD, sizeof(*flood));
	assert_non_null(flood);
	int n = 0;
	for (; n < FLOOD; n++) {
		if (vt_raw_connect(&flood[n], d.socket_path) != 0)
			break; /* the listen backlog is full: enough */
		struct vt_req q;
		assert_true(vt_raw_send_request(&flood[n], vt_req_hello(&q, "fd-flood")) != 0);
	}
	struct vt_latency lat;
	int rc = vt_probe_measure(&probe, (unsigned)vt_scale(200), &lat);
	vt_latency_print("bystander while the daemon is out of fds", &lat);
	if (rc != 0)
		fail_msg("the bystander was not served while the daemon was out of fds: %s",
			 probe.first_error);
	int answered = 0;
	for (int i = 0; i < n; i++) {
		Vad__Response *resp = NULL;
		if (vt_raw_recv(&flood[i], &resp, 50) == VT_RAW_RESPONSE) {
			answered++;
			vt_raw_response_free(resp);
		}
	}
	printf("%d connections queued against a limit of %d fds; %d said hello in time; daemon "
	       "fds now %d\n",
	       n, NOFILE, answered, vt_fd_count(d.pid));
	assert_true(answered < n); /* the limit did bite */

	/* Once they leave, the daemon accepts again. */
	for (int i = 0; i < n; i++)
		vt_raw_close(&flood[i]);
	free(flood);
	vt_probe_close(&probe);
	vad_client *c = NULL;
	uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
	while (vad_connect(d.socket_path, "after-flood", &c) != 0) {
		if (vt_now_ns() >= deadline)
			fail_msg("no new connection is served after the flood: %s",
				 vad_last_error(NULL));
		vt_sleep_ms(50);
	}
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	if (vt_baseline_check(&d, &base, vt_timeout_ms(10000)) != 0)
		fail_msg("the daemon did not return to its baseline");
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_connection_flood, test_setup),
	    cmocka_unit_test_setup(test_client_out_of_fds, test_setup),
	    cmocka_unit_test_setup(test_fds_sent_to_daemon, test_setup),
	    cmocka_unit_test(test_flood_past_fd_limit),
	};
	return cmocka_run_group_tests_name("hostile_conns", tests, group_setup,
					   vt_group_daemon_stop);
}
