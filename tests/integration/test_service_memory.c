/*
 * test_service_memory.c - what kind of memory an arena gets, and when:
 * - commit = reserve on a directory arena in a small tmpfs (mounted by the test, as root):
 *   an allocation larger than the file system's room fails with ECOMMIT and a sentence, the
 *   client lives on, nothing stays committed; the same allocation with commit = touch is
 *   granted and a child that writes it dies of SIGBUS.
 * - backing = hugetlb:2M: the test reserves a few huge pages (/proc/sys/vm/nr_hugepages,
 *   restored after); ranges are huge-page sized and aligned, read and written, come back as
 *   zeros, and with commit = reserve asking for more than the pool holds fails with a sentence
 *   naming the pool.
 * - huge = thp with commit = reserve: committed in huge pages (shmem THP set to "advise" for
 *   the test when it is "never", restored after).
 * - numa_node = 0 and interleave: the policy get_mempolicy reads back on a page a client
 *   touched.
 * Where the machine cannot (not root, no mount, no huge pages), the test says so in one
 * skipped line.
 */
#include <errno.h>
#include <stdbool.h>
#include <linux/mempolicy.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vtassert.h"

#define MiB (1024ull * 1024ull)

static struct vad_arena_stats stats_of(vad_client *c, const char *arena)
{
	struct vad_daemon_stats *ds;
	VT_ASSERT_OK(c, vad_stats_detail(c, arena, &ds));
	assert_int_equal(1, ds->n_arenas);
	struct vad_arena_stats a = ds->arenas[0];
	a.name = NULL;
	free(ds);
	return a;
}

/* ---- commit = reserve in a small tmpfs -------------------------------------------------- */

static void test_commit_reserve_tmpfs(void **state)
{
	(void)state;
	if (!vt_is_root()) {
		print_message("skipped: mounting a size-limited tmpfs needs root\n");
		skip();
	}
	char mnt[256];
	assert_int_equal(0, vt_make_temp_dir(mnt, sizeof(mnt), "vad-commit-tmpfs"));
	if (mount("vadtest", mnt, "tmpfs", 0, "size=8m") != 0) {
		print_message("skipped: cannot mount a tmpfs on %s: %s\n", mnt, strerror(errno));
		rmdir(mnt);
		skip();
	}
	char sections[2048];
	snprintf(sections, sizeof(sections),
		 "[arena frames]\nsize = 64M\nbacking = %s\naccept_unsealed = yes\n"
		 "commit = reserve\n"
		 "[arena lazy]\nsize = 64M\nbacking = %s\naccept_unsealed = yes\n",
		 mnt, mnt);
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_setup(&d, NULL, sections));
	vad_client *c;
	assert_int_equal(0, vt_connect(&d, "committer", &c));

	/* 16 MiB cannot be committed in an 8 MiB tmpfs: refused with a sentence, nothing kept */
	void *p = NULL;
	VT_ASSERT_ERR(c, VAD_ECOMMIT, vad_alloc_in(c, "frames", 16 * MiB, 0, &p));
	const char *msg = vad_last_error(c);
	print_message("refused: %s\n", msg);
	assert_true(vt_contains(msg, "arena 'frames' cannot commit 16 MiB"));
	assert_true(vt_contains(msg, "the file system of"));
	struct vad_arena_stats a = stats_of(c, "frames");
	assert_int_equal(0, a.busy_bytes);
	assert_int_equal(0, a.committed_bytes);
	assert_int_equal(1, a.commit_failures);
	assert_int_equal(0, a.resident_bytes); /* the part that was committed is punched again */

	/* the client lives on: 2 MiB fits, and is committed before it is granted */
	VT_ASSERT_OK(c, vad_alloc_in(c, "frames", 2 * MiB, 0, &p));
	a = stats_of(c, "frames");
	assert_int_equal(2 * MiB, a.committed_bytes);
	assert_true(a.resident_bytes >= 2 * MiB); /* backed, though nobody wrote it yet */
	memset(p, 0x5a, 2 * MiB);

	/* a batch that fails at its second range keeps nothing, the first one included */
	void *two[2];
	size_t sizes[2] = {1 * MiB, 16 * MiB};
	VT_ASSERT_ERR(c, VAD_ECOMMIT, vad_alloc_batch_in(c, "frames", 2, sizes, 0, two));
	assert_true(vt_contains(vad_last_error(c), "(range 2 of 2; none kept)"));
	a = stats_of(c, "frames");
	assert_int_equal(2 * MiB, a.committed_bytes);
	assert_int_equal(2 * MiB, a.busy_bytes);
	VT_ASSERT_OK(c, vad_free(c, p));

	/* a freed range keeps its memory on the allocator's lazy list until it is punched: a
	 * commit that runs short gives that back first, so 6 MiB fits again and again */
	for (int i = 0; i < 4; i++) {
		VT_ASSERT_OK(c, vad_alloc_in(c, "frames", 6 * MiB, 0, &p));
		VT_ASSERT_OK(c, vad_free(c, p));
	}
	assert_int_equal(2, stats_of(c, "frames").commit_failures);

	/* with commit = touch the same request is granted, and the first write past the
	 * file system's room kills the writer */
	fflush(stdout);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGBUS, SIG_DFL); /* cmocka's handler would carry on with the tests here */
		vad_client *cc;
		int rc = vad_connect(d.socket_path, "toucher", &cc);
		VT_CHILD_CHECK(rc == 0, "connect: %d", rc);
		void *q;
		rc = vad_alloc_in(cc, "lazy", 16 * MiB, 0, &q);
		VT_CHILD_CHECK(rc == 0, "alloc with commit = touch: %s", vad_last_error(cc));
		memset(q, 1, 16 * MiB);
		_exit(0); /* not reached in an 8 MiB tmpfs */
	}
	int st = vt_wait_child(pid, vt_timeout_ms(30000));
	print_message("a child writing 16 MiB of a commit = touch arena: %s\n",
		      st == 128 + SIGBUS ? "killed by SIGBUS" : "not killed by SIGBUS");
	assert_int_equal(128 + SIGBUS, st);

	vad_close(c);
	assert_int_equal(0, vt_check_invariants(&d));
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}

/* ---- backing = hugetlb ------------------------------------------------------------------ */

#define HUGE_DIR  "/sys/kernel/mm/hugepages/hugepages-2048kB/"
#define HUGE_PAGE (2 * MiB)
#define HUGE_WANT 4 /* pages the test adds to the pool */

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_long(const char *path, long v)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	int rc = fprintf(f, "%ld\n", v) > 0 ? 0 : -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

static long huge_before = -1; /* the pool's size before the test raised it */

/* Give the pool back its size, whatever the test's end. */
static int restore_huge_pages(void **state)
{
	(void)state;
	if (huge_before >= 0)
		write_long(HUGE_DIR "nr_hugepages", huge_before);
	huge_before = -1;
	return 0;
}

static void test_hugetlb_arena(void **state)
{
	(void)state;
	if (!vt_is_root()) {
		print_message("skipped: reserving huge pages needs root\n");
		skip();
	}
	long before = read_long(HUGE_DIR "nr_hugepages");
	if (before < 0 || write_long(HUGE_DIR "nr_hugepages", before + HUGE_WANT) != 0) {
		print_message("skipped: the kernel has no 2 MiB huge page pool to raise\n");
		skip();
	}
	huge_before = before;
	long avail = read_long(HUGE_DIR "free_hugepages") - read_long(HUGE_DIR "resv_hugepages");
	if (avail < HUGE_WANT) {
		print_message("skipped: the kernel gave only %ld free huge pages of %d asked\n",
			      avail, HUGE_WANT);
		skip();
	}
	/* the arena is larger than the pool, so the pool is what runs short */
	char section[256];
	snprintf(section, sizeof(section),
		 "[arena frames]\nsize = %ldM\nbacking = hugetlb:2M\ncommit = reserve\n",
		 2 * (avail + 8));
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_setup(&d, NULL, section));
	vad_client *c;
	assert_int_equal(0, vt_connect(&d, "huge", &c));
	struct vad_arena_info *ai;
	size_t n;
	VT_ASSERT_OK(c, vad_arenas(c, &ai, &n));
	assert_int_equal(1, n);
	assert_int_equal(HUGE_PAGE, ai[0].quantum);
	assert_string_equal("hugetlb", ai[0].backing);
	assert_string_equal("2 MiB", ai[0].huge);
	assert_string_equal("reserve", ai[0].commit);
	free(ai);

	/* a small request is one huge page, aligned; written and read back */
	void *p[2];
	VT_ASSERT_OK(c, vad_alloc_in(c, "frames", 4096, 0, &p[0]));
	VT_ASSERT_OK(c, vad_alloc_in(c, "frames", HUGE_PAGE + 1, 0, &p[1]));
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, p[0], &r));
	assert_int_equal(HUGE_PAGE, r.size);
	assert_int_equal(0, r.offset % HUGE_PAGE);
	assert_int_equal(0, (uintptr_t)p[0] % HUGE_PAGE);
	VT_ASSERT_OK(c, vad_range_info(c, p[1], &r));
	assert_int_equal(2 * HUGE_PAGE, r.size);
	vt_fill_pattern(p[1], 2 * HUGE_PAGE, 7);
	assert_true(vt_check_pattern(p[1], 2 * HUGE_PAGE, 7) < 0);
	struct vad_arena_stats a = stats_of(c, "frames");
	assert_int_equal(3 * HUGE_PAGE, a.committed_bytes);

	/* one page more than the pool has left is refused with a sentence naming the pool, and
	 * nobody dies */
	void *q;
	long left = read_long(HUGE_DIR "free_hugepages") - read_long(HUGE_DIR "resv_hugepages");
	VT_ASSERT_ERR(c, VAD_ECOMMIT,
		      vad_alloc_in(c, "frames", (size_t)(left + 1) * HUGE_PAGE, 0, &q));
	print_message("refused: %s\n", vad_last_error(c));
	assert_true(vt_contains(vad_last_error(c), "arena 'frames' cannot commit"));
	char pool[96];
	snprintf(pool, sizeof(pool), "the 2 MiB huge page pool has %ld of", left);
	assert_true(vt_contains(vad_last_error(c), pool));
	a = stats_of(c, "frames");
	assert_int_equal(3 * HUGE_PAGE, a.committed_bytes);
	assert_int_equal(1, a.commit_failures);

	/* a freed range comes back as zeros */
	VT_ASSERT_OK(c, vad_free(c, p[1]));
	VT_ASSERT_OK(c, vad_purge_arena(c, "frames", NULL));
	VT_ASSERT_OK(c, vad_alloc_in(c, "frames", 2 * HUGE_PAGE, 0, &q));
	for (size_t i = 0; i < 2 * HUGE_PAGE; i += 4096)
		if (((volatile unsigned char *)q)[i])
			fail_msg("byte %zu of a reused huge range is not zero", i);
	VT_ASSERT_OK(c, vad_free(c, q));
	VT_ASSERT_OK(c, vad_free(c, p[0]));
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(&d));
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

/* ---- huge = thp ------------------------------------------------------------------------ */

#define SHMEM_THP "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

static char thp_before[32]; /* the shmem THP policy before the test set "advise" */

/* The policy in brackets of SHMEM_THP ("never"), or "" if the kernel has none. */
static void shmem_policy(char *buf, size_t len)
{
	buf[0] = '\0';
	char line[256];
	FILE *f = fopen(SHMEM_THP, "re");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f)) {
		char *open = strchr(line, '['), *close = open ? strchr(open, ']') : NULL;
		if (close)
			snprintf(buf, len, "%.*s", (int)(close - open - 1), open + 1);
	}
	fclose(f);
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	int rc = fputs(text, f) >= 0 ? 0 : -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

static int restore_thp(void **state)
{
	(void)state;
	if (thp_before[0])
		write_text(SHMEM_THP, thp_before);
	thp_before[0] = '\0';
	return 0;
}

/* kB of the daemon's mapping of memfd "vad:NAME" mapped by huge pages (ShmemPmdMapped). */
static long pmd_mapped_kb(pid_t pid, const char *name)
{
	char path[64], line[512], want[96];
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	snprintf(want, sizeof(want), "/memfd:vad:%s ", name);
	FILE *f = fopen(path, "re");
	long kb = -1;
	bool in = false;
	while (f && fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strstr(line, " rw-s "))
			in = strstr(line, want) != NULL;
		if (in && sscanf(line, "ShmemPmdMapped: %ld kB", &kb) == 1)
			break;
	}
	if (f)
		fclose(f);
	return kb;
}

/* With shmem THP on "advise", a huge = thp, commit = reserve arena's ranges are committed in
 * huge pages through the daemon's advised mapping. */
static void test_thp_arena(void **state)
{
	(void)state;
	char policy[32];
	shmem_policy(policy, sizeof(policy));
	if (!policy[0]) {
		print_message("skipped: this kernel has no shmem transparent huge pages\n");
		skip();
	}
	if (strcmp(policy, "never") == 0 || strcmp(policy, "deny") == 0) {
		if (!vt_is_root() || write_text(SHMEM_THP, "advise") != 0) {
			print_message("skipped: shmem THP is \"%s\" and cannot be set to advise\n",
				      policy);
			skip();
		}
		snprintf(thp_before, sizeof(thp_before), "%s", policy);
	}
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_setup(&d, NULL,
					    "[arena thp]\nsize = 64M\nhuge = thp\n"
					    "commit = reserve\n"));
	vad_client *c;
	assert_int_equal(0, vt_connect(&d, "thp", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "thp", 4 * MiB, 2 * MiB, &p));
	long kb = pmd_mapped_kb(d.pid, "thp");
	print_message("shmem THP \"%s\": %ld kB of the 4 MiB committed in huge pages\n",
		      thp_before[0] ? "advise" : policy, kb);
	assert_true(kb >= 4096);
	memset(p, 3, 4 * MiB);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(&d));
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

/* ---- numa_node -------------------------------------------------------------------------- */

/* The policy of the page at p as get_mempolicy(MPOL_F_ADDR) reads it: mode and node mask. */
static int policy_of(void *p, unsigned long *mask)
{
	int mode = -1;
	*mask = 0;
	if (syscall(SYS_get_mempolicy, &mode, mask, 8 * sizeof(*mask), p, MPOL_F_ADDR) != 0)
		fail_msg("get_mempolicy: %s", strerror(errno));
	return mode;
}

static void test_numa_policy(void **state)
{
	(void)state;
	struct vt_daemon d;
	assert_int_equal(0, vt_daemon_setup(&d, NULL,
					    "[arena near]\nsize = 64M\nnuma_node = 0\n"
					    "[arena spread]\nsize = 64M\nnuma_node = interleave\n"
					    "[arena plain]\nsize = 64M\n"));
	vad_client *c;
	assert_int_equal(0, vt_connect(&d, "placed", &c));
	void *p[3];
	const char *names[3] = {"near", "spread", "plain"};
	for (int i = 0; i < 3; i++) {
		VT_ASSERT_OK(c, vad_alloc_in(c, names[i], 1 * MiB, 0, &p[i]));
		memset(p[i], 1, 1 * MiB); /* this client touches the pages first */
	}
	unsigned long mask;
	assert_int_equal(MPOL_BIND, policy_of(p[0], &mask));
	assert_int_equal(1, mask);
	assert_int_equal(MPOL_INTERLEAVE, policy_of(p[1], &mask));
	assert_true(mask & 1);
	assert_int_equal(MPOL_DEFAULT, policy_of(p[2], &mask));

	struct vad_arena_info *ai;
	size_t n;
	VT_ASSERT_OK(c, vad_arenas(c, &ai, &n));
	assert_int_equal(3, n);
	for (size_t i = 0; i < n; i++) {
		const char *want = strcmp(ai[i].name, "near") == 0     ? "node 0"
				   : strcmp(ai[i].name, "spread") == 0 ? "interleave"
								       : "";
		assert_string_equal(want, ai[i].numa);
		assert_string_equal("touch", ai[i].commit);
	}
	free(ai);
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(&d));
	assert_int_equal(0, vt_daemon_stop(&d));
	vt_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_commit_reserve_tmpfs),
	    cmocka_unit_test_teardown(test_hugetlb_arena, restore_huge_pages),
	    cmocka_unit_test_teardown(test_thp_arena, restore_thp),
	    cmocka_unit_test(test_numa_policy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
