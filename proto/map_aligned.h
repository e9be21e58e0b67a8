/*
 * map_aligned.h - a file mapped shared at an aligned address, as both the daemon (its own
 * view of a huge-page or NUMA-placed arena) and libvad (a client's view of an arena) need.
 */
#ifndef VAD_MAP_ALIGNED_H
#define VAD_MAP_ALIGNED_H

#include <stddef.h>

/* Map size bytes of fd MAP_SHARED with prot at an address aligned to align (a power of two);
 * MAP_FAILED with errno set on failure. */
void *vad_map_aligned(int fd, size_t size, size_t align, int prot);

#endif
