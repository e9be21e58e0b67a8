/*
 * test_metrics.c - the daemon's Prometheus text, through libvad (vad_metrics, what vactl
 * metrics prints) and over HTTP (metrics_listen): every family has HELP and TYPE before its
 * samples, which are together; histograms are cumulative with +Inf equal to _count; the figures
 * agree with the stats operation; the HTTP listener answers only GET/HEAD /metrics, refuses a
 * huge head, closes a slow client, and idle connections past its limit neither stop a scrape
 * nor a libvad client nor take more of the daemon's fds than the limit; out of fds it pauses
 * and comes back; renderings beside a client's allocations (TSan); a tenant's text shows its
 * own arena only, an admin's and HTTP's every one; a small max_frame gives ETOOBIG.
 * (test_metrics_prometheus.sh has a real Prometheus scrape it.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "uid_peers.h"
#include "vtassert.h"

#define MAX_HTTP_CONNS 16 /* METRICS_HTTP_MAX_CONNS */

struct fixture {
	struct vt_daemon d;
	int port;
};

/* A TCP port on 127.0.0.1 free a moment ago (the kernel picked it). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("free_port");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return ntohs(a.sin_port);
}

static int group_setup(void **state)
{
	int port = free_port();
	if (port < 0)
		return -1;
	char extra[128];
	snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", port);
	int rc = VT_GROUP_FIXTURE_SETUP(state, struct fixture, extra, NULL);
	if (rc == 0)
		((struct fixture *)*state)->port = port;
	return rc;
}

/* A connected TCP socket to the listener, or -1. */
static int http_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("http_connect");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Read fd until the peer closes it (or timeout_ms passes: NULL); malloc'd, NUL-terminated. */
static char *read_all(int fd, int timeout_ms)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;
	uint64_t end = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		uint64_t now = vt_now_ns();
		if (now >= end) {
			free(buf);
			return NULL;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, (int)((end - now) / 1000000u) + 1) <= 0)
			continue;
		char chunk[16384];
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) /* a reset after the reply is an end too */
			break;
		if (vt_buf_append(&buf, &len, &cap, chunk, (size_t)n) < 0) {
			free(buf);
			return NULL;
		}
	}
	if (!buf)
		buf = strdup("");
	return buf;
}

/* Send request (raw bytes) on a fresh connection and return the whole answer, or NULL. */
static char *http(int port, const char *request)
{
	int fd = http_connect(port);
	if (fd < 0)
		return NULL;
	if (write(fd, request, strlen(request)) != (ssize_t)strlen(request)) {
		close(fd);
		return NULL;
	}
	char *r = read_all(fd, vt_timeout_ms(10000));
	close(fd);
	return r;
}

/* The body of an HTTP answer (after the blank line), or NULL. */
static const char *body_of(const char *answer)
{
	const char *b = answer ? strstr(answer, "\r\n\r\n") : NULL;
	return b ? b + 4 : NULL;
}

/* Lines of the daemon's log that contain needle. */
static int log_lines_with(const struct vt_daemon *d, const char *needle)
{
	FILE *f = fopen(d->log_path, "r");
	if (!f)
		return -1;
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/* ---- checking the text ------------------------------------------------------------------ */

/* The family a sample belongs to: its name, less a histogram's suffix when the family is a
 * histogram (hist_family names the one being read). */
static void family_of(const char *name, const char *hist_family, char *out, size_t cap)
{
	snprintf(out, cap, "%s", name);
	if (!hist_family)
		return;
	size_t n = strlen(hist_family);
	if (strncmp(name, hist_family, n) == 0 &&
	    (!strcmp(name + n, "_bucket") || !strcmp(name + n, "_sum") ||
	     !strcmp(name + n, "_count")))
		snprintf(out, cap, "%s", hist_family);
}

/* The value of the sample line whose name and labels are exactly series ("vad_sessions",
 * "vad_allocs_total{arena=\"default\"}"); NAN when absent. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return NAN;
}

/* Check the exposition rules over the whole text; returns the number of families. */
static int check_text(const char *text)
{
	char *copy = strdup(text);
	assert_non_null(copy);
	char help[128] = "", type[128] = "", kind[32] = "", current[128] = "";
	char seen[4096] = " "; /* " fam1 fam2 ... ": families whose samples have ended */
	int families = 0;
	/* Histogram state of the series being read. */
	char hist_series[256] = "";
	double last_le = -1, last_cum = -1, inf_count = -1;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "# HELP ", 7) == 0) {
			sscanf(line + 7, "%127s", help);
			families++;
			char key[140];
			snprintf(key, sizeof(key), " %s ", help);
			if (strstr(seen, key))
				fail_msg("family %s appears twice", help);
			if (current[0] && strlen(seen) + strlen(current) + 2 < sizeof(seen)) {
				strcat(seen, current);
				strcat(seen, " ");
			}
			current[0] = '\0';
			continue;
		}
		if (strncmp(line, "# TYPE ", 7) == 0) {
			if (sscanf(line + 7, "%127s %31s", type, kind) != 2 || strcmp(type, help))
				fail_msg("TYPE without its HELP just before: %s", line);
			if (strcmp(kind, "gauge") && strcmp(kind, "counter") &&
			    strcmp(kind, "histogram"))
				fail_msg("unknown type: %s", line);
			snprintf(current, sizeof(current), "%s", type);
			continue;
		}
		assert_int_not_equal(line[0], '#');
		char name[160];
		size_t nl = strcspn(line, "{ ");
		assert_true(nl > 0 && nl < sizeof(name));
		memcpy(name, line, nl);
		name[nl] = '\0';
		char fam[160];
		family_of(name, strcmp(kind, "histogram") ? NULL : type, fam, sizeof(fam));
		if (strcmp(fam, current))
			fail_msg("sample %s outside its family's block (in %s)", line, current);
		if (!strcmp(kind, "counter") && !strstr(name, "_total"))
			fail_msg("counter without _total: %s", name);
		const char *sp = strrchr(line, ' ');
		assert_non_null(sp);
		char *end;
		double v = strtod(sp + 1, &end);
		if (*end || v < 0)
			fail_msg("bad value: %s", line);
		if (!strcmp(kind, "histogram")) {
			const char *op = strstr(line, "op=\"");
			assert_non_null(op);
			char series[64];
			snprintf(series, sizeof(series), "%.*s", (int)strcspn(op + 4, "\""),
				 op + 4);
			if (strcmp(series, hist_series)) {
				snprintf(hist_series, sizeof(hist_series), "%s", series);
				last_le = -1;
				last_cum = 0;
				inf_count = -1;
			}
			const char *le = strstr(line, "le=\"");
			if (le) {
				double bound = strncmp(le + 4, "+Inf", 4) == 0
						   ? INFINITY
						   : strtod(le + 4, NULL);
				if (!(bound > last_le) || v < last_cum)
					fail_msg("histogram %s not cumulative at %s", series, line);
				last_le = bound;
				last_cum = v;
				if (isinf(bound))
					inf_count = v;
			} else if (strstr(name, "_count")) {
				if (inf_count < 0 || v != inf_count)
					fail_msg("%s: _count %g is not the +Inf bucket %g", series,
						 v, inf_count);
			}
		}
	}
	free(copy);
	return families;
}

/* The text through libvad, checked, and its figures against the stats operation. */
static void test_text_through_socket(void **state)
{
	struct fixture *f = *state;
	vad_client *c;
	assert_int_equal(vt_connect(&f->d, "metrics", &c), 0);
	void *p[10];
	for (int i = 0; i < 10; i++)
		VT_ASSERT_OK(c, vad_alloc(c, 8192, 0, &p[i]));
	for (int i = 0; i < 4; i++)
		VT_ASSERT_OK(c, vad_free(c, p[i]));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free(c, (char *)p[9] + 4096)); /* one error */
	struct vad_daemon_stats *st;
	VT_ASSERT_OK(c, vad_stats_detail(c, "default", &st));
	char *text = NULL;
	VT_ASSERT_OK(c, vad_metrics(c, &text));
	int families = check_text(text);
	assert_true(families >= 25);
	assert_int_equal(sample(text, "vad_build_info{version=\"" VAD_VERSION_STRING "\"}"), 1);
	assert_true(sample(text, "vad_sessions") >= 1);
	assert_true(sample(text, "vad_start_time_seconds") > 1.6e9);
	assert_true(st->n_arenas == 1);
	const struct vad_arena_stats *a = &st->arenas[0];
	assert_int_equal(sample(text, "vad_allocs_total{arena=\"default\"}"), a->allocs);
	assert_int_equal(sample(text, "vad_frees_total{arena=\"default\"}"), a->frees);
	assert_int_equal(sample(text, "vad_arena_busy_bytes{arena=\"default\"}"), a->busy_bytes);
	assert_int_equal(sample(text, "vad_arena_busy_bytes{arena=\"default\"}"), 6 * 8192);
	assert_int_equal(sample(text, "vad_arena_ranges{arena=\"default\"}"), 6);
	assert_int_equal(sample(text, "vad_arena_size_bytes{arena=\"default\"}"), a->size);
	assert_true(sample(text, "vad_allocs_total{arena=\"default\"}") >= 10);
	assert_true(sample(text, "vad_requests_total{op=\"alloc\"}") >= 10);
	assert_true(sample(text, "vad_request_duration_seconds_count{op=\"alloc\"}") >= 10);
	assert_true(sample(text, "vad_request_duration_seconds_sum{op=\"alloc\"}") > 0);
	assert_true(sample(text, "vad_request_errors_total{op=\"free\"}") >= 1);
	assert_true(sample(text, "vad_errors_total{code=\"ENOTHELD\"}") >= 1);
	assert_int_equal(sample(text, "vad_errors_total{code=\"ECOMMIT\"}"), 0);
	assert_false(isnan(sample(text, "vad_request_duration_seconds_bucket{op=\"metrics\","
					"le=\"+Inf\"}")));
	free(text);
	free(st);
	for (int i = 4; i < 10; i++)
		VT_ASSERT_OK(c, vad_free(c, p[i]));
	vad_close(c);
}

/* GET /metrics serves the same families; HEAD the head alone; other paths and methods and
 * malformed or oversized requests are refused with their status. */
static void test_http_answers(void **state)
{
	struct fixture *f = *state;
	char *r = http(f->port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
	assert_non_null(r);
	assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(r, "Connection: close"));
	const char *body = body_of(r);
	assert_non_null(body);
	size_t clen = strtoul(strstr(r, "Content-Length: ") + 16, NULL, 10);
	assert_int_equal(clen, strlen(body));
	vad_client *c;
	assert_int_equal(vt_connect(&f->d, "metrics", &c), 0);
	char *text = NULL;
	VT_ASSERT_OK(c, vad_metrics(c, &text));
	vad_close(c);
	assert_int_equal(check_text(body), check_text(text));
	assert_false(isnan(sample(body, "vad_allocs_total{arena=\"default\"}")));
	free(text);
	free(r);

	r = http(f->port, "HEAD /metrics?x=1 HTTP/1.0\r\n\r\n");
	assert_non_null(r);
	assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_string_equal(body_of(r), "");
	free(r);

	static const struct {
		const char *request, *status;
	} refused[] = {
	    {"GET / HTTP/1.1\r\n\r\n", "404"},
	    {"GET /metricsx HTTP/1.1\r\n\r\n", "404"},
	    {"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "405"},
	    {"DELETE /metrics HTTP/1.1\r\n\r\n", "405"},
	    {"hello\r\n\r\n", "400"},
	    {"GET /metrics SPDY/3\r\n\r\n", "400"},
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		r = http(f->port, refused[i].request);
		assert_non_null(r);
		if (strncmp(r + 9, refused[i].status, 3) != 0)
			fail_msg("%s got %.40s, not %s", refused[i].request, r, refused[i].status);
		if (!strcmp(refused[i].status, "405"))
			assert_non_null(strstr(r, "Allow: GET, HEAD"));
		free(r);
	}

	/* A head past 8 KiB: 431 once it passes, whatever follows. */
	size_t big = 64 * 1024;
	char *req = malloc(big + 64);
	assert_non_null(req);
	strcpy(req, "GET /metrics HTTP/1.1\r\nX-Pad: ");
	size_t used = strlen(req);
	memset(req + used, 'a', big);
	strcpy(req + used + big, "\r\n\r\n");
	int fd = http_connect(f->port);
	assert_true(fd >= 0);
	(void)!write(fd, req, strlen(req)); /* the daemon may close before reading it all */
	r = read_all(fd, vt_timeout_ms(10000));
	close(fd);
	free(req);
	assert_non_null(r);
	assert_true(strncmp(r, "HTTP/1.1 431", 12) == 0);
	free(r);
}

/* Idle connections past the limit push out the oldest idle ones (the daemon's fds stay
 * bounded) and a scrape and a libvad client still work; a client that never finishes its
 * request is closed by its deadline. */
static void test_http_hostile(void **state)
{
	struct fixture *f = *state;
	int fds_before = vt_fd_count(f->d.pid);
	assert_true(fds_before > 0);
	enum { IDLE = 48 };
	int idle[IDLE];
	for (int i = 0; i < IDLE; i++) {
		idle[i] = http_connect(f->port);
		assert_true(idle[i] >= 0);
		(void)!write(idle[i], "GET /met", 8); /* a head begun, never finished */
	}
	char *r = http(f->port, "GET /metrics HTTP/1.1\r\n\r\n");
	assert_non_null(r);
	assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
	free(r);
	vad_client *c;
	assert_int_equal(vt_connect(&f->d, "beside-idle-http", &c), 0);
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 4096, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	int fds = vt_fd_count(f->d.pid);
	printf("daemon fds: %d before, %d with %d idle HTTP connections open\n", fds_before, fds,
	       IDLE);
	assert_true(fds <= fds_before + MAX_HTTP_CONNS + 2);
	/* 32 connections pushed out: one line in the log, not one each. */
	int lines = log_lines_with(&f->d, "pushed out before sending a request");
	printf("log lines about pushed-out connections: %d\n", lines);
	assert_true(lines >= 1 && lines <= 2);

	/* Every idle connection ends: pushed out, or closed at its 2 s deadline. */
	for (int i = 0; i < IDLE; i++) {
		char *rest = read_all(idle[i], vt_timeout_ms(15000));
		if (!rest)
			fail_msg("idle connection %d still open long after its deadline", i);
		assert_string_equal(rest, "");
		free(rest);
		close(idle[i]);
	}
	assert_true(vt_wait_fds(&f->d, fds_before, vt_timeout_ms(10000)) <= fds_before);

	/* A slow client: a byte now and then keeps no connection past the deadline. */
	int slow = http_connect(f->port);
	assert_true(slow >= 0);
	uint64_t t0 = vt_now_ns();
	bool closed = false;
	for (int i = 0; i < 200 && !closed; i++) {
		if (write(slow, "G", 1) != 1) {
			closed = true;
			break;
		}
		struct pollfd pf = {.fd = slow, .events = POLLIN};
		if (poll(&pf, 1, 100) > 0) {
			char b;
			closed = read(slow, &b, 1) <= 0;
		}
	}
	close(slow);
	assert_true(closed);
	printf("a client sending a byte per 100 ms was closed after %.1f s\n",
	       (double)(vt_now_ns() - t0) / 1e9);
}

struct churn {
	const struct vt_daemon *d;
	int stop; /* atomic */
	int allocs, failures;
};

/* Allocate and free until told to stop. */
static void *churn_main(void *arg)
{
	struct churn *ch = arg;
	vad_client *c;
	if (vt_connect(ch->d, "churn", &c) != 0) {
		ch->failures++;
		return NULL;
	}
	while (!__atomic_load_n(&ch->stop, __ATOMIC_RELAXED)) {
		void *p[8];
		size_t sizes[8] = {4096, 8192, 4096, 65536, 4096, 4096, 12288, 4096};
		if (vad_alloc_batch(c, 8, sizes, 0, p) != 0 || vad_free_batch(c, 8, p) != 0) {
			ch->failures++;
			break;
		}
		ch->allocs += 8;
	}
	vad_close(c);
	return NULL;
}

/* Renderings (through the socket and over HTTP) while another client allocates and frees:
 * every text is well formed, the alloc count never goes back and the start time never moves
 * (TSan watches the threads). */
static void test_render_under_load(void **state)
{
	struct fixture *f = *state;
	struct churn ch = {.d = &f->d};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, churn_main, &ch), 0);
	vad_client *c;
	assert_int_equal(vt_connect(&f->d, "scraper", &c), 0);
	/* No assertion while the thread runs (a failed one would leave it on this stack). */
	double last = 0, start0 = 0;
	int renders = vt_scale(40), bad = 0;
	char *last_text = NULL;
	char why[256] = "";
	for (int i = 0; i < renders && !bad; i++) {
		char *text = NULL;
		if (vad_metrics(c, &text) != 0) {
			snprintf(why, sizeof(why), "vad_metrics: %s", vad_last_error(c));
			bad = 1;
			break;
		}
		double allocs = sample(text, "vad_allocs_total{arena=\"default\"}");
		/* Fixed: only a restart may change it (VadRestarted watches changes()). */
		double start = sample(text, "vad_start_time_seconds");
		if (i == 0)
			start0 = start;
		if (!(allocs >= last) || !(start == start0)) {
			snprintf(why, sizeof(why),
				 "rendering %d: allocs %g after %g, start %.3f after %.3f", i,
				 allocs, last, start, start0);
			bad = 1;
		}
		last = allocs;
		free(last_text);
		last_text = text; /* checked line by line once the thread is gone */
		if (i % 8 == 0) {
			char *r = http(f->port, "GET /metrics HTTP/1.1\r\n\r\n");
			if (!r || !body_of(r) || strncmp(r, "HTTP/1.1 200", 12) != 0) {
				snprintf(why, sizeof(why), "GET /metrics: %.60s",
					 r ? r : "(no answer)");
				bad = 1;
			}
			free(r);
		}
	}
	__atomic_store_n(&ch.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	vad_close(c);
	if (bad)
		fail_msg("%s", why);
	assert_non_null(last_text);
	check_text(last_text);
	free(last_text);
	assert_int_equal(ch.failures, 0);
	printf("%d renderings beside %d allocations\n", renders, ch.allocs);
}

/* A max_frame too small for the text: vad_metrics says so (ETOOBIG) and what to do; a
 * metrics_listen address already taken leaves the daemon serving, with a log line. */
static void test_small_frame_and_taken_port(void **state)
{
	(void)state;
	int holder = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	assert_int_equal(bind(holder, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(holder, 1), 0);
	assert_int_equal(getsockname(holder, (struct sockaddr *)&a, &len), 0);
	char extra[128];
	snprintf(extra, sizeof(extra), "max_frame = 4K\nmetrics_listen = 127.0.0.1:%d\n",
		 ntohs(a.sin_port));
	struct vt_daemon d;
	assert_int_equal(vt_daemon_setup(&d, extra, NULL), 0);
	vad_client *c;
	assert_int_equal(vt_connect(&d, "metrics", &c), 0);
	char *text = NULL;
	VT_ASSERT_ERR(c, VAD_ETOOBIG, vad_metrics(c, &text));
	assert_null(text);
	assert_true(vt_contains(vad_last_error(c), "max_frame"));
	assert_true(vt_contains(vad_last_error(c), "metrics_listen"));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 4096, 0, &p));
	vad_close(c);
	assert_true(vt_daemon_log_contains(&d, "running without HTTP /metrics"));
	assert_int_equal(vt_daemon_stop(&d), 0);
	vt_daemon_destroy(&d);
	close(holder);
}

/* Out of descriptors (RLIMIT_NOFILE 128, filled by Unix connections): the metrics listener's
 * accept fails, it pauses and says so (no spinning, no libevent warning per attempt), and
 * once descriptors are free again a scrape is answered. */
static void test_out_of_fds(void **state)
{
	(void)state;
	int port = free_port();
	assert_true(port > 0);
	char extra[128];
	snprintf(extra, sizeof(extra), "stats_interval = 1h\nmetrics_listen = 127.0.0.1:%d\n",
		 port);
	struct vt_daemon d;
	assert_int_equal(vt_daemon_init(&d), 0);
	assert_int_equal(vt_daemon_write_config(&d, extra, NULL), 0);
	struct vt_start_opts opts = {.listen_fd = -1, .nofile = 128};
	if (vt_daemon_start_opts(&d, &opts) != 0) {
		vt_daemon_destroy(&d);
		fail_msg("the daemon did not start with RLIMIT_NOFILE 128");
	}
	enum { FLOOD = 200 };
	int fds[FLOOD];
	for (int i = 0; i < FLOOD; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		memcpy(sa.sun_path, d.socket_path, strlen(d.socket_path) + 1);
		(void)!connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)); /* queued or refused */
	}
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	while (!vt_daemon_log_contains(&d, "accept failed") && vt_now_ns() < deadline)
		vt_sleep_ms(20);
	assert_true(vt_daemon_log_contains(&d, "accept failed")); /* the Unix listener's */
	int probe = http_connect(port); /* the kernel completes it; the daemon cannot accept */
	assert_true(probe >= 0);
	const char *get = "GET /metrics HTTP/1.1\r\n\r\n";
	(void)!write(probe, get, strlen(get));
	while (!vt_daemon_log_contains(&d, "metrics 127.0.0.1") && vt_now_ns() < deadline)
		vt_sleep_ms(20);
	if (!vt_daemon_log_contains(&d, "pausing /metrics")) {
		vt_daemon_print_log(&d, 20);
		fail_msg("the metrics listener did not report its failed accept");
	}
	for (int i = 0; i < FLOOD; i++)
		close(fds[i]);
	/* The connection made meanwhile is answered (or closed) once descriptors are back, and
	 * a new scrape is answered. */
	char *r = read_all(probe, vt_timeout_ms(15000));
	free(r);
	close(probe);
	char *ok = NULL;
	deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	while (vt_now_ns() < deadline) {
		ok = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
		if (ok && strncmp(ok, "HTTP/1.1 200", 12) == 0)
			break;
		free(ok);
		ok = NULL;
		vt_sleep_ms(50);
	}
	assert_non_null(ok);
	free(ok);
	assert_false(vt_daemon_log_contains(&d, "Error from accept"));
	int stopped = vt_daemon_stop(&d);
	vt_daemon_destroy(&d);
	assert_int_equal(stopped, 0);
}

/* What a tenant peer needs: the daemon and the other tenant's uid. */
struct tenant_args {
	const struct vt_daemon *d;
	unsigned other;
};

/* A tenant (another uid): allocates in its own arena, then its metrics through the socket
 * show that arena and not the other tenant's, like its stats. */
static void tenant_main(void *ctx, int in, int out)
{
	const struct tenant_args *args = ctx;
	vad_client *c = vt_child_connect(args->d, "tenant");
	void *p;
	int rc = vad_alloc(c, 4 * 4096, 0, &p);
	VT_CHILD_CHECK(rc == 0, "alloc: %s", vad_last_error(c));
	char line[64];
	vt_child_send(out, "allocated");
	vt_child_expect(in, "look", line, sizeof(line));
	char *text = NULL;
	rc = vad_metrics(c, &text);
	VT_CHILD_CHECK(rc == 0, "vad_metrics: %s", vad_last_error(c));
	char mine[96], theirs[96];
	snprintf(mine, sizeof(mine), "vad_arena_busy_bytes{arena=\"default@%u\"} 16384",
		 (unsigned)getuid());
	snprintf(theirs, sizeof(theirs), "default@%u", args->other);
	VT_CHILD_CHECK(strstr(text, mine), "its own arena missing: %s", mine);
	VT_CHILD_CHECK(!strstr(text, theirs), "the other tenant's arena %s is shown", theirs);
	VT_CHILD_CHECK(strstr(text, "vad_requests_total{op=\"alloc\"}"), "no daemon-wide counters");
	free(text);
	vt_child_send(out, "ok");
	vt_child_expect(in, "bye", line, sizeof(line));
	vad_close(c);
}

/* tenancy = uid: a tenant's vad_metrics shows its own arena only (the stats gate); an admin's
 * and the HTTP endpoint's show every tenant arena. */
static void test_tenants_see_their_own(void **state)
{
	(void)state;
	if (!vt_is_root()) {
		print_message("skipped: the tenants run as other uids, which needs root\n");
		skip();
	}
	unsigned ids[2];
	if (vt_pick_unused_ids(62100, ids, 2) != 0)
		fail_msg("no unused uids from 62100");
	int port = free_port();
	char extra[96];
	snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", port);
	struct vt_daemon d;
	assert_int_equal(vt_daemon_setup(&d, extra, "[arena default]\nsize = 64M\ntenancy = uid\n"),
			 0);
	struct tenant_args a_args = {.d = &d, .other = ids[1]}, b_args = {.d = &d, .other = ids[0]};
	struct vt_peer a, b;
	char line[64];
	vt_peer_start(ids[0], NULL, 0, tenant_main, &a_args, &a);
	vt_peer_start(ids[1], NULL, 0, tenant_main, &b_args, &b);
	vt_peer_expect(&a, "allocated", line, sizeof(line));
	vt_peer_expect(&b, "allocated", line, sizeof(line));
	vt_peer_send(&a, "look");
	vt_peer_send(&b, "look");
	vt_peer_expect(&a, "ok", line, sizeof(line));
	vt_peer_expect(&b, "ok", line, sizeof(line));

	char name_a[64], name_b[64];
	snprintf(name_a, sizeof(name_a), "arena=\"default@%u\"", ids[0]);
	snprintf(name_b, sizeof(name_b), "arena=\"default@%u\"", ids[1]);
	vad_client *c;
	assert_int_equal(vt_connect(&d, "admin", &c), 0);
	char *text = NULL;
	VT_ASSERT_OK(c, vad_metrics(c, &text));
	assert_non_null(strstr(text, name_a));
	assert_non_null(strstr(text, name_b));
	free(text);
	vad_close(c);
	char *r = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
	assert_non_null(r);
	assert_non_null(strstr(r, name_a));
	assert_non_null(strstr(r, name_b));
	free(r);

	vt_peer_send(&a, "bye");
	vt_peer_send(&b, "bye");
	vt_peer_finish(&a, "tenant A");
	vt_peer_finish(&b, "tenant B");
	int stopped = vt_daemon_stop(&d);
	vt_daemon_destroy(&d);
	assert_int_equal(stopped, 0);
}

int main(void)
{
	const struct CMUnitTest group[] = {
	    cmocka_unit_test(test_text_through_socket),
	    cmocka_unit_test(test_http_answers),
	    cmocka_unit_test(test_http_hostile),
	    cmocka_unit_test(test_render_under_load),
	};
	const struct CMUnitTest alone[] = {
	    cmocka_unit_test(test_small_frame_and_taken_port),
	    cmocka_unit_test(test_out_of_fds),
	    cmocka_unit_test(test_tenants_see_their_own),
	};
	int failed =
	    cmocka_run_group_tests_name("metrics", group, group_setup, vt_group_daemon_stop);
	failed += cmocka_run_group_tests_name("metrics-alone", alone, NULL, NULL);
	return failed;
}
