/*
 * test_libvad_populate.c - VAD_POPULATE: ranges of a batch (adjacent and not) and single
 * ranges of 4 KiB to 1 MiB come back with every page resident (mincore) and writing them all
 * takes no page fault in this thread (getrusage); unknown flags are refused with a sentence;
 * flags 0 behave as vad_alloc_batch_in. (A read-only arena's refusal is in
 * test_service_readers, which runs peers as reader uids.)
 */
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "vtassert.h"

#define PAGE 4096u

static const char *const arenas_conf = "[arena default]\n"
				       "size = 256M\n";

VT_DAEMON_GROUP(group_setup, NULL, arenas_conf)

/* Pages of [p, p + len) not resident in this process's view of the arena. */
static size_t missing_pages(void *p, size_t len)
{
	size_t pages = (len + PAGE - 1) / PAGE;
	unsigned char vec[512];
	assert_true(pages <= sizeof(vec));
	assert_int_equal(0, mincore(p, pages * PAGE, vec));
	size_t missing = 0;
	for (size_t i = 0; i < pages; i++)
		missing += !(vec[i] & 1);
	return missing;
}

static long thread_faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt + ru.ru_majflt;
}

/* A sanitizer's shadow memory faults on the first write of every page it shadows, so the
 * fault count says nothing about the range there; mincore still does. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FAULTS_MEAN_NOTHING 1
#else
#define FAULTS_MEAN_NOTHING 0
#endif

/* Write every byte of ptrs[i] (sizes[i]); whether that took almost no page fault (a few of
 * the stack or the test's own pages at most, never one per page). */
static bool write_all_faultless(size_t n, void **ptrs, const size_t *sizes)
{
	long f0 = thread_faults();
	for (size_t i = 0; i < n; i++)
		memset(ptrs[i], 0x5a, sizes[i]);
	return FAULTS_MEAN_NOTHING || thread_faults() - f0 < 4;
}

static void test_populated_batches(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "populate", &c));
	static const size_t shapes[] = {PAGE, 16 * PAGE, 256 * PAGE, 3 * PAGE};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		enum { N = 8 };
		size_t sizes[N];
		void *v[N];
		for (size_t i = 0; i < N; i++)
			sizes[i] = shapes[s] + (i % 2) * PAGE; /* mixed sizes */
		VT_ASSERT_OK(c, vad_alloc_batch_flags(c, NULL, N, sizes, 0, VAD_POPULATE, v));
		for (size_t i = 0; i < N; i++)
			assert_int_equal(0, missing_pages(v[i], sizes[i]));
		/* Present and writable: writing everything faults nowhere. */
		assert_true(write_all_faultless(N, v, sizes));
		VT_ASSERT_OK(c, vad_free_batch(c, N, v));

		void *one;
		VT_ASSERT_OK(c, vad_alloc_flags(c, NULL, shapes[s], 0, VAD_POPULATE, &one));
		assert_int_equal(0, missing_pages(one, shapes[s]));
		assert_true(write_all_faultless(1, &one, &shapes[s]));
		VT_ASSERT_OK(c, vad_free(c, one));
	}
	/* Flags 0: a plain allocation. */
	void *plain;
	VT_ASSERT_OK(c, vad_alloc_flags(c, "", 2 * PAGE, 0, 0, &plain));
	assert_int_equal(2 * PAGE, vad_size(c, plain));
	VT_ASSERT_OK(c, vad_free(c, plain));
	vad_close(c);
}

static void test_unknown_flags(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "flags", &c));
	void *p;
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_alloc_flags(c, NULL, PAGE, 0, 0x80, &p));
	assert_true(vt_contains(vad_last_error(c), "unknown flags 0x80"));
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges); /* refused before any request */
	vad_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_populated_batches),
	    cmocka_unit_test(test_unknown_flags),
	};
	return cmocka_run_group_tests_name("libvad VAD_POPULATE", tests, group_setup,
					   vt_group_daemon_stop_if_running);
}
