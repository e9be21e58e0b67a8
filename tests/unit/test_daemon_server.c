/*
 * test_daemon_server.c - the server in-process: listener and workers on a real Unix socket,
 * arena fds passed by SCM_RIGHTS and mapped, sharing between connections, max_clients, a
 * slow reader that does not hold up anyone else, disconnects dropping references, SIGHUP,
 * SIGTERM and vad_server_stop. Under ASan and TSan this covers the threads and the teardown.
 * Waits are polls with generous deadlines, never timing assertions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "fdpass.h"
#include "frame.h"
#include "log.h"
#include "server.h"

#define ARENA_SIZE  (64ull << 20)
#define DEADLINE_MS 20000

struct fixture {
	struct vad_config cfg;
	struct vad_server *srv;
	pthread_t thread;
	int run_rc;
	bool running;
	char sock[108];
	char conf[128];
};

static struct fixture *fx;

/* A raw protocol client that keeps received fds. */
struct rc {
	int fd;
	uint8_t buf[1 << 17];
	size_t len;
	int fds[64];
	size_t n_fds;
	uint64_t next_id;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- server fixture ----------------------------------------------------------------------- */

static void *run_thread(void *arg)
{
	struct fixture *f = arg;
	f->run_rc = vad_server_run(f->srv);
	return NULL;
}

static int listen_on(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 64), 0);
	return fd;
}

static void start_server(unsigned max_clients, const char *conf_text)
{
	fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	vad_config_defaults(&fx->cfg);
	fx->cfg.workers = 2;
	fx->cfg.nodes = 2;
	fx->cfg.max_clients = max_clients;
	snprintf(fx->sock, sizeof(fx->sock), "/tmp/vad-test-server-%d.sock", (int)getpid());
	if (conf_text) {
		snprintf(fx->conf, sizeof(fx->conf), "/tmp/vad-test-server-%d.conf", (int)getpid());
		FILE *f = fopen(fx->conf, "w");
		assert_non_null(f);
		fputs(conf_text, f);
		fclose(f);
		snprintf(fx->cfg.path, sizeof(fx->cfg.path), "%s", fx->conf);
	}
	struct vad_arena_conf ac;
	memset(&ac, 0, sizeof(ac));
	snprintf(ac.name, sizeof(ac.name), "default");
	ac.size = ARENA_SIZE;
	ac.quantum = 4096;
	ac.allow_any = true;
	struct vad_arena **arenas = calloc(1, sizeof(*arenas));
	assert_non_null(arenas);
	char err[512] = "";
	if (vad_arena_open(&ac, &fx->cfg, 0, &arenas[0], err, sizeof(err)) != 0)
		fail_msg("vad_arena_open: %s", err);
	int lfd = listen_on(fx->sock);
	if (vad_server_create(&fx->cfg, arenas, 1, lfd, &fx->srv, err, sizeof(err)) != 0)
		fail_msg("vad_server_create: %s", err);
	assert_int_equal(pthread_create(&fx->thread, NULL, run_thread, fx), 0);
	fx->running = true;
}

static void join_server(void)
{
	pthread_join(fx->thread, NULL);
	fx->running = false;
	assert_int_equal(fx->run_rc, 0);
}

static int teardown(void **state)
{
	(void)state;
	if (!fx)
		return 0;
	if (fx->running) {
		vad_server_stop(fx->srv);
		join_server();
	}
	vad_server_destroy(fx->srv);
	unlink(fx->sock);
	if (fx->conf[0])
		unlink(fx->conf);
	free(fx);
	fx = NULL;
	return 0;
}

static int setup(void **state)
{
	(void)state;
	vad_log_set_level(VAD_LOG_ERR);
	start_server(8, NULL);
	return 0;
}

/* ---- raw client --------------------------------------------------------------------------- */

static struct rc *rc_connect(void)
{
	struct rc *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c->fd >= 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", fx->sock);
	assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	c->next_id = 1;
	return c;
}

static void rc_close(struct rc *c)
{
	for (size_t i = 0; i < c->n_fds; i++)
		close(c->fds[i]);
	close(c->fd);
	free(c);
}

static void rc_send(struct rc *c, Vad__Request *req)
{
	uint8_t buf[1024];
	if (!req->id)
		req->id = c->next_id++;
	size_t n = vad_frame_encode_request(req, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(send(c->fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Next response, or NULL at end of stream. */
static Vad__Response *rc_recv(struct rc *c)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;
	for (;;) {
		size_t plen;
		if (vad_frame_peek(c->buf, c->len, sizeof(c->buf), &plen) == VAD_FRAME_READY) {
			Vad__Response *r =
			    vad__response__unpack(NULL, plen, c->buf + VAD_FRAME_HEADER);
			assert_non_null(r);
			memmove(c->buf, c->buf + VAD_FRAME_HEADER + plen,
				c->len - VAD_FRAME_HEADER - plen);
			c->len -= VAD_FRAME_HEADER + plen;
			return r;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		int left = (int)(deadline - now_ms());
		if (left <= 0)
			fail_msg("no response from the daemon within %d ms", DEADLINE_MS);
		if (poll(&p, 1, left) <= 0)
			continue;
		int fds[4];
		size_t n_fds = 0;
		ssize_t n = vad_recv_with_fds(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, fds,
					      4, &n_fds);
		for (size_t i = 0; i < n_fds; i++) {
			assert_true(c->n_fds < 64);
			c->fds[c->n_fds++] = fds[i];
		}
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return NULL;
		assert_true(n > 0);
		c->len += (size_t)n;
	}
}

static Vad__Response *rc_call(struct rc *c, Vad__Request *req)
{
	rc_send(c, req);
	Vad__Response *r = rc_recv(c);
	assert_non_null(r);
	assert_int_equal(r->id, req->id);
	return r;
}

static void expect_ok(Vad__Response *r)
{
	if (r->error)
		fail_msg("error %d: %s", r->error, r->message);
}

static void rc_hello(struct rc *c, const char *name)
{
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = (char *)name;
	h.version = VAD_PROTOCOL_VERSION;
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_HELLO;
	q.hello = &h;
	Vad__Response *r = rc_call(c, &q);
	expect_ok(r);
	vad__response__free_unpacked(r, NULL);
}

/* Say hello on a connection the daemon may refuse; true if it was accepted. */
static bool rc_try_hello(struct rc *c, const char *name)
{
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = (char *)name;
	h.version = VAD_PROTOCOL_VERSION;
	Vad__Request q = VAD__REQUEST__INIT;
	q.id = c->next_id++;
	q.op_case = VAD__REQUEST__OP_HELLO;
	q.hello = &h;
	uint8_t buf[256];
	size_t n = vad_frame_encode_request(&q, buf, sizeof(buf));
	(void)!send(c->fd, buf, n, MSG_NOSIGNAL); /* a refused client may already be closed */
	Vad__Response *r = rc_recv(c);
	bool ok = r && r->error == VAD__ERROR__OK;
	if (r)
		vad__response__free_unpacked(r, NULL);
	return ok;
}

static uint64_t rc_alloc(struct rc *c, uint64_t size)
{
	Vad__Alloc a = VAD__ALLOC__INIT;
	a.arena = (char *)"";
	a.size = size;
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_ALLOC;
	q.alloc = &a;
	Vad__Response *r = rc_call(c, &q);
	expect_ok(r);
	uint64_t off = r->alloc->offsets[0];
	vad__response__free_unpacked(r, NULL);
	return off;
}

/* Map the default arena through MapArena; returns the mapping. */
static uint8_t *rc_map(struct rc *c)
{
	Vad__MapArena m = VAD__MAP_ARENA__INIT;
	m.arena = (char *)"";
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_MAP_ARENA;
	q.map_arena = &m;
	size_t before = c->n_fds;
	Vad__Response *r = rc_call(c, &q);
	expect_ok(r);
	assert_int_equal(r->map_arena->arena->size, ARENA_SIZE);
	vad__response__free_unpacked(r, NULL);
	assert_int_equal(c->n_fds, before + 1); /* the fd came with the reply */
	void *p = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, c->fds[before], 0);
	assert_true(p != MAP_FAILED);
	return p;
}

static uint64_t busy_bytes(struct rc *c)
{
	Vad__StatsRequest st = VAD__STATS_REQUEST__INIT;
	st.arena = (char *)"";
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_STATS;
	q.stats = &st;
	Vad__Response *r = rc_call(c, &q);
	expect_ok(r);
	uint64_t v = r->stats->arenas[0]->busy_bytes;
	vad__response__free_unpacked(r, NULL);
	return v;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_map_share_attach(void **state)
{
	(void)state;
	struct rc *a = rc_connect(), *b = rc_connect();
	rc_hello(a, "writer");
	rc_hello(b, "reader");
	uint64_t off = rc_alloc(a, 8192);
	uint8_t *ma = rc_map(a);
	memcpy(ma + off, "through the arena", 18);

	Vad__Share sh = VAD__SHARE__INIT;
	sh.arena = (char *)"";
	sh.offset = off;
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_SHARE;
	q.share = &sh;
	Vad__Response *r = rc_call(a, &q);
	expect_ok(r);
	Vad__Attach at = VAD__ATTACH__INIT;
	at.token = r->share->token;
	Vad__Request q2 = VAD__REQUEST__INIT;
	q2.op_case = VAD__REQUEST__OP_ATTACH;
	q2.attach = &at;
	Vad__Response *r2 = rc_call(b, &q2);
	expect_ok(r2);
	assert_int_equal(r2->attach->offset, off);
	vad__response__free_unpacked(r, NULL);
	vad__response__free_unpacked(r2, NULL);

	uint8_t *mb = rc_map(b);
	assert_memory_equal(mb + off, "through the arena", 18);

	/* The writer goes away; the reader's reference keeps the range and its bytes. */
	rc_close(a);
	munmap(ma, ARENA_SIZE);
	uint64_t deadline = now_ms() + DEADLINE_MS;
	while (busy_bytes(b) != 8192) {
		assert_true(now_ms() < deadline);
		usleep(1000);
	}
	assert_memory_equal(mb + off, "through the arena", 18);
	munmap(mb, ARENA_SIZE);
	rc_close(b);
}

/* A client that hoards arena fds is refused beyond the budget, and served again once the
 * socket shows it has read everything (SIOCOUTQ). */
static void test_unread_fd_budget(void **state)
{
	(void)state;
	struct rc *c = rc_connect();
	rc_hello(c, "hoarder");
	Vad__MapArena m = VAD__MAP_ARENA__INIT;
	m.arena = (char *)"";
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_MAP_ARENA;
	q.map_arena = &m;
	int total = 40, ok = 0, busy = 0;
	for (int i = 0; i < total; i++) {
		q.id = 0;
		rc_send(c, &q);
	}
	for (int i = 0; i < total; i++) {
		Vad__Response *r = rc_recv(c);
		assert_non_null(r);
		if (r->error == VAD__ERROR__OK)
			ok++;
		else if (r->error == VAD__ERROR__EBUSY)
			busy++;
		vad__response__free_unpacked(r, NULL);
	}
	/* However the requests were batched, at most the budget went out unread at once. */
	assert_int_equal(ok + busy, total);
	assert_true(ok >= 32);
	assert_int_equal((int)c->n_fds, ok);
	/* Everything is read now: the next one is served. */
	q.id = 0;
	Vad__Response *r = rc_call(c, &q);
	expect_ok(r);
	vad__response__free_unpacked(r, NULL);
	rc_close(c);
}

static void test_disconnect_and_pipelining(void **state)
{
	(void)state;
	struct rc *a = rc_connect(), *obs = rc_connect();
	rc_hello(a, "pipeliner");
	rc_hello(obs, "observer");

	/* 100 allocations in one write: all answered, in order. */
	uint8_t buf[100 * 32];
	size_t n = 0;
	for (int i = 0; i < 100; i++) {
		Vad__Alloc al = VAD__ALLOC__INIT;
		al.arena = (char *)"";
		al.size = 4096;
		Vad__Request q = VAD__REQUEST__INIT;
		q.id = 1000 + (uint64_t)i;
		q.op_case = VAD__REQUEST__OP_ALLOC;
		q.alloc = &al;
		n += vad_frame_encode_request(&q, buf + n, sizeof(buf) - n);
	}
	assert_int_equal(send(a->fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
	for (int i = 0; i < 100; i++) {
		Vad__Response *r = rc_recv(a);
		assert_non_null(r);
		expect_ok(r);
		assert_int_equal(r->id, 1000 + (uint64_t)i);
		vad__response__free_unpacked(r, NULL);
	}
	assert_int_equal(busy_bytes(obs), 100 * 4096);
	rc_close(a); /* every reference goes with the connection */
	uint64_t deadline = now_ms() + DEADLINE_MS;
	while (busy_bytes(obs) != 0) {
		assert_true(now_ms() < deadline);
		usleep(1000);
	}
	rc_close(obs);
}

static void test_max_clients(void **state)
{
	(void)state;
	teardown(NULL);
	start_server(3, NULL);
	struct rc *c[3];
	for (int i = 0; i < 3; i++) {
		c[i] = rc_connect();
		rc_hello(c[i], "full");
	}
	struct rc *extra = rc_connect();
	Vad__Response *r = rc_recv(extra); /* refused before it says anything */
	assert_non_null(r);
	assert_int_equal(r->error, VAD__ERROR__EBUSY);
	assert_non_null(strstr(r->message, "max_clients 3"));
	vad__response__free_unpacked(r, NULL);
	assert_null(rc_recv(extra));
	rc_close(extra);

	/* A slot frees when a client leaves. */
	rc_close(c[0]);
	uint64_t deadline = now_ms() + DEADLINE_MS;
	for (;;) {
		struct rc *again = rc_connect();
		bool ok = rc_try_hello(again, "again");
		rc_close(again);
		if (ok)
			break;
		assert_true(now_ms() < deadline);
		usleep(1000);
	}
	rc_close(c[1]);
	rc_close(c[2]);
}

static void test_slow_reader_does_not_stall_others(void **state)
{
	(void)state;
	struct rc *slow = rc_connect(), *fast = rc_connect();
	rc_hello(slow, "slow");
	rc_hello(fast, "fast");

	/* The slow client writes requests until the daemon stops reading them. */
	int fl = fcntl(slow->fd, F_GETFL);
	fcntl(slow->fd, F_SETFL, fl | O_NONBLOCK);
	Vad__ArenasRequest ar = VAD__ARENAS_REQUEST__INIT;
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_ARENAS;
	q.arenas = &ar;
	uint8_t frame[32];
	q.id = 7;
	size_t flen = vad_frame_encode_request(&q, frame, sizeof(frame));
	uint64_t sent = 0, deadline = now_ms() + DEADLINE_MS, quiet_since = now_ms();
	/* One small frame per send (all or nothing), until sends have been refused for a while:
	 * then the daemon's buffers and the socket's are full. */
	while (now_ms() - quiet_since < 300) {
		ssize_t n = send(slow->fd, frame, flen, MSG_NOSIGNAL);
		if (n > 0) {
			assert_int_equal(n, (ssize_t)flen);
			sent++;
			quiet_since = now_ms();
			assert_true(now_ms() < deadline);
		} else {
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			usleep(1000);
		}
	}
	assert_true(sent > 0);

	/* Meanwhile another client is served normally. */
	uint64_t off = rc_alloc(fast, 4096);
	Vad__Free f = VAD__FREE__INIT;
	f.arena = (char *)"";
	f.offsets = &off;
	f.n_offsets = 1;
	Vad__Request fq = VAD__REQUEST__INIT;
	fq.op_case = VAD__REQUEST__OP_FREE;
	fq.free = &f;
	Vad__Response *r = rc_call(fast, &fq);
	expect_ok(r);
	vad__response__free_unpacked(r, NULL);

	/* The slow client finally reads: every whole request it sent gets its reply. */
	fcntl(slow->fd, F_SETFL, fl);
	uint64_t got = 0;
	while (got < sent) {
		r = rc_recv(slow);
		assert_non_null(r);
		expect_ok(r);
		assert_int_equal(r->id, 7);
		vad__response__free_unpacked(r, NULL);
		got++;
	}
	rc_close(slow);
	rc_close(fast);
}

static void test_sighup_reload_and_sigterm(void **state)
{
	(void)state;
	teardown(NULL);
	start_server(2, "[vad]\nmax_clients = 2\nlog_level = err\n[arena default]\nsize = 64M\n");
	struct rc *a = rc_connect(), *b = rc_connect();
	rc_hello(a, "a");
	rc_hello(b, "b");

	FILE *f = fopen(fx->conf, "w");
	assert_non_null(f);
	fputs("[vad]\nmax_clients = 4\nlog_level = err\n[arena default]\nsize = 64M\n", f);
	fclose(f);
	assert_int_equal(kill(getpid(), SIGHUP), 0);
	uint64_t deadline = now_ms() + DEADLINE_MS;
	struct rc *c = NULL;
	for (;;) { /* the third client is welcome once the reload is applied */
		c = rc_connect();
		bool ok = rc_try_hello(c, "third");
		if (ok)
			break;
		rc_close(c);
		assert_true(now_ms() < deadline);
		usleep(1000);
	}
	rc_alloc(c, 4096);

	/* SIGTERM: the run loop returns 0 and every connection is closed. */
	assert_int_equal(kill(getpid(), SIGTERM), 0);
	join_server();
	assert_null(rc_recv(a));
	assert_null(rc_recv(c));
	rc_close(a);
	rc_close(b);
	rc_close(c);
}

static void test_stop_before_run(void **state)
{
	(void)state;
	teardown(NULL);
	fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	vad_config_defaults(&fx->cfg);
	fx->cfg.workers = 1;
	snprintf(fx->sock, sizeof(fx->sock), "/tmp/vad-test-server-%d.sock", (int)getpid());
	struct vad_arena_conf ac;
	memset(&ac, 0, sizeof(ac));
	snprintf(ac.name, sizeof(ac.name), "default");
	ac.size = ARENA_SIZE;
	ac.quantum = 4096;
	ac.allow_any = true;
	struct vad_arena **arenas = calloc(1, sizeof(*arenas));
	assert_non_null(arenas);
	char err[512];
	assert_int_equal(vad_arena_open(&ac, &fx->cfg, 0, &arenas[0], err, sizeof(err)), 0);
	int lfd = listen_on(fx->sock);
	assert_int_equal(vad_server_create(&fx->cfg, arenas, 1, lfd, &fx->srv, err, sizeof(err)),
			 0);
	vad_server_stop(fx->srv);
	assert_int_equal(vad_server_run(fx->srv), 0);
	/* teardown destroys it */
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_map_share_attach, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unread_fd_budget, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disconnect_and_pipelining, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_max_clients, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slow_reader_does_not_stall_others, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_sighup_reload_and_sigterm, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_before_run, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
