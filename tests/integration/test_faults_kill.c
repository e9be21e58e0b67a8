/*
 * test_faults_kill.c - processes dying at the worst moment.
 *
 * Clients: rounds of child processes that pipeline allocations (libvad threads, batches,
 * shares and attaches, and a raw connection with hundreds of requests in flight) are killed
 * with SIGKILL at a random instant; after each round, once the daemon has noticed, busy bytes
 * are back to exactly the baseline (after a purge), so no range was lost or freed twice, and
 * every few rounds the daemon's invariant check passes.
 *
 * The daemon: killed with SIGKILL while clients hammer it and its stats thread writes every
 * 100 ms; each client's call returns VAD_EGONE with a sentence naming the daemon, the stats
 * database passes PRAGMA integrity_check, and a daemon restarted on the same socket serves
 * the clients once they reconnect.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "hostile_util.h"
#include "vtassert.h"

#define PAGE	      4096u
#define CHILDREN      4
#define CHILD_THREADS 3
#define REPLY_TIMEOUT vt_timeout_ms(10000)

/* ---- clients killed mid-flight ----------------------------------------------------------- */

struct child_thread {
	vad_client *c;
	unsigned seed;
	int out; /* report fd, or -1 */
};

static void *child_worker(void *arg)
{
	struct child_thread *t = arg;
	void *held[64];
	int n = 0;
	for (unsigned i = 0;; i++) {
		unsigned r = rand_r(&t->seed);
		if (n < 64 && (n < 8 || r % 3)) {
			if (r % 5 == 0 && n <= 56) {
				size_t sizes[8];
				for (int k = 0; k < 8; k++)
					sizes[k] = (size_t)(1 + (r >> k) % 16) * PAGE;
				if (vad_alloc_batch(t->c, 8, sizes, 0, held + n) == 0)
					n += 8;
			} else if (vad_alloc(t->c, (size_t)(1 + r % 64) * PAGE, 0, &held[n]) == 0) {
				n++;
			}
		} else if (n > 0) {
			int k = (int)(r % (unsigned)n);
			if (r % 7 == 0) {
				/* Share and attach it to ourselves: two references to drop. */
				char tok[VAD_TOKEN_LEN + 1];
				void *p;
				size_t sz;
				if (n < 64 && vad_share(t->c, held[k], tok) == 0 &&
				    vad_attach(t->c, tok, &p, &sz) == 0)
					held[n++] = p;
			} else {
				vad_free(t->c, held[k]);
				held[k] = held[--n];
			}
		}
		if (i == 32 && t->out >= 0)
			vt_pipe_send(t->out, "ready");
	}
	return NULL;
}

/* A raw connection with hundreds of allocations in flight, reading replies only now and
 * then (so many are still unanswered when the kill comes). */
static void *child_pipeliner(void *arg)
{
	const char *socket_path = arg;
	struct vt_raw r;
	if (vt_raw_connect(&r, socket_path) != 0 || vt_raw_hello(&r, "pipeliner") != 0)
		return NULL;
	for (;;) {
		for (int i = 0; i < 300; i++) {
			struct vt_req q;
			vt_req_alloc(&q, NULL, (uint64_t)(1 + i % 8) * PAGE, 0,
				     (uint32_t)(1 + i % 3));
			if (!vt_raw_send_request(&r, &q.req))
				return NULL;
		}
		for (int i = 0; i < 200; i++) {
			Vad__Response *resp = NULL;
			if (vt_raw_recv(&r, &resp, 1000) != VT_RAW_RESPONSE)
				return NULL;
			vt_raw_response_free(resp);
		}
	}
}

static void killed_child(const char *socket_path, int out, unsigned seed)
{
	vad_client *c = NULL;
	VT_CHILD_CHECK(vad_connect(socket_path, "doomed", &c) == 0, "%s", vad_last_error(NULL));
	struct child_thread t[CHILD_THREADS];
	pthread_t th[CHILD_THREADS + 1];
	for (int i = 0; i < CHILD_THREADS; i++) {
		t[i] = (struct child_thread){
		    .c = c, .seed = seed * 31 + (unsigned)i, .out = i == 0 ? out : -1};
		VT_CHILD_CHECK(pthread_create(&th[i], NULL, child_worker, &t[i]) == 0, "thread");
	}
	VT_CHILD_CHECK(
	    pthread_create(&th[CHILD_THREADS], NULL, child_pipeliner, (void *)socket_path) == 0,
	    "thread");
	for (;;)
		pause(); /* until SIGKILL */
}

static void test_clients_killed_mid_flight(void **state)
{
	(void)state;
	struct vt_daemon d;
	assert_int_equal(
	    0, vt_daemon_setup(&d, "stats_interval = 1h\n", "[arena default]\nsize = 1G\n"));
	struct vt_baseline base;
	assert_int_equal(0, vt_baseline_take(&d, &base));
	int rounds = vt_scale(20);
	unsigned seed = (unsigned)time(NULL);
	printf("killing %d clients per round for %d rounds (seed %u)\n", CHILDREN, rounds, seed);

	for (int round = 0; round < rounds; round++) {
		pid_t pids[CHILDREN];
		int pipes[CHILDREN][2];
		for (int i = 0; i < CHILDREN; i++) {
			assert_int_equal(0, pipe(pipes[i]));
			fflush(NULL);
			pids[i] = fork();
			assert_true(pids[i] >= 0);
			if (pids[i] == 0) {
				close(pipes[i][0]);
				killed_child(d.socket_path, pipes[i][1],
					     seed + (unsigned)(round * CHILDREN + i));
			}
			close(pipes[i][1]);
		}
		for (int i = 0; i < CHILDREN; i++) {
			char line[64];
			if (vt_pipe_recv(pipes[i][0], line, sizeof(line), REPLY_TIMEOUT) < 0)
				fail_msg("round %d: child %d never got going", round, i);
			close(pipes[i][0]);
		}
		/* A duration, not a wait: the kill lands at a random point of the children's
		 * requests (all are going, as their pipes said). */
		vt_sleep_ms((int)(rand_r(&seed) % 40));
		for (int i = 0; i < CHILDREN; i++)
			kill(pids[i], SIGKILL);
		for (int i = 0; i < CHILDREN; i++) {
			int st;
			assert_int_equal(pids[i], waitpid(pids[i], &st, 0));
			assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		}
		if (vt_baseline_check(&d, &base, vt_timeout_ms(10000)) != 0)
			fail_msg("round %d: the daemon did not return to its baseline", round);
	}
	struct vad_stats s;
	assert_int_equal(0, vt_stats(&d, &s));
	printf("after %d rounds: %llu allocations and %llu frees in the daemon's lifetime, busy "
	       "%llu bytes\n",
	       rounds, (unsigned long long)s.allocs, (unsigned long long)s.frees,
	       (unsigned long long)s.busy_bytes);
	assert_true(s.allocs > (uint64_t)rounds * CHILDREN);
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

/* ---- the daemon killed under load -------------------------------------------------------- */

struct loader {
	pthread_t th;
	vad_client *c;
	int rc;		   /* the first failure */
	char msg[256];	   /* its sentence */
	unsigned long ops; /* atomic: batches done */
	int done;	   /* atomic */
};

static void *loader_main(void *arg)
{
	struct loader *l = arg;
	for (;;) {
		void *p[4];
		size_t sizes[4] = {PAGE, 2 * PAGE, 3 * PAGE, 16 * PAGE};
		int rc = vad_alloc_batch(l->c, 4, sizes, 0, p);
		if (rc == 0)
			rc = vad_free_batch(l->c, 4, p);
		if (rc != 0) {
			l->rc = rc;
			snprintf(l->msg, sizeof(l->msg), "%s", vad_last_error(l->c));
			break;
		}
		__atomic_store_n(&l->ops, l->ops + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&l->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* PRAGMA integrity_check on the stats database; 0 if "ok", 1 if there is none yet. */
static int db_integrity(const char *path)
{
	if (access(path, F_OK) != 0)
		return 1;
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "cannot open %s: %s\n", path, db ? sqlite3_errmsg(db) : "?");
		sqlite3_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		const char *res = (const char *)sqlite3_column_text(st, 0);
		if (res && strcmp(res, "ok") == 0)
			rc = 0;
		else
			fprintf(stderr, "integrity_check of %s: %s\n", path, res ? res : "?");
	} else {
		fprintf(stderr, "integrity_check of %s: %s\n", path, sqlite3_errmsg(db));
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return rc;
}

/* The id of the newest snapshot in the stats database at path (0: none yet), or -1 when it
 * cannot be read now (the daemon writing it holds it busy for a moment). */
static int64_t newest_snapshot(const char *path)
{
	if (access(path, F_OK) != 0)
		return 0;
	sqlite3 *db = NULL;
	int64_t id = -1;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
		sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(db, "SELECT coalesce(max(id), 0) FROM snapshot", -1, &st,
				       NULL) == SQLITE_OK &&
		    sqlite3_step(st) == SQLITE_ROW)
			id = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return id;
}

static void test_daemon_killed_under_load(void **state)
{
	(void)state;
	enum { LOADERS = 4 };
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_setup(&d, "stats_interval = 100ms\n", NULL));
	int restarts = vt_mode() == VT_MODE_NORMAL ? 3 : 2;
	struct loader l[LOADERS];
	memset(l, 0, sizeof(l));
	for (int i = 0; i < LOADERS; i++)
		assert_int_equal(0, vt_connect(&d, "loader", &l[i].c));

	for (int round = 0; round < restarts; round++) {
		int64_t snap0 = -1;
		uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
		while ((snap0 = newest_snapshot(d.stats_db)) < 0 && vt_now_ns() < deadline)
			vt_sleep_ms(5);
		for (int i = 0; i < LOADERS; i++) {
			l[i].rc = 0;
			l[i].ops = 0;
			l[i].msg[0] = '\0';
			__atomic_store_n(&l[i].done, 0, __ATOMIC_RELEASE);
			assert_int_equal(0, pthread_create(&l[i].th, NULL, loader_main, &l[i]));
		}
		/* Killed under load, with the stats thread writing: every loader has done many
		 * batches and two snapshots were written since the loaders started. */
		deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
		for (;;) {
			unsigned long least = ULONG_MAX;
			for (int i = 0; i < LOADERS; i++) {
				unsigned long ops = __atomic_load_n(&l[i].ops, __ATOMIC_ACQUIRE);
				least = ops < least ? ops : least;
			}
			if (least >= (unsigned long)vt_scale(200) &&
			    newest_snapshot(d.stats_db) >= snap0 + 2)
				break;
			if (vt_now_ns() >= deadline)
				fail_msg("round %d: the loaders did %lu batches at least and the "
					 "newest snapshot is %lld (%lld when they started)",
					 round, least, (long long)newest_snapshot(d.stats_db),
					 (long long)snap0);
			vt_sleep_ms(5);
		}
		assert_int_equal(0, vt_daemon_signal(&d, SIGKILL));
		deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
		while (vt_daemon_alive(&d))
			assert_true(vt_now_ns() < deadline);
		assert_true(WIFSIGNALED(d.exit_status));

		for (int i = 0; i < LOADERS; i++) {
			while (!__atomic_load_n(&l[i].done, __ATOMIC_ACQUIRE)) {
				if (vt_now_ns() >= deadline)
					fail_msg("loader %d still blocked after the daemon died",
						 i);
				vt_sleep_ms(5);
			}
			pthread_join(l[i].th, NULL);
			printf("round %d loader %d: %lu batches, then %d (%s): \"%s\"\n", round, i,
			       l[i].ops, l[i].rc, vad_strerror(l[i].rc), l[i].msg);
			assert_int_equal(VAD_EGONE, l[i].rc);
			assert_true(vt_contains(l[i].msg, "daemon"));
			/* The dead connection stays dead, quickly and clearly. */
			void *p;
			VT_ASSERT_ERR(l[i].c, VAD_EGONE, vad_alloc(l[i].c, PAGE, 0, &p));
		}
		/* It exists: snapshots were written above. */
		if (db_integrity(d.stats_db) != 0)
			fail_msg("round %d: the stats database is damaged after SIGKILL", round);
		printf("round %d: stats database passes integrity_check\n", round);

		/* Restart on the same socket (the dead daemon left its socket file). */
		assert_int_equal(0, vt_daemon_start(&d));
		struct vad_stats s;
		assert_int_equal(0, vt_stats(&d, &s));
		assert_int_equal(0, s.busy_bytes);
		for (int i = 0; i < LOADERS; i++) {
			vad_close(l[i].c);
			assert_int_equal(0, vt_connect(&d, "loader-again", &l[i].c));
			void *p;
			VT_ASSERT_OK(l[i].c, vad_alloc(l[i].c, PAGE, 0, &p));
			memset(p, 0x3c, PAGE);
			VT_ASSERT_OK(l[i].c, vad_free(l[i].c, p));
		}
	}
	for (int i = 0; i < LOADERS; i++)
		vad_close(l[i].c);
	assert_int_equal(0, vt_daemon_stop(&d));
	int db = db_integrity(d.stats_db);
	if (db < 0)
		fail_msg("the stats database is damaged after the restarts");
	printf("after a clean stop: stats database %s\n",
	       db == 0 ? "passes integrity_check" : "not created (skipped)");
	vt_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clients_killed_mid_flight),
	    cmocka_unit_test(test_daemon_killed_under_load),
	};
	return cmocka_run_group_tests_name("faults_kill", tests, NULL, NULL);
}
