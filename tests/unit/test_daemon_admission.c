/* test_daemon_admission.c - admission decisions, connections per uid, rate-limited notes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>

#include "admission.h"

#define SEC 1000000000ull

static void test_reserved_is_half_at_most(void **state)
{
	(void)state;
	assert_int_equal(vad_admission_reserved(1024, 4), 4);
	assert_int_equal(vad_admission_reserved(1024, 0), 0);
	assert_int_equal(vad_admission_reserved(64, 40), 32);
	assert_int_equal(vad_admission_reserved(3, 4), 1);
	assert_int_equal(vad_admission_reserved(1, 4), 0);
}

static void test_decide(void **state)
{
	(void)state;
	/* max_clients 64, admin_slots 4, max_clients_uid 8 */
	assert_int_equal(vad_admission_decide(0, 0, false, 64, 4, 8), VAD_ADMIT_OK);
	assert_int_equal(vad_admission_decide(59, 7, false, 64, 4, 8), VAD_ADMIT_OK);
	/* the 61st non-admin finds only the admin slots left */
	assert_int_equal(vad_admission_decide(60, 0, false, 64, 4, 8), VAD_ADMIT_RESERVED);
	assert_int_equal(vad_admission_decide(60, 0, true, 64, 4, 8), VAD_ADMIT_OK);
	assert_int_equal(vad_admission_decide(63, 100, true, 64, 4, 8), VAD_ADMIT_OK);
	/* nobody past max_clients, admins included */
	assert_int_equal(vad_admission_decide(64, 0, true, 64, 4, 8), VAD_ADMIT_FULL);
	assert_int_equal(vad_admission_decide(64, 0, false, 64, 4, 8), VAD_ADMIT_FULL);
	/* the uid limit: non-admins only, and said before the reserved slots */
	assert_int_equal(vad_admission_decide(10, 8, false, 64, 4, 8), VAD_ADMIT_UID);
	assert_int_equal(vad_admission_decide(61, 8, false, 64, 4, 8), VAD_ADMIT_UID);
	assert_int_equal(vad_admission_decide(10, 8, true, 64, 4, 8), VAD_ADMIT_OK);
	/* 0: no such limit */
	assert_int_equal(vad_admission_decide(10, 1000, false, 64, 4, 0), VAD_ADMIT_OK);
	assert_int_equal(vad_admission_decide(100000, 0, false, 0, 4, 0), VAD_ADMIT_OK);
	/* no admin slots: non-admins may fill max_clients */
	assert_int_equal(vad_admission_decide(63, 0, false, 64, 0, 0), VAD_ADMIT_OK);
	/* tiny max_clients: half at most is kept, a non-admin still gets one */
	assert_int_equal(vad_admission_decide(0, 0, false, 2, 4, 0), VAD_ADMIT_OK);
	assert_int_equal(vad_admission_decide(1, 0, false, 2, 4, 0), VAD_ADMIT_RESERVED);
	assert_int_equal(vad_admission_decide(0, 0, false, 1, 4, 0), VAD_ADMIT_OK);
}

static void test_uid_conns(void **state)
{
	(void)state;
	struct vad_uid_conns *t = vad_uid_conns_new();
	assert_non_null(t);
	assert_int_equal(vad_uid_conns_get(t, 1000), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(vad_uid_conns_add(t, 1000), 0);
	assert_int_equal(vad_uid_conns_add(t, 0), 0);
	assert_int_equal(vad_uid_conns_get(t, 1000), 5);
	assert_int_equal(vad_uid_conns_get(t, 0), 1);
	assert_int_equal(vad_uid_conns_get(t, 65534), 0);
	assert_int_equal(vad_uid_conns_uids(t), 2);
	for (int i = 0; i < 5; i++)
		vad_uid_conns_drop(t, 1000);
	assert_int_equal(vad_uid_conns_get(t, 1000), 0);
	assert_int_equal(vad_uid_conns_uids(t), 1); /* an entry at 0 is freed */
	vad_uid_conns_drop(t, 4242);		    /* unknown: ignored */
	assert_int_equal(vad_uid_conns_uids(t), 1);
	vad_uid_conns_free(t); /* with an entry left */
}

struct churn {
	struct vad_uid_conns *t;
	uid_t uid;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	for (int i = 0; i < 20000; i++) {
		if (vad_uid_conns_add(c->t, c->uid) != 0)
			return (void *)1;
		vad_uid_conns_drop(c->t, c->uid);
	}
	return NULL;
}

/* Adds and drops from several threads (the listener and the workers) keep exact counts. */
static void test_uid_conns_threads(void **state)
{
	(void)state;
	struct vad_uid_conns *t = vad_uid_conns_new();
	assert_non_null(t);
	assert_int_equal(vad_uid_conns_add(t, 7), 0);
	pthread_t th[4];
	struct churn c[4];
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){.t = t, .uid = (uid_t)(i % 2 ? 7 : 100 + i)};
		assert_int_equal(pthread_create(&th[i], NULL, churn_thread, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *rc;
		pthread_join(th[i], &rc);
		assert_null(rc);
	}
	assert_int_equal(vad_uid_conns_get(t, 7), 1);
	assert_int_equal(vad_uid_conns_uids(t), 1);
	vad_uid_conns_free(t);
}

/* The first event of a kind is logged; the rest in its window are counted, one summary per
 * interval; a quiet interval lets the next one be logged in full again. */
static void test_notes(void **state)
{
	(void)state;
	struct vad_notes n;
	struct vad_note_summary sum[VAD_N_NOTES];
	vad_notes_init(&n, 10 * SEC);
	uint64_t t0 = 100 * SEC;

	assert_int_equal(vad_notes_hit(&n, VAD_NOTE_HELLO_TIMEOUT, t0, 65534, 10), VAD_NOTE_LOG);
	assert_int_equal(vad_notes_hit(&n, VAD_NOTE_HELLO_TIMEOUT, t0 + 1, 65534, 11),
			 VAD_NOTE_COUNT_ARM);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(vad_notes_hit(&n, VAD_NOTE_HELLO_TIMEOUT, t0 + 2, 65534, 12),
				 VAD_NOTE_COUNTED);
	/* another kind has its own first line, and shares the armed summary */
	assert_int_equal(vad_notes_hit(&n, VAD_NOTE_UID, t0 + 3, 1000, 20), VAD_NOTE_LOG);
	assert_int_equal(vad_notes_hit(&n, VAD_NOTE_UID, t0 + 4, 1000, 21), VAD_NOTE_COUNTED);

	vad_notes_take(&n, t0 + 10 * SEC, sum);
	assert_int_equal(sum[VAD_NOTE_HELLO_TIMEOUT].counted, 1001);
	assert_int_equal(sum[VAD_NOTE_HELLO_TIMEOUT].last_pid, 12);
	assert_int_equal(sum[VAD_NOTE_HELLO_TIMEOUT].last_uid, 65534);
	assert_int_equal(sum[VAD_NOTE_UID].counted, 1);
	assert_int_equal(sum[VAD_NOTE_FULL].counted, 0);

	/* the flood goes on: still counted (a new window began at the summary), timer again */
	assert_int_equal(vad_notes_hit(&n, VAD_NOTE_HELLO_TIMEOUT, t0 + 11 * SEC, 65534, 13),
			 VAD_NOTE_COUNT_ARM);
	vad_notes_take(&n, t0 + 20 * SEC, sum);
	assert_int_equal(sum[VAD_NOTE_HELLO_TIMEOUT].counted, 1);
	assert_int_equal(sum[VAD_NOTE_UID].counted, 0);
	/* a summary with nothing counted starts no window: after a quiet interval, in full */
	vad_notes_take(&n, t0 + 30 * SEC, sum);
	assert_int_equal(sum[VAD_NOTE_HELLO_TIMEOUT].counted, 0);
	assert_int_equal(vad_notes_hit(&n, VAD_NOTE_HELLO_TIMEOUT, t0 + 31 * SEC, 65534, 14),
			 VAD_NOTE_LOG);
	assert_int_equal(vad_notes_total(&n, VAD_NOTE_HELLO_TIMEOUT), 1004);
	assert_int_equal(vad_notes_total(&n, VAD_NOTE_UID), 2);
	assert_int_equal(vad_notes_total(&n, VAD_NOTE_ACCEPT), 0);
	assert_string_equal(vad_note_what(VAD_NOTE_UID), "connections refused at max_clients_uid");
	vad_notes_fini(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reserved_is_half_at_most),
	    cmocka_unit_test(test_decide),
	    cmocka_unit_test(test_uid_conns),
	    cmocka_unit_test(test_uid_conns_threads),
	    cmocka_unit_test(test_notes),
	};
	return cmocka_run_group_tests_name("daemon_admission", tests, NULL, NULL);
}
