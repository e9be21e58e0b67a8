/* zero.h - freed blocks the allocator keeps pooled are made to read zeros in place (a memset
 * of their written pages through the daemon's mapping) instead of being punched out, so the
 * next holder keeps its page table entries and takes no page fault; see zero.c. */
#ifndef VAD_ZERO_H
#define VAD_ZERO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vad_arena;
struct va_extent;

/* True if a's file allows zeroing in place: a sealed shmem memfd of small pages with commit =
 * touch (a hugetlb page or a committed one may be absent, and writing it could fault). */
bool vad_zero_possible(const struct vad_arena *a);

/* Map a's file for zeroing (reusing a->map when the NUMA code made one); 0, or -1 with a
 * sentence in err (the arena then only punches). Call only when vad_zero_possible(a). */
int vad_zero_map(struct vad_arena *a, char *err, size_t err_len);

/* va_config.zero for ctx = the arena: zero the written pages of [start, start + size). */
void vad_zero_block(void *ctx, uint64_t start, uint64_t size);

/* va_config.zero_many for ctx = the arena: zero the written pages of n free blocks sorted by
 * address, with one SEEK_DATA for a run of them nobody wrote. */
void vad_zero_many(void *ctx, const struct va_extent *r, size_t n);

/* Undo vad_zero_map (a's own mapping only). */
void vad_zero_unmap(struct vad_arena *a);

#endif
