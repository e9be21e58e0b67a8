/*
 * test_service_resident.c - memory a client writes into free space (every client maps the
 * whole arena, so it can): the arena's resident bytes show it at once, `vactl purge` gives
 * it back down to busy + pooled without touching the live ranges, and the idle drain does
 * too once the allocator has been idle. The dirtying client holds no range and allocates
 * nothing, so it starts no idle period of its own: each test first waits out the one the
 * setup started, and nothing but the purge (or the idle drain) can release its pages.
 */
#include <json-c/json.h>
#include <string.h>
#include <sys/wait.h>

#include "vtassert.h"

#define MiB	(1024ull * 1024ull)
#define DIRTY	(256 * MiB) /* written into free space: enough to see, quick to purge */
#define LIVE	16	    /* ranges the keeper holds, with a pattern, between free gaps */
#define LIVE_SZ (1 * MiB)
#define PAGE	4096u

struct fx {
	struct vt_daemon d;
	vad_client *keeper;
	void *live[LIVE];
};

static struct vad_arena_stats arena_stats(vad_client *c)
{
	struct vad_daemon_stats *ds;
	VT_ASSERT_OK(c, vad_stats_detail(c, "default", &ds));
	assert_int_equal(1, ds->n_arenas);
	struct vad_arena_stats a = ds->arenas[0];
	a.name = NULL; /* lives in ds */
	free(ds);
	return a;
}

/* The keeper holds LIVE patterned ranges with a freed range between each two, then the
 * setup waits until the allocator's idle pass has released the free space once (it
 * counts every free block it passes to release in free_released_bytes): from then on, with no
 * allocation or free, no idle pass runs again. */
static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	if (vt_daemon_setup(&f->d, "stats_interval = 1h\n", "[arena default]\nsize = 1G\n"))
		return -1;
	if (vt_connect(&f->d, "keeper", &f->keeper))
		return -1;
	void *gap[LIVE];
	for (int i = 0; i < LIVE; i++)
		if (vad_alloc(f->keeper, LIVE_SZ, 0, &f->live[i]) ||
		    vad_alloc(f->keeper, LIVE_SZ, 0, &gap[i]))
			return -1;
	/* Read before the last activity (the frees), so the idle pass after them cannot have
	 * been counted already. */
	struct vad_arena_stats a = arena_stats(f->keeper);
	uint64_t start = a.free_released_bytes;
	for (int i = 0; i < LIVE; i++)
		if (vad_free(f->keeper, gap[i]))
			return -1;
	for (int i = 0; i < LIVE; i++)
		vt_fill_pattern(f->live[i], LIVE_SZ, 1000 + (uint64_t)i);
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (a.free_released_bytes - start < a.size / 2) {
		if (vt_now_ns() > deadline) {
			fprintf(stderr, "the idle release did not run: released %llu since setup\n",
				(unsigned long long)(a.free_released_bytes - start));
			return -1;
		}
		vt_sleep_ms(50);
		a = arena_stats(f->keeper);
	}
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int rc = 0;
	if (f->keeper)
		vad_close(f->keeper);
	if (vt_check_invariants(&f->d) != 0 || vt_daemon_stop(&f->d) != 0)
		rc = -1;
	vt_daemon_destroy(&f->d);
	free(f);
	return rc;
}

/* A child process connects, writes bytes into the arena's free blocks (found with the
 * admin walk, written through vad_pointer: no range held, nothing allocated) and exits. */
static void dirty_free_space(const struct vt_daemon *d, uint64_t bytes)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		vad_client *c;
		int rc = vad_connect(d->socket_path, "scribbler", &c);
		VT_CHILD_CHECK(rc == 0, "connect: %d", rc);
		struct vad_arena_map *m;
		rc = vad_walk(c, "default", 0, &m);
		VT_CHILD_CHECK(rc == 0, "walk: %s", vad_last_error(c));
		uint64_t left = bytes;
		for (size_t i = 0; i < m->n_blocks && left; i++) {
			if (m->blocks[i].kind != VAD_BLOCK_FREE)
				continue;
			uint64_t n = m->blocks[i].size < left ? m->blocks[i].size : left;
			void *p;
			rc = vad_pointer(c, "default", m->blocks[i].offset, &p);
			VT_CHILD_CHECK(rc == 0, "pointer: %s", vad_last_error(c));
			memset(p, 0xa5, n);
			left -= n;
		}
		VT_CHILD_CHECK(left == 0, "only %llu bytes of free space found",
			       (unsigned long long)(bytes - left));
		free(m);
		vad_close(c);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(60000)));
}

static void check_live(const struct fx *f)
{
	for (int i = 0; i < LIVE; i++) {
		ssize_t bad = vt_check_pattern(f->live[i], LIVE_SZ, 1000 + (uint64_t)i);
		if (bad >= 0)
			fail_msg("live range %d changed at byte %zd", i, bad);
	}
}

static void test_purge_releases_written_free_space(void **state)
{
	struct fx *f = *state;
	struct vad_arena_stats before = arena_stats(f->keeper);
	dirty_free_space(&f->d, DIRTY);
	struct vad_arena_stats dirty = arena_stats(f->keeper);
	print_message("resident %llu before, %llu after writing %llu bytes into free space "
		      "(busy %llu, pooled %llu)\n",
		      (unsigned long long)before.resident_bytes,
		      (unsigned long long)dirty.resident_bytes, (unsigned long long)DIRTY,
		      (unsigned long long)dirty.busy_bytes, (unsigned long long)dirty.pooled_bytes);
	/* nothing but the writes changed: no figure but resident shows them */
	assert_int_equal(before.busy_bytes, dirty.busy_bytes);
	assert_true(dirty.resident_bytes >= before.resident_bytes + DIRTY);

	struct vt_output o;
	uint64_t t0 = vt_now_ns();
	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "--json", "purge", NULL));
	uint64_t purge_ms = (vt_now_ns() - t0) / 1000000;
	VT_ASSERT_EXIT(&o, 0, "vactl --json purge");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	uint64_t released, res_before, res_after, busy, pooled;
	assert_int_equal(0, vt_json_u64(j, "released_bytes", &released));
	assert_int_equal(0, vt_json_u64(j, "resident_before", &res_before));
	assert_int_equal(0, vt_json_u64(j, "resident_after", &res_after));
	assert_int_equal(0, vt_json_u64(j, "busy_bytes", &busy));
	assert_int_equal(0, vt_json_u64(j, "pooled_bytes", &pooled));
	json_object_put(j);
	vt_output_free(&o);
	print_message("vactl purge: released %llu, resident %llu -> %llu (busy %llu, pooled "
		      "%llu) in %llu ms\n",
		      (unsigned long long)released, (unsigned long long)res_before,
		      (unsigned long long)res_after, (unsigned long long)busy,
		      (unsigned long long)pooled, (unsigned long long)purge_ms);
	assert_true(released >= DIRTY);
	assert_true(res_after <= busy + pooled + PAGE);

	struct vad_arena_stats after = arena_stats(f->keeper);
	if (after.resident_bytes > after.busy_bytes + after.pooled_bytes + PAGE)
		fail_msg("after the purge resident %llu > busy %llu + pooled %llu + a page",
			 (unsigned long long)after.resident_bytes,
			 (unsigned long long)after.busy_bytes,
			 (unsigned long long)after.pooled_bytes);
	/* the live ranges were not touched: their pages are resident, their bytes intact */
	assert_true(after.resident_bytes >= (uint64_t)LIVE * LIVE_SZ);
	check_live(f);
	assert_int_equal(0, vt_check_invariants(&f->d));
}

/* Without a purge: the next idle period of the allocator gives the pages back. */
static void test_idle_drain_releases_written_free_space(void **state)
{
	struct fx *f = *state;
	struct vad_arena_stats before = arena_stats(f->keeper);
	dirty_free_space(&f->d, DIRTY / 4);
	struct vad_arena_stats a = arena_stats(f->keeper);
	assert_true(a.resident_bytes >= before.resident_bytes + DIRTY / 4);
	/* one allocation and free: activity, so an idle period follows */
	void *p;
	VT_ASSERT_OK(f->keeper, vad_alloc(f->keeper, PAGE, 0, &p));
	VT_ASSERT_OK(f->keeper, vad_free(f->keeper, p));
	uint64_t t0 = vt_now_ns();
	uint64_t deadline = t0 + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (a.resident_bytes > a.busy_bytes + a.pooled_bytes + PAGE) {
		if (vt_now_ns() > deadline)
			fail_msg("the idle drain left resident %llu > busy %llu + pooled %llu",
				 (unsigned long long)a.resident_bytes,
				 (unsigned long long)a.busy_bytes,
				 (unsigned long long)a.pooled_bytes);
		vt_sleep_ms(50);
		a = arena_stats(f->keeper);
	}
	print_message("idle drain: resident back to %llu (busy %llu) %llu ms after the last "
		      "free\n",
		      (unsigned long long)a.resident_bytes, (unsigned long long)a.busy_bytes,
		      (unsigned long long)((vt_now_ns() - t0) / 1000000));
	check_live(f);

	/* a purge now finds nothing written: the text says what it did */
	struct vt_output o;
	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "purge", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl purge");
	if (!vt_contains(o.out, "purged every arena: released ") ||
	    !vt_contains(o.out, "; resident ")) {
		vt_output_print("vactl purge", &o);
		fail_msg("vactl purge does not show the resident bytes");
	}
	vt_output_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_purge_releases_written_free_space, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_idle_drain_releases_written_free_space, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
