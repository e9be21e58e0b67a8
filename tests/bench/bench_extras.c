/*
 * bench_extras.c - the exactness price and the metadata cost, shown in every run.
 *
 * Exact hole: areas of 1, 97 and 1 quanta from the bottom of the space, the 97 freed (and
 * made reusable), then a request of 97 quanta. An exact allocator puts it in the hole; a
 * segregated fit rounds 97 up to its next class and passes over it. Once in the full-size
 * space (where it lands), once in a space of exactly 99 quanta (whether it fails).
 *
 * Metadata: in a child process per implementation, so every one starts from a fresh
 * heap (lib/ keeps its block slabs at their high-water mark for the process), the heap
 * in use (mallinfo2: arena and mmap'd bytes) before and after making N live ranges of
 * 1 quantum, packed, and N live ranges each followed by a 1-quantum hole.
 */
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_extras.h"

#define HOLE_Q		97
#define META_DEADLINE	30 /* seconds a child may take */
#define HOLE_NOT_PACKED 1  /* the three areas were not placed side by side */

static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* Where a 97-quanta request goes once a 97-quanta hole lies between two busy areas:
 * *where = its distance past the hole in quanta (0: in the hole). VA_OK or the error. */
static int hole_case(const struct bench_impl_ops *impl, uint64_t quantum, uint64_t base,
		     uint64_t size, int64_t *where)
{
	struct bench_space_cfg cfg = {.base = base, .size = size, .quantum = quantum};
	uint64_t a, b, c, d;
	void *h;
	int rc = impl->create(&cfg, &h);

	if (rc)
		return rc;
	if (impl->thread_start)
		impl->thread_start(h, 0);
	rc = impl->alloc(h, quantum, 0, &a);
	if (!rc)
		rc = impl->alloc(h, HOLE_Q * quantum, 0, &b);
	if (!rc)
		rc = impl->alloc(h, quantum, 0, &c);
	if (!rc && (b != a + quantum || c != b + HOLE_Q * quantum))
		rc = HOLE_NOT_PACKED; /* no hole of exactly 97 quanta to test */
	if (!rc)
		rc = impl->free(h, b);
	if (!rc && impl->quiesce)
		impl->quiesce(h);
	if (!rc)
		rc = impl->alloc(h, HOLE_Q * quantum, 0, &d);
	if (!rc)
		*where = ((int64_t)d - (int64_t)b) / (int64_t)quantum;
	impl->destroy(h);
	return rc;
}

static void print_hole(FILE *f, const struct bench_impl_ops *impl, uint64_t quantum, uint64_t base,
		       uint64_t size)
{
	int64_t where = 0;
	int big = hole_case(impl, quantum, base, size, &where);
	char a[80], b[80];

	if (big == HOLE_NOT_PACKED)
		snprintf(a, sizeof(a), "n/a (its pools place the 3 areas apart)");
	else if (big)
		snprintf(a, sizeof(a), "fails (%s)", va_strerror(big));
	else if (!where)
		snprintf(a, sizeof(a), "uses it");
	else
		snprintf(a, sizeof(a), "skips it (lands %+lld quanta away)", (long long)where);
	int tight = hole_case(impl, quantum, base, (HOLE_Q + 2) * quantum, &where);
	if (tight == HOLE_NOT_PACKED)
		snprintf(b, sizeof(b), "n/a (not packed)");
	else if (tight == VA_ENOSPC)
		snprintf(b, sizeof(b), "fails (no space)");
	else if (tight)
		snprintf(b, sizeof(b), "error (%s)", va_strerror(tight));
	else
		snprintf(b, sizeof(b), where ? "misplaced" : "uses it");
	fprintf(f, "  %-10s 97-quanta hole, request 97: %s; in a 99-quanta space: %s\n", impl->name,
		a, b);
}

/* In the child: heap bytes per live range for n live ranges, holed or packed. */
static double meta_per_range(const struct bench_impl_ops *impl, uint64_t quantum, uint64_t base,
			     uint64_t size, uint64_t n, int holed)
{
	struct bench_space_cfg cfg = {.base = base, .size = size, .quantum = quantum};
	uint64_t total = holed ? 2 * n : n, *addrs = malloc(total * sizeof(*addrs)), before;
	void *h;

	if (!addrs || impl->create(&cfg, &h))
		return -1;
	if (impl->thread_start)
		impl->thread_start(h, 0);
	before = heap_bytes();
	for (uint64_t i = 0; i < total; i++)
		if (impl->alloc(h, quantum, 0, &addrs[i]))
			return -1;
	for (uint64_t i = 1; holed && i < total; i += 2)
		if (impl->free(h, addrs[i]))
			return -1;
	if (impl->quiesce)
		impl->quiesce(h);
	return (double)(heap_bytes() - before) / (double)n;
}

/* Fork, measure both shapes, pass the figures back through a pipe. */
static void print_meta(FILE *f, const struct bench_impl_ops *impl, uint64_t quantum, uint64_t base,
		       uint64_t size, uint64_t live)
{
	double v[2] = {-1, -1};
	int fd[2], st;
	pid_t pid;

	fflush(f);
	if (pipe(fd))
		return;
	pid = fork();
	if (pid == 0) {
		close(fd[0]);
		alarm(META_DEADLINE);
		v[0] = meta_per_range(impl, quantum, base, size, live, 0);
		if (write(fd[1], v, sizeof(v[0])) != sizeof(v[0]))
			_exit(1);
		v[1] = meta_per_range(impl, quantum, base, size, live, 1);
		if (write(fd[1], &v[1], sizeof(v[1])) != sizeof(v[1]))
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	if (pid > 0) {
		for (unsigned i = 0; i < 2; i++)
			if (read(fd[0], &v[i], sizeof(v[i])) != sizeof(v[i]))
				break;
		waitpid(pid, &st, 0);
	}
	close(fd[0]);
	fprintf(f, "  %-10s metadata at %llu live ranges: ", impl->name, (unsigned long long)live);
	for (unsigned i = 0; i < 2; i++) {
		if (v[i] < 0)
			fprintf(f, "%s n/a", i ? ", holed" : "packed");
		else
			fprintf(f, "%s %.1f B/range", i ? ", holed" : "packed", v[i]);
	}
	fprintf(f, "\n");
}

void bench_extras(FILE *f, const struct bench_impl_ops *const *impls, unsigned n, uint64_t quantum,
		  uint64_t base, uint64_t space_size, uint64_t live)
{
	for (unsigned i = 0; i < n; i++)
		print_hole(f, impls[i], quantum, base, space_size);
	for (unsigned i = 0; live && i < n; i++)
		print_meta(f, impls[i], quantum, base, space_size, live);
	fflush(f);
}
