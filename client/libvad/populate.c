/*
 * populate.c - VAD_POPULATE: the pages of new ranges made present and writable in this
 * process before the allocation returns, so the caller's first writes take no faults.
 * Adjacent ranges (a batch usually is) go in one madvise(MADV_POPULATE_WRITE); a kernel
 * without it (before 5.14: EINVAL) gets each page written instead, with an atomic add of 0
 * that keeps whatever the range holds.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Whether the kernel refused MADV_POPULATE_WRITE as unknown (then never asked again). */
static bool no_populate_write;

static void touch_pages(uint8_t *p, size_t len, size_t page)
{
	for (size_t o = 0; o < len; o += page)
		__atomic_fetch_add(p + o, 0, __ATOMIC_RELAXED);
}

/* Prefault [p, p + len) (page aligned); 0 or an errno. */
static int populate_run(uint8_t *p, size_t len, size_t page)
{
	if (!__atomic_load_n(&no_populate_write, __ATOMIC_RELAXED)) {
		if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
			return 0;
		if (errno != EINVAL)
			return errno;
		__atomic_store_n(&no_populate_write, true, __ATOMIC_RELAXED);
	}
	touch_pages(p, len, page);
	return 0;
}

int libvad_populate(vad_client *c, size_t n, const size_t *sizes, void *const *ptrs)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int err = 0;
	uintptr_t lo = 0, hi = 0; /* the run of adjacent pages being gathered */
	for (size_t i = 0; i <= n && !err; i++) {
		uintptr_t a = 0, b = 0;
		if (i < n) {
			a = (uintptr_t)ptrs[i] & ~(uintptr_t)(page - 1);
			b = ((uintptr_t)ptrs[i] + sizes[i] + page - 1) & ~(uintptr_t)(page - 1);
			if (hi && a <= hi && b >= lo) { /* touches the run: extend it */
				lo = a < lo ? a : lo;
				hi = b > hi ? b : hi;
				continue;
			}
		}
		if (hi)
			err = populate_run((uint8_t *)lo, hi - lo, page);
		lo = a;
		hi = b;
	}
	if (!err)
		return VAD_OK;
	vad_free_batch(c, n, ptrs);
	return libvad_failf(c, VAD_ENOMEM,
			    "VAD_POPULATE: the kernel could not back the new ranges with memory "
			    "(madvise MADV_POPULATE_WRITE: %s); they are freed",
			    strerror(err));
}
