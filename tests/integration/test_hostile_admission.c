/*
 * test_hostile_admission.c - one unprivileged uid tries to lock everyone out: it opens
 * max_clients connections and never says hello, opens more than max_clients_uid, sends its
 * hello a byte at a time, or floods the daemon past its fd limit. Root's `vactl status` must
 * still answer (the slots kept for admins), another uid must still connect (the limit is per
 * uid), silent connections must be closed at hello_timeout (counted from the accept), a client
 * that said hello and then idles must stay, and the log must not grow a line per offender.
 *
 * The crowd is a forked child running as another uid (nobody, or 65533), driven by one-line
 * commands over a pipe; the test itself is root, so it is an admin peer of the daemon.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdint.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "hostile_util.h"
#include "vtassert.h"

#define PAGE	      4096u
#define NOBODY	      65534u
#define OTHER_UID     65533u /* a second unprivileged uid: any number the kernel accepts */
#define REPLY_TIMEOUT vt_timeout_ms(10000)
#define MAX_CROWD     1100

/* ---- the crowd: a child process of another uid ------------------------------------------ */

struct crowd_child {
	const char *socket_path;
	struct vt_raw conns[MAX_CROWD];
	bool hello[MAX_CROWD];	  /* said hello (admitted and known so) */
	bool answered[MAX_CROWD]; /* the daemon sent something or closed: refused or timed out */
	int n;
	uint64_t last_connect_ns;
};

static void child_reply(int out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void child_reply(int out, const char *fmt, ...)
{
	char line[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	vt_pipe_send(out, line);
}

/* Keep a daemon sentence on one line of the pipe. */
static void one_line(char *s)
{
	for (; *s; s++)
		if (*s == '\n')
			*s = ' ';
}

/* "hello N": N new connections, each saying hello; how many were taken, and the first
 * refusal's sentence. */
static void child_hello(struct crowd_child *cc, int count, int out)
{
	int ok = 0, refused = 0;
	char first[512] = "-";
	for (int i = 0; i < count && cc->n < MAX_CROWD; i++) {
		struct vt_raw *r = &cc->conns[cc->n];
		VT_CHILD_CHECK(vt_raw_connect(r, cc->socket_path) == 0, "connect %d", cc->n);
		struct vt_req q;
		/* a refusal may close before the hello arrives */
		(void)vt_raw_send_request(r, vt_req_hello(&q, "crowd"));
		Vad__Response *resp = NULL;
		enum vt_raw_result res = vt_raw_recv(r, &resp, REPLY_TIMEOUT);
		VT_CHILD_CHECK(res == VT_RAW_RESPONSE, "connection %d: no reply to hello (%d)",
			       cc->n, res);
		if (resp->error == VAD__ERROR__OK) {
			ok++;
			cc->hello[cc->n++] = true;
		} else {
			VT_CHILD_CHECK(resp->error == VAD__ERROR__EBUSY, "hello got %s: %s",
				       vt_error_name(resp->error), resp->message);
			if (!refused++)
				snprintf(first, sizeof(first), "%s", resp->message);
			VT_CHILD_CHECK(vt_raw_wait_closed(r, REPLY_TIMEOUT) == 1,
				       "a refused connection stayed open");
			vt_raw_close(r);
		}
		vt_raw_response_free(resp);
	}
	one_line(first);
	child_reply(out, "ok %d refused %d %s", ok, refused, first);
}

/* "silent N": N new connections that send nothing. */
static void child_silent(struct crowd_child *cc, int count, int out)
{
	int opened = 0;
	for (int i = 0; i < count && cc->n < MAX_CROWD; i++) {
		struct vt_raw *r = &cc->conns[cc->n];
		VT_CHILD_CHECK(vt_raw_connect(r, cc->socket_path) == 0, "connect %d", cc->n);
		cc->hello[cc->n] = false;
		cc->answered[cc->n] = false;
		cc->n++;
		opened++;
	}
	cc->last_connect_ns = vt_now_ns();
	child_reply(out, "opened %d", opened);
}

/* Silent connections the daemon has answered (a frame or a close), waiting up to
 * timeout_ms until there are want of them; reads each one's frame: how many were EBUSY and
 * ENOHELLO, one sentence of each, and whether each was closed afterwards. */
static void child_answered(struct crowd_child *cc, int want, int timeout_ms, int out)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct pollfd *pf = calloc((size_t)cc->n, sizeof(*pf));
	VT_CHILD_CHECK(pf != NULL, "out of memory");
	int np = 0;
	for (int i = 0; i < cc->n; i++)
		if (!cc->hello[i] && !cc->answered[i] && cc->conns[i].fd >= 0)
			pf[np++] = (struct pollfd){.fd = cc->conns[i].fd, .events = POLLIN};
	/* poll says how many are readable (a frame, or the close); wait until want are. */
	int ready;
	while ((ready = poll(pf, (nfds_t)np, 0)) < want && vt_now_ns() < deadline) {
		VT_CHILD_CHECK(ready >= 0 || errno == EINTR, "poll: %s", strerror(errno));
		vt_sleep_ms(5);
	}
	free(pf);
	uint64_t done_ns = vt_now_ns();
	int busy = 0, nohello = 0, other = 0, unclosed = 0, answered = 0;
	char busy_msg[512] = "-", nohello_msg[512] = "-";
	for (int i = 0; i < cc->n; i++) {
		struct vt_raw *r = &cc->conns[i];
		if (cc->hello[i] || cc->answered[i] || r->fd < 0)
			continue;
		struct pollfd p = {.fd = r->fd, .events = POLLIN};
		if (poll(&p, 1, 0) != 1)
			continue;
		Vad__Response *resp = NULL;
		enum vt_raw_result res = vt_raw_recv(r, &resp, REPLY_TIMEOUT);
		answered++;
		cc->answered[i] = true;
		if (res == VT_RAW_RESPONSE) {
			if (resp->error == VAD__ERROR__EBUSY) {
				if (!busy++)
					snprintf(busy_msg, sizeof(busy_msg), "%s", resp->message);
			} else if (resp->error == VAD__ERROR__ENOHELLO) {
				if (!nohello++)
					snprintf(nohello_msg, sizeof(nohello_msg), "%s",
						 resp->message);
			} else {
				other++;
			}
			vt_raw_response_free(resp);
			if (vt_raw_wait_closed(r, REPLY_TIMEOUT) != 1)
				unclosed++;
		} else if (res != VT_RAW_CLOSED) {
			other++;
		}
		vt_raw_close(r);
	}
	one_line(busy_msg);
	one_line(nohello_msg);
	/* Two lines: the counts, then the sentences (each may hold spaces). */
	child_reply(out, "answered %d busy %d nohello %d other %d unclosed %d after_ms %llu",
		    answered, busy, nohello, other, unclosed,
		    (unsigned long long)((done_ns - cc->last_connect_ns) / 1000000u));
	child_reply(out, "%s", busy_msg);
	child_reply(out, "%s", nohello_msg);
}

static void crowd_main(const char *socket_path, uid_t uid, int in, int out)
{
	static struct crowd_child cc;
	cc.socket_path = socket_path;
	/* Root may raise its limits before it drops them: a crowd of max_clients needs fds. */
	struct rlimit rl = {.rlim_cur = MAX_CROWD + 64, .rlim_max = MAX_CROWD + 64};
	struct rlimit cur;
	if (getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_max > rl.rlim_max)
		rl.rlim_max = cur.rlim_max;
	VT_CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	VT_CHILD_CHECK(setgroups(0, NULL) == 0 && setgid(uid) == 0 && setuid(uid) == 0,
		       "cannot become uid %u: %s", (unsigned)uid, strerror(errno));
	child_reply(out, "uid %u", (unsigned)getuid());
	char cmd[256];
	while (vt_pipe_recv(in, cmd, sizeof(cmd), 600000) > 0) {
		int a = 0, b = 0;
		if (sscanf(cmd, "hello %d", &a) == 1) {
			child_hello(&cc, a, out);
		} else if (sscanf(cmd, "silent %d", &a) == 1) {
			child_silent(&cc, a, out);
		} else if (sscanf(cmd, "answered %d %d", &a, &b) == 2) {
			child_answered(&cc, a, b, out);
		} else if (sscanf(cmd, "drop %d", &a) == 1) {
			for (int i = cc.n - 1; i >= 0 && a > 0; i--) {
				if (cc.hello[i] && cc.conns[i].fd >= 0) {
					vt_raw_close(&cc.conns[i]);
					cc.hello[i] = false;
					cc.answered[i] = true;
					a--;
				}
			}
			child_reply(out, "dropped");
		} else if (strcmp(cmd, "exit") == 0) {
			break;
		} else {
			VT_CHILD_CHECK(false, "unknown command '%s'", cmd);
		}
	}
	_exit(0);
}

struct crowd {
	pid_t pid;
	int cmd; /* we write commands */
	int rep; /* we read replies */
};

static void crowd_start(struct crowd *cw, const struct vt_daemon *d, uid_t uid)
{
	int to_child[2], from_child[2];
	assert_int_equal(0, pipe(to_child));
	assert_int_equal(0, pipe(from_child));
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(to_child[1]);
		close(from_child[0]);
		crowd_main(d->socket_path, uid, to_child[0], from_child[1]);
	}
	close(to_child[0]);
	close(from_child[1]);
	cw->pid = pid;
	cw->cmd = to_child[1];
	cw->rep = from_child[0];
	char line[64];
	if (vt_pipe_recv(cw->rep, line, sizeof(line), REPLY_TIMEOUT) <= 0)
		fail_msg("the crowd child did not start as uid %u", (unsigned)uid);
	char want[32];
	snprintf(want, sizeof(want), "uid %u", (unsigned)uid);
	assert_string_equal(want, line);
}

/* Send a command and read its one-line reply. */
static void crowd_ask(struct crowd *cw, const char *cmd, char *reply, size_t len)
{
	assert_int_equal(0, vt_pipe_send(cw->cmd, cmd));
	if (vt_pipe_recv(cw->rep, reply, len, vt_timeout_ms(60000)) < 0)
		fail_msg("the crowd did not answer '%s'", cmd);
}

static void crowd_read(struct crowd *cw, char *reply, size_t len)
{
	if (vt_pipe_recv(cw->rep, reply, len, vt_timeout_ms(60000)) < 0)
		fail_msg("the crowd sent no more lines");
}

static void crowd_stop(struct crowd *cw)
{
	vt_pipe_send(cw->cmd, "exit");
	close(cw->cmd);
	close(cw->rep);
	assert_int_equal(0, vt_wait_child(cw->pid, REPLY_TIMEOUT));
}

/* ---- the daemon's view ------------------------------------------------------------------- */

/* Clients connected, read through a connection the test holds (root: an admin, so it is
 * never refused, and it counts itself). */
static uint32_t clients_now(vad_client *admin)
{
	struct vad_stats st;
	int rc = vad_stats(admin, &st);
	if (rc != 0)
		fail_msg("stats: %s", vad_last_error(admin));
	return st.clients;
}

/* Poll until the daemon counts want clients; the count at the deadline otherwise. */
static uint32_t wait_clients(vad_client *admin, uint32_t want, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	uint32_t n;
	while ((n = clients_now(admin)) != want && vt_now_ns() < deadline)
		vt_sleep_ms(10);
	return n;
}

/* Poll until the log has a line with needle. */
static bool wait_log(const struct vt_daemon *d, const char *needle, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (!vt_daemon_log_contains(d, needle)) {
		if (vt_now_ns() >= deadline)
			return false;
		vt_sleep_ms(50);
	}
	return true;
}

/* Time root's `vactl status`; it must succeed. */
static double timed_status(const struct vt_daemon *d)
{
	struct vt_output o;
	uint64_t t0 = vt_now_ns();
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "status", NULL));
	double s = (double)(vt_now_ns() - t0) / 1e9;
	if (o.exit_code != 0) {
		vt_output_print("vactl status", &o);
		fail_msg("root's vactl status failed while one uid filled the daemon");
	}
	assert_true(vt_contains(o.out, "admin"));
	vt_output_free(&o);
	return s;
}

static void start_daemon(struct vt_daemon *d, const char *extra)
{
	char conf[512];
	snprintf(conf, sizeof(conf), "stats_interval = 1h\n%s", extra);
	assert_int_equal(0, vt_daemon_setup(d, conf, NULL));
}

static void stop_daemon(struct vt_daemon *d)
{
	assert_int_equal(0, vt_daemon_stop(d));
	vt_daemon_destroy(d);
}

/* start_daemon, root's watching connection (counted by the daemon) and nobody's crowd. */
static vad_client *start_watched_crowd(struct vt_daemon *d, const char *extra, struct crowd *cw)
{
	start_daemon(d, extra);
	vad_client *admin = NULL;
	assert_int_equal(0, vt_connect(d, "admin-watch", &admin));
	assert_int_equal(1, wait_clients(admin, 1, REPLY_TIMEOUT));
	crowd_start(cw, d, NOBODY);
	return admin;
}

/* What the crowd's silent connections were told: counts by kind, then the first refusal
 * ("busy") and the first hello-timeout sentence. */
struct answers {
	int answered, busy, nohello, other, unclosed;
	char busy_msg[768], nohello_msg[768];
};

/* "answered WANT TIMEOUT_MS": wait for want answers and read the three reply lines. */
static void crowd_answers(struct crowd *cw, int want, int timeout_ms, struct answers *a)
{
	char cmd[64], reply[768];
	snprintf(cmd, sizeof(cmd), "answered %d %d", want, timeout_ms);
	crowd_ask(cw, cmd, reply, sizeof(reply));
	crowd_read(cw, a->busy_msg, sizeof(a->busy_msg));
	crowd_read(cw, a->nohello_msg, sizeof(a->nohello_msg));
	a->answered = a->busy = a->nohello = a->other = a->unclosed = -1;
	sscanf(reply, "answered %d busy %d nohello %d other %d unclosed %d", &a->answered, &a->busy,
	       &a->nohello, &a->other, &a->unclosed);
}

/* ---- max_clients silent connections from one uid ---------------------------------------- */

/* nobody opens max_clients connections and says nothing; root holds one. nobody gets
 * max_clients - admin_slots - 1, the rest are refused naming the admin slots, and root's
 * vactl status still answers. */
static void fill_and_status(int max_clients, int admin_slots, const char *more)
{
	struct vt_daemon d;
	char extra[256];
	snprintf(extra, sizeof(extra), "max_clients = %d\nadmin_slots = %d\nhello_timeout = 1h\n%s",
		 max_clients, admin_slots, more);
	struct crowd cw;
	vad_client *admin = start_watched_crowd(&d, extra, &cw);
	char cmd[64], reply[768];
	snprintf(cmd, sizeof(cmd), "silent %d", max_clients);
	crowd_ask(&cw, cmd, reply, sizeof(reply));
	char want[32];
	snprintf(want, sizeof(want), "opened %d", max_clients);
	assert_string_equal(want, reply);

	int admitted = max_clients - admin_slots - 1; /* root's watcher holds one */
	int refused = max_clients - admitted;
	uint32_t n = wait_clients(admin, (uint32_t)admitted + 1, REPLY_TIMEOUT);
	if (n != (uint32_t)admitted + 1)
		fail_msg("the daemon counts %u clients, expected %d of nobody's and root's", n,
			 admitted);
	/* Root gets in first, whatever the counts are: that is the promise, and what is checked:
	 * each status succeeds and is served as admin (with every slot but the admins' taken and
	 * hello_timeout 1h, nothing else would let it in). How long it took is a figure, printed,
	 * not a bound: a loaded machine stretches it. */
	double worst = 0;
	for (int i = 0; i < 3; i++) {
		double s = timed_status(&d);
		worst = s > worst ? s : worst;
	}
	printf("root's vactl status with %d silent connections of uid %u (max_clients %d): "
	       "worst of 3: %.3f s\n",
	       admitted, NOBODY, max_clients, worst);
	struct answers ans;
	crowd_answers(&cw, refused, REPLY_TIMEOUT, &ans);
	printf("nobody opened %d silent connections: %d admitted, %d refused: %s\n", max_clients,
	       admitted, ans.busy, ans.busy_msg);
	assert_int_equal(refused, ans.answered);
	assert_int_equal(refused, ans.busy);
	assert_int_equal(0, ans.other);
	assert_int_equal(0, ans.unclosed);
	char needle[96];
	snprintf(needle, sizeof(needle), "keeps the last %d of max_clients %d for admins",
		 admin_slots, max_clients);
	if (!vt_contains(ans.busy_msg, needle))
		fail_msg("the refusal does not name the admin slots (%s): %s", needle,
			 ans.busy_msg);

	/* One refusal in the log, however many there were. */
	assert_true(vt_daemon_log_count(&d, "keeps the last") <= 1);

	crowd_stop(&cw);
	assert_int_equal(1, wait_clients(admin, 1, REPLY_TIMEOUT));
	vad_close(admin);
	stop_daemon(&d);
}

static void test_fill_max_clients_silent(void **state)
{
	(void)state;
	if (!vt_is_root())
		skip();
	/* max_clients_uid must not bite first, to show the admin slots */
	fill_and_status(64, 4, "max_clients_uid = unlimited\n");
}

static void test_fill_default_sizes(void **state)
{
	(void)state;
	if (!vt_is_root())
		skip();
	fill_and_status(1024, 4, "max_clients_uid = unlimited\n");
}

/* At the defaults the per-uid limit stops a single uid at 128 connections first. */
static void test_defaults_stop_one_uid(void **state)
{
	(void)state;
	if (!vt_is_root())
		skip();
	struct vt_daemon d;
	struct crowd cw;
	/* the sizes are the defaults */
	vad_client *admin = start_watched_crowd(&d, "hello_timeout = 1h\n", &cw);
	char reply[768];
	crowd_ask(&cw, "silent 1024", reply, sizeof(reply));
	assert_string_equal("opened 1024", reply);
	assert_int_equal(129, wait_clients(admin, 129, REPLY_TIMEOUT));
	struct answers ans;
	crowd_answers(&cw, 1024 - 128, REPLY_TIMEOUT, &ans);
	printf("defaults: nobody's 1024 connections: 128 admitted, %d refused: %s\n", ans.busy,
	       ans.busy_msg);
	assert_int_equal(1024 - 128, ans.busy);
	assert_true(vt_contains(ans.busy_msg, "uid 65534 already has 128 connections"));
	assert_true(vt_contains(ans.busy_msg, "max_clients_uid 128"));
	double s = timed_status(&d);
	printf("root's vactl status at the defaults with uid %u at its limit: %.3f s\n", NOBODY, s);
	assert_true(s < 5.0);
	assert_true(vt_daemon_log_count(&d, "max_clients_uid") <= 1);
	crowd_stop(&cw);
	vad_close(admin);
	stop_daemon(&d);
}

/* ---- the hello timeout ------------------------------------------------------------------- */

/* Silent connections are closed at hello_timeout, told why, and logged as one line plus a
 * summary with their count. */
static void test_silent_closed_at_timeout(void **state)
{
	(void)state;
	if (!vt_is_root())
		skip();
	struct vt_daemon d;
	/* 1 s; longer in sanitizer builds, so that all are connected before the first goes */
	int timeout_s = vt_timeout_ms(1000) / 1000;
	char extra[160];
	snprintf(extra, sizeof(extra),
		 "max_clients = 64\nmax_clients_uid = unlimited\nhello_timeout = %ds\n", timeout_s);
	struct crowd cw;
	vad_client *admin = start_watched_crowd(&d, extra, &cw);
	enum { SILENT = 59 }; /* 64 - 4 admin slots - root's watcher */
	char reply[768];
	uint64_t t0 = vt_now_ns();
	crowd_ask(&cw, "silent 59", reply, sizeof(reply));
	uint64_t t_opened = vt_now_ns();
	assert_string_equal("opened 59", reply);
	uint32_t n = wait_clients(admin, SILENT + 1, REPLY_TIMEOUT);
	double all_in_s = (double)(vt_now_ns() - t0) / 1e9;
	if (n != SILENT + 1)
		fail_msg("the daemon counts %u clients, expected %d silent ones and root's", n,
			 SILENT);
	/* The daemon drops them all by itself. */
	n = wait_clients(admin, 1, vt_timeout_ms(10000) + timeout_s * 1000);
	double gone_s = (double)(vt_now_ns() - t_opened) / 1e9;
	if (n != 1)
		fail_msg("%u silent connections still open %.1f s after their last connect, with "
			 "hello_timeout %d s",
			 n - 1, gone_s, timeout_s);
	printf("%d silent connections (all counted %.3f s after the first connect) with "
	       "hello_timeout %d s: all closed %.3f s after the last connect\n",
	       SILENT, all_in_s, timeout_s, gone_s);
	assert_true(gone_s >= timeout_s * 0.9);
	struct answers ans;
	crowd_answers(&cw, SILENT, 10000, &ans);
	assert_int_equal(SILENT, ans.answered);
	assert_int_equal(SILENT, ans.nohello);
	assert_int_equal(0, ans.busy);
	assert_int_equal(0, ans.unclosed);
	char named[32];
	snprintf(named, sizeof(named), "hello_timeout %d s", timeout_s);
	if (!vt_contains(ans.nohello_msg, named))
		fail_msg("the closing frame does not name hello_timeout: %s", ans.nohello_msg);
	/* One line for the first, one summary with the count of the others. */
	if (!wait_log(&d, "more connections closed for not completing hello", vt_timeout_ms(30000)))
		fail_msg("no summary line of the hello timeouts in the log");
	assert_int_equal(1, vt_daemon_log_count(&d, "no hello within hello_timeout"));
	char summary[96];
	snprintf(summary, sizeof(summary), "%d more connections closed for not completing hello",
		 SILENT - 1);
	if (!vt_daemon_log_contains(&d, summary)) {
		vt_daemon_print_log(&d, 20);
		fail_msg("the summary does not count the other %d closes", SILENT - 1);
	}
	crowd_stop(&cw);
	vad_close(admin);
	stop_daemon(&d);
}

/* Slowloris: a hello sent a byte at a time gains nothing: the timeout counts from the accept,
 * so the connection is closed before its hello is complete. */
static void test_slow_hello_counts_from_accept(void **state)
{
	(void)state;
	struct vt_daemon d;
	start_daemon(&d, "hello_timeout = 1s\n");
	/* A hello that takes 5 s or more at one byte per 50 ms (longer in sanitizer builds). */
	int pace_ms = 50;
	size_t want_len = (size_t)vt_timeout_ms(5000) / (size_t)pace_ms;
	char *name = malloc(want_len + 1);
	assert_non_null(name);
	memset(name, 'x', want_len);
	name[want_len] = '\0';
	struct vt_req q;
	Vad__Request *req = vt_req_hello(&q, name);
	req->id = 1;
	size_t len = vad_frame_request_size(req);
	uint8_t *frame = malloc(len);
	assert_non_null(frame);
	assert_int_equal(len, vt_frame_request(req, 1, frame, len));

	struct vt_raw r;
	uint64_t t0 = vt_now_ns();
	assert_int_equal(0, vt_raw_connect(&r, d.socket_path));
	size_t sent = 0;
	bool closed = false;
	while (sent < len) {
		if (send(r.fd, frame + sent, 1, MSG_NOSIGNAL) != 1) {
			closed = true; /* the daemon closed: EPIPE/ECONNRESET */
			break;
		}
		sent++;
		struct pollfd p = {.fd = r.fd, .events = POLLIN};
		if (poll(&p, 1, pace_ms) == 1) {
			closed = true;
			break;
		}
	}
	double at_s = (double)(vt_now_ns() - t0) / 1e9;
	printf("slow hello: %zu of %zu bytes sent at one per %d ms when the daemon closed after "
	       "%.3f s\n",
	       sent, len, pace_ms, at_s);
	if (!closed || sent >= len)
		fail_msg("a hello sent a byte at a time was not cut off: %zu of %zu bytes in "
			 "%.1f s with hello_timeout 1s",
			 sent, len, at_s);
	assert_true(at_s >= 0.9); /* not before the timeout */
	Vad__Response *resp = NULL;
	if (vt_raw_recv(&r, &resp, REPLY_TIMEOUT) == VT_RAW_RESPONSE) {
		assert_int_equal(VAD__ERROR__ENOHELLO, resp->error);
		assert_true(vt_contains(resp->message, "hello_timeout"));
		vt_raw_response_free(resp);
	}
	vt_raw_close(&r);
	free(frame);
	free(name);
	stop_daemon(&d);
}

/* A client that completed hello and then idles is a real client: no timeout. Proven without
 * a fixed wait: two silent connections opened after its hello, one after the other, are
 * closed at their timeouts, so two whole timeouts passed since its accept. */
static void test_idle_after_hello_stays(void **state)
{
	(void)state;
	struct vt_daemon d;
	start_daemon(&d, "hello_timeout = 500ms\n");
	struct vt_raw idle;
	assert_int_equal(0, vt_raw_connect(&idle, d.socket_path));
	assert_int_equal(0, vt_raw_hello(&idle, "idle"));
	uint64_t t0 = vt_now_ns();
	for (int i = 0; i < 2; i++) {
		struct vt_raw silent;
		assert_int_equal(0, vt_raw_connect(&silent, d.socket_path));
		if (vt_raw_wait_closed(&silent, vt_timeout_ms(10000)) != 1)
			fail_msg("a silent connection was not closed at hello_timeout");
		vt_raw_close(&silent);
	}
	double idle_s = (double)(vt_now_ns() - t0) / 1e9;
	uint64_t off;
	assert_int_equal(0, vt_raw_alloc(&idle, PAGE, &off));
	assert_int_equal(0, vt_raw_free(&idle, off));
	printf("a client idle for %.2f s after its hello (hello_timeout 500ms) is still served\n",
	       idle_s);
	vt_raw_close(&idle);
	stop_daemon(&d);
}

/* hello_timeout is reloadable: a shorter one applies to the next connection; one that was
 * already waiting keeps its old deadline, and may still say hello. */
static void test_hello_timeout_reload(void **state)
{
	(void)state;
	struct vt_daemon d;
	start_daemon(&d, "hello_timeout = 1h\n");
	struct vt_raw before, after;
	assert_int_equal(0, vt_raw_connect(&before, d.socket_path));
	assert_int_equal(
	    0, vt_daemon_write_config(&d, "stats_interval = 1h\nhello_timeout = 500ms\n", NULL));
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d.socket_path, NULL, &o, "reload", NULL));
	if (o.exit_code != 0 || !vt_contains(o.out, "hello_timeout 500 ms")) {
		vt_output_print("vactl reload", &o);
		fail_msg("the reload did not report hello_timeout 500 ms");
	}
	vt_output_free(&o);
	uint64_t t0 = vt_now_ns();
	assert_int_equal(0, vt_raw_connect(&after, d.socket_path));
	Vad__Response *resp = NULL;
	assert_int_equal(VT_RAW_RESPONSE, vt_raw_recv(&after, &resp, vt_timeout_ms(10000)));
	assert_int_equal(VAD__ERROR__ENOHELLO, resp->error);
	if (!vt_contains(resp->message, "hello_timeout 500 ms"))
		fail_msg("the closing frame does not name the reloaded timeout: %s", resp->message);
	vt_raw_response_free(resp);
	assert_int_equal(1, vt_raw_wait_closed(&after, REPLY_TIMEOUT));
	printf("after a reload to hello_timeout 500ms a silent connection was closed after "
	       "%.3f s\n",
	       (double)(vt_now_ns() - t0) / 1e9);
	vt_raw_close(&after);
	assert_int_equal(0, vt_raw_hello(&before, "from-before-the-reload"));
	vt_raw_close(&before);
	stop_daemon(&d);
}

/* ---- hand-over between workers ------------------------------------------------------------ */

#define LOAD_CONNS   6
#define LOAD_THREADS 18 /* three per connection: libvad pipelines them */
#define LOAD_BATCH   128

struct load {
	vad_client *c[LOAD_CONNS];
	pthread_t t[LOAD_THREADS];
	int stop;   /* atomic */
	int failed; /* atomic */
};

static struct load *load_of[LOAD_THREADS];

/* Allocate and free LOAD_BATCH pages per request, until told to stop: enough work on the
 * daemon's side that its one active worker saturates and the balancer spreads. */
static void *load_run(void *arg)
{
	int id = (int)(intptr_t)arg;
	struct load *ld = load_of[id];
	vad_client *c = ld->c[id % LOAD_CONNS];
	size_t sizes[LOAD_BATCH];
	void *p[LOAD_BATCH];
	for (int i = 0; i < LOAD_BATCH; i++)
		sizes[i] = PAGE;
	while (!__atomic_load_n(&ld->stop, __ATOMIC_RELAXED)) {
		if (vad_alloc_batch(c, LOAD_BATCH, sizes, 0, p) != 0 ||
		    vad_free_batch(c, LOAD_BATCH, p) != 0) {
			fprintf(stderr, "load %d: %s\n", id, vad_last_error(c));
			__atomic_store_n(&ld->failed, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	return NULL;
}

/* Silent connections that a worker hands to another (the balancer gathering the connections
 * on one worker when the load goes) still close at hello_timeout: the new worker arms the
 * timer for what is left of it. Whether the daemon spreads depends on the machine's load; if
 * it does not within a generous bound the hand-over is not tested here (skipped, not failed). */
static void test_moved_silent_connections_time_out(void **state)
{
	(void)state;
	struct vt_daemon d;
	int timeout_s = vt_timeout_ms(2000) / 1000;
	char extra[160];
	snprintf(extra, sizeof(extra),
		 "workers = 2\nworker_spread_idle = 0\nlog_level = debug\nhello_timeout = %ds\n",
		 timeout_s);
	start_daemon(&d, extra);
	vad_client *admin = NULL;
	assert_int_equal(0, vt_connect(&d, "admin-watch", &admin));
	struct load ld = {0};
	for (int i = 0; i < LOAD_CONNS; i++)
		assert_int_equal(0, vt_connect(&d, "load", &ld.c[i]));
	for (int i = 0; i < LOAD_THREADS; i++) {
		load_of[i] = &ld;
		assert_int_equal(0, pthread_create(&ld.t[i], NULL, load_run, (void *)(intptr_t)i));
	}
	bool spread = wait_log(&d, "spreading over 2", vt_timeout_ms(20000)) &&
		      wait_log(&d, "handed", vt_timeout_ms(5000)); /* the spread's own moves */
	/* Silent connections now land on both workers (the least loaded takes each)... */
	enum { SILENT = 20 };
	struct vt_raw silent[SILENT];
	int handed_before = vt_daemon_log_count(&d, "handed");
	uint64_t t0 = vt_now_ns();
	for (int i = 0; i < SILENT; i++)
		assert_int_equal(0, vt_raw_connect(&silent[i], d.socket_path));
	/* ...and when the load stops, the workers gather on one: worker 1 hands its over. */
	__atomic_store_n(&ld.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < LOAD_THREADS; i++)
		pthread_join(ld.t[i], NULL);
	for (int i = 0; i < LOAD_CONNS; i++)
		vad_close(ld.c[i]);
	assert_int_equal(0, __atomic_load_n(&ld.failed, __ATOMIC_RELAXED));
	int closed = 0;
	uint64_t deadline = t0 + (uint64_t)(vt_timeout_ms(10000) + timeout_s * 1000) * 1000000u;
	for (int i = 0; i < SILENT; i++) {
		uint64_t now = vt_now_ns();
		int left = now < deadline ? (int)((deadline - now) / 1000000u) : 0;
		closed += vt_raw_wait_closed(&silent[i], left);
		vt_raw_close(&silent[i]);
	}
	double gone_s = (double)(vt_now_ns() - t0) / 1e9;
	bool moved = vt_daemon_log_count(&d, "handed") > handed_before;
	printf("%d silent connections, %s between workers, closed %.2f s after the first connect "
	       "(hello_timeout %d s)\n",
	       closed, moved ? "handed over" : "not handed over", gone_s, timeout_s);
	assert_int_equal(SILENT, closed);
	assert_int_equal(1, wait_clients(admin, 1, REPLY_TIMEOUT));
	vad_close(admin);
	stop_daemon(&d);
	if (!spread || !moved)
		skip(); /* closed in time, but no hand-over happened on this machine */
}

/* ---- the per-uid limit ------------------------------------------------------------------- */

/* The (limit+1)th connection of one uid is refused naming the limit and the uid; another uid
 * and root still get in; a reload raises the limit. */
static void test_uid_limit(void **state)
{
	(void)state;
	if (!vt_is_root())
		skip();
	struct vt_daemon d;
	start_daemon(&d, "max_clients_uid = 8\n");
	struct crowd nob, other;
	crowd_start(&nob, &d, NOBODY);
	crowd_start(&other, &d, OTHER_UID);
	char reply[768];
	crowd_ask(&nob, "hello 9", reply, sizeof(reply));
	printf("uid %u, 9 connections with max_clients_uid 8: %s\n", NOBODY, reply);
	if (strncmp(reply, "ok 8 refused 1 ", 15) != 0)
		fail_msg("expected 8 taken and 1 refused: %s", reply);
	if (!vt_contains(reply, "uid 65534 already has 8 connections") ||
	    !vt_contains(reply, "max_clients_uid 8"))
		fail_msg("the refusal does not name the limit and the uid: %s", reply);
	/* Another uid is not affected by nobody's count. */
	crowd_ask(&other, "hello 8", reply, sizeof(reply));
	assert_true(strncmp(reply, "ok 8 refused 0", 14) == 0);
	/* Neither is root: admins are exempt. */
	vad_client *roots[10];
	for (int i = 0; i < 10; i++)
		assert_int_equal(0, vt_connect(&d, "root-many", &roots[i]));
	for (int i = 0; i < 10; i++)
		vad_close(roots[i]);

	/* A slot of nobody's frees when one leaves. */
	crowd_ask(&nob, "drop 1", reply, sizeof(reply));
	uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
	for (;;) {
		crowd_ask(&nob, "hello 1", reply, sizeof(reply));
		if (strncmp(reply, "ok 1", 4) == 0)
			break;
		if (vt_now_ns() >= deadline)
			fail_msg("nobody's slot did not free after a close: %s", reply);
		vt_sleep_ms(20);
	}
	/* Reload: a higher limit applies to the next connection. */
	assert_int_equal(
	    0, vt_daemon_write_config(&d, "stats_interval = 1h\nmax_clients_uid = 10\n", NULL));
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d.socket_path, NULL, &o, "reload", NULL));
	if (o.exit_code != 0 || !vt_contains(o.out, "max_clients_uid 10")) {
		vt_output_print("vactl reload", &o);
		fail_msg("the reload did not report max_clients_uid 10");
	}
	vt_output_free(&o);
	crowd_ask(&nob, "hello 3", reply, sizeof(reply));
	printf("after reload to max_clients_uid 10: %s\n", reply);
	if (strncmp(reply, "ok 2 refused 1 ", 15) != 0 || !vt_contains(reply, "max_clients_uid 10"))
		fail_msg("expected 2 more taken and 1 refused at 10: %s", reply);
	/* One line in the log for the refusals, counted after that. */
	assert_true(vt_daemon_log_count(&d, "already has") <= 2);
	crowd_stop(&nob);
	crowd_stop(&other);
	stop_daemon(&d);
}

/* ---- out of fds: the listener must not spin --------------------------------------------- */

/* The daemon's pause after a failed accept (daemon/server.c: ACCEPT_PAUSE_MS). */
#define ACCEPT_PAUSE_MS 100

/* The number N of the first "N more accept failures in the last ..." line of d's log (the
 * daemon's count of the failed accepts it did not log one by one), or -1 if none yet. */
static long long accept_failures_counted(const struct vt_daemon *d)
{
	FILE *f = fopen(d->log_path, "r");
	if (!f)
		return -1;
	char line[2048];
	long long n = -1;
	while (n < 0 && fgets(line, sizeof(line), f)) {
		char *at = strstr(line, " more accept failures in the last ");
		if (!at)
			continue;
		char *p = at;
		while (p > line && p[-1] >= '0' && p[-1] <= '9')
			p--;
		if (p < at)
			n = strtoll(p, NULL, 10);
	}
	fclose(f);
	return n;
}

/* Out of fds, the listener pauses ACCEPT_PAUSE_MS after each failed accept instead of
 * retrying a socket that stays readable. The daemon counts those failures and logs the count
 * once per note interval: wait for that line and bound the count by the wall time it can
 * cover. Paused, that is about one failure per pause; a spinning listener fails thousands of
 * times per second, however loaded the machine. */
static void test_out_of_fds_no_spin(void **state)
{
	(void)state;
	enum { NOFILE = 64, FLOOD = 120 };
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_init(&d));
	assert_int_equal(0, vt_daemon_wrap_unprivileged(&d, NOFILE, true));
	assert_int_equal(0, vt_daemon_write_config(&d, "stats_interval = 1h\n", NULL));
	assert_int_equal(0, vt_daemon_start(&d));
	struct vt_raw *flood = calloc(FLOOD, sizeof(*flood));
	assert_non_null(flood);
	/* No failure can come before this: the daemon had fds to spare until the flood. */
	uint64_t t0 = vt_now_ns();
	int n = 0;
	for (; n < FLOOD; n++)
		if (vt_raw_connect(&flood[n], d.socket_path) != 0)
			break; /* the backlog is full: enough */
	if (!wait_log(&d, "accept failed", REPLY_TIMEOUT))
		fail_msg("%d connections did not use up the daemon's %d fds", n, NOFILE);
	/* The summary comes one note interval (10 s) after the first counted failure. */
	long long counted;
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(60000) * 1000000u;
	while ((counted = accept_failures_counted(&d)) < 0) {
		if (vt_now_ns() >= deadline) {
			vt_daemon_print_log(&d, 20);
			fail_msg("no count of accept failures in the log %d s after the first",
				 vt_timeout_ms(60000) / 1000);
		}
		vt_sleep_ms(50);
	}
	int full_lines = vt_daemon_log_count(&d, "accept failed");
	uint64_t window_ms = (vt_now_ns() - t0) / 1000000u;
	/* Every failure but the first (logged in full) falls in the window. Twice the pauses
	 * that fit it, plus one: slack for a timer that fires a little early. */
	long long bound = 2 * (long long)(window_ms / ACCEPT_PAUSE_MS) + 1;
	printf("out of fds with %d connections queued: %lld failed accepts counted, at most %lld "
	       "fit the %llu ms since the flood began\n",
	       n, counted, bound, (unsigned long long)window_ms);
	assert_true(counted >= 1);
	if (counted > bound)
		fail_msg("the listener retried a failing accept %lld times in %llu ms: it spins "
			 "instead of pausing %d ms",
			 counted, (unsigned long long)window_ms, ACCEPT_PAUSE_MS);
	/* One line in full per note interval (10 s), the rest counted. */
	assert_true(full_lines >= 1);
	if (full_lines > 1 + (int)(window_ms / 10000))
		fail_msg("%d lines of accept failures in %llu ms: not one per 10 s", full_lines,
			 (unsigned long long)window_ms);
	for (int i = 0; i < n; i++)
		vt_raw_close(&flood[i]);
	free(flood);
	vad_client *c = NULL;
	deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
	while (vad_connect(d.socket_path, "after-flood", &c) != 0) {
		if (vt_now_ns() >= deadline)
			fail_msg("no connection is served after the flood: %s",
				 vad_last_error(NULL));
		vt_sleep_ms(50);
	}
	vad_close(c);
	stop_daemon(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fill_max_clients_silent),
	    cmocka_unit_test(test_fill_default_sizes),
	    cmocka_unit_test(test_defaults_stop_one_uid),
	    cmocka_unit_test(test_silent_closed_at_timeout),
	    cmocka_unit_test(test_slow_hello_counts_from_accept),
	    cmocka_unit_test(test_idle_after_hello_stays),
	    cmocka_unit_test(test_hello_timeout_reload),
	    cmocka_unit_test(test_moved_silent_connections_time_out),
	    cmocka_unit_test(test_uid_limit),
	    cmocka_unit_test(test_out_of_fds_no_spin),
	};
	return cmocka_run_group_tests_name("hostile_admission", tests, NULL, NULL);
}
