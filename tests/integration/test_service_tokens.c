/*
 * test_service_tokens.c - share tokens that die before their range: revoked (vad_unshare, or
 * replaced by a newer share), single use, expiring; each refuses later attaches with its own
 * error while the references already taken stay. And a client that guesses tokens: slowed
 * down past VAD_GUESS_FREE guesses, then closed, while a client on the same (only) worker
 * keeps completing its round trips during the guesser's pauses; a consumer racing its
 * producer's frees, whose attaches of freed tokens are no guesses. vactl session's share
 * options and unshare.
 */
#include <pthread.h>
#include <string.h>

#include <json-c/json.h>

#include "guess.h"
#include "rawclient.h"
#include "vtassert.h"

#define PAGE	    4096u
#define SEED_OWNER  0x70C3
#define SEED_HOLDER 0x40D3

/* One worker, so the guesser and the bystander share it. */
VT_DAEMON_GROUP(group_setup, "workers = 1\nstats_interval = 1h\n", NULL)

static vad_client *connect_as(const struct vt_daemon *d, const char *name)
{
	vad_client *c = NULL;
	if (vt_connect(d, name, &c) != 0)
		fail_msg("cannot connect as %s", name);
	return c;
}

/* Attach token as c, which must fail with want and say so in a sentence holding needle. */
static void attach_refused(vad_client *c, const char *token, int want, const char *needle)
{
	void *q = NULL;
	size_t size = 0;
	VT_ASSERT_ERR(c, want, vad_attach(c, token, &q, &size));
	if (!vt_contains(vad_last_error(c), needle))
		fail_msg("attach refused with \"%s\", which does not say \"%s\"", vad_last_error(c),
			 needle);
}

/* The failed attaches the daemon counts for c's session (vad_clients, as vactl clients). */
static uint64_t failed_attaches(const struct vt_daemon *d, vad_client *c)
{
	struct vad_session me;
	VT_ASSERT_OK(c, vad_session_info(c, &me));
	vad_client *admin = connect_as(d, "lister");
	struct vad_client_info *v = NULL;
	size_t n = 0;
	VT_ASSERT_OK(admin, vad_clients(admin, &v, &n));
	uint64_t found = UINT64_MAX;
	for (size_t i = 0; i < n; i++)
		if (v[i].session_id == me.session_id)
			found = v[i].failed_attaches;
	free(v);
	vad_close(admin);
	if (found == UINT64_MAX)
		fail_msg("session %llu is not listed", (unsigned long long)me.session_id);
	return found;
}

/* The registry and the allocators agree with themselves, and nothing is left busy. */
static void assert_clean(const struct vt_daemon *d)
{
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, vt_timeout_ms(5000), NULL));
}

static void test_unshare_revokes(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *owner = connect_as(d, "owner"), *holder = connect_as(d, "holder"),
		   *late = connect_as(d, "late");
	void *p, *q;
	size_t size;
	VT_ASSERT_OK(owner, vad_alloc(owner, 2 * PAGE, 0, &p));
	vt_fill_pattern(p, 2 * PAGE, SEED_OWNER);
	char token[VAD_TOKEN_LEN + 1], again[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(owner, vad_share(owner, p, token));
	VT_ASSERT_OK(holder, vad_attach(holder, token, &q, &size));

	VT_ASSERT_OK(owner, vad_unshare(owner, p));
	attach_refused(late, token, VAD_EREVOKED, "revoked");
	attach_refused(late, token, VAD_EREVOKED, "unshare"); /* every time, not only once */
	VT_ASSERT_OK(owner, vad_unshare(owner, p));	      /* no token left: nothing to do */

	/* The holder keeps its reference: it reads the owner's bytes, and writes it sees. */
	struct vad_range info;
	VT_ASSERT_OK(holder, vad_range_info(holder, q, &info));
	assert_int_equal(1, info.refs);
	assert_true(vt_check_pattern(q, 2 * PAGE, SEED_OWNER) < 0);
	vt_fill_pattern(q, 2 * PAGE, SEED_HOLDER);
	assert_true(vt_check_pattern(p, 2 * PAGE, SEED_HOLDER) < 0);

	/* A holder may revoke too, and only a holder. */
	VT_ASSERT_OK(owner, vad_share(owner, p, again));
	assert_string_not_equal(token, again);
	void *seen; /* the range in late's mapping, held by others only */
	VT_ASSERT_OK(late, vad_pointer(late, info.arena, info.offset, &seen));
	VT_ASSERT_ERR(late, VAD_ENOTHELD, vad_unshare(late, seen));
	assert_true(vt_contains(vad_last_error(late), "only a holder"));
	VT_ASSERT_OK(holder, vad_unshare(holder, q));
	attach_refused(late, again, VAD_EREVOKED, "revoked");

	/* The owner frees: the holder's reference keeps the range and its bytes. */
	VT_ASSERT_OK(owner, vad_free(owner, p));
	assert_true(vt_check_pattern(q, 2 * PAGE, SEED_HOLDER) < 0);
	VT_ASSERT_OK(holder, vad_free(holder, q));
	/* Now the range is gone: its token is refused as freed, no longer as revoked. */
	VT_ASSERT_OK(owner, vad_alloc(owner, PAGE, 0, &p));
	VT_ASSERT_OK(owner, vad_share(owner, p, token));
	VT_ASSERT_OK(owner, vad_free(owner, p));
	attach_refused(late, token, VAD_ETOKEN, "freed by every holder");
	assert_int_equal(4, failed_attaches(d, late)); /* revoked three times, freed once */
	vad_close(late);
	vad_close(holder);
	vad_close(owner);
	assert_clean(d);
}

static void test_single_use(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *owner = connect_as(d, "owner"), *first = connect_as(d, "first"),
		   *second = connect_as(d, "second");
	void *p, *q, *r;
	size_t size;
	VT_ASSERT_OK(owner, vad_alloc(owner, PAGE, 0, &p));
	vt_fill_pattern(p, PAGE, SEED_OWNER);
	const struct vad_share_opts once = {.single_use = 1};
	char token[VAD_TOKEN_LEN + 1], older[VAD_TOKEN_LEN + 1], plain[VAD_TOKEN_LEN + 1];

	/* A fresh token revokes the one before it. */
	VT_ASSERT_OK(owner, vad_share_opts(owner, p, &once, older));
	VT_ASSERT_OK(owner, vad_share_opts(owner, p, &once, token));
	assert_string_not_equal(older, token);
	attach_refused(second, older, VAD_EREVOKED, "newer token replaced it");

	VT_ASSERT_OK(first, vad_attach(first, token, &q, &size));
	attach_refused(second, token, VAD_ETOKENUSED, "single attach");
	attach_refused(first, token, VAD_ETOKENUSED, "single attach");
	assert_true(vt_check_pattern(q, PAGE, SEED_OWNER) < 0);
	assert_int_equal(PAGE, vad_size(first, q));

	/* A plain share now makes a plain token, which attaches any number of times. */
	VT_ASSERT_OK(owner, vad_share(owner, p, plain));
	assert_string_not_equal(plain, token);
	VT_ASSERT_OK(second, vad_attach(second, plain, &r, &size));
	VT_ASSERT_OK(second, vad_free(second, r));
	VT_ASSERT_OK(second, vad_attach(second, plain, &r, &size));
	assert_true(vt_check_pattern(r, PAGE, SEED_OWNER) < 0);
	VT_ASSERT_OK(second, vad_free(second, r));
	VT_ASSERT_OK(first, vad_free(first, q));
	VT_ASSERT_OK(owner, vad_free(owner, p));
	vad_close(second);
	vad_close(first);
	vad_close(owner);
	assert_clean(d);
}

static void test_expiring(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *owner = connect_as(d, "owner"), *other = connect_as(d, "other");
	void *p, *q;
	size_t size;
	VT_ASSERT_OK(owner, vad_alloc(owner, PAGE, 0, &p));
	const struct vad_share_opts brief = {.ttl_ms = 50}, hour = {.ttl_ms = 3600u * 1000u};
	char token[VAD_TOKEN_LEN + 1], lasting[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(owner, vad_share_opts(owner, p, &brief, token));

	/* Attach until the daemon says the token expired (each reference given back). */
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	int rc;
	unsigned attached = 0;
	while ((rc = vad_attach(other, token, &q, &size)) == VAD_OK) {
		attached++;
		VT_ASSERT_OK(other, vad_free(other, q));
		if (vt_now_ns() > deadline)
			fail_msg("a token with a 50 ms ttl still attaches after 10 s");
		vt_sleep_ms(5);
	}
	if (rc != VAD_EEXPIRED)
		fail_msg("an expiring token was refused with %d (%s: \"%s\")", rc, vad_strerror(rc),
			 vad_last_error(other));
	print_message("the 50 ms token attached %u times before it expired\n", attached);
	attach_refused(other, token, VAD_EEXPIRED, "expired"); /* removed, and remembered */

	/* A ttl of an hour is not over: its token attaches. */
	VT_ASSERT_OK(owner, vad_share_opts(owner, p, &hour, lasting));
	VT_ASSERT_OK(other, vad_attach(other, lasting, &q, &size));
	VT_ASSERT_OK(other, vad_free(other, q));
	VT_ASSERT_OK(owner, vad_free(owner, p));
	vad_close(other);
	vad_close(owner);
	assert_clean(d);
}

/* ---- vactl session ------------------------------------------------------------------------ */

/* Send one session command and read its JSON result line. */
static struct json_object *session_cmd(struct vt_proc *p, const char *line)
{
	assert_int_equal(0, vt_proc_write(p, line));
	struct json_object *j = vt_proc_read_json(p, vt_timeout_ms(10000));
	if (!j)
		fail_msg("no result line for \"%s\"", line);
	return j;
}

/* The string at key of a result line ("" when absent). */
static const char *jtext(struct json_object *j, const char *key)
{
	struct json_object *v = vt_json_path(j, key);
	return v ? json_object_get_string(v) : "";
}

static void test_vactl_session(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_proc p;
	assert_int_equal(0,
			 vt_proc_vactl(&p, "--socket", d->socket_path, "--json", "session", NULL));
	json_object_put(session_cmd(&p, "alloc 4K\n"));
	struct json_object *sh = session_cmd(&p, "share #1 once\n");
	char token[VAD_TOKEN_LEN + 1], cmd[128];
	snprintf(token, sizeof(token), "%s", jtext(sh, "token"));
	json_object_put(sh);
	assert_int_equal(VAD_TOKEN_LEN, strlen(token));
	snprintf(cmd, sizeof(cmd), "attach %s\n", token);
	struct json_object *j = session_cmd(&p, cmd);
	assert_true(json_object_get_boolean(vt_json_path(j, "ok")));
	json_object_put(j);
	j = session_cmd(&p, cmd);
	assert_string_equal("ETOKENUSED", jtext(j, "error"));
	json_object_put(j);

	sh = session_cmd(&p, "share #1 ttl 1h\n");
	snprintf(cmd, sizeof(cmd), "attach %s\n", jtext(sh, "token"));
	json_object_put(sh);
	j = session_cmd(&p, "unshare #1\n");
	assert_true(json_object_get_boolean(vt_json_path(j, "ok")));
	json_object_put(j);
	j = session_cmd(&p, cmd);
	assert_string_equal("EREVOKED", jtext(j, "error"));
	json_object_put(j);
	j = session_cmd(&p, "share #1 ttl 0\n");
	assert_string_equal("usage", jtext(j, "error"));
	json_object_put(j);
	struct vt_output o;
	assert_int_equal(2, vt_proc_finish(&p, vt_timeout_ms(10000), &o)); /* the usage error */
	vt_output_free(&o);
	assert_clean(d);
}

/* ---- a consumer racing its producer's frees ------------------------------------------------ */

/* Far more tokens than VAD_GUESS_CLOSE, far fewer than the daemon remembers dead. */
#define RACE_TOKENS (4 * (int)VAD_GUESS_CLOSE)

struct producer {
	vad_client *c;
	pthread_t thread;
	char tokens[RACE_TOKENS][VAD_TOKEN_LEN + 1];
	int published; /* atomic: tokens[0..published) are shared (and maybe freed already) */
	int failed;    /* atomic */
	char error[256];
};

/* Allocate, share, publish and free at once, RACE_TOKENS times: a pipeline's producer. */
static void *producer_run(void *arg)
{
	struct producer *pr = arg;
	for (int i = 0; i < RACE_TOKENS; i++) {
		void *p;
		int rc = vad_alloc(pr->c, PAGE, 0, &p);
		if (rc == VAD_OK)
			rc = vad_share(pr->c, p, pr->tokens[i]);
		if (rc == VAD_OK) {
			__atomic_store_n(&pr->published, i + 1, __ATOMIC_RELEASE);
			rc = vad_free(pr->c, p);
		}
		if (rc != VAD_OK) {
			snprintf(pr->error, sizeof(pr->error), "%s", vad_last_error(pr->c));
			__atomic_store_n(&pr->failed, 1, __ATOMIC_RELEASE);
			break;
		}
	}
	return NULL;
}

/* Attach token as c: attached (and let go), or refused as freed by every holder; 1 if
 * refused. Any other answer, a closed connection above all, fails the test. */
static int consume(vad_client *c, const char *token)
{
	void *q;
	size_t size;
	int rc = vad_attach(c, token, &q, &size);
	if (rc == VAD_OK) {
		VT_ASSERT_OK(c, vad_free(c, q));
		return 0;
	}
	if (rc != VAD_ETOKEN || !vt_contains(vad_last_error(c), "freed by every holder"))
		fail_msg("attach of a token freed lately: %d, \"%s\" (not refused as freed)", rc,
			 vad_last_error(c));
	return 1;
}

/* A consumer that attaches tokens whose ranges its producer frees at the same time is an
 * honest client: the daemon remembers those tokens as freed, and however many such attaches
 * fail, none is a guess, so the session is never slowed nor closed (a guesser is: below). */
static void test_consumer_racing_frees(void **state)
{
	struct vt_daemon *d = *state;
	struct producer *pr = calloc(1, sizeof(*pr));
	assert_non_null(pr);
	pr->c = connect_as(d, "producer");
	vad_client *consumer = connect_as(d, "consumer");
	assert_int_equal(0, pthread_create(&pr->thread, NULL, producer_run, pr));
	unsigned refused = 0;
	for (int seen = 0; seen < RACE_TOKENS && !__atomic_load_n(&pr->failed, __ATOMIC_ACQUIRE);) {
		int n = __atomic_load_n(&pr->published, __ATOMIC_ACQUIRE);
		for (; seen < n; seen++)
			refused += (unsigned)consume(consumer, pr->tokens[seen]);
	}
	pthread_join(pr->thread, NULL);
	if (pr->failed)
		fail_msg("producer: %s", pr->error);
	/* Every range is freed now: each token is refused once more, so that the refusals
	 * certainly pass VAD_GUESS_CLOSE. */
	for (int i = 0; i < RACE_TOKENS; i++)
		refused += (unsigned)consume(consumer, pr->tokens[i]);
	print_message("%u of %u attaches refused as freed\n", refused, 2 * RACE_TOKENS);
	assert_true(refused >= RACE_TOKENS);
	assert_int_equal(refused, failed_attaches(d, consumer));
	void *p; /* still connected, and not paused */
	VT_ASSERT_OK(consumer, vad_alloc(consumer, PAGE, 0, &p));
	VT_ASSERT_OK(consumer, vad_free(consumer, p));
	vad_close(consumer);
	vad_close(pr->c);
	free(pr);
	assert_clean(d);
}

/* ---- a guesser beside a bystander on the same worker -------------------------------------- */

struct bystander {
	vad_client *c;
	pthread_t thread;
	unsigned done;	 /* atomic: round trips completed */
	unsigned failed; /* atomic */
	int stop;	 /* atomic */
	char error[256];
};

/* alloc, write, free until told to stop. */
static void *bystander_run(void *arg)
{
	struct bystander *b = arg;
	while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
		void *p;
		int rc = vad_alloc(b->c, PAGE, 0, &p);
		if (rc == VAD_OK) {
			memset(p, 0x5A, PAGE);
			rc = vad_free(b->c, p);
		}
		if (rc != VAD_OK) {
			if (__atomic_fetch_add(&b->failed, 1, __ATOMIC_RELAXED) == 0)
				snprintf(b->error, sizeof(b->error), "%s", vad_last_error(b->c));
			break;
		}
		__atomic_add_fetch(&b->done, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static unsigned bystander_done(struct bystander *b)
{
	return __atomic_load_n(&b->done, __ATOMIC_ACQUIRE);
}

/* The i-th of a run of well-formed tokens no range has. */
static void guess_token(uint64_t *x, char tok[VAD_TOKEN_LEN + 1])
{
	static const char base62[] =
	    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	for (int k = 0; k < VAD_TOKEN_LEN; k++) {
		*x ^= *x << 13;
		*x ^= *x >> 7;
		*x ^= *x << 17;
		tok[k] = base62[*x % 62];
	}
	tok[VAD_TOKEN_LEN] = '\0';
}

static void test_guesser_slowed_then_closed(void **state)
{
	struct vt_daemon *d = *state;
	struct bystander b = {.c = connect_as(d, "bystander")};
	vad_client *g = connect_as(d, "guesser");
	assert_int_equal(0, pthread_create(&b.thread, NULL, bystander_run, &b));

	uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
	uint64_t waited_ns = 0, paused_ns = 0;
	unsigned long_pauses = 0, progressed = 0;
	for (unsigned i = 1; i <= VAD_GUESS_CLOSE; i++) {
		char tok[VAD_TOKEN_LEN + 1];
		guess_token(&x, tok);
		/* The guess before this one paused the session for pause ms: this attach's
		 * request waits in the daemon until that is over. */
		uint32_t pause = vad_guess_pause_ms(i - 1);
		unsigned before = bystander_done(&b);
		uint64_t t0 = vt_now_ns();
		void *q;
		size_t size;
		VT_ASSERT_ERR(g, VAD_ETOKEN, vad_attach(g, tok, &q, &size));
		uint64_t took = vt_now_ns() - t0;
		unsigned after = bystander_done(&b);
		if (!pause)
			continue;
		waited_ns += took;
		paused_ns += (uint64_t)pause * 1000000u;
		if (pause == VAD_GUESS_PAUSE_MAX_MS) {
			long_pauses++;
			progressed += after > before;
		}
	}
	/* The guess that reached VAD_GUESS_CLOSE got its reply; then the session was closed. */
	struct vad_stats st;
	VT_ASSERT_ERR(g, VAD_EGONE, vad_stats(g, &st));
	vad_close(g);

	/* The bystander kept going while the guesser sat out each long pause. */
	print_message("guesser waited %llu ms over pauses of %llu ms; the bystander made %u round "
		      "trips, progressing in %u of %u long pauses\n",
		      (unsigned long long)(waited_ns / 1000000u),
		      (unsigned long long)(paused_ns / 1000000u), bystander_done(&b), progressed,
		      long_pauses);
	__atomic_store_n(&b.stop, 1, __ATOMIC_RELEASE);
	pthread_join(b.thread, NULL);
	if (b.failed)
		fail_msg("the bystander failed %u round trips: %s", b.failed, b.error);
	assert_true(long_pauses > 0);
	assert_int_equal(long_pauses, progressed);
	/* Slowed: a pause only ends once its time has passed (load only adds to it). Each one
	 * starts as the reply before it goes out, a moment before the guesser sends again, so
	 * only half is asserted: a guesser that was never paused waits next to nothing. */
	assert_true(waited_ns >= paused_ns / 2);
	vad_close(b.c);

	/* One line says why it was closed. */
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(5000) * 1000000u;
	while (!vt_daemon_log_contains(d, "share tokens that do not exist") &&
	       vt_now_ns() < deadline)
		vt_sleep_ms(10);
	char line[64];
	snprintf(line, sizeof(line), "'guesser') guessed %u share tokens", VAD_GUESS_CLOSE);
	assert_true(vt_daemon_log_contains(d, line));
	assert_clean(d);
	assert_true(vt_daemon_alive(d));
}

/* A guesser that pipelines its guesses: each waits its turn behind the pause of the one
 * before, the one that reaches VAD_GUESS_CLOSE is answered, and what follows is never
 * handled. */
static void test_pipelined_guesses(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	assert_int_equal(0, vt_raw_connect(&r, d->socket_path));
	assert_int_equal(0, vt_raw_hello(&r, "pipelined-guesser"));
	uint64_t x = 0x2545F4914F6CDD1Dull;
	for (unsigned i = 0; i < VAD_GUESS_CLOSE + 8; i++) {
		char tok[VAD_TOKEN_LEN + 1];
		guess_token(&x, tok);
		struct vt_req q;
		assert_true(vt_raw_send_request(&r, vt_req_attach(&q, tok)) != 0);
	}
	unsigned answered = 0;
	for (;;) {
		Vad__Response *resp = NULL;
		enum vt_raw_result got = vt_raw_recv(&r, &resp, vt_timeout_ms(30000));
		if (got == VT_RAW_CLOSED)
			break;
		if (got != VT_RAW_RESPONSE)
			fail_msg("after %u replies: no reply and no close (%d)", answered,
				 (int)got);
		assert_int_equal(VAD__ERROR__ETOKEN, resp->error);
		vt_raw_response_free(resp);
		answered++;
	}
	vt_raw_close(&r);
	assert_int_equal(VAD_GUESS_CLOSE, answered);
	assert_clean(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unshare_revokes),
	    cmocka_unit_test(test_single_use),
	    cmocka_unit_test(test_expiring),
	    cmocka_unit_test(test_vactl_session),
	    cmocka_unit_test(test_consumer_racing_frees),
	    cmocka_unit_test(test_guesser_slowed_then_closed),
	    cmocka_unit_test(test_pipelined_guesses),
	};
	return cmocka_run_group_tests_name("service_tokens", tests, group_setup,
					   vt_group_daemon_stop);
}
