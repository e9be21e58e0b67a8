/* numa.c - NUMA policy and huge-page advice on the daemon's mapping of an arena; see numa.h.
 *
 * mbind on a shared mapping of a memfd sets the file's shared policy (shmem keeps it per file
 * range), so a page lands on the node whichever client touches it first, and the daemon's own
 * fallocate (commit = reserve) obeys it too. A hugetlb file keeps no shared policy: there the
 * policy holds for the daemon's mapping only, and the daemon commits such an arena's ranges by
 * populating that mapping (commit.c), so the pages it commits land on the node. The raw
 * system calls are used: libnuma is not needed for two calls.
 */
#include "numa.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "map_aligned.h"

#define NODEMASK_BITS (VAD_NUMA_NODE_MAX + 1)

/* Every node with memory (/sys/devices/system/node/has_memory, "0-1,3"), else node 0. */
static void nodes_with_memory(unsigned long *mask)
{
	memset(mask, 0, NODEMASK_BITS / 8);
	FILE *f = fopen("/sys/devices/system/node/has_memory", "re");
	unsigned a, b;
	char sep = 0;
	bool any = false;
	while (f && fscanf(f, "%u", &a) == 1) {
		b = a;
		if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%u%c", &b, &sep) < 1)
			break;
		for (unsigned n = a; n <= b && n < NODEMASK_BITS; n++) {
			mask[n / (8 * sizeof(long))] |= 1ul << (n % (8 * sizeof(long)));
			any = true;
		}
		if (sep != ',')
			break;
	}
	if (f)
		fclose(f);
	if (!any)
		mask[0] = 1;
}

int vad_numa_apply(struct vad_arena *a, char *err, size_t err_len)
{
	const struct vad_arena_conf *c = &a->conf;
	if (c->numa == VAD_NUMA_NONE && !c->thp)
		return 0;
	size_t align = c->hugetlb_page > (2u << 20) ? c->hugetlb_page : (2u << 20);
	void *p = vad_map_aligned(a->fd, c->size, align, PROT_READ | PROT_WRITE);
	if (p == MAP_FAILED) {
		snprintf(err, err_len, "arena %s: cannot map its file to set its %s: %s", c->name,
			 c->thp ? "huge page advice" : "NUMA policy", strerror(errno));
		return -1;
	}
	a->map = p;
	if (c->thp && madvise(p, c->size, MADV_HUGEPAGE) != 0) {
		snprintf(err, err_len, "arena %s: huge = thp: madvise(MADV_HUGEPAGE): %s", c->name,
			 strerror(errno));
		goto fail;
	}
	if (c->numa == VAD_NUMA_NONE)
		return 0;
	unsigned long mask[NODEMASK_BITS / (8 * sizeof(long))];
	int mode = MPOL_INTERLEAVE;
	if (c->numa == VAD_NUMA_INTERLEAVE) {
		nodes_with_memory(mask);
	} else {
		memset(mask, 0, sizeof(mask));
		mask[c->numa_node / (8 * sizeof(long))] = 1ul
							  << (c->numa_node % (8 * sizeof(long)));
		mode = MPOL_BIND;
	}
	if (syscall(SYS_mbind, p, c->size, mode, mask, (unsigned long)NODEMASK_BITS, 0) != 0) {
		snprintf(err, err_len, "arena %s: numa_node = %s: mbind: %s", c->name,
			 c->numa == VAD_NUMA_INTERLEAVE ? "interleave" : c->numa_text + 5,
			 strerror(errno));
		goto fail;
	}
	return 0;
fail:
	munmap(p, c->size);
	a->map = NULL;
	return -1;
}

void vad_numa_unmap(struct vad_arena *a)
{
	if (a->map)
		munmap(a->map, a->conf.size);
	a->map = NULL;
}
