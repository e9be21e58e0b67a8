/*
 * test_faults_alloc.c - the allocation failure paths a client meets in normal life: an arena
 * that fills up (ENOSPC, single and all-or-nothing batch allocations, attaches still fine)
 * and quotas reached (EQUOTA per client and per uid, also through attach, and with many
 * connections racing for the last bytes of a uid quota). Each failure is
 * a code with a sentence naming the arena or quota; nothing is half done (a refused batch
 * holds nothing), the daemon's numbers return exactly to the baseline once the ranges are
 * freed, and allocation works again right after.
 */
#include <pthread.h>
#include <string.h>

#include "hostile_util.h"
#include "vtassert.h"

#define KiB	      1024u
#define MiB	      (1024u * 1024u)
#define ARENA	      (32u * MiB)
#define REPLY_TIMEOUT vt_timeout_ms(10000)

static void assert_sentence(vad_client *c, const char *word)
{
	const char *m = vad_last_error(c);
	if (!vt_contains(m, word))
		fail_msg("the error sentence \"%s\" does not mention \"%s\"", m, word);
}

static uint64_t held_bytes(vad_client *c)
{
	struct vad_stats s;
	VT_ASSERT_OK(c, vad_stats(c, &s));
	return s.held_bytes;
}

static void test_arena_exhausted(void **state)
{
	(void)state;
	struct vt_daemon d;
	char arenas[96];
	snprintf(arenas, sizeof(arenas), "[arena small]\nsize = %uM\n", ARENA / MiB);
	assert_int_equal(0, vt_daemon_setup(&d, "stats_interval = 1h\n", arenas));
	struct vt_baseline base;
	assert_int_equal(0, vt_baseline_take(&d, &base));
	vad_client *c, *other;
	assert_int_equal(0, vt_connect(&d, "filler", &c));
	assert_int_equal(0, vt_connect(&d, "other", &other));

	/* Fill with 1 MiB ranges until the arena says no. */
	void *r[64];
	int n = 0, rc;
	while ((rc = vad_alloc(c, MiB, 0, &r[n])) == VAD_OK) {
		memset(r[n], n + 1, 64);
		assert_true(++n < 64);
	}
	assert_int_equal(VAD_ENOSPC, rc);
	assert_sentence(c, "small");
	assert_int_equal(ARENA / MiB, n);
	/* The other client is refused the same way and can still read stats. */
	void *p;
	VT_ASSERT_ERR(other, VAD_ENOSPC, vad_alloc(other, 4 * KiB, 0, &p));
	assert_int_equal(0, held_bytes(other));

	/* Free two ranges that are not adjacent: a 2 MiB request cannot fit, a batch of
	 * three 1 MiB ranges cannot fit, and neither leaves anything behind. */
	VT_ASSERT_OK(c, vad_free(c, r[3]));
	VT_ASSERT_OK(c, vad_free(c, r[10]));
	uint64_t held = held_bytes(c);
	VT_ASSERT_ERR(c, VAD_ENOSPC, vad_alloc(c, 2 * MiB, 0, &p));
	size_t sizes[3] = {MiB, MiB, MiB};
	void *out[3] = {NULL, NULL, NULL};
	VT_ASSERT_ERR(c, VAD_ENOSPC, vad_alloc_batch(c, 3, sizes, 0, out));
	assert_int_equal(held, held_bytes(c));
	/* ... while two fit exactly, as a batch. */
	VT_ASSERT_OK(c, vad_alloc_batch(c, 2, sizes, 0, out));
	r[3] = out[0];
	r[10] = out[1];

	/* Sharing still works in a full arena: an attach takes no space. */
	char tok[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, r[0], tok));
	size_t sz;
	VT_ASSERT_OK(other, vad_attach(other, tok, &p, &sz));
	assert_int_equal(MiB, sz);
	assert_int_equal(1, ((unsigned char *)p)[0]);
	VT_ASSERT_OK(other, vad_free(other, p));

	/* Everything back; the whole arena is one range again. */
	VT_ASSERT_OK(c, vad_free_batch(c, (size_t)n, r));
	assert_int_equal(0, held_bytes(c));
	vad_close(other);
	assert_int_equal(0, vt_purge(&d));
	VT_ASSERT_OK(c, vad_alloc(c, ARENA, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	if (vt_baseline_check(&d, &base, vt_timeout_ms(5000)) != 0)
		fail_msg("the daemon did not return to its baseline");
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

static void test_quota_reached(void **state)
{
	(void)state;
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_setup(&d,
					    "stats_interval = 1h\nquota_client = 4M\n"
					    "quota_uid = 6M\n",
					    NULL));
	struct vt_baseline base;
	assert_int_equal(0, vt_baseline_take(&d, &base));
	vad_client *a, *b;
	assert_int_equal(0, vt_connect(&d, "quota-a", &a));
	assert_int_equal(0, vt_connect(&d, "quota-b", &b));

	/* Client quota: 4 MiB in four ranges, then one page more is refused. */
	void *ra[4], *p;
	for (int i = 0; i < 4; i++)
		VT_ASSERT_OK(a, vad_alloc(a, MiB, 0, &ra[i]));
	VT_ASSERT_ERR(a, VAD_EQUOTA, vad_alloc(a, 4 * KiB, 0, &p));
	assert_sentence(a, "quota-a");
	size_t sizes[2] = {4 * KiB, 4 * KiB};
	void *out[2];
	VT_ASSERT_ERR(a, VAD_EQUOTA, vad_alloc_batch(a, 2, sizes, 0, out));
	assert_int_equal(4 * MiB, held_bytes(a));

	/* Uid quota: b (same uid) gets the remaining 2 MiB, then is refused naming the uid. */
	VT_ASSERT_OK(b, vad_alloc(b, 2 * MiB, 0, &p));
	void *q;
	VT_ASSERT_ERR(b, VAD_EQUOTA, vad_alloc(b, 4 * KiB, 0, &q));
	assert_sentence(b, "uid");

	/* An attach counts against the quota too: b cannot take a reference to a's range. */
	char tok[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(a, vad_share(a, ra[0], tok));
	size_t sz;
	VT_ASSERT_ERR(b, VAD_EQUOTA, vad_attach(b, tok, &q, &sz));

	/* Freeing gives the quota back at once. */
	VT_ASSERT_OK(b, vad_free(b, p));
	VT_ASSERT_OK(b, vad_attach(b, tok, &q, &sz));
	VT_ASSERT_OK(b, vad_free(b, q));
	VT_ASSERT_OK(a, vad_free(a, ra[3]));
	VT_ASSERT_OK(a, vad_alloc(a, MiB, 0, &ra[3]));
	vad_close(a);
	/* The daemon drops a's references when it sees the hang-up, asynchronously: b's
	 * allocation is refused on the uid quota until then. */
	int rc;
	for (int waited = 0;; waited += 10) {
		rc = vad_alloc(b, 4 * MiB, 0, &p);
		if (rc != VAD_EQUOTA || waited >= vt_timeout_ms(5000))
			break;
		usleep(10000);
	}
	VT_ASSERT_OK(b, rc);
	vad_close(b);
	if (vt_baseline_check(&d, &base, vt_timeout_ms(5000)) != 0)
		fail_msg("the daemon did not return to its baseline");
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

/* Many connections of one uid race for the last bytes of its quota: together they never
 * hold more than the quota, and they stop only when it is (nearly) used up. */
struct racer {
	pthread_t th;
	vad_client *c;
	uint64_t got; /* bytes allocated */
	int last_rc;
	char msg[256];
};

#define RACE_RANGE (64u * KiB)

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	for (;;) {
		void *p;
		int rc = vad_alloc(r->c, RACE_RANGE, 0, &p);
		if (rc != 0) {
			r->last_rc = rc;
			snprintf(r->msg, sizeof(r->msg), "%s", vad_last_error(r->c));
			return NULL;
		}
		r->got += RACE_RANGE;
	}
}

static void test_quota_race(void **state)
{
	(void)state;
	enum { RACERS = 8 };
	const uint64_t quota = 24 * MiB;
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_setup(&d, "stats_interval = 1h\nquota_uid = 24M\n", NULL));
	struct vt_baseline base;
	assert_int_equal(0, vt_baseline_take(&d, &base));
	int rounds = vt_scale(10);
	for (int round = 0; round < rounds; round++) {
		struct racer r[RACERS];
		memset(r, 0, sizeof(r));
		for (int i = 0; i < RACERS; i++)
			assert_int_equal(0, vt_connect(&d, "racer", &r[i].c));
		for (int i = 0; i < RACERS; i++)
			assert_int_equal(0, pthread_create(&r[i].th, NULL, racer_main, &r[i]));
		uint64_t total = 0;
		for (int i = 0; i < RACERS; i++) {
			pthread_join(r[i].th, NULL);
			if (r[i].last_rc != VAD_EQUOTA)
				fail_msg("racer %d stopped with %d (%s): %s", i, r[i].last_rc,
					 vad_strerror(r[i].last_rc), r[i].msg);
			total += r[i].got;
		}
		struct vad_stats s;
		assert_int_equal(0, vt_stats(&d, &s));
		if (total > quota || s.busy_bytes - base.busy > quota)
			fail_msg(
			    "round %d: uid holds %llu bytes (daemon busy %llu) over a quota of "
			    "%llu",
			    round, (unsigned long long)total,
			    (unsigned long long)(s.busy_bytes - base.busy),
			    (unsigned long long)quota);
		if (total + RACE_RANGE <= quota)
			fail_msg("round %d: refused at %llu bytes although %llu more fit the quota",
				 round, (unsigned long long)total,
				 (unsigned long long)(quota - total));
		for (int i = 0; i < RACERS; i++)
			vad_close(r[i].c);
		if (vt_baseline_check(&d, &base, vt_timeout_ms(5000)) != 0)
			fail_msg("round %d: the daemon did not return to its baseline", round);
	}
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_arena_exhausted),
	    cmocka_unit_test(test_quota_reached),
	    cmocka_unit_test(test_quota_race),
	};
	return cmocka_run_group_tests_name("faults_alloc", tests, NULL, NULL);
}
