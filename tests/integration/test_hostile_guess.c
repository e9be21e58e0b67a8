/*
 * test_hostile_guess.c - a client that guesses: frees ranges it does not hold (offsets of a
 * victim's ranges, every page of the arena's start, batches mixing its own and foreign
 * offsets, double frees), attaches with random and malformed tokens and with a real token
 * one character off (starting a new connection before the daemon would slow it down), and runs
 * admin operations as nobody. Every guess gets its own error;
 * the victim keeps its ranges and bytes; no token, range or byte leaks.
 */
#include <string.h>
#include <sys/wait.h>

#include "guess.h"
#include "hostile_util.h"
#include "vtassert.h"

#define PAGE	      4096u
#define VICTIM_RANGES 16
#define VICTIM_SEED   0x61C7
#define REPLY_TIMEOUT vt_timeout_ms(10000)

struct guess {
	struct vt_daemon d;
	struct vt_baseline base;
	vad_client *victim;
	void *ranges[VICTIM_RANGES];
	uint64_t offsets[VICTIM_RANGES];
	char token[VAD_TOKEN_LEN + 1];
	uint64_t shares0; /* live share tokens with the victim's one */
};

static uint64_t live_shares(const struct vt_daemon *d)
{
	vad_client *c;
	if (vt_connect(d, "shares", &c) != 0)
		fail_msg("cannot connect");
	struct vad_daemon_stats *st = NULL;
	VT_ASSERT_OK(c, vad_stats_detail(c, NULL, &st));
	uint64_t n = st->shares;
	free(st);
	vad_close(c);
	return n;
}

static int group_setup(void **state)
{
	if (VT_GROUP_FIXTURE_SETUP(state, struct guess, "stats_interval = 1h\n", NULL) != 0)
		return -1;
	struct guess *g = *state;
	if (vt_baseline_take(&g->d, &g->base) != 0)
		return -1;
	if (vt_connect(&g->d, "victim", &g->victim) != 0)
		return -1;
	for (int i = 0; i < VICTIM_RANGES; i++) {
		if (vad_alloc(g->victim, (size_t)(i % 4 + 1) * PAGE, 0, &g->ranges[i]) != 0)
			return -1;
		vt_fill_pattern(g->ranges[i], (size_t)(i % 4 + 1) * PAGE,
				VICTIM_SEED + (uint64_t)i);
		struct vad_range info;
		if (vad_range_info(g->victim, g->ranges[i], &info) != 0)
			return -1;
		g->offsets[i] = info.offset;
	}
	if (vad_share(g->victim, g->ranges[0], g->token) != 0)
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	struct guess *g = *state;
	if (g->victim)
		vad_close(g->victim);
	int rc = 0;
	if (vt_baseline_check(&g->d, &g->base, vt_timeout_ms(5000)) != 0)
		rc = -1;
	/* Every token died with the victim. */
	struct vad_daemon_stats *st = NULL;
	vad_client *c = NULL;
	if (vt_connect(&g->d, "after", &c) == 0 && vad_stats_detail(c, NULL, &st) == 0) {
		if (st->shares != 0) {
			fprintf(stderr, "%llu share tokens outlive their ranges\n",
				(unsigned long long)st->shares);
			rc = -1;
		}
		free(st);
	}
	if (c)
		vad_close(c);
	if (vt_group_daemon_stop(state) != 0)
		rc = -1;
	return rc;
}

/* The victim still holds every range with its bytes. */
static void assert_victim_intact(struct guess *g)
{
	struct vad_stats s;
	VT_ASSERT_OK(g->victim, vad_stats(g->victim, &s));
	assert_int_equal(VICTIM_RANGES, s.held_ranges);
	for (int i = 0; i < VICTIM_RANGES; i++) {
		size_t len = (size_t)(i % 4 + 1) * PAGE;
		assert_int_equal(len, vad_size(g->victim, g->ranges[i]));
		if (vt_check_pattern(g->ranges[i], len, VICTIM_SEED + (uint64_t)i) >= 0)
			fail_msg("victim range %d changed", i);
	}
}

static int raw_free_many(struct vt_raw *r, const char *arena, size_t n, uint64_t *offsets,
			 char *msg, size_t msg_len)
{
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(r, vt_req_free(&q, arena, offsets, n), REPLY_TIMEOUT);
	if (!resp)
		fail_msg("no reply to a free");
	int rc = resp->error;
	snprintf(msg, msg_len, "%s", resp->message ? resp->message : "");
	vt_raw_response_free(resp);
	return rc;
}

static void test_free_what_is_not_held(void **state)
{
	struct guess *g = *state;
	struct vt_raw r;
	char msg[512];
	assert_int_equal(0, vt_raw_connect(&r, g->d.socket_path));
	assert_int_equal(0, vt_raw_hello(&r, "guesser"));

	/* The victim's exact offsets, one by one. */
	for (int i = 0; i < VICTIM_RANGES; i++) {
		int rc = raw_free_many(&r, "", 1, &g->offsets[i], msg, sizeof(msg));
		if (rc != VAD__ERROR__ENOTHELD)
			fail_msg("free of the victim's offset %llu: %s (%s)",
				 (unsigned long long)g->offsets[i], vt_error_name(rc), msg);
		assert_true(msg[0] != '\0');
	}
	/* Every page of the first MiB, and offsets inside ranges and past the arena. */
	uint64_t offs[256];
	for (int i = 0; i < 256; i++)
		offs[i] = (uint64_t)i * PAGE + (i % 3 == 2 ? 17 : 0);
	for (int i = 0; i < 256; i += 64)
		assert_int_equal(VAD__ERROR__ENOTHELD,
				 raw_free_many(&r, "", 64, offs + i, msg, sizeof(msg)));
	uint64_t far[] = {UINT64_MAX, UINT64_MAX - PAGE + 1, 1ull << 40};
	for (int i = 0; i < 3; i++)
		assert_int_equal(VAD__ERROR__ENOTHELD,
				 raw_free_many(&r, "", 1, &far[i], msg, sizeof(msg)));
	assert_int_equal(VAD__ERROR__ENOARENA,
			 raw_free_many(&r, "no-such-arena", 1, &g->offsets[0], msg, sizeof(msg)));

	/* A batch mixing its own range and a victim's: the victim's is refused. */
	uint64_t own;
	assert_int_equal(0, vt_raw_alloc(&r, PAGE, &own));
	uint64_t mixed[2] = {own, g->offsets[3]};
	assert_int_equal(VAD__ERROR__ENOTHELD, raw_free_many(&r, "", 2, mixed, msg, sizeof(msg)));
	/* Its own range may or may not have gone first (batch frees stop at the first
	 * failure); either way a second free of it must not succeed twice. */
	int again = raw_free_many(&r, "", 1, &own, msg, sizeof(msg));
	assert_true(again == VAD__ERROR__OK || again == VAD__ERROR__ENOTHELD);
	assert_int_equal(VAD__ERROR__ENOTHELD, raw_free_many(&r, "", 1, &own, msg, sizeof(msg)));

	/* Sharing a victim's range is refused as well. */
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(&r, vt_req_share(&q, NULL, g->offsets[1]), REPLY_TIMEOUT);
	assert_non_null(resp);
	assert_int_equal(VAD__ERROR__ENOTHELD, resp->error);
	vt_raw_response_free(resp);

	vt_raw_close(&r);
	assert_victim_intact(g);
}

static int raw_attach(struct vt_raw *r, const char *token)
{
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(r, vt_req_attach(&q, token), REPLY_TIMEOUT);
	if (!resp)
		fail_msg("no reply to an attach");
	int rc = resp->error;
	if (rc != VAD__ERROR__OK && (!resp->message || !resp->message[0]))
		fail_msg("attach refused without a sentence");
	vt_raw_response_free(resp);
	return rc;
}

/* A guessing connection that starts over before the daemon would slow it down (guess.h):
 * this test wants every guess answered; test_service_tokens tests the slowing. */
struct guesser {
	struct vt_raw r;
	const char *socket_path;
	unsigned guesses;
};

static void guesser_open(struct guesser *gs, const char *socket_path)
{
	gs->socket_path = socket_path;
	gs->guesses = 0;
	assert_int_equal(0, vt_raw_connect(&gs->r, socket_path));
	assert_int_equal(0, vt_raw_hello(&gs->r, "token-guesser"));
}

/* Attach with a token that names no range: the code the daemon answers. */
static int guess_attach(struct guesser *gs, const char *token)
{
	if (gs->guesses == VAD_GUESS_FREE) {
		vt_raw_close(&gs->r);
		guesser_open(gs, gs->socket_path);
	}
	gs->guesses++;
	return raw_attach(&gs->r, token);
}

static void test_attach_random_tokens(void **state)
{
	struct guess *g = *state;
	static const char base62[] =
	    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	struct guesser gs;
	guesser_open(&gs, g->d.socket_path);
	g->shares0 = live_shares(&g->d);
	assert_int_equal(1, g->shares0);

	uint64_t x = 0x243F6A8885A308D3ull ^ (uint64_t)getpid();
	int n = vt_scale(3000);
	for (int i = 0; i < n; i++) {
		char tok[VAD_TOKEN_LEN + 1];
		for (int k = 0; k < VAD_TOKEN_LEN; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			tok[k] = base62[x % 62];
		}
		tok[VAD_TOKEN_LEN] = '\0';
		int rc = guess_attach(&gs, tok);
		if (rc != VAD__ERROR__ETOKEN)
			fail_msg("attach with random token %s: %s", tok, vt_error_name(rc));
	}
	/* The real token with each position changed in turn. */
	for (int k = 0; k < VAD_TOKEN_LEN; k++) {
		char tok[VAD_TOKEN_LEN + 1];
		memcpy(tok, g->token, sizeof(tok));
		tok[k] = tok[k] == 'a' ? 'b' : 'a';
		assert_int_equal(VAD__ERROR__ETOKEN, guess_attach(&gs, tok));
	}
	/* Malformed: empty, short, long, prefix of the real one, non-base62, a path. */
	char longtok[200];
	memset(longtok, 'Q', sizeof(longtok) - 1);
	longtok[sizeof(longtok) - 1] = '\0';
	char prefix[VAD_TOKEN_LEN];
	memcpy(prefix, g->token, VAD_TOKEN_LEN - 1);
	prefix[VAD_TOKEN_LEN - 1] = '\0';
	char extended[VAD_TOKEN_LEN + 2];
	snprintf(extended, sizeof(extended), "%sA", g->token);
	const char *bad[] = {"",
			     "abc",
			     longtok,
			     prefix,
			     extended,
			     "../../../../etc/passwd/../../../../../x",
			     "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
			     "                                "};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(VAD__ERROR__ETOKEN, guess_attach(&gs, bad[i]));
	/* The real token still works, once guessing is over. */
	assert_int_equal(VAD__ERROR__OK, raw_attach(&gs.r, g->token));
	vt_raw_close(&gs.r);
	assert_int_equal(g->shares0, live_shares(&g->d));
	assert_victim_intact(g);
}

static void nobody_child(const char *socket_path, const char *token)
{
	VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot become nobody");
	vad_client *c = NULL;
	VT_CHILD_CHECK(vad_connect(socket_path, "nobody", &c) == 0, "connect: %s",
		       vad_last_error(NULL));
	struct vad_session info;
	VT_CHILD_CHECK(vad_session_info(c, &info) == 0 && !info.admin, "nobody counted as admin");
	uint64_t released;
	int rc = vad_purge(c, &released);
	VT_CHILD_CHECK(rc == VAD_EPERM, "purge: %d %s", rc, vad_last_error(c));
	VT_CHILD_CHECK(vt_contains(vad_last_error(c), "admin"), "purge refusal: %s",
		       vad_last_error(c));
	rc = vad_purge_arena(c, "default", &released);
	VT_CHILD_CHECK(rc == VAD_EPERM, "purge default: %d %s", rc, vad_last_error(c));
	rc = vad_reload(c);
	VT_CHILD_CHECK(rc == VAD_EPERM, "reload: %d %s", rc, vad_last_error(c));
	struct vad_client_info *list = NULL;
	size_t n = 0;
	rc = vad_clients(c, &list, &n);
	VT_CHILD_CHECK(rc == VAD_EPERM, "clients: %d %s", rc, vad_last_error(c));
	int ok = 0;
	rc = vad_check(c, &ok, NULL);
	VT_CHILD_CHECK(rc == VAD_EPERM, "check: %d %s", rc, vad_last_error(c));
	/* Refusals do not end the session: ordinary requests still work. */
	void *p;
	rc = vad_alloc(c, PAGE, 0, &p);
	VT_CHILD_CHECK(rc == 0, "alloc after refusals: %s", vad_last_error(c));
	void *q;
	size_t size;
	rc = vad_attach(c, token, &q, &size);
	VT_CHILD_CHECK(rc == 0, "attach of a real token as nobody: %s", vad_last_error(c));
	VT_CHILD_CHECK(vad_free(c, p) == 0 && vad_free(c, q) == 0, "free: %s", vad_last_error(c));
	vad_close(c);
	_exit(0);
}

static void test_admin_as_nobody(void **state)
{
	struct guess *g = *state;
	if (!vt_is_root()) {
		printf("not root: cannot run a client as nobody; skipped\n");
		skip();
	}
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		nobody_child(g->d.socket_path, g->token);
	assert_int_equal(0, vt_wait_child(pid, REPLY_TIMEOUT));
	assert_victim_intact(g);
	assert_true(vt_daemon_alive(&g->d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_free_what_is_not_held),
	    cmocka_unit_test(test_attach_random_tokens),
	    cmocka_unit_test(test_admin_as_nobody),
	};
	return cmocka_run_group_tests_name("hostile_guess", tests, group_setup, group_teardown);
}
