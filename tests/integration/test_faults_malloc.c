/*
 * test_faults_malloc.c - the daemon under malloc failure. The test builds the LD_PRELOAD
 * shim tests/faults/failmalloc.c and starts the real daemon with it; for a window of a few
 * seconds every Nth malloc/calloc/realloc in the daemon (N = 3, 10, 50) returns NULL while
 * raw clients run every kind of request: hello, single and batch allocs, batch frees,
 * share, attach, map-arena, stats, arenas, clients, purge, check, and connections coming
 * and going; the stats thread writes its database every 100 ms meanwhile.
 *
 * Each request gets a reply (OK or an error with a sentence) or the connection is closed;
 * none goes unanswered, the daemon never dies. When the window closes the daemon must be
 * whole: its invariant check passes, busy bytes, clients and fds are back to the baseline,
 * new clients are served, and SIGTERM ends it with status 0.
 *
 * Normal build only: sanitizer runtimes own malloc (VAD_TEST_MODE=asan|tsan skips).
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hostile_util.h"
#include "vtassert.h"

#define PAGE	      4096u
#define CLIENTS	      6
#define MAX_HELD      256
#define WINDOW_MS     3000
#define REPLY_TIMEOUT 10000
#define SETTLE_MS     4000 /* start, baseline: malloc fails only after this */

static char shim_src[PATH_MAX];

/* Find tests/faults/failmalloc.c: $VAD_SOURCE_DIR, then beside this file's source path,
 * then the parent of the build directory. */
static bool find_shim_source(void)
{
	char here[PATH_MAX];
	snprintf(here, sizeof(here), "%s", __FILE__);
	char *dir = dirname(here); /* tests/integration */
	const char *src = getenv("VAD_SOURCE_DIR");
	char build[PATH_MAX];
	snprintf(build, sizeof(build), "%s", vt_build_dir());
	const char *candidates[3][2] = {
	    {src ? src : "", "/tests/faults/failmalloc.c"},
	    {dir, "/../faults/failmalloc.c"},
	    {dirname(build), "/tests/faults/failmalloc.c"},
	};
	for (int i = 0; i < 3; i++) {
		if (!candidates[i][0][0])
			continue;
		snprintf(shim_src, sizeof(shim_src), "%s%s", candidates[i][0], candidates[i][1]);
		if (access(shim_src, R_OK) == 0)
			return true;
	}
	return false;
}

static int build_shim(const struct vt_daemon *d, char *so, size_t len)
{
	snprintf(so, len, "%s/failmalloc.so", d->dir);
	const char *cc = getenv("CC");
	char *const argv[] = {(char *)(cc && *cc ? cc : "cc"),
			      (char *)"-shared",
			      (char *)"-fPIC",
			      (char *)"-O2",
			      (char *)"-o",
			      so,
			      shim_src,
			      NULL};
	/* vt_run wants a path in argv[0]; go through the shell's PATH lookup. */
	char *const sh[] = {(char *)"/bin/sh", (char *)"-c", (char *)"exec \"$0\" \"$@\"",
			    argv[0],	       argv[1],	     argv[2],
			    argv[3],	       argv[4],	     argv[5],
			    argv[6],	       NULL};
	struct vt_output o;
	if (vt_run(sh, NULL, 60000, &o) != 0 || o.exit_code != 0) {
		vt_output_print("building the failmalloc shim", &o);
		vt_output_free(&o);
		return -1;
	}
	vt_output_free(&o);
	return 0;
}

/* ---- a client that keeps every kind of request coming ------------------------------------ */

struct fclient {
	struct vt_raw raw;
	bool up;
	uint64_t held[MAX_HELD];
	int n_held;
	char token[VAD_TOKEN_LEN + 1];
	unsigned seed;
};

struct tally {
	unsigned long replies, ok, by_code[32], closed, refused_connects;
	unsigned long unanswered;
	char first_odd[256];
	char first_unanswered[128];
};

static struct tally tally;
static char shared_token[VAD_TOKEN_LEN + 1];

static bool fc_connect(struct fclient *f, const char *path)
{
	if (vt_raw_connect(&f->raw, path) != 0)
		return false;
	f->n_held = 0;
	struct vt_req q;
	Vad__Response *resp = NULL;
	(void)vt_raw_send_request(&f->raw, vt_req_hello(&q, "under-pressure"));
	enum vt_raw_result res = vt_raw_recv(&f->raw, &resp, REPLY_TIMEOUT);
	bool ok = res == VT_RAW_RESPONSE && resp->error == VAD__ERROR__OK;
	if (res == VT_RAW_RESPONSE && !ok)
		tally.refused_connects++;
	if (res == VT_RAW_TIMEOUT && !tally.unanswered++)
		snprintf(tally.first_unanswered, sizeof(tally.first_unanswered), "hello");
	vt_raw_response_free(resp);
	if (!ok)
		vt_raw_close(&f->raw);
	f->up = ok;
	return ok;
}

/* One request of a random kind; false if the connection is gone. */
static bool fc_step(struct fclient *f)
{
	struct vt_req q;
	Vad__Request *req;
	uint64_t offs[16];
	unsigned r = (unsigned)rand_r(&f->seed);
	switch (r % 12) {
	case 0:
	case 1:
	case 2: {
		uint32_t count = 1 + r / 256 % 8;
		if (f->n_held + (int)count > MAX_HELD)
			count = 1;
		if (f->n_held + 1 > MAX_HELD)
			return true;
		req = vt_req_alloc(&q, NULL, (uint64_t)(1 + r / 16 % 16) * PAGE, 0, count);
		break;
	}
	case 3:
	case 4: {
		if (!f->n_held)
			return true;
		size_t n = 1 + r / 16 % 8;
		if (n > (size_t)f->n_held)
			n = (size_t)f->n_held;
		for (size_t i = 0; i < n; i++)
			offs[i] = f->held[f->n_held - 1 - (int)i];
		req = vt_req_free(&q, NULL, offs, n);
		break;
	}
	case 5:
		if (!f->n_held)
			return true;
		req = vt_req_share(&q, NULL, f->held[r / 16 % (unsigned)f->n_held]);
		break;
	case 6:
		if (!shared_token[0] || f->n_held >= MAX_HELD)
			return true;
		req = vt_req_attach(&q, shared_token);
		break;
	case 7:
		req = vt_req_map_arena(&q, NULL);
		break;
	case 8:
		req = vt_req_stats(&q, NULL);
		break;
	case 9:
		req = r & 16 ? vt_req_arenas(&q) : vt_req_clients(&q);
		break;
	case 10:
		req = r & 16 ? vt_req_purge(&q, NULL) : vt_req_check(&q);
		break;
	default:
		/* Hang up now and then: connections come and go under pressure too. */
		vt_raw_close(&f->raw);
		f->up = false;
		return false;
	}
	uint64_t id = vt_raw_send_request(&f->raw, req);
	if (!id) {
		tally.closed++;
		vt_raw_close(&f->raw);
		f->up = false;
		return false;
	}
	Vad__Response *resp = NULL;
	enum vt_raw_result res = vt_raw_recv(&f->raw, &resp, REPLY_TIMEOUT);
	if (res == VT_RAW_TIMEOUT) {
		if (!tally.unanswered++)
			snprintf(tally.first_unanswered, sizeof(tally.first_unanswered),
				 "request %llu (op %d)", (unsigned long long)id, (int)req->op_case);
		vt_raw_close(&f->raw);
		f->up = false;
		return false;
	}
	if (res != VT_RAW_RESPONSE) {
		tally.closed++;
		vt_raw_close(&f->raw);
		f->up = false;
		return false;
	}
	tally.replies++;
	if (resp->error >= 0 && resp->error < 32)
		tally.by_code[resp->error]++;
	if (resp->id != id && resp->id != 0 && !tally.first_odd[0])
		snprintf(tally.first_odd, sizeof(tally.first_odd), "reply id %llu to request %llu",
			 (unsigned long long)resp->id, (unsigned long long)id);
	if (resp->error != VAD__ERROR__OK && (!resp->message || !resp->message[0]) &&
	    !tally.first_odd[0])
		snprintf(tally.first_odd, sizeof(tally.first_odd), "%s without a sentence",
			 vt_error_name(resp->error));
	if (resp->error == VAD__ERROR__OK) {
		tally.ok++;
		if (req->op_case == VAD__REQUEST__OP_ALLOC && resp->alloc) {
			for (size_t i = 0; i < resp->alloc->n_offsets && f->n_held < MAX_HELD; i++)
				f->held[f->n_held++] = resp->alloc->offsets[i];
		} else if (req->op_case == VAD__REQUEST__OP_FREE) {
			f->n_held -= (int)q.op.free.n_offsets;
		} else if (req->op_case == VAD__REQUEST__OP_SHARE && resp->share &&
			   resp->share->token) {
			snprintf(shared_token, sizeof(shared_token), "%s", resp->share->token);
		} else if (req->op_case == VAD__REQUEST__OP_ATTACH && resp->attach) {
			f->held[f->n_held++] = resp->attach->offset;
		}
	} else if (req->op_case == VAD__REQUEST__OP_FREE) {
		/* A batch free stops at its first failure; which ones went is unknown, so
		 * forget the client's books: they are dropped when it disconnects. */
		vt_raw_response_free(resp);
		vt_raw_close(&f->raw);
		f->up = false;
		return false;
	}
	vt_raw_response_free(resp);
	return true;
}

static void run_window(int every)
{
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_init(&d));
	assert_int_equal(0, vt_daemon_write_config(&d, "stats_interval = 100ms\n", NULL));
	char so[PATH_MAX];
	assert_int_equal(0, build_shim(&d, so, sizeof(so)));

	/* The window opens once the daemon is up and the baseline taken. Its start is fixed
	 * when the daemon starts (the shim reads it from the environment): when starting and
	 * taking the baseline overran it on a loaded machine, that is no failure of the
	 * daemon; kill it (nothing of that run is checked) and start again with twice the
	 * time. */
	uint64_t from = 0, until = 0;
	char report[PATH_MAX + 16];
	snprintf(report, sizeof(report), "%s/failmalloc.txt", d.dir);
	struct vt_baseline base;
	for (int settle_ms = SETTLE_MS;; settle_ms *= 2) {
		from = vt_now_ns() + (uint64_t)settle_ms * 1000000u;
		until = from + (uint64_t)WINDOW_MS * 1000000u;
		char every_s[32], from_s[32], until_s[32];
		snprintf(every_s, sizeof(every_s), "%d", every);
		snprintf(from_s, sizeof(from_s), "%llu", (unsigned long long)from);
		snprintf(until_s, sizeof(until_s), "%llu", (unsigned long long)until);
		setenv("LD_PRELOAD", so, 1);
		setenv("VAD_FAILMALLOC_EVERY", every_s, 1);
		setenv("VAD_FAILMALLOC_FROM_NS", from_s, 1);
		setenv("VAD_FAILMALLOC_UNTIL_NS", until_s, 1);
		setenv("VAD_FAILMALLOC_REPORT", report, 1);
		int started = vt_daemon_start(&d);
		unsetenv("LD_PRELOAD");
		unsetenv("VAD_FAILMALLOC_EVERY");
		unsetenv("VAD_FAILMALLOC_FROM_NS");
		unsetenv("VAD_FAILMALLOC_UNTIL_NS");
		unsetenv("VAD_FAILMALLOC_REPORT");
		assert_int_equal(0, started);
		assert_int_equal(0, vt_baseline_take(&d, &base));
		if (vt_now_ns() < from)
			break;
		if (settle_ms >= 8 * SETTLE_MS)
			fail_msg("the daemon took more than %d ms to start and settle", settle_ms);
		printf("every %d: starting and settling took more than %d ms; again with %d ms\n",
		       every, settle_ms, 2 * settle_ms);
		assert_int_equal(0, vt_daemon_signal(&d, SIGKILL));
		uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
		while (vt_daemon_alive(&d)) {
			assert_true(vt_now_ns() < deadline);
			vt_sleep_ms(5);
		}
		unlink(report);
	}
	while (vt_now_ns() < from) /* the window opens at a time, the shim's clock */
		vt_sleep_ms(5);

	memset(&tally, 0, sizeof(tally));
	shared_token[0] = '\0';
	struct fclient fc[CLIENTS];
	memset(fc, 0, sizeof(fc));
	for (int i = 0; i < CLIENTS; i++)
		fc[i].seed = (unsigned)(every * 100 + i);
	while (vt_now_ns() < until) {
		for (int i = 0; i < CLIENTS; i++) {
			if (!fc[i].up && !fc_connect(&fc[i], d.socket_path))
				continue;
			for (int k = 0; k < 8 && fc_step(&fc[i]); k++)
				;
		}
		if (!vt_daemon_alive(&d))
			break;
	}
	bool alive = vt_daemon_alive(&d);
	for (int i = 0; i < CLIENTS; i++)
		if (fc[i].up)
			vt_raw_close(&fc[i].raw);
	printf("every %d: %lu replies (%lu OK, %lu ENOMEM, %lu EINTERNAL, %lu EPROTO), %lu "
	       "connections closed by the daemon, %lu connects refused, %lu unanswered\n",
	       every, tally.replies, tally.ok, tally.by_code[VAD__ERROR__ENOMEM],
	       tally.by_code[VAD__ERROR__EINTERNAL], tally.by_code[VAD__ERROR__EPROTO],
	       tally.closed, tally.refused_connects, tally.unanswered);
	if (!alive) {
		vt_daemon_print_log(&d, 40);
		fail_msg("the daemon died under malloc failure (every %d): status 0x%x", every,
			 d.exit_status);
	}
	if (tally.unanswered)
		fail_msg("%lu requests got neither a reply nor a closed connection in %d ms, "
			 "the first: %s",
			 tally.unanswered, REPLY_TIMEOUT, tally.first_unanswered);
	if (tally.first_odd[0])
		fail_msg("odd reply under malloc failure: %s", tally.first_odd);

	/* The window is over: the daemon must be whole. */
	while (vt_now_ns() < until + 100ull * 1000000u)
		vt_sleep_ms(5);
	if (vt_baseline_check(&d, &base, vt_timeout_ms(10000)) != 0)
		fail_msg("after malloc failures (every %d) the daemon did not return to its "
			 "baseline",
			 every);
	vad_client *c;
	assert_int_equal(0, vt_connect(&d, "after", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 64 * PAGE, 0, &p));
	memset(p, 1, 64 * PAGE);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(&d));
	FILE *f = fopen(report, "r");
	char line[128] = "";
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	printf("every %d: the shim reports %s", every, line[0] ? line : "nothing\n");
	unsigned long long calls = 0, failed = 0;
	if (sscanf(line, "calls %llu failed %llu", &calls, &failed) == 2 && failed == 0)
		fail_msg("no malloc failed in the window: the test tested nothing");
	vt_daemon_destroy(&d);
}

static int group_setup(void **state)
{
	(void)state;
	if (vt_mode() != VT_MODE_NORMAL) {
		printf("VAD_TEST_MODE=%s: the sanitizer runtime owns malloc; skipped\n",
		       getenv("VAD_TEST_MODE"));
		return 0;
	}
	if (!find_shim_source())
		printf("tests/faults/failmalloc.c not found (set VAD_SOURCE_DIR); skipped\n");
	return 0;
}

static void skip_unless_possible(void)
{
	if (vt_mode() != VT_MODE_NORMAL || !shim_src[0] || access(shim_src, R_OK) != 0)
		skip();
}

static void test_every_3rd(void **state)
{
	(void)state;
	skip_unless_possible();
	run_window(3);
}

static void test_every_10th(void **state)
{
	(void)state;
	skip_unless_possible();
	run_window(10);
}

static void test_every_50th(void **state)
{
	(void)state;
	skip_unless_possible();
	run_window(50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_3rd),
	    cmocka_unit_test(test_every_10th),
	    cmocka_unit_test(test_every_50th),
	};
	return cmocka_run_group_tests_name("faults_malloc", tests, group_setup, NULL);
}
