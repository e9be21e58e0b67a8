/*
 * test_libvad_align.c - pointers are aligned to what was asked, in every process, against
 * the real daemon. For every power of two from the quantum up to VAD_MAX_ALIGN (1 GiB, in a
 * 4 GiB sparse arena) and up to the size of a small arena (6 MiB, whose mapping is aligned
 * to 8 MiB), ranges from vad_alloc, vad_alloc_batch, vad_attach (in a second connection,
 * its own mapping) and vad_pointer (in a third) are aligned, and the three views are the
 * same memory. The daemon aligns offsets; libvad must map each arena at an address aligned
 * at least as much (with mmap(NULL, ...) a mapping is only page aligned, or 2 MiB by luck).
 * Alignments above what an arena can give are refused with VAD_EINVAL and a sentence.
 */
#include <string.h>

#include "vtassert.h"

#define PAGE 4096u

static const char *const arenas_conf = "[arena default]\n"
				       "size = 4G\n"
				       "\n"
				       "[arena small]\n"
				       "size = 6M\n";

struct views {
	vad_client *owner;    /* allocates and shares */
	vad_client *attacher; /* attaches by token */
	vad_client *pointer;  /* vad_pointer by offset */
};

static bool aligned(const void *p, size_t align)
{
	return ((uintptr_t)p & (align - 1)) == 0;
}

/* Note a misaligned pointer (the first one of each alignment is printed). */
static void misaligned(bool *failed, const char *what, const char *arena, size_t align,
		       const void *p)
{
	if (!*failed)
		fprintf(stderr, "arena '%s', alignment %zu: %s returned %p (off by %zu)\n", arena,
			align, what, p, (size_t)((uintptr_t)p & (align - 1)));
	*failed = true;
}

/* Check one alignment in arena (size bytes); true if every pointer was aligned. */
static bool check_alignment(struct views *v, const char *arena, uint64_t size, size_t align)
{
	bool failed = false;
	void *p;
	VT_ASSERT_OK(v->owner, vad_alloc_in(v->owner, arena, PAGE, align, &p));
	if (!aligned(p, align))
		misaligned(&failed, "vad_alloc", arena, align, p);
	*(volatile uint64_t *)p = align;

	/* Another process's view: attach by token, and vad_pointer by offset. */
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(v->owner, vad_share(v->owner, p, token));
	void *q;
	size_t qsize;
	VT_ASSERT_OK(v->attacher, vad_attach(v->attacher, token, &q, &qsize));
	if (!aligned(q, align))
		misaligned(&failed, "vad_attach", arena, align, q);
	assert_int_equal(align, *(volatile uint64_t *)q);
	struct vad_range info;
	VT_ASSERT_OK(v->owner, vad_range_info(v->owner, p, &info));
	void *r;
	VT_ASSERT_OK(v->pointer, vad_pointer(v->pointer, arena, info.offset, &r));
	if (!aligned(r, align))
		misaligned(&failed, "vad_pointer", arena, align, r);
	assert_int_equal(align, *(volatile uint64_t *)r);
	VT_ASSERT_OK(v->attacher, vad_free(v->attacher, q));
	VT_ASSERT_OK(v->owner, vad_free(v->owner, p));

	/* A batch: as many ranges as fit at that alignment, at most 3. */
	size_t n = (size_t)((size - PAGE) / align + 1);
	if (n > 3)
		n = 3;
	size_t sizes[3] = {PAGE, 2 * PAGE, PAGE};
	void *ptrs[3];
	VT_ASSERT_OK(v->owner, vad_alloc_batch_in(v->owner, arena, n, sizes, align, ptrs));
	for (size_t i = 0; i < n; i++)
		if (!aligned(ptrs[i], align))
			misaligned(&failed, "vad_alloc_batch", arena, align, ptrs[i]);
	VT_ASSERT_OK(v->owner, vad_free_batch(v->owner, n, ptrs));
	return !failed;
}

/* Every power of two from the quantum up to the largest the arena can take; returns how
 * many failed, of *checked. */
static int check_arena(struct vt_daemon *d, const char *arena, uint64_t size, size_t top,
		       int *checked)
{
	struct views v;
	assert_int_equal(0, vt_connect(d, "align-owner", &v.owner));
	assert_int_equal(0, vt_connect(d, "align-attacher", &v.attacher));
	assert_int_equal(0, vt_connect(d, "align-pointer", &v.pointer));
	int failed = 0;
	*checked = 0;
	for (size_t align = PAGE; align <= top; align <<= 1) {
		(*checked)++;
		if (!check_alignment(&v, arena, size, align))
			failed++;
	}
	vad_close(v.pointer);
	vad_close(v.attacher);
	vad_close(v.owner);
	return failed;
}

static void test_every_alignment_up_to_1g(void **state)
{
	struct vt_daemon *d = *state;
	int checked;
	int failed = check_arena(d, "default", 4ull << 30, VAD_MAX_ALIGN, &checked);
	fprintf(stderr,
		"arena 'default' (4 GiB): %d of %d alignments from 2^12 to 2^30 gave a "
		"misaligned pointer\n",
		failed, checked);
	assert_int_equal(19, checked);
	assert_int_equal(0, failed);
	assert_int_equal(0, vt_check_invariants(d));
}

static void test_every_alignment_of_a_small_arena(void **state)
{
	struct vt_daemon *d = *state;
	int checked;
	/* 6 MiB: the daemon takes alignments up to the arena's size, so 4 MiB is the last. */
	int failed = check_arena(d, "small", 6u << 20, 4u << 20, &checked);
	fprintf(stderr,
		"arena 'small' (6 MiB): %d of %d alignments from 2^12 to 2^22 gave a "
		"misaligned pointer\n",
		failed, checked);
	assert_int_equal(0, failed);
}

/* Above what an arena can give: refused by libvad with a sentence, nothing allocated. */
static void test_larger_alignments_refused(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "align-refused", &c));
	void *p = NULL;
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_alloc(c, PAGE, (size_t)VAD_MAX_ALIGN * 2, &p));
	assert_true(vt_contains(vad_last_error(c), "VAD_MAX_ALIGN"));
	size_t sizes[2] = {PAGE, PAGE};
	void *ptrs[2];
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_alloc_batch(c, 2, sizes, (size_t)VAD_MAX_ALIGN * 4, ptrs));
	/* The small arena is mapped aligned to 8 MiB (6 MiB rounded up): 16 MiB is too much. */
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_alloc_in(c, "small", PAGE, 16u << 20, &p));
	assert_true(vt_contains(vad_last_error(c), "largest arena 'small' gives"));
	/* 8 MiB is within the mapping's alignment but above the arena's size: the daemon's. */
	VT_ASSERT_ERR(c, VAD_EALIGN, vad_alloc_in(c, "small", PAGE, 8u << 20, &p));
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	vad_close(c);
}

VT_DAEMON_GROUP(group_setup, NULL, arenas_conf)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_alignment_up_to_1g),
	    cmocka_unit_test(test_every_alignment_of_a_small_arena),
	    cmocka_unit_test(test_larger_alignments_refused),
	};
	return cmocka_run_group_tests_name("libvad alignment", tests, group_setup,
					   vt_group_daemon_stop);
}
