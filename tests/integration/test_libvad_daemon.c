/*
 * test_libvad_daemon.c - libvad's own promises against the real daemon: pointers and the
 * held-range table (vad_size, vad_range_info, vad_pointer), batches across arenas and a
 * partial batch free, the first mapping of an arena raced by many threads, the typed
 * introspection calls, no fd or mapping left after vad_close, and a daemon that goes away.
 */
#include <pthread.h>
#include <string.h>

#include "vtassert.h"

#define PAGE	      4096u
#define SMALL_QUANTUM (64u * 1024u)

static const char *const arenas_conf = "[arena default]\n"
				       "size = 256M\n"
				       "\n"
				       "[arena small]\n"
				       "size = 16M\n"
				       "quantum = 64K\n";

VT_DAEMON_GROUP(group_setup, NULL, arenas_conf)

static void test_pointers_and_bookkeeping(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "bookkeeping", &c));
	struct vad_session s;
	VT_ASSERT_OK(c, vad_session_info(c, &s));
	assert_string_equal("default", s.default_arena);
	assert_string_equal(d->socket_path, s.socket_path);

	void *p, *q;
	VT_ASSERT_OK(c, vad_alloc(c, 5000, 0, &p));
	VT_ASSERT_OK(c, vad_alloc_in(c, "small", 1, 0, &q));
	assert_int_equal(2 * PAGE, vad_size(c, p));
	assert_int_equal(SMALL_QUANTUM, vad_size(c, q));
	assert_int_equal(0, vad_size(c, (char *)p + PAGE)); /* not a range start */

	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, q, &r));
	assert_string_equal("small", r.arena);
	assert_int_equal(SMALL_QUANTUM, r.size);
	assert_int_equal(1, r.refs);
	assert_int_equal(0, r.offset % SMALL_QUANTUM);
	void *again;
	VT_ASSERT_OK(c, vad_pointer(c, "small", r.offset, &again));
	assert_ptr_equal(q, again);
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_pointer(c, "small", 16u << 20, &again));

	/* Writable shared memory, fresh ranges read as zeros. */
	assert_int_equal(-1, vt_first_nonzero(p, 2 * PAGE));
	vt_fill_pattern(p, 2 * PAGE, 7);

	/* Freeing something that is no range of any arena is refused without a round trip. */
	int on_stack;
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free(c, &on_stack));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_range_info(c, &on_stack, &r));

	VT_ASSERT_OK(c, vad_free(c, p));
	assert_int_equal(0, vad_size(c, p));
	/* The daemon refuses a second free, with its own sentence. */
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free(c, p));
	assert_true(vt_contains(vad_last_error(c), "not held"));
	VT_ASSERT_OK(c, vad_free(c, q));
	vad_close(c);
}

static void test_batches_across_arenas(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "batches", &c));
	enum { N = 16 };
	size_t sizes[N];
	void *v[N], *w[N];
	for (int i = 0; i < N; i++)
		sizes[i] = PAGE * (size_t)(1 + i % 4);
	VT_ASSERT_OK(c, vad_alloc_batch(c, N, sizes, 0, v));
	VT_ASSERT_OK(c, vad_alloc_batch_in(c, "small", N, sizes, 0, w));
	for (int i = 0; i < N; i++) {
		assert_int_equal(sizes[i], vad_size(c, v[i]));
		assert_int_equal(SMALL_QUANTUM, vad_size(c, w[i]));
		vt_fill_pattern(v[i], sizes[i], (uint64_t)i);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(-1, vt_check_pattern(v[i], sizes[i], (uint64_t)i));
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(2 * N, st.held_ranges);

	/* One call frees ranges of both arenas, interleaved. */
	void *mixed[2 * N];
	for (int i = 0; i < N; i++) {
		mixed[2 * i] = v[i];
		mixed[2 * i + 1] = w[i];
	}
	VT_ASSERT_OK(c, vad_free_batch(c, 2 * N, mixed));
	for (int i = 0; i < 2 * N; i++)
		assert_int_equal(0, vad_size(c, mixed[i]));
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);

	/* A batch that fails part-way: the daemon frees in order up to the refused range,
	 * and libvad's table follows it. */
	VT_ASSERT_OK(c, vad_alloc_batch(c, 3, sizes, 0, v));
	void *partial[3] = {v[0], v[0], v[1]};
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free_batch(c, 3, partial));
	assert_int_equal(0, vad_size(c, v[0]));
	assert_int_equal(sizes[1], vad_size(c, v[1]));
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(2, st.held_ranges);
	void *rest[2] = {v[1], v[2]};
	VT_ASSERT_OK(c, vad_free_batch(c, 2, rest));
	/* All or nothing: a batch that cannot be served leaves nothing behind. */
	size_t huge[2] = {PAGE, 1u << 30};
	VT_ASSERT_ERR(c, VAD_ESIZE, vad_alloc_batch(c, 2, huge, 0, v));
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
}

struct racer {
	vad_client *c;
	const char *arena;
	void *ptr;
	int err;
};

static void *race_first_map(void *arg)
{
	struct racer *r = arg;
	r->err = vad_alloc_in(r->c, r->arena, PAGE, 0, &r->ptr);
	return NULL;
}

/* Both arenas are unmapped when eight threads allocate at once: several MapArena replies
 * (each carrying an fd) are in flight together, and every pointer must be right. */
static void test_first_map_raced_by_threads(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "racers", &c));
	enum { THREADS = 8 };
	pthread_t t[THREADS];
	struct racer r[THREADS];
	for (int i = 0; i < THREADS; i++) {
		r[i] = (struct racer){c, i % 2 ? "small" : NULL, NULL, 0};
		assert_int_equal(0, pthread_create(&t[i], NULL, race_first_map, &r[i]));
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(0, pthread_join(t[i], NULL));
	for (int i = 0; i < THREADS; i++) {
		VT_ASSERT_OK(c, r[i].err);
		struct vad_range rg;
		VT_ASSERT_OK(c, vad_range_info(c, r[i].ptr, &rg));
		assert_string_equal(i % 2 ? "small" : "default", rg.arena);
		void *base;
		VT_ASSERT_OK(c, vad_pointer(c, rg.arena, 0, &base));
		assert_int_equal(rg.offset, (uint64_t)((char *)r[i].ptr - (char *)base));
		/* A second client sees the bytes through its own mapping. */
		memset(r[i].ptr, 'a' + i, PAGE);
	}
	vad_client *other;
	assert_int_equal(0, vt_connect(d, "witness", &other));
	for (int i = 0; i < THREADS; i++) {
		char token[VAD_TOKEN_LEN + 1];
		VT_ASSERT_OK(c, vad_share(c, r[i].ptr, token));
		void *q;
		size_t size;
		VT_ASSERT_OK(other, vad_attach(other, token, &q, &size));
		assert_int_equal('a' + i, ((char *)q)[PAGE - 1]);
		VT_ASSERT_OK(other, vad_free(other, q));
		VT_ASSERT_OK(c, vad_free(c, r[i].ptr));
	}
	vad_close(other);
	vad_close(c);
}

static void test_typed_introspection(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "introspect", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "small", 3 * SMALL_QUANTUM, 0, &p));
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, p, &r));

	struct vad_daemon_stats *ds;
	VT_ASSERT_OK(c, vad_stats_detail(c, "small", &ds));
	assert_int_equal(1, ds->n_arenas);
	assert_string_equal("small", ds->arenas[0].name);
	assert_int_equal(16u << 20, ds->arenas[0].size);
	assert_int_equal(SMALL_QUANTUM, ds->arenas[0].quantum);
	assert_true(ds->arenas[0].busy_bytes >= 3 * SMALL_QUANTUM);
	assert_int_equal(3 * SMALL_QUANTUM, ds->held_bytes);
	assert_int_equal(1, ds->held_ranges);
	assert_true(ds->clients >= 1);
	free(ds);
	VT_ASSERT_ERR(c, VAD_ENOARENA, vad_stats_detail(c, "nosuch", &ds));

	struct vad_arena_info *ai;
	size_t n;
	VT_ASSERT_OK(c, vad_arenas(c, &ai, &n));
	assert_int_equal(2, n);
	bool saw_small = false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(ai[i].name, "small") == 0) {
			saw_small = true;
			assert_int_equal(SMALL_QUANTUM, ai[i].quantum);
			assert_string_equal("memfd", ai[i].backing);
			assert_true(ai[i].allowed);
		}
	assert_true(saw_small);
	free(ai);

	struct vad_session s;
	VT_ASSERT_OK(c, vad_session_info(c, &s));
	if (s.admin) {
		struct vad_client_info *ci;
		VT_ASSERT_OK(c, vad_clients(c, &ci, &n));
		bool found = false;
		for (size_t i = 0; i < n; i++)
			if (ci[i].session_id == s.session_id) {
				found = true;
				assert_string_equal("introspect", ci[i].name);
				assert_int_equal(getpid(), ci[i].pid);
				assert_int_equal(3 * SMALL_QUANTUM, ci[i].held_bytes);
			}
		assert_true(found);
		free(ci);
		int ok = 0;
		char *detail = NULL;
		VT_ASSERT_OK(c, vad_check(c, &ok, &detail));
		assert_int_equal(1, ok);
		assert_non_null(detail);
		free(detail);
		char *reloaded = NULL;
		VT_ASSERT_OK(c, vad_reload_detail(c, &reloaded));
		assert_non_null(reloaded);
		free(reloaded);
		uint64_t released;
		VT_ASSERT_OK(c, vad_purge_arena(c, "small", &released));
		VT_ASSERT_ERR(c, VAD_ENOARENA, vad_purge_arena(c, "nosuch", &released));
	}
	if (s.admin) {
		/* The walk tiles the arena in address order and shows our range as busy. */
		struct vad_arena_map *m;
		VT_ASSERT_OK(c, vad_walk(c, "small", 0, &m));
		assert_string_equal("small", m->arena);
		assert_int_equal(16u << 20, m->size);
		assert_int_equal(SMALL_QUANTUM, m->quantum);
		assert_false(m->truncated);
		uint64_t at = 0;
		bool mine = false;
		for (size_t i = 0; i < m->n_blocks; i++) {
			assert_int_equal(at, m->blocks[i].offset);
			at += m->blocks[i].size;
			if (m->blocks[i].offset == r.offset) {
				mine = true;
				assert_int_equal(VAD_BLOCK_BUSY, m->blocks[i].kind);
				assert_int_equal(3 * SMALL_QUANTUM, m->blocks[i].size);
			}
		}
		assert_int_equal(16u << 20, at);
		assert_true(mine);
		free(m);
		VT_ASSERT_OK(c, vad_walk(c, "small", 1, &m));
		assert_int_equal(1, m->n_blocks);
		assert_true(m->truncated);
		free(m);
		VT_ASSERT_ERR(c, VAD_ENOARENA, vad_walk(c, "nosuch", 0, &m));
	}
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

/* Shared mappings of memfds in this process (/proc/self/maps lines naming "memfd:"). */
static int memfd_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "memfd:"))
			n++;
	fclose(f);
	return n;
}

/* vad_close gives back every descriptor and mapping it took. */
static void test_close_leaves_nothing(void **state)
{
	struct vt_daemon *d = *state;
	int before = vt_fd_count(getpid());
	int maps_before = memfd_mappings();
	assert_true(before > 0);
	for (int round = 0; round < 3; round++) {
		vad_client *c;
		assert_int_equal(0, vt_connect(d, "closer", &c));
		void *p, *q;
		VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
		VT_ASSERT_OK(c, vad_alloc_in(c, "small", PAGE, 0, &q));
		assert_int_equal(maps_before + 2, memfd_mappings());
		vad_close(c); /* without freeing: the daemon drops them */
	}
	assert_int_equal(before, vt_fd_count(getpid()));
	assert_int_equal(maps_before, memfd_mappings());
	assert_int_equal(0, vt_check_invariants(d));
}

static void test_daemon_goes_away(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "survivor", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	assert_int_equal(0, vt_daemon_stop(d));
	VT_ASSERT_ERR(c, VAD_EGONE, vad_alloc(c, PAGE, 0, &p));
	assert_true(vt_contains(vad_last_error(c), "closed the connection"));
	/* Later calls fail at once; the local table still answers. */
	VT_ASSERT_ERR(c, VAD_EGONE, vad_free(c, p));
	struct vad_stats st;
	VT_ASSERT_ERR(c, VAD_EGONE, vad_stats(c, &st));
	assert_int_equal(PAGE, vad_size(c, p));
	vad_close(c);
	/* A new connection names the socket it tried. */
	vad_client *none = NULL;
	assert_int_equal(VAD_ECONNECT, vad_connect(d->socket_path, "late", &none));
	assert_null(none);
	assert_true(vt_contains(vad_last_error(NULL), d->socket_path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pointers_and_bookkeeping),
	    cmocka_unit_test(test_batches_across_arenas),
	    cmocka_unit_test(test_first_map_raced_by_threads),
	    cmocka_unit_test(test_typed_introspection),
	    cmocka_unit_test(test_close_leaves_nothing),
	    cmocka_unit_test(test_daemon_goes_away),
	};
	return cmocka_run_group_tests_name("libvad against vad", tests, group_setup,
					   vt_group_daemon_stop_if_running);
}
