/*
 * balance.c - the adaptive worker balance's decisions, one tick at a time.
 *
 * Every tick while clients are connected, from the workers' scheduler statistics: the active
 * workers all ran RUN_SATURATED of the time (they are short of CPU, not of a turn on one), or
 * all wanted a CPU BUSY_PIPELINED of the time with clients that pipeline (PIPELINED_READS
 * requests per read), for SATURATED_TICKS ticks: wake one more and give it its share of their
 * connections, on trial: unless the next TRIAL_TICKS serve TRIAL_GAIN times the requests/s of
 * before, they go back and spreading waits a back-off that doubles while the same clients
 * stay. Together busy for less than what one worker fewer could carry at BUSY_GATHER each: the
 * last active one hands its connections to the others. A lightly loaded daemon thus runs on
 * one worker, one wakeup per round of ready connections and the other CPUs left to its
 * clients; a busy one spreads when that serves more.
 */
#include "balance.h"

#include <stddef.h>

/* A worker that ran this share of the tick is out of CPU, not waiting for a turn on one. */
#define RUN_SATURATED 0.85
/* One saturated tick can be a burst: this many in a row before another worker is tried. */
#define SATURATED_TICKS 2
/* Or busy (ran + waited) this share of the tick with pipelined clients: more work per read. */
#define BUSY_PIPELINED 0.5
/* Requests per read at least this: the clients pipeline, a second worker has work to take. */
#define PIPELINED_READS 2.0
/* A worker with fewer connections than this has nothing to split. */
#define SPLIT_MIN_CONNS 2
/* Active workers busy less than (active - 1) x this together: one fewer carries them. */
#define BUSY_GATHER 0.6
/* After a spread, this many ticks of requests/s to compare with before it (noise averages). */
#define TRIAL_TICKS 3
/* The spread stays if it raised requests/s this much; less is within the noise. */
#define TRIAL_GAIN 1.05
/* A spread that did not pay is not tried again for this many ticks (2 s), */
#define BACKOFF_TICKS 20
/* doubling up to this many (one minute) while the same clients stay. */
#define BACKOFF_MAX_TICKS 600
/* The tick after a move mixes before and after it: wait this many before deciding again. */
#define HOLD_TICKS 1
/* Connected clients that sent nothing: look once a second, an idle daemon wakes no CPU. */
#define BALANCE_IDLE_MS 1000
/* idle_min before a saturated tick measured it: more than any machine has. */
#define IDLE_UNKNOWN 1e9
/* idle_min below spread_idle by more than rounding: too few idle CPUs. */
#define IDLE_EPSILON 1e-9

void balance_init(struct balance_state *st, unsigned n_workers, double spread_idle)
{
	*st = (struct balance_state){
	    .n_workers = n_workers,
	    .active = 1,
	    .idle_min = IDLE_UNKNOWN,
	    .spread_idle = spread_idle,
	    .backoff_len = BACKOFF_TICKS,
	};
}

void balance_use_all(struct balance_state *st)
{
	st->active = st->n_workers;
}

unsigned balance_share(const struct balance_action *a, unsigned n_conns)
{
	return a->to ? n_conns / a->to : 0;
}

/* Forget the saturated ticks counted so far (and what they measured). */
static void saturation_reset(struct balance_state *st)
{
	st->saturated_ticks = 0;
	st->before_sum = 0;
	st->idle_min = IDLE_UNKNOWN;
}

/* Nobody to serve: the next clients start afresh on one worker. */
static void forget_clients(struct balance_state *st)
{
	st->active = 1;
	saturation_reset(st);
	st->idle_short_said = false;
	st->trial = false;
	st->backoff = 0;
	st->backoff_len = BACKOFF_TICKS;
}

/* What the active workers did over the tick. */
struct active_load {
	bool all_saturated, all_busy, can_split, pipelined;
	double busy; /* their load summed */
};

static struct active_load active_load(const struct balance_state *st,
				      const struct balance_sample *sm)
{
	struct active_load al = {.all_saturated = true, .all_busy = true};
	uint64_t reads = 0, handled = 0;
	for (unsigned i = 0; i < st->active; i++) {
		const struct balance_worker_sample *w = &sm->workers[i];
		reads += w->reads;
		handled += w->requests;
		if (w->ran < RUN_SATURATED)
			al.all_saturated = false;
		if (w->load < BUSY_PIPELINED)
			al.all_busy = false;
		if (w->n_conns >= SPLIT_MIN_CONNS)
			al.can_split = true;
		al.busy += w->load;
	}
	/* Clients that send one request at a time bring a wakeup's worth of work per read: a
	 * second worker only splits those wakeups (more of them, each as costly) unless one
	 * worker has run out of CPU; waiting for a CPU other threads hold is no reason, a
	 * second worker would compete for the same CPUs. Pipelined clients bring more per
	 * read: try. */
	al.pipelined = reads && (double)handled >= PIPELINED_READS * (double)reads;
	return al;
}

/* The spread on trial has served another tick: keep it only if it served more (with many
 * clients that each send one small request at a time, a second worker mostly adds
 * wakeups). */
static void trial_tick(struct balance_state *st, double rate, struct balance_action *a)
{
	st->trial_sum += rate;
	if (++st->trial_ticks < TRIAL_TICKS)
		return;
	double after = st->trial_sum / st->trial_ticks;
	double before = st->trial_before;
	st->trial = false;
	saturation_reset(st);
	if (after < before * TRIAL_GAIN) {
		st->active = a->from - 1;
		st->hold = HOLD_TICKS;
		st->backoff = st->backoff_len;
		a->verdict = BALANCE_UNDO;
		a->rate_before = before;
		a->rate_after = after;
		a->backoff_ms = st->backoff * BALANCE_TICK_MS;
		if (st->backoff_len < BACKOFF_MAX_TICKS)
			st->backoff_len *= 2;
	} else {
		st->backoff_len = BACKOFF_TICKS;
	}
}

/* Saturated long enough: another worker, if the machine has a CPU nobody uses. */
static void try_spread(struct balance_state *st, const struct active_load *al,
		       struct balance_action *a)
{
	a->pipelined = !al->all_saturated;
	/* Another worker can only take CPU that nobody uses: with less idle than spread_idle
	 * in any of the saturated ticks it would take turns with the clients (and the busy
	 * workers) on the same CPUs, each request costing more wakeups, and even the trial
	 * costs them a tail of scheduler delays. */
	if (st->idle_min < st->spread_idle - IDLE_EPSILON) {
		a->verdict = BALANCE_NO_IDLE_CPU;
		a->idle_min = st->idle_min;
		a->first_no_idle = !st->idle_short_said;
		st->idle_short_said = true;
		saturation_reset(st);
		return;
	}
	a->verdict = BALANCE_SPREAD;
	st->active = a->from + 1;
	st->hold = HOLD_TICKS;
	st->trial = true;
	st->trial_sum = 0;
	st->trial_ticks = 0;
	st->trial_before = st->before_sum / st->saturated_ticks;
	saturation_reset(st);
	st->idle_short_said = false;
}

struct balance_action balance_tick(struct balance_state *st, const struct balance_sample *sm)
{
	struct balance_action a = {.verdict = BALANCE_KEEP, .from = st->active};
	double rate = sm->elapsed_ns ? (double)sm->requests * 1e9 / (double)sm->elapsed_ns : 0;
	if (sm->clients == 0) {
		forget_clients(st);
		a.verdict = BALANCE_STOP;
		a.to = st->active;
		a.hold = st->hold;
		return a; /* next_tick_ms 0: the next client arms the timer again */
	}
	unsigned k = st->active;
	struct active_load al = active_load(st, sm);
	if (al.can_split && (al.all_saturated || (al.all_busy && al.pipelined))) {
		st->saturated_ticks++;
		st->before_sum += rate;
		if (sm->idle >= 0 && sm->idle < st->idle_min)
			st->idle_min = sm->idle; /* unknown: no objection */
	} else {
		saturation_reset(st);
	}
	if (st->backoff)
		st->backoff--;
	if (st->hold) {
		st->hold--; /* the last tick included a move */
	} else if (st->trial) {
		trial_tick(st, rate, &a);
	} else if (st->saturated_ticks >= SATURATED_TICKS && k < st->n_workers && !st->backoff) {
		try_spread(st, &al, &a);
	} else if (k > 1 && al.busy < (k - 1) * BUSY_GATHER) {
		a.verdict = BALANCE_GATHER;
		a.busy = al.busy;
		st->active = k - 1;
		st->hold = HOLD_TICKS;
	}
	a.to = st->active;
	a.hold = st->hold;
	/* Connected clients that sent nothing: look again in a second, not ten times (an idle
	 * daemon should not wake a CPU for nothing); a load that starts meanwhile waits at most
	 * that long for its first look. */
	bool quiet = rate == 0 && !st->trial && !st->hold && st->active == 1;
	a.next_tick_ms = quiet ? BALANCE_IDLE_MS : BALANCE_TICK_MS;
	return a;
}
