/*
 * balance.h - the adaptive worker balance's decisions (worker_balance = adaptive): how many
 * workers serve, from what the server measured over the last tick. A pure function of its
 * state and one sample: no I/O, no clock, no locks, no logging. server.c reads the figures
 * (scheduler statistics, request counters, /proc/stat), runs the timer, moves the connections
 * the action asks for and logs it.
 */
#ifndef VAD_BALANCE_H
#define VAD_BALANCE_H

#include <stdbool.h>
#include <stdint.h>

/* How often the balancer looks at the workers' load while clients send requests (ms). */
#define BALANCE_TICK_MS 100

/* What the balancer remembers between ticks. */
struct balance_state {
	unsigned n_workers;	  /* workers there are (fixed) */
	unsigned active;	  /* new and moved connections go to workers 0..active-1 */
	unsigned hold;		  /* ticks to wait after a change before deciding again */
	unsigned saturated_ticks; /* ticks in a row that called for a spread */
	double before_sum;	  /* requests/s summed over the saturated ticks */
	double idle_min;	  /* fewest idle CPUs in a saturated tick (huge: none measured) */
	double spread_idle;	  /* worker_spread_idle: idle CPUs a spread needs */
	bool idle_short_said;	  /* a tick already said that saturated workers had no idle CPU */
	bool trial;		  /* the last spread is on trial: does it raise requests/s? */
	double trial_before;	  /* requests/s before the spread on trial */
	double trial_sum;	  /* requests/s summed over the trial's ticks so far */
	unsigned trial_ticks;	  /* ticks of the trial so far */
	unsigned backoff;	  /* ticks before a spread may be tried again */
	unsigned backoff_len;	  /* the next back-off after a spread that did not pay */
};

/* One worker over the last tick. */
struct balance_worker_sample {
	double load;	   /* share of the tick it wanted a CPU (ran or waited runnable) */
	double ran;	   /* share of the tick it ran */
	unsigned n_conns;  /* connections it owns now */
	uint64_t reads;	   /* reads that brought requests, during the tick */
	uint64_t requests; /* requests it handled during the tick */
};

/* What server.c measured over the last tick. */
struct balance_sample {
	unsigned clients;			     /* connected clients now */
	uint64_t requests;			     /* requests the daemon handled in the tick */
	uint64_t elapsed_ns;			     /* length of the tick */
	double idle;				     /* idle CPUs on the machine; < 0: unknown */
	const struct balance_worker_sample *workers; /* n_workers of them */
};

enum balance_verdict {
	BALANCE_KEEP,	    /* the same active workers */
	BALANCE_STOP,	    /* no clients: back to one worker; stop ticking until the next */
	BALANCE_SPREAD,	    /* wake worker from: each active one hands it balance_share() */
	BALANCE_GATHER,	    /* the load fits in one worker fewer: the last one hands over */
	BALANCE_UNDO,	    /* the spread on trial did not raise requests/s: one fewer again */
	BALANCE_NO_IDLE_CPU /* saturated, but the machine has too few idle CPUs to spread */
};

/* The balancer's decision for one tick. Workers from `to` on hand over all they have. */
struct balance_action {
	enum balance_verdict verdict;
	unsigned from, to;     /* active workers before and after */
	unsigned hold;	       /* ticks after this one before the next decision */
	unsigned next_tick_ms; /* when to look again; 0: stop ticking */
	bool pipelined;	       /* spread (or no idle CPU): busy with pipelined clients, not
				* saturated */
	bool first_no_idle;    /* NO_IDLE_CPU: the first since the last spread or reset */
	double busy;	       /* GATHER: the active workers' load summed (CPUs) */
	double idle_min;       /* NO_IDLE_CPU: fewest idle CPUs over the saturated ticks */
	double rate_before;    /* UNDO: requests/s before the spread */
	double rate_after;     /* UNDO: requests/s during its trial */
	unsigned backoff_ms;   /* UNDO: how long before a spread is tried again */
};

/* Start with one active worker of n_workers; spread_idle is worker_spread_idle. */
void balance_init(struct balance_state *st, unsigned n_workers, double spread_idle);

/* Every worker serves from now on (the balancer is off). */
void balance_use_all(struct balance_state *st);

/* Decide one tick from its sample (sample->workers has st->n_workers entries). */
struct balance_action balance_tick(struct balance_state *st, const struct balance_sample *sample);

/* SPREAD: how many of its n_conns connections an active worker hands the woken one. */
unsigned balance_share(const struct balance_action *a, unsigned n_conns);

#endif
