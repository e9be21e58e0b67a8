/*
 * test_vabench.c - the daemon load generator (vabench --daemon) through its command line:
 * against a real daemon it completes exactly the requests it was asked for, in both of its
 * loops (blocking, one connection per driver; epoll, several), with and without bursts, and
 * frees everything it allocated; with --resp it speaks Redis's SET to a small RESP server in
 * this test, byte for byte; a server's error reply fails the run with the reply in the
 * message; conflicting options are refused.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "vtassert.h"

/* What vabench --resp must send for every request (redis-benchmark -t set's defaults). */
static const char set_cmd[] = "*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nxxx\r\n";

/* Run BUILD/vabench with args (NULL-terminated); returns its output (caller frees). */
static struct vt_output run_vabench(char *const *args)
{
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/vabench", vt_build_dir());
	char *argv[32] = {bin};
	int n = 1;
	for (; args[n - 1] && n < 31; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	struct vt_output o;
	if (vt_run(argv, NULL, vt_timeout_ms(60000), &o) != 0)
		fail_msg("vabench did not run or timed out");
	return o;
}

/* Check one JSON row of a run of `ops` requests on each of `conns` connections with
 * `inflight` in flight: vad runs free every range they allocated (the frees of allocations
 * still in flight when the count is reached come on top, at most inflight per connection);
 * Redis runs send exactly the SETs asked for. No errors, no failure message. */
static void check_row(struct json_object *row, const char *mode, uint64_t conns, uint64_t ops,
		      uint64_t inflight, uint64_t batch)
{
	struct json_object *m = vt_json_find(row, "mode");
	assert_non_null(m);
	assert_string_equal(json_object_get_string(m), mode);
	assert_null(vt_json_find(row, "error"));
	uint64_t requests, items, allocs, errors, samples;
	assert_int_equal(0, vt_json_u64(row, "requests", &requests));
	assert_int_equal(0, vt_json_u64(row, "items", &items));
	assert_int_equal(0, vt_json_u64(row, "allocs", &allocs));
	assert_int_equal(0, vt_json_u64(row, "errors", &errors));
	assert_int_equal(0, vt_json_u64(row, "alloc_samples", &samples));
	assert_int_equal(errors, 0);
	assert_int_equal(items, requests * batch);
	assert_int_equal(samples, allocs);
	if (strcmp(mode, "redis") == 0) {
		assert_int_equal(requests, conns * ops);
		assert_int_equal(allocs, requests);
		return;
	}
	assert_int_equal(requests, 2 * allocs);
	assert_in_range(requests, conns * ops, conns * (ops + inflight));
}

/* Run vabench, require exit 0 and nrows JSON rows on stdout; rows[] must be put. */
static void run_rows(char *const *args, struct json_object **rows, int nrows)
{
	struct vt_output o = run_vabench(args);
	if (o.exit_code != 0)
		vt_output_print("vabench", &o);
	assert_int_equal(o.exit_code, 0);
	int got = vt_json_lines(o.out, rows, nrows + 1);
	if (got != nrows)
		vt_output_print("vabench", &o);
	assert_int_equal(got, nrows);
	vt_output_free(&o);
}

static void test_daemon_requests_counted_and_freed(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base, s;
	assert_int_equal(0, vt_stats(d, &base));
	const char *sock = d->socket_path;
	struct json_object *rows[2];

	/* epoll loop: 3 connections on one driver, a window of 4, batches of 1 and 8 */
	run_rows((char *[]){"--daemon", (char *)sock, "--clients", "3", "--drivers", "1",
			    "--pipeline", "4", "--batch", "1,8", "--ops", "50", "--json", NULL},
		 rows, 2);
	check_row(rows[0], "vad", 3, 50, 4, 1);
	check_row(rows[1], "vad", 3, 50, 4, 8);
	json_object_put(rows[0]);
	json_object_put(rows[1]);

	/* blocking loop (one connection per driver), bursts of 16, random sizes */
	run_rows((char *[]){"--daemon", (char *)sock, "--clients", "2", "--pipeline", "16",
			    "--burst", "--workload", "random_size", "--ops", "64", "--json", NULL},
		 rows, 1);
	check_row(rows[0], "vad", 2, 64, 16, 1);
	json_object_put(rows[0]);

	/* libvad pipelined (tickets): 3 clients through epoll on one thread, windows of 4 */
	run_rows((char *[]){"--daemon", (char *)sock, "--libvad", "--burst", "--clients", "3",
			    "--pipeline", "4", "--ops", "42", "--json", NULL},
		 rows, 1);
	check_row(rows[0], "libvad", 3, 42, 4, 1);
	json_object_put(rows[0]);
	/* ... and one client with blocking waits, bursts of 16 */
	run_rows((char *[]){"--daemon", (char *)sock, "--libvad", "--burst", "--pipeline", "16",
			    "--workload", "random_size", "--ops", "64", "--json", NULL},
		 rows, 1);
	check_row(rows[0], "libvad", 1, 64, 16, 1);
	json_object_put(rows[0]);

	/* every range it allocated went back */
	if (vt_wait_busy(d, base.busy_bytes, 1, vt_timeout_ms(5000), &s) != 0)
		fail_msg("busy bytes %llu after the runs, %llu before",
			 (unsigned long long)s.busy_bytes, (unsigned long long)base.busy_bytes);
	assert_int_equal(0, vt_check_invariants(d));
}

/* ---- a small RESP server ------------------------------------------------------------------ */

struct resp_server {
	char dir[80], path[96];
	int listen_fd;
	const char *reply; /* sent for each whole SET; NULL: hang up at the first */
	int conns;	   /* connections to serve before it returns */
	uint64_t sets;	   /* whole SETs received */
	uint64_t bad;	   /* bytes that were not part of a well-formed SET */
	pthread_t thread;
};

/* Serve r->conns connections until each is closed: count SETs, answer each with r->reply. */
static void *resp_serve(void *arg)
{
	struct resp_server *r = arg;
	enum { MAXC = 8 };
	struct pollfd p[MAXC];
	char buf[MAXC][4096];
	size_t have[MAXC] = {0};
	int n = 0, open_conns = 0;
	const size_t len = sizeof(set_cmd) - 1;
	while (n < r->conns) {
		int fd = accept(r->listen_fd, NULL, NULL);
		if (fd < 0)
			return NULL;
		p[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
		open_conns++;
	}
	while (open_conns) {
		if (poll(p, (nfds_t)n, 10000) <= 0)
			break;
		for (int i = 0; i < n; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t k = read(p[i].fd, buf[i] + have[i], sizeof(buf[i]) - have[i]);
			if (k <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_conns--;
				continue;
			}
			have[i] += (size_t)k;
			size_t pos = 0;
			while (have[i] - pos >= len) {
				if (memcmp(buf[i] + pos, set_cmd, len) != 0) {
					r->bad += have[i] - pos;
					pos = have[i];
					break;
				}
				pos += len;
				r->sets++;
				if (!r->reply) { /* NULL: hang up at the first SET */
					shutdown(p[i].fd, SHUT_RDWR);
					break;
				}
				if (write(p[i].fd, r->reply, strlen(r->reply)) < 0)
					r->bad++;
			}
			memmove(buf[i], buf[i] + pos, have[i] - pos);
			have[i] -= pos;
		}
	}
	for (int i = 0; i < n; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	return NULL;
}

static void resp_start(struct resp_server *r, const char *reply, int conns)
{
	memset(r, 0, sizeof(*r));
	assert_int_equal(0, vt_make_temp_dir(r->dir, sizeof(r->dir), "vt-resp"));
	snprintf(r->path, sizeof(r->path), "%s/redis.sock", r->dir);
	r->reply = reply;
	r->conns = conns;
	r->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(r->listen_fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r->path);
	assert_int_equal(0, bind(r->listen_fd, (struct sockaddr *)&sa, sizeof(sa)));
	assert_int_equal(0, listen(r->listen_fd, 16));
	assert_int_equal(0, pthread_create(&r->thread, NULL, resp_serve, r));
}

static void resp_stop(struct resp_server *r)
{
	shutdown(r->listen_fd, SHUT_RDWR); /* an accept still waiting returns */
	pthread_join(r->thread, NULL);
	close(r->listen_fd);
	unlink(r->path);
	rmdir(r->dir);
}

static void test_resp_sends_redis_benchmark_sets(void **state)
{
	(void)state;
	struct resp_server r;
	resp_start(&r, "+OK\r\n", 2);
	struct json_object *row;
	run_rows((char *[]){"--daemon", r.path, "--resp", "--clients", "2", "--drivers", "1",
			    "--pipeline", "4", "--burst", "--ops", "40", "--json", NULL},
		 &row, 1);
	resp_stop(&r);
	check_row(row, "redis", 2, 40, 4, 1);
	json_object_put(row);
	assert_int_equal(r.sets, 80);
	assert_int_equal(r.bad, 0);
}

/* A --resp run of 5 SETs against a server that answers with reply (NULL: hangs up at the
 * first SET) must fail, saying says in its JSON row. */
static void resp_run_fails(const char *reply, const char *says)
{
	struct resp_server r;
	resp_start(&r, reply, 1);
	struct vt_output o =
	    run_vabench((char *[]){"--daemon", r.path, "--resp", "--ops", "5", "--json", NULL});
	resp_stop(&r);
	if (o.exit_code == 0 || !vt_contains(o.out, says))
		vt_output_print("vabench", &o);
	assert_int_not_equal(o.exit_code, 0);
	assert_true(vt_contains(o.out, says));
	vt_output_free(&o);
}

static void test_resp_error_reply_fails_the_run(void **state)
{
	(void)state;
	resp_run_fails("-ERR out of memory\r\n", "SET answered \\\"-ERR out of memory\\\"");
}

/* A server that goes away: the run fails and says so (a Redis server is not "the daemon"). */
static void test_resp_server_gone(void **state)
{
	(void)state;
	resp_run_fails(NULL, "the server closed the connection");
}

static void test_conflicting_options_refused(void **state)
{
	(void)state;
	static const struct {
		const char *args[6];
		const char *says;
	} bad[] = {
	    {{"--daemon", "/nonexistent", "--resp", "--libvad", NULL}, "exclude each other"},
	    {{"--daemon", "/nonexistent", "--resp", "--batch", "8", NULL}, "--resp sends single"},
	    {{"--daemon", "/nonexistent", "--resp", "--touch", NULL}, "--resp sends single"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct vt_output o = run_vabench((char *const *)bad[i].args);
		if (o.exit_code != 2 || !vt_contains(o.err, bad[i].says))
			vt_output_print("vabench", &o);
		assert_int_equal(o.exit_code, 2);
		assert_true(vt_contains(o.err, bad[i].says));
		vt_output_free(&o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_daemon_requests_counted_and_freed,
					    vt_fixture_daemon_setup, vt_fixture_daemon_teardown),
	    cmocka_unit_test(test_resp_sends_redis_benchmark_sets),
	    cmocka_unit_test(test_resp_error_reply_fails_the_run),
	    cmocka_unit_test(test_resp_server_gone),
	    cmocka_unit_test(test_conflicting_options_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
