/* arena.h - one shared-memory arena: a sealed sparse memfd (or unlinked file) plus its allocator. */
#ifndef VAD_ARENA_H
#define VAD_ARENA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "vaspace.h"

struct vad_arena {
	struct vad_arena_conf conf; /* deep copy: name, size, quantum, backing, allow-list */
	unsigned index;		    /* position in the daemon's arena array */
	int fd;			    /* memfd sealed F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL */
	int ro_fd;		    /* the same file reopened O_RDONLY: what readers are sent;
				       -1 if it could not be made (only in an arena without
				       readers) */
	struct va_space *vs;	    /* offsets [0, size) */
	uint64_t punch_failures;    /* fallocate(PUNCH_HOLE) errors (logged once each kind) */
	bool unsealed;		    /* a directory file that could not be sealed, accepted by
				       the section's accept_unsealed = yes */
};

/* Create the backing file, size it sparse, seal it and build its allocator with the
 * daemon-wide nodes/lazy_max; release = fallocate(PUNCH_HOLE|KEEP_SIZE). A file that cannot
 * be sealed is refused ("FILE:LINE: ..." of its section, naming the seal and errno) unless
 * the section accepts it unsealed. On failure returns -1 with a reason in err. */
int vad_arena_open(const struct vad_arena_conf *conf, const struct vad_config *cfg,
		   unsigned index, struct vad_arena **out, char *err, size_t err_len);

/* Bytes of the arena's file backed by memory: its allocated blocks (fstat st_blocks x 512),
 * whoever wrote them; 0 if fstat fails. */
uint64_t vad_arena_resident_bytes(const struct vad_arena *a);

/* Destroy the allocator and close the fd (clients keep their own mappings). */
void vad_arena_close(struct vad_arena *a);

/* May a peer with this uid, primary gid and supplementary groups write in the arena (root,
 * any peer when it has no allow-list, else its allow_uids/allow_gids)? */
bool vad_arena_allows(const struct vad_arena *a, uid_t uid, gid_t gid, const gid_t *groups,
		      size_t n_groups);

/* May such a peer read the arena only: not a writer, but in its reader_uids/reader_gids? */
bool vad_arena_reads_only(const struct vad_arena *a, uid_t uid, gid_t gid, const gid_t *groups,
			  size_t n_groups);

#endif
