/*
 * failmalloc.c - an LD_PRELOAD shim that makes malloc, calloc, realloc, posix_memalign,
 * aligned_alloc and memalign fail (NULL, errno ENOMEM) every Nth call, so a test can watch a
 * program meet allocation failures without changing its source.
 *
 *   VAD_FAILMALLOC_EVERY=N       fail every Nth call (0 or unset: never fail)
 *   VAD_FAILMALLOC_START=M       ... but only after the first M calls
 *   VAD_FAILMALLOC_FROM_NS=T     ... and only from CLOCK_MONOTONIC time T (ns; 0: from the start)
 *   VAD_FAILMALLOC_UNTIL_NS=T    ... and only before CLOCK_MONOTONIC time T (ns; 0: forever)
 *   VAD_FAILMALLOC_REPORT=PATH   at exit, write "calls N failed F" to PATH
 *
 * The real allocator is glibc's (__libc_malloc and friends, exported for exactly this), so
 * no dlsym recursion. Not for sanitizer builds: their runtimes own malloc.
 * Build: cc -shared -fPIC -O2 -o failmalloc.so failmalloc.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void __libc_free(void *p);

static uint64_t every, start_after, from_ns, until_ns;
static int armed;	/* parsed the environment */
static uint64_t calls;	/* atomic */
static uint64_t failed; /* atomic */
static char report_path[512];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t env_u64(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : 0;
}

static void report(void)
{
	if (!report_path[0])
		return;
	FILE *f = fopen(report_path, "w");
	if (!f)
		return;
	fprintf(f, "calls %llu failed %llu\n",
		(unsigned long long)__atomic_load_n(&calls, __ATOMIC_RELAXED),
		(unsigned long long)__atomic_load_n(&failed, __ATOMIC_RELAXED));
	fclose(f);
}

__attribute__((constructor)) static void failmalloc_init(void)
{
	every = env_u64("VAD_FAILMALLOC_EVERY");
	start_after = env_u64("VAD_FAILMALLOC_START");
	from_ns = env_u64("VAD_FAILMALLOC_FROM_NS");
	until_ns = env_u64("VAD_FAILMALLOC_UNTIL_NS");
	const char *r = getenv("VAD_FAILMALLOC_REPORT");
	if (r && strlen(r) < sizeof(report_path)) {
		strcpy(report_path, r);
		atexit(report);
	}
	__atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
}

/* Should this call fail? */
static int should_fail(void)
{
	if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE) || !every)
		return 0;
	uint64_t n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
	if (n <= start_after || n % every != 0)
		return 0;
	if (from_ns || until_ns) {
		uint64_t t = now_ns();
		if (t < from_ns || (until_ns && t >= until_ns))
			return 0;
	}
	__atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t size)
{
	return should_fail() ? NULL : __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	return should_fail() ? NULL : __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	/* realloc(p, 0) frees; never turn a free into a leak. */
	if (p && size == 0)
		return __libc_realloc(p, 0);
	return should_fail() ? NULL : __libc_realloc(p, size);
}

void free(void *p)
{
	__libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	if (should_fail())
		return ENOMEM;
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	void *p = __libc_memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
	return should_fail() ? NULL : __libc_memalign(align, size);
}

void *memalign(size_t align, size_t size)
{
	return should_fail() ? NULL : __libc_memalign(align, size);
}
