/* numa.h - an arena's placement and huge-page advice, set on the daemon's own mapping of its
 * file: numa_node (mbind, a shared policy every process that maps a memfd obeys) and huge =
 * thp (MADV_HUGEPAGE). */
#ifndef VAD_NUMA_H
#define VAD_NUMA_H

#include <stddef.h>

struct vad_arena;

/* Map the arena's file in the daemon when its section asks for a NUMA policy, transparent huge
 * pages, or hugetlb pages placed on a node, and set them there (a->map). 0, or -1 with a
 * sentence in err. Nothing to do: 0 and a->map stays NULL. */
int vad_numa_apply(struct vad_arena *a, char *err, size_t err_len);

/* Unmap what vad_numa_apply mapped. */
void vad_numa_unmap(struct vad_arena *a);

#endif
