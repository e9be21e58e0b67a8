/*
 * test_daemon_balance.c - the adaptive balancer's decisions (balance.c) from made-up samples:
 * spread when the active workers are saturated and a CPU is idle, or busy with pipelined
 * clients; no spread without an idle CPU, with one connection, with one worker or with every
 * worker in use; a spread on trial undone when requests/s did not rise, kept when they did;
 * the back-off after an undo, doubling; the hold-back tick after every change; gather when
 * the load falls; back to one worker when the clients go; the slow look while nothing comes.
 * No daemon, no clock: the same on any machine, loaded or not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "balance.h"

#define MAX_W	  4
#define TICK_NS	  (BALANCE_TICK_MS * 1000000ull)
#define SATURATED 0.95 /* ran (and wanted a CPU) this share of a tick */

/* A balancer and the sample it is fed. */
struct rig {
	struct balance_state st;
	struct balance_worker_sample w[MAX_W];
	struct balance_sample sm;
};

static void rig_init(struct rig *r, unsigned n_workers, double spread_idle)
{
	memset(r, 0, sizeof(*r));
	balance_init(&r->st, n_workers, spread_idle);
	r->sm.workers = r->w;
	r->sm.clients = 8;
	r->sm.elapsed_ns = TICK_NS;
	r->sm.idle = 1.0;
}

/* Worker i over the next ticks: wanted a CPU load, ran ran of the tick, owns conns
 * connections, one request per read. */
static void worker_set(struct rig *r, unsigned i, double load, double ran, unsigned conns)
{
	r->w[i] = (struct balance_worker_sample){
	    .load = load, .ran = ran, .n_conns = conns, .reads = 100, .requests = 100};
}

/* The daemon served per_s requests/s over the next ticks. */
static void rate_set(struct rig *r, uint64_t per_s)
{
	r->sm.requests = per_s * BALANCE_TICK_MS / 1000;
}

static struct balance_action tick(struct rig *r)
{
	return balance_tick(&r->st, &r->sm);
}

/* Tick until the verdict is not KEEP, at most max ticks; *ticks says how many it took. */
static struct balance_action tick_until_change(struct rig *r, int max, int *ticks)
{
	struct balance_action a = {.verdict = BALANCE_KEEP};
	for (*ticks = 1; *ticks <= max; (*ticks)++) {
		a = tick(r);
		if (a.verdict != BALANCE_KEEP)
			return a;
	}
	return a;
}

/* One worker of two saturated with 6 connections, 1000 requests/s: spreads on its second
 * saturated tick (a rig for the tests that start from a spread). */
static void spread_once(struct rig *r)
{
	rig_init(r, 2, 0.4);
	worker_set(r, 0, SATURATED, SATURATED, 6);
	rate_set(r, 1000);
	assert_int_equal(tick(r).verdict, BALANCE_KEEP);
	struct balance_action a = tick(r);
	assert_int_equal(a.verdict, BALANCE_SPREAD);
	worker_set(r, 0, SATURATED, SATURATED, 3);
	worker_set(r, 1, SATURATED, SATURATED, 3);
}

static void test_spread_when_saturated_and_cpu_idle(void **state)
{
	struct rig r;
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	rate_set(&r, 1000);
	/* one saturated tick can be a burst */
	struct balance_action a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_KEEP);
	assert_int_equal(a.to, 1);
	a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_SPREAD);
	assert_int_equal(a.from, 1);
	assert_int_equal(a.to, 2);
	assert_int_equal(r.st.active, 2);
	assert_false(a.pipelined); /* saturated, not only busy */
	assert_int_equal(a.hold, 1);
	assert_true(r.st.trial);
	assert_int_equal(a.next_tick_ms, BALANCE_TICK_MS);
	/* each of the one active worker's 6 connections: half to the woken one */
	assert_int_equal(balance_share(&a, 6), 3);
	assert_int_equal(balance_share(&a, 1), 0);
}

static void test_saturation_must_last(void **state)
{
	struct rig r;
	rig_init(&r, 2, 0.4);
	rate_set(&r, 1000);
	/* saturated, calm, saturated, calm: never two in a row, never a spread */
	for (int i = 0; i < 10; i++) {
		double ran = i % 2 ? 0.5 : SATURATED;
		worker_set(&r, 0, ran, ran, 6);
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
	}
	/* below RUN_SATURATED, though wanting a CPU all the time (others hold it): no spread */
	worker_set(&r, 0, 1.0, 0.8, 6);
	for (int i = 0; i < 10; i++)
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
	assert_int_equal(r.st.active, 1);
}

static void test_spread_for_pipelined_clients(void **state)
{
	struct rig r;
	rig_init(&r, 2, 0.4);
	rate_set(&r, 1000);
	/* busy 0.7 but ran only 0.6: one request per read is no reason */
	worker_set(&r, 0, 0.7, 0.6, 6);
	for (int i = 0; i < 10; i++)
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
	/* two requests per read: pipelined, try */
	r.w[0].requests = 2 * r.w[0].reads;
	assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
	struct balance_action a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_SPREAD);
	assert_true(a.pipelined);
	/* pipelined but busy less than BUSY_PIPELINED: no */
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, 0.4, 0.4, 6);
	r.w[0].requests = 4 * r.w[0].reads;
	for (int i = 0; i < 10; i++)
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
}

static void test_no_spread_without_idle_cpu(void **state)
{
	struct rig r;
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	rate_set(&r, 1000);
	r.sm.idle = 0.2;
	assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
	struct balance_action a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_NO_IDLE_CPU);
	assert_true(a.first_no_idle);
	assert_true(a.idle_min > 0.19 && a.idle_min < 0.21);
	assert_int_equal(a.to, 1);
	assert_int_equal(r.st.active, 1);
	/* said once: the next refusals are quiet, and still no spread */
	for (int i = 0; i < 3; i++) {
		a = tick_until_change(&r, 5, &(int){0});
		assert_int_equal(a.verdict, BALANCE_NO_IDLE_CPU);
		assert_false(a.first_no_idle);
		assert_int_equal(r.st.active, 1);
	}
	/* one tick of the saturated pair short of idle CPU is enough to refuse */
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	r.sm.idle = 0.3;
	tick(&r);
	r.sm.idle = 1.5;
	assert_int_equal(tick(&r).verdict, BALANCE_NO_IDLE_CPU);
	/* exactly spread_idle idle is enough; unknown idle CPU is no objection */
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	r.sm.idle = 0.4;
	tick(&r);
	assert_int_equal(tick(&r).verdict, BALANCE_SPREAD);
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	r.sm.idle = -1;
	tick(&r);
	assert_int_equal(tick(&r).verdict, BALANCE_SPREAD);
}

static void test_no_spread_with_one_connection(void **state)
{
	struct rig r;
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 1);
	rate_set(&r, 1000);
	for (int i = 0; i < 10; i++)
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
	assert_int_equal(r.st.active, 1);
}

static void test_one_worker_never_moves(void **state)
{
	struct rig r;
	rig_init(&r, 1, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	rate_set(&r, 1000);
	for (int i = 0; i < 10; i++) {
		struct balance_action a = tick(&r);
		assert_int_equal(a.verdict, BALANCE_KEEP);
		assert_int_equal(a.to, 1);
	}
	/* idle: nothing to gather either */
	worker_set(&r, 0, 0, 0, 6);
	for (int i = 0; i < 10; i++)
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
}

/* The spread paid (requests/s rose 10 %): it stays, and with every worker in use and all
 * saturated there is nothing more to wake. */
static void test_spread_that_pays_stays(void **state)
{
	struct rig r;
	spread_once(&r);
	rate_set(&r, 1100);
	int ticks;
	struct balance_action a = tick_until_change(&r, 50, &ticks);
	assert_int_equal(a.verdict, BALANCE_KEEP);
	assert_int_equal(r.st.active, 2);
	assert_false(r.st.trial);
	/* after one that did not pay (back-off 2 s, the next 4 s), one that pays: the next
	 * back-off is 2 s again */
	spread_once(&r);
	rate_set(&r, 1000);
	assert_int_equal(tick_until_change(&r, 10, &ticks).verdict, BALANCE_UNDO);
	worker_set(&r, 1, 0, 0, 0);
	assert_int_equal(tick_until_change(&r, 100, &ticks).verdict, BALANCE_SPREAD);
	worker_set(&r, 1, SATURATED, SATURATED, 3);
	rate_set(&r, 1100);
	assert_int_equal(tick_until_change(&r, 50, &ticks).verdict, BALANCE_KEEP);
	assert_int_equal(r.st.active, 2);
	r.st.active = 1; /* as if the load had gone and come back */
	worker_set(&r, 1, 0, 0, 0);
	assert_int_equal(tick_until_change(&r, 10, &ticks).verdict, BALANCE_SPREAD);
	rate_set(&r, 1000);
	worker_set(&r, 1, SATURATED, SATURATED, 3);
	struct balance_action undo = tick_until_change(&r, 10, &ticks);
	assert_int_equal(undo.verdict, BALANCE_UNDO);
	assert_int_equal(undo.backoff_ms, 20 * BALANCE_TICK_MS);
}

/* The no-idle-CPU refusal is said once per spread: after a spread, the next is news again. */
static void test_no_idle_said_again_after_a_spread(void **state)
{
	struct rig r;
	rig_init(&r, 3, 0.4);
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	rate_set(&r, 1000);
	r.sm.idle = 0.2;
	int ticks;
	struct balance_action a = tick_until_change(&r, 5, &ticks);
	assert_int_equal(a.verdict, BALANCE_NO_IDLE_CPU);
	assert_true(a.first_no_idle);
	r.sm.idle = 1.0;
	assert_int_equal(tick_until_change(&r, 5, &ticks).verdict, BALANCE_SPREAD);
	worker_set(&r, 1, SATURATED, SATURATED, 6);
	rate_set(&r, 2000); /* the spread pays */
	r.sm.idle = 0.2;
	a = tick_until_change(&r, 10, &ticks);
	assert_int_equal(a.verdict, BALANCE_NO_IDLE_CPU);
	assert_int_equal(a.from, 2);
	assert_true(a.first_no_idle);
}

static void test_undo_spread_that_did_not_pay(void **state)
{
	struct rig r;
	spread_once(&r);
	rate_set(&r, 1040); /* 4 % more: not the TRIAL_GAIN of 5 % */
	/* the hold-back tick, then the trial's three ticks */
	int ticks;
	struct balance_action a = tick_until_change(&r, 10, &ticks);
	assert_int_equal(a.verdict, BALANCE_UNDO);
	assert_int_equal(ticks, 4);
	assert_int_equal(a.from, 2);
	assert_int_equal(a.to, 1);
	assert_int_equal(r.st.active, 1);
	assert_int_equal(a.hold, 1);
	assert_true(a.rate_before > 999 && a.rate_before < 1001);
	assert_true(a.rate_after > 1039 && a.rate_after < 1041);
	assert_int_equal(a.backoff_ms, 20 * BALANCE_TICK_MS);
	/* still saturated: the next spread waits out the back-off */
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	worker_set(&r, 1, 0, 0, 0);
	rate_set(&r, 1000);
	a = tick_until_change(&r, 100, &ticks);
	assert_int_equal(a.verdict, BALANCE_SPREAD);
	assert_int_equal(ticks, 20);
	/* it does not pay again: the back-off doubles */
	worker_set(&r, 1, SATURATED, SATURATED, 3);
	a = tick_until_change(&r, 10, &ticks);
	assert_int_equal(a.verdict, BALANCE_UNDO);
	assert_int_equal(a.backoff_ms, 40 * BALANCE_TICK_MS);
}

static void test_backoff_doubles_up_to_a_bound(void **state)
{
	struct rig r;
	spread_once(&r);
	rate_set(&r, 1000);
	unsigned last = 0;
	for (int round = 0; round < 12; round++) {
		int ticks;
		worker_set(&r, 1, SATURATED, SATURATED, 3);
		struct balance_action a = tick_until_change(&r, 10, &ticks);
		assert_int_equal(a.verdict, BALANCE_UNDO);
		assert_true(a.backoff_ms >= last);
		assert_true(a.backoff_ms <= 2 * 600 * BALANCE_TICK_MS);
		last = a.backoff_ms;
		worker_set(&r, 1, 0, 0, 0);
		a = tick_until_change(&r, 2000, &ticks);
		assert_int_equal(a.verdict, BALANCE_SPREAD);
		assert_int_equal((unsigned)ticks * BALANCE_TICK_MS, last);
	}
	assert_int_equal(last, 640 * BALANCE_TICK_MS); /* 20 doubled past 600 once, no more */
}

static void test_gather_when_load_falls(void **state)
{
	struct rig r;
	spread_once(&r);
	rate_set(&r, 1100);
	int ticks;
	tick_until_change(&r, 4, &ticks); /* the trial pays */
	assert_int_equal(r.st.active, 2);
	/* 0.25 + 0.25 of a CPU: one worker carries that */
	worker_set(&r, 0, 0.25, 0.25, 3);
	worker_set(&r, 1, 0.25, 0.25, 3);
	struct balance_action a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_GATHER);
	assert_int_equal(a.from, 2);
	assert_int_equal(a.to, 1);
	assert_int_equal(a.hold, 1);
	assert_true(a.busy > 0.49 && a.busy < 0.51);
	/* 0.35 + 0.35 would be more than one worker at BUSY_GATHER: stays */
	rig_init(&r, 2, 0.4);
	r.st.active = 2;
	worker_set(&r, 0, 0.35, 0.35, 3);
	worker_set(&r, 1, 0.35, 0.35, 3);
	rate_set(&r, 1000);
	for (int i = 0; i < 10; i++)
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
}

static void test_hold_back_after_a_change(void **state)
{
	struct rig r;
	rig_init(&r, 3, 0.4);
	r.st.active = 3;
	rate_set(&r, 1000);
	for (unsigned i = 0; i < 3; i++)
		worker_set(&r, i, 0, 0, 2);
	struct balance_action a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_GATHER);
	assert_int_equal(a.to, 2);
	/* the next tick mixes before and after the move: no decision, however idle */
	a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_KEEP);
	assert_int_equal(a.to, 2);
	assert_int_equal(a.hold, 0);
	a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_GATHER);
	assert_int_equal(a.to, 1);
	/* after a spread too: the tick after it is no trial tick and no gather */
	spread_once(&r);
	worker_set(&r, 0, 0, 0, 3);
	worker_set(&r, 1, 0, 0, 3);
	a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_KEEP);
	assert_int_equal(r.st.trial_ticks, 0);
}

static void test_every_worker_in_use(void **state)
{
	struct rig r;
	rig_init(&r, 2, 0.4);
	r.st.active = 2;
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	worker_set(&r, 1, SATURATED, SATURATED, 6);
	rate_set(&r, 1000);
	for (int i = 0; i < 10; i++) {
		struct balance_action a = tick(&r);
		assert_int_equal(a.verdict, BALANCE_KEEP);
		assert_int_equal(a.to, 2);
	}
	/* with two of three active, one saturated and one not: not all saturated, no spread */
	rig_init(&r, 3, 0.4);
	r.st.active = 2;
	worker_set(&r, 0, SATURATED, SATURATED, 6);
	worker_set(&r, 1, 0.5, 0.5, 6);
	for (int i = 0; i < 10; i++)
		assert_int_equal(tick(&r).verdict, BALANCE_KEEP);
}

static void test_no_clients_starts_afresh(void **state)
{
	struct rig r;
	spread_once(&r);
	r.sm.clients = 0;
	struct balance_action a = tick(&r);
	assert_int_equal(a.verdict, BALANCE_STOP);
	assert_int_equal(a.to, 1);
	assert_int_equal(a.next_tick_ms, 0);
	assert_int_equal(r.st.active, 1);
	assert_false(r.st.trial);
	assert_int_equal(r.st.backoff, 0);
	assert_int_equal(r.st.saturated_ticks, 0);
}

static void test_quiet_clients_are_looked_at_rarely(void **state)
{
	struct rig r;
	rig_init(&r, 2, 0.4);
	worker_set(&r, 0, 0, 0, 1);
	rate_set(&r, 0);
	assert_int_equal(tick(&r).next_tick_ms, 1000);
	rate_set(&r, 10);
	assert_int_equal(tick(&r).next_tick_ms, BALANCE_TICK_MS);
	/* no requests, but a move to settle: the usual tick */
	spread_once(&r);
	rate_set(&r, 0);
	assert_int_equal(tick(&r).next_tick_ms, BALANCE_TICK_MS);
	/* a tick of no length counts no requests/s */
	rig_init(&r, 2, 0.4);
	rate_set(&r, 1000);
	r.sm.elapsed_ns = 0;
	worker_set(&r, 0, 0, 0, 1);
	assert_int_equal(tick(&r).next_tick_ms, 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spread_when_saturated_and_cpu_idle),
	    cmocka_unit_test(test_saturation_must_last),
	    cmocka_unit_test(test_spread_for_pipelined_clients),
	    cmocka_unit_test(test_no_spread_without_idle_cpu),
	    cmocka_unit_test(test_no_spread_with_one_connection),
	    cmocka_unit_test(test_one_worker_never_moves),
	    cmocka_unit_test(test_spread_that_pays_stays),
	    cmocka_unit_test(test_no_idle_said_again_after_a_spread),
	    cmocka_unit_test(test_undo_spread_that_did_not_pay),
	    cmocka_unit_test(test_backoff_doubles_up_to_a_bound),
	    cmocka_unit_test(test_gather_when_load_falls),
	    cmocka_unit_test(test_hold_back_after_a_change),
	    cmocka_unit_test(test_every_worker_in_use),
	    cmocka_unit_test(test_no_clients_starts_afresh),
	    cmocka_unit_test(test_quiet_clients_are_looked_at_rarely),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
