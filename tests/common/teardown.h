/*
 * teardown.h - what one client's teardown costs the others: client A (a forked process)
 * holds n single-page ranges and goes away (closes, is killed, or is dropped by the daemon
 * for a broken frame) while client B, on the same worker, loops alloc+free and times each
 * round trip until every range of A is back. Shared by the integration test
 * (test_service_teardown) and the bench (tests/bench/registry).
 */
#ifndef VAD_TEST_TEARDOWN_H
#define VAD_TEST_TEARDOWN_H

#include <stdbool.h>
#include <stdint.h>

#include "harness.h"

/* How client A goes away. */
enum vt_teardown_how {
	VT_TEARDOWN_CLOSE, /* closes its socket */
	VT_TEARDOWN_KILL,  /* SIGKILL */
	VT_TEARDOWN_DROP,  /* sends a frame above max_frame: the daemon drops the session */
};

struct vt_teardown_result {
	uint64_t rounds;	 /* B's alloc+free round trips while A's ranges came back */
	uint64_t max_ns, p99_ns; /* of those */
	uint64_t max_at_ns;	 /* when the worst one started, from A's going */
	uint64_t back_ns;	 /* from A's going until busy bytes were at the baseline again */
	/* Polls that found A's ranges partly back with one of B's rounds done since the last
	 * poll: B was served while the teardown was under way, not after it. */
	unsigned partial_polls;
	unsigned checks, checks_failed; /* consistency checks run between B's rounds */
	char check_msg[256];		/* the first failure's sentence */
};

/* Run one teardown of n ranges against the running daemon d (B's baseline: busy bytes
 * before A started). checks: run `vactl check`'s operation between B's rounds (not timed).
 * timeout_ms: how long the ranges may take to come back. Returns 0, or -1 with the reason
 * printed. */
int vt_teardown_run(const struct vt_daemon *d, uint64_t n, enum vt_teardown_how how, bool checks,
		    int timeout_ms, struct vt_teardown_result *out);

/* The name of a teardown kind ("close", "kill", "drop"). */
const char *vt_teardown_name(enum vt_teardown_how how);

/* Allocate n single-page ranges on r in batches of up to batch; 0, or -1 printed. */
struct vt_raw;
int vt_raw_alloc_many(struct vt_raw *r, uint64_t n, unsigned batch);

#endif
