/*
 * map_aligned.c - reserve size + align bytes of address space, map the file over the aligned
 * part of it and give back both ends. MAP_NORESERVE: a hugetlb arena's mapping would otherwise
 * reserve huge pages for the whole arena (the daemon commits per range where the arena says
 * commit = reserve).
 */
#include "map_aligned.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

void *vad_map_aligned(int fd, size_t size, size_t align, int prot)
{
	size_t span = size + align;
	uint8_t *res =
	    mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *base = (uint8_t *)(((uintptr_t)res + align - 1) & ~(uintptr_t)(align - 1));
	if (mmap(base, size, prot, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0) == MAP_FAILED) {
		int e = errno;
		munmap(res, span);
		errno = e;
		return MAP_FAILED;
	}
	if (base > res)
		munmap(res, (size_t)(base - res));
	if (res + span > base + size)
		munmap(base + size, (size_t)(res + span - (base + size)));
	return base;
}
