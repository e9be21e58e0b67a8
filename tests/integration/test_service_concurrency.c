/*
 * test_service_concurrency.c - many requests in flight: threads pipelining through one
 * vad_client, many processes with their own connections, many connections in one
 * process, and shares handed between threads while their owners free them. Every range
 * is written and verified by its owner (two live ranges that overlapped would corrupt
 * one another), and busy bytes return to the baseline at the end.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "vtassert.h"

#define PAGE	      4096u
#define CHILD_TIMEOUT vt_timeout_ms(60000)
#define WINDOW	      8 /* live ranges per worker */

struct worker {
	vad_client *c; /* shared, or the worker's own when own_connection */
	const char *socket_path;
	int id;
	int iterations;
	bool batch; /* use vad_alloc_batch/vad_free_batch */
	bool own_connection;
	uint64_t rng;
	char error[512]; /* first failure, empty when all went well */
	uint64_t ops;
};

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define WORKER_FAIL(w, ...)                                                                        \
	do {                                                                                       \
		snprintf((w)->error, sizeof((w)->error), __VA_ARGS__);                             \
		goto out;                                                                          \
	} while (0)

/* Allocate, write, verify and free in a window of live ranges; any failure stops the
 * worker with a message. */
static void *worker_run(void *arg)
{
	struct worker *w = arg;
	void *live[WINDOW] = {NULL};
	size_t sizes[WINDOW] = {0};
	uint64_t seeds[WINDOW] = {0};
	vad_client *c = w->c;
	if (w->own_connection) {
		int rc = vad_connect(w->socket_path, "worker", &c);
		if (rc != 0)
			WORKER_FAIL(w, "worker %d: vad_connect: %s", w->id, vad_last_error(NULL));
	}
	for (int it = 0; it < w->iterations; it++) {
		int slot = (int)(next_rand(&w->rng) % WINDOW);
		if (live[slot]) {
			ssize_t bad = vt_check_pattern(live[slot], sizes[slot], seeds[slot]);
			if (bad >= 0)
				WORKER_FAIL(w,
					    "worker %d: range %p (%zu bytes) changed at byte %zd: "
					    "another live range overlaps it",
					    w->id, live[slot], sizes[slot], bad);
			int rc = vad_free(c, live[slot]);
			if (rc != 0)
				WORKER_FAIL(w, "worker %d: vad_free: %d %s", w->id, rc,
					    vad_last_error(c));
			live[slot] = NULL;
			w->ops++;
			continue;
		}
		size_t size = PAGE * (1 + next_rand(&w->rng) % 16) - next_rand(&w->rng) % 64;
		size_t align = next_rand(&w->rng) % 4 == 0 ? 64 * 1024 : 0;
		uint64_t seed = ((uint64_t)w->id << 32) | (uint64_t)it;
		int rc;
		if (w->batch) {
			/* fill every free slot from this one on with one request */
			int n = 0;
			int idx[WINDOW];
			size_t bsizes[WINDOW];
			void *out[WINDOW];
			for (int s = slot; s < WINDOW && !live[s]; s++) {
				idx[n] = s;
				bsizes[n] = size + (size_t)n * PAGE;
				n++;
			}
			rc = vad_alloc_batch(c, (size_t)n, bsizes, align, out);
			if (rc != 0)
				WORKER_FAIL(w, "worker %d: vad_alloc_batch(%d): %d %s", w->id, n,
					    rc, vad_last_error(c));
			for (int k = 0; k < n; k++) {
				live[idx[k]] = out[k];
				sizes[idx[k]] = bsizes[k];
				seeds[idx[k]] = seed ^ ((uint64_t)k << 24);
				vt_fill_pattern(out[k], bsizes[k], seeds[idx[k]]);
			}
		} else {
			void *p;
			rc = vad_alloc(c, size, align, &p);
			if (rc != 0)
				WORKER_FAIL(w, "worker %d: vad_alloc(%zu, %zu): %d %s", w->id, size,
					    align, rc, vad_last_error(c));
			if (align) {
				struct vad_range r;
				rc = vad_range_info(c, p, &r);
				if (rc != 0 || r.offset % align != 0)
					WORKER_FAIL(
					    w, "worker %d: range at offset %llu not aligned to %zu",
					    w->id, (unsigned long long)r.offset, align);
			}
			if (vad_size(c, p) < size)
				WORKER_FAIL(w, "worker %d: vad_size %zu < %zu", w->id,
					    vad_size(c, p), size);
			live[slot] = p;
			sizes[slot] = size;
			seeds[slot] = seed;
			vt_fill_pattern(p, size, seed);
		}
		w->ops++;
	}
	/* Verify everything still live, then free it (in one batch for batch workers). */
	void *rest[WINDOW];
	int n_rest = 0;
	for (int s = 0; s < WINDOW; s++) {
		if (!live[s])
			continue;
		ssize_t bad = vt_check_pattern(live[s], sizes[s], seeds[s]);
		if (bad >= 0)
			WORKER_FAIL(w, "worker %d: final check: range changed at byte %zd", w->id,
				    bad);
		rest[n_rest++] = live[s];
		live[s] = NULL;
	}
	if (n_rest) {
		int rc = w->batch ? vad_free_batch(c, (size_t)n_rest, rest) : 0;
		for (int k = 0; !w->batch && k < n_rest && rc == 0; k++)
			rc = vad_free(c, rest[k]);
		if (rc != 0)
			WORKER_FAIL(w, "worker %d: final free: %d %s", w->id, rc,
				    vad_last_error(c));
	}
out:
	if (w->own_connection && c)
		vad_close(c);
	return NULL;
}

VT_DAEMON_GROUP(group_setup, "workers = 4\n", NULL)

/* Run n workers as threads; fail with the first worker's message. */
static void run_threads(struct worker *w, int n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	assert_non_null(t);
	for (int i = 0; i < n; i++)
		assert_int_equal(0, pthread_create(&t[i], NULL, worker_run, &w[i]));
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	for (int i = 0; i < n; i++)
		if (w[i].error[0])
			fail_msg("%s", w[i].error);
}

static void assert_back_to_baseline(const struct vt_daemon *d, uint64_t busy)
{
	struct vad_stats s;
	if (vt_wait_busy(d, busy, 1, vt_timeout_ms(2000), &s) != 0)
		fail_msg("busy bytes %llu with %u clients, baseline %llu with 1",
			 (unsigned long long)s.busy_bytes, s.clients, (unsigned long long)busy);
	assert_int_equal(0, vt_check_invariants(d));
}

static void test_threads_share_one_client(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "threads", &c));
	enum { N = 8 };
	struct worker w[N];
	memset(w, 0, sizeof(w));
	for (int i = 0; i < N; i++) {
		w[i].c = c;
		w[i].id = i;
		w[i].iterations = vt_scale(1000); /* about 500 allocs and 500 frees */
		w[i].batch = i < 2;
		w[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
	}
	run_threads(w, N);
	struct vad_stats s;
	VT_ASSERT_OK(c, vad_stats(c, &s));
	assert_int_equal(0, s.held_bytes);
	assert_int_equal(0, s.held_ranges);
	vad_close(c);
	assert_back_to_baseline(d, base.busy_bytes);
}

static void test_many_connections_in_threads(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));
	enum { N = 16 };
	struct worker w[N];
	memset(w, 0, sizeof(w));
	for (int i = 0; i < N; i++) {
		w[i].socket_path = d->socket_path;
		w[i].own_connection = true;
		w[i].id = 100 + i;
		w[i].iterations = vt_scale(400);
		w[i].batch = i % 4 == 0;
		w[i].rng = 0xD1B54A32D192ED03ull * (uint64_t)(i + 1);
	}
	run_threads(w, N);
	assert_back_to_baseline(d, base.busy_bytes);
}

static void test_many_processes(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));
	enum { N = 20 };
	pid_t pids[N];
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			struct worker w = {
			    .socket_path = d->socket_path,
			    .own_connection = true,
			    .id = 1000 + i,
			    .iterations = vt_scale(400),
			    .batch = i % 5 == 0,
			    .rng = 0xA0761D6478BD642Full * (uint64_t)(i + 1),
			};
			worker_run(&w);
			VT_CHILD_CHECK(!w.error[0], "%s", w.error);
			_exit(0);
		}
	}
	int failed = 0;
	for (int i = 0; i < N; i++) {
		int rc = vt_wait_child(pids[i], CHILD_TIMEOUT);
		if (rc != 0) {
			fprintf(stderr, "process %d exited %d\n", i, rc);
			failed++;
		}
	}
	assert_int_equal(0, failed);
	assert_back_to_baseline(d, base.busy_bytes);
}

/* Sharing under contention: owners allocate, share and hand the token to another thread,
 * which attaches it, reads the contents and frees its reference. Every other range the
 * owner frees at once, racing the attach: that attach may find the token gone (ETOKEN),
 * but only once the owner's free is through, never for a range still held. The other
 * ranges the owner keeps until the attacher is done with them: those attaches succeed. */
#define RING 64

struct share_ring {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char tokens[RING][VAD_TOKEN_LEN + 1];
	uint64_t seeds[RING];
	size_t sizes[RING];
	int rounds[RING];
	bool kept[RING]; /* the owner holds this range until the attacher is done with it */
	int head, tail;
	bool done;
	int published;	 /* tokens put in the ring */
	int processed;	 /* tokens the attacher finished with */
	int freed_round; /* the last round the owner freed at once (-1: none yet) */
};

struct share_worker {
	struct share_ring *ring;
	const char *socket_path;
	int id;
	int rounds;
	int attached; /* attacher: attaches that succeeded */
	int refused;  /* attacher: attaches refused with ETOKEN (racing a free) */
	int kept;     /* owner: rounds whose range it kept until the attach was done */
	char error[512];
};

/* The owner puts round i's token in the ring (waiting while it is full); false if the
 * attacher gave up. */
static bool ring_publish(struct share_ring *ring, const char *token, uint64_t seed, size_t size,
			 int i, bool kept)
{
	pthread_mutex_lock(&ring->lock);
	while ((ring->head + 1) % RING == ring->tail && !ring->done)
		pthread_cond_wait(&ring->cond, &ring->lock);
	if (ring->done) {
		pthread_mutex_unlock(&ring->lock);
		return false;
	}
	int k = ring->head;
	memcpy(ring->tokens[k], token, VAD_TOKEN_LEN + 1);
	ring->seeds[k] = seed;
	ring->sizes[k] = size;
	ring->rounds[k] = i;
	ring->kept[k] = kept;
	ring->head = (k + 1) % RING;
	ring->published++;
	pthread_cond_broadcast(&ring->cond);
	pthread_mutex_unlock(&ring->lock);
	return true;
}

/* The owner freed round i's range at once. */
static void ring_freed(struct share_ring *ring, int i)
{
	pthread_mutex_lock(&ring->lock);
	ring->freed_round = i;
	pthread_cond_broadcast(&ring->cond);
	pthread_mutex_unlock(&ring->lock);
}

/* One side is through (or gave up): the other stops waiting for it. */
static void ring_finish(struct share_ring *ring)
{
	pthread_mutex_lock(&ring->lock);
	ring->done = true;
	pthread_cond_broadcast(&ring->cond);
	pthread_mutex_unlock(&ring->lock);
}

static void *share_owner(void *arg)
{
	struct share_worker *w = arg;
	struct share_ring *ring = w->ring;
	vad_client *c = NULL;
	void **kept = calloc((size_t)w->rounds, sizeof(*kept));
	int rc = kept ? vad_connect(w->socket_path, "share-owner", &c) : VAD_ENOMEM;
	if (rc != 0) {
		snprintf(w->error, sizeof(w->error), "owner: vad_connect: %d", rc);
		goto out;
	}
	for (int i = 0; i < w->rounds; i++) {
		size_t size = PAGE * (size_t)(1 + i % 7);
		uint64_t seed = ((uint64_t)w->id << 40) | (uint64_t)i;
		void *p;
		char token[VAD_TOKEN_LEN + 1];
		if ((rc = vad_alloc(c, size, 0, &p)) != 0 || (vt_fill_pattern(p, size, seed), 0) ||
		    (rc = vad_share(c, p, token)) != 0) {
			snprintf(w->error, sizeof(w->error), "owner: alloc/share: %d %s", rc,
				 vad_last_error(c));
			goto out;
		}
		bool keep = i % 2 == 1;
		if (!ring_publish(ring, token, seed, size, i, keep)) {
			vad_free(c, p);
			goto out; /* the attacher failed and said why */
		}
		if (keep) {
			kept[w->kept++] = p;
			continue;
		}
		/* Free at once: the attacher may or may not have attached yet. */
		if ((rc = vad_free(c, p)) != 0) {
			snprintf(w->error, sizeof(w->error), "owner: free: %d %s", rc,
				 vad_last_error(c));
			goto out;
		}
		ring_freed(ring, i);
	}
	/* The kept ranges go once the attacher has been through every token. */
	pthread_mutex_lock(&ring->lock);
	while (ring->processed < ring->published && !ring->done)
		pthread_cond_wait(&ring->cond, &ring->lock);
	pthread_mutex_unlock(&ring->lock);
	for (int i = 0; i < w->kept; i++) {
		if ((rc = vad_free(c, kept[i])) != 0) {
			snprintf(w->error, sizeof(w->error), "owner: free of a kept range: %d %s",
				 rc, vad_last_error(c));
			goto out;
		}
	}
out:
	if (c)
		vad_close(c);
	free(kept);
	ring_finish(ring);
	return NULL;
}

/* An attach of round's token was refused: fine only if the owner freed that range, so its
 * free must be through (the owner's reply may still be on its way: wait for it). */
static bool owner_freed(struct share_ring *ring, int round)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	pthread_mutex_lock(&ring->lock);
	while (ring->freed_round < round && vt_now_ns() < deadline) {
		pthread_mutex_unlock(&ring->lock);
		vt_sleep_ms(1);
		pthread_mutex_lock(&ring->lock);
	}
	bool freed = ring->freed_round >= round;
	pthread_mutex_unlock(&ring->lock);
	return freed;
}

/* Attach one token; false (with w->error set) on anything but a success or a refusal that
 * raced the owner's free. */
static bool attach_one(struct share_worker *w, vad_client *c, int k, const char *token)
{
	uint64_t seed = w->ring->seeds[k];
	size_t want = w->ring->sizes[k];
	int round = w->ring->rounds[k];
	bool kept = w->ring->kept[k];
	void *q;
	size_t size;
	int rc = vad_attach(c, token, &q, &size);
	if (rc == VAD_ETOKEN && !kept && owner_freed(w->ring, round)) {
		w->refused++;
		return true;
	}
	if (rc != 0) {
		snprintf(w->error, sizeof(w->error),
			 "attacher: vad_attach of round %d (%s by its owner): %d %s", round,
			 kept ? "still held" : "not freed in time", rc, vad_last_error(c));
		return false;
	}
	/* Attached: the range is ours too, so its bytes must still be the owner's. */
	ssize_t bad = size >= want ? vt_check_pattern(q, want, seed) : 0;
	if (bad >= 0) {
		snprintf(w->error, sizeof(w->error),
			 "attacher: attached range (%zu bytes, want %zu) differs at %zd", size,
			 want, bad);
		return false;
	}
	if ((rc = vad_free(c, q)) != 0) {
		snprintf(w->error, sizeof(w->error), "attacher: free: %d %s", rc,
			 vad_last_error(c));
		return false;
	}
	w->attached++;
	return true;
}

static void *share_attacher(void *arg)
{
	struct share_worker *w = arg;
	struct share_ring *ring = w->ring;
	vad_client *c = NULL;
	int rc = vad_connect(w->socket_path, "share-attacher", &c);
	if (rc != 0) {
		snprintf(w->error, sizeof(w->error), "attacher: vad_connect: %d", rc);
		ring_finish(ring);
		return NULL;
	}
	bool ok = true;
	while (ok) {
		pthread_mutex_lock(&ring->lock);
		while (ring->head == ring->tail && !ring->done)
			pthread_cond_wait(&ring->cond, &ring->lock);
		if (ring->head == ring->tail) {
			pthread_mutex_unlock(&ring->lock);
			break;
		}
		int k = ring->tail;
		char token[VAD_TOKEN_LEN + 1];
		memcpy(token, ring->tokens[k], sizeof(token));
		pthread_mutex_unlock(&ring->lock);
		ok = attach_one(w, c, k, token);
		/* The slot is free for the owner only now: attach_one read its round. */
		pthread_mutex_lock(&ring->lock);
		ring->tail = (k + 1) % RING;
		ring->processed++;
		if (!ok)
			ring->done = true; /* the owner must not wait for the rest */
		pthread_cond_broadcast(&ring->cond);
		pthread_mutex_unlock(&ring->lock);
	}
	vad_close(c);
	return NULL;
}

static void test_share_while_freeing(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));
	enum { PAIRS = 4 };
	struct share_ring rings[PAIRS];
	struct share_worker owners[PAIRS], attachers[PAIRS];
	pthread_t t[2 * PAIRS];
	for (int i = 0; i < PAIRS; i++) {
		memset(&rings[i], 0, sizeof(rings[i]));
		rings[i].freed_round = -1;
		pthread_mutex_init(&rings[i].lock, NULL);
		pthread_cond_init(&rings[i].cond, NULL);
		owners[i] = (struct share_worker){.ring = &rings[i],
						  .socket_path = d->socket_path,
						  .id = i,
						  .rounds = vt_scale(300)};
		attachers[i] = owners[i];
		assert_int_equal(0, pthread_create(&t[2 * i], NULL, share_owner, &owners[i]));
		assert_int_equal(
		    0, pthread_create(&t[2 * i + 1], NULL, share_attacher, &attachers[i]));
	}
	for (int i = 0; i < 2 * PAIRS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < PAIRS; i++) {
		if (owners[i].error[0])
			fail_msg("%s", owners[i].error);
		if (attachers[i].error[0])
			fail_msg("%s", attachers[i].error);
		pthread_mutex_destroy(&rings[i].lock);
		pthread_cond_destroy(&rings[i].cond);
		int rounds = owners[i].rounds;
		printf("pair %d: %d tokens, %d attached, %d refused racing a free (%d kept by the "
		       "owner)\n",
		       i, rounds, attachers[i].attached, attachers[i].refused, owners[i].kept);
		/* Every token was tried, and only the ranges freed at once can be refused. */
		assert_int_equal(rounds, attachers[i].attached + attachers[i].refused);
		assert_int_equal(rounds / 2, owners[i].kept);
		assert_true(attachers[i].refused <= rounds - owners[i].kept);
		assert_true(attachers[i].attached >= owners[i].kept);
	}
	assert_back_to_baseline(d, base.busy_bytes);
}

/* Connections come and go by the hundred: afterwards the daemon has exactly the
 * sessions and descriptors it had before. */
struct churn {
	const char *socket_path;
	int rounds;
	char error[256];
};

static void *churn_run(void *arg)
{
	struct churn *ch = arg;
	for (int i = 0; i < ch->rounds; i++) {
		vad_client *c;
		int rc = vad_connect(ch->socket_path, "churn", &c);
		if (rc != 0) {
			snprintf(ch->error, sizeof(ch->error), "round %d: vad_connect: %d %s", i,
				 rc, vad_last_error(NULL));
			return NULL;
		}
		void *p;
		rc = vad_alloc(c, PAGE, 0, &p);
		if (rc != 0) {
			snprintf(ch->error, sizeof(ch->error), "round %d: vad_alloc: %d %s", i, rc,
				 vad_last_error(c));
			vad_close(c);
			return NULL;
		}
		*(volatile int *)p = i;
		/* every other client leaves without freeing: the daemon frees for it */
		if (i % 2)
			vad_free(c, p);
		vad_close(c);
	}
	return NULL;
}

static int quiet_fd_count(const struct vt_daemon *d)
{
	int best = vt_fd_count(d->pid);
	for (int i = 0; i < 30; i++) {
		vt_sleep_ms(10);
		int n = vt_fd_count(d->pid);
		if (n >= 0 && n < best)
			best = n;
	}
	return best;
}

static void test_connection_churn(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(2000), &base));
	int base_fds = quiet_fd_count(d);
	assert_true(base_fds > 0);
	enum { N = 4 };
	struct churn ch[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		ch[i] = (struct churn){.socket_path = d->socket_path, .rounds = vt_scale(150)};
		assert_int_equal(0, pthread_create(&t[i], NULL, churn_run, &ch[i]));
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++)
		if (ch[i].error[0])
			fail_msg("%s", ch[i].error);
	assert_back_to_baseline(d, base.busy_bytes);
	int fds = vt_wait_fds(d, base_fds, vt_timeout_ms(2000));
	if (fds > base_fds)
		fail_msg("daemon has %d descriptors after the churn, %d before", fds, base_fds);
}

/* Admin work racing the allocators: purges (drains), invariant checks, stats walks,
 * client listings, reloads and SIGHUPs while worker connections allocate and free. */
struct admin_loop {
	const struct vt_daemon *d;
	int stop; /* atomic */
	int rounds;
	char error[512];
};

static void *admin_run(void *arg)
{
	struct admin_loop *al = arg;
	vad_client *c;
	int rc = vad_connect(al->d->socket_path, "admin-loop", &c);
	if (rc != 0) {
		snprintf(al->error, sizeof(al->error), "admin: vad_connect: %d", rc);
		return NULL;
	}
	while (!__atomic_load_n(&al->stop, __ATOMIC_ACQUIRE)) {
		uint64_t released;
		int ok = 0;
		struct vad_daemon_stats *ds = NULL;
		struct vad_client_info *ci = NULL;
		size_t n;
		if ((rc = vad_purge(c, &released)) != 0 || (rc = vad_check(c, &ok, NULL)) != 0 ||
		    (rc = vad_stats_detail(c, NULL, &ds)) != 0 ||
		    (rc = vad_clients(c, &ci, &n)) != 0 || (rc = vad_reload(c)) != 0) {
			snprintf(al->error, sizeof(al->error), "admin round %d: %d %s", al->rounds,
				 rc, vad_last_error(c));
			break;
		}
		free(ds);
		free(ci);
		if (!ok) {
			snprintf(al->error, sizeof(al->error),
				 "admin round %d: allocator invariants broken under load",
				 al->rounds);
			break;
		}
		if (al->rounds % 4 == 0)
			kill(al->d->pid, SIGHUP);
		al->rounds++;
	}
	vad_close(c);
	return NULL;
}

static void test_admin_ops_under_load(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));
	struct admin_loop al = {.d = d};
	pthread_t admin;
	assert_int_equal(0, pthread_create(&admin, NULL, admin_run, &al));
	enum { N = 6 };
	struct worker w[N];
	memset(w, 0, sizeof(w));
	for (int i = 0; i < N; i++) {
		w[i].socket_path = d->socket_path;
		w[i].own_connection = true;
		w[i].id = 200 + i;
		w[i].iterations = vt_scale(1000);
		w[i].batch = i % 3 == 0;
		w[i].rng = 0x2545F4914F6CDD1Dull * (uint64_t)(i + 1);
	}
	run_threads(w, N);
	__atomic_store_n(&al.stop, 1, __ATOMIC_RELEASE);
	pthread_join(admin, NULL);
	if (al.error[0])
		fail_msg("%s", al.error);
	print_message("%d admin rounds ran alongside the workers\n", al.rounds);
	assert_true(al.rounds > 0);
	assert_true(vt_daemon_alive((struct vt_daemon *)d));
	assert_back_to_baseline(d, base.busy_bytes);
}

/* The daemon runs out of descriptors (RLIMIT_NOFILE 128) under a flood of connections:
 * it keeps serving the clients it has, and once the flood leaves, new clients get in. */
static void test_daemon_out_of_fds(void **state)
{
	struct vt_daemon *shared = *state;
	(void)shared;
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_init(&d));
	assert_int_equal(0, vt_daemon_write_config(&d, "stats_interval = 1h\n", NULL));
	struct vt_start_opts opts = {.listen_fd = -1, .nofile = 128};
	if (vt_daemon_start_opts(&d, &opts) != 0) {
		vt_daemon_destroy(&d);
		fail_msg("the daemon did not start with RLIMIT_NOFILE 128");
	}
	vad_client *bystander;
	assert_int_equal(0, vt_connect(&d, "bystander", &bystander));
	void *p;
	VT_ASSERT_OK(bystander, vad_alloc(bystander, PAGE, 0, &p));
	int base_fds = quiet_fd_count(&d);

	enum { FLOOD = 300 };
	int fds[FLOOD];
	int connected = 0;
	for (int i = 0; i < FLOOD; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		memcpy(sa.sun_path, d.socket_path, strlen(d.socket_path) + 1);
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) == 0)
			connected++;
	}
	print_message("%d of %d flood connections were accepted or queued\n", connected, FLOOD);
	/* It runs out: accept fails (EMFILE) and the daemon says so and pauses accepting. */
	uint64_t out_by = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	while (!vt_daemon_log_contains(&d, "accept failed: ") && vt_now_ns() < out_by)
		vt_sleep_ms(20);
	if (!vt_daemon_log_contains(&d, "accept failed: ")) {
		vt_daemon_print_log(&d, 20);
		fail_msg("the daemon never said it could not accept with RLIMIT_NOFILE 128");
	}
	/* The client the daemon already had is still served. */
	void *q;
	VT_ASSERT_OK(bystander, vad_alloc(bystander, PAGE, 0, &q));
	VT_ASSERT_OK(bystander, vad_free(bystander, q));
	assert_true(vt_daemon_alive(&d));
	/* it really ran out: it could not take every connection */
	struct vad_stats st;
	VT_ASSERT_OK(bystander, vad_stats(bystander, &st));
	print_message("sessions during the flood: %u\n", st.clients);
	assert_true(st.clients < 128);
	for (int i = 0; i < FLOOD; i++)
		close(fds[i]);
	/* After the flood, a newcomer gets in (the daemon may still be pausing accepts). */
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(5000) * 1000000u;
	vad_client *c = NULL;
	int rc;
	while ((rc = vad_connect(d.socket_path, "newcomer", &c)) != 0 && vt_now_ns() < deadline)
		vt_sleep_ms(50);
	if (rc != 0) {
		vt_daemon_print_log(&d, 20);
		vt_daemon_destroy(&d);
		fail_msg("no new client got in after the flood: %d (%s)", rc, vad_strerror(rc));
	}
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &q));
	VT_ASSERT_OK(c, vad_free(c, q));
	vad_close(c);
	int now = vt_wait_fds(&d, base_fds, vt_timeout_ms(3000));
	if (now > base_fds)
		fail_msg("the daemon has %d descriptors after the flood, %d before", now, base_fds);
	VT_ASSERT_OK(bystander, vad_free(bystander, p));
	vad_close(bystander);
	int stopped = vt_daemon_stop(&d);
	vt_daemon_destroy(&d);
	assert_int_equal(0, stopped);
}

static void test_daemon_stops_cleanly(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_threads_share_one_client),
	    cmocka_unit_test(test_many_connections_in_threads),
	    cmocka_unit_test(test_many_processes),
	    cmocka_unit_test(test_share_while_freeing),
	    cmocka_unit_test(test_connection_churn),
	    cmocka_unit_test(test_admin_ops_under_load),
	    cmocka_unit_test(test_daemon_out_of_fds),
	    cmocka_unit_test(test_daemon_stops_cleanly),
	};
	return cmocka_run_group_tests(tests, group_setup, vt_group_daemon_stop_if_running);
}
