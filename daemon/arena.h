/* arena.h - one shared-memory arena: a sealed sparse memfd (or unlinked file) plus its allocator.
 */
#ifndef VAD_ARENA_H
#define VAD_ARENA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "latency.h"
#include "vaspace.h"

struct vad_arena {
	struct vad_arena_conf conf; /* deep copy: name (NAME@ID for a tenant's), size, quantum,
				       backing, allow-list */
	char client_name[VAD_NAME_MAX + 1]; /* what its clients call it: its section's name */
	unsigned index;			    /* position in the daemon's arena array */
	unsigned section;		    /* its [arena] section's position in the config */
	bool tenant;	     /* one tenant's arena of a section with tenancy (tenants.h) */
	uint32_t tenant_id;  /* that tenant's uid or gid */
	uint64_t generation; /* distinct for every arena opened, so per-slot state sees a
				new arena in a reused slot */
	struct vad_latency *alloc_latency; /* alloc request latency */
	/* Tenant arenas only, under the tenants' lock (tenants.c): */
	unsigned pins;		  /* sessions of the tenant using it, and passing readers */
	uint64_t idle_since_ms;	  /* first sweep that found it unused, 0 while in use */
	int fd;			  /* memfd sealed F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL */
	int ro_fd;		  /* the same file reopened O_RDONLY: what readers are sent;
				     -1 if it could not be made (only in an arena without
				     readers) */
	struct va_space *vs;	  /* offsets [0, size) */
	uint64_t punch_failures;  /* fallocate(PUNCH_HOLE) errors (logged once each kind) */
	bool unsealed;		  /* a directory file that could not be sealed, accepted by
				     the section's accept_unsealed = yes */
	void *map;		  /* the daemon's own mapping of the file where a NUMA policy or
				     huge-page advice is set on it (numa.h), else NULL */
	uint64_t commit_failures; /* alloc requests refused by commit = reserve (atomic) */
	void *zero_map; /* the daemon's mapping pooled blocks are zeroed through (zero.h) when
			   a->map is NULL, else NULL */
	uint64_t zero_seen, zero_written; /* atomic: frees zero.c's looks stand for in this
					     window, and those that held written pages */
	bool keep_pages; /* atomic: stopping with the state kept (persist.h): free ranges are
			    not punched, since a client may still hold them in the next daemon */
};

/* Create the backing file (a memfd, a MFD_HUGETLB memfd for backing = hugetlb, or a file in a
 * directory), size it sparse, set its NUMA policy and huge-page advice (numa.h), seal it and build
 * its allocator with the daemon-wide nodes/lazy_max; release = vad_arena_release, and zero =
 * vad_zero_block where zero.h allows it (a memfd of small pages with commit = touch). A
 * file that cannot be sealed is refused ("FILE:LINE: ..." of its section, naming the seal and
 * errno) unless the section accepts it unsealed. On failure returns -1 with a reason in err. */
int vad_arena_open(const struct vad_arena_conf *conf, const struct vad_config *cfg, unsigned index,
		   struct vad_arena **out, char *err, size_t err_len);

/* vad_arena_open over a file kept from an earlier daemon (fd, taken over: closed on failure
 * too), checked to be the arena conf describes: its size, its seals. fd -1: a fresh file. */
int vad_arena_adopt(const struct vad_arena_conf *conf, const struct vad_config *cfg, unsigned index,
		    int fd, struct vad_arena **out, char *err, size_t err_len);

/* Open the arena of one tenant of a section with tenancy: like vad_arena_open, named
 * "NAME@ID" (its memfd "vad:NAME@ID"), with the section's name for its clients. */
int vad_arena_open_tenant(const struct vad_arena_conf *section, const struct vad_config *cfg,
			  unsigned index, unsigned section_index, uint32_t tenant_id,
			  struct vad_arena **out, char *err, size_t err_len);

/* vad_arena_open_tenant over a file kept from an earlier daemon (fd, taken over: closed on
 * failure too; -1: a fresh file), checked as vad_arena_adopt checks it. */
int vad_arena_adopt_tenant(const struct vad_arena_conf *section, const struct vad_config *cfg,
			   unsigned index, unsigned section_index, uint32_t tenant_id, int fd,
			   struct vad_arena **out, char *err, size_t err_len);

/* Give every page of the arena's file back to the system at once (a tenant arena that
 * closes: clients that still map it see zeros). */
void vad_arena_release_all(struct vad_arena *a);

/* va_config.release for ctx = the arena: punch [start, start + size) out of its file (from its
 * first written page; zeroed by hand if punching fails). */
void vad_arena_release(void *ctx, uint64_t start, uint64_t size);

/* A deep copy of src (its id lists too) into dst; 0, or -1 out of memory (dst left empty). */
int vad_arena_conf_copy(struct vad_arena_conf *dst, const struct vad_arena_conf *src);

/* Free the id lists of a conf made by vad_arena_conf_copy. */
void vad_arena_conf_free(struct vad_arena_conf *c);

/* Bytes of the arena's file backed by memory: its allocated blocks (fstat st_blocks x 512),
 * whoever wrote them; 0 if fstat fails. */
uint64_t vad_arena_resident_bytes(const struct vad_arena *a);

/* Destroy the allocator and close the fd (clients keep their own mappings). */
void vad_arena_close(struct vad_arena *a);

/* May a peer with this uid, primary gid and supplementary groups write in the arena (root,
 * any peer when it has no allow-list, else its allow_uids/allow_gids)? */
bool vad_arena_allows(const struct vad_arena *a, uid_t uid, gid_t gid, const gid_t *groups,
		      size_t n_groups);

/* The same for an arena section: may the peer use it (or, with tenancy, its own arena)? */
bool vad_arena_conf_allows(const struct vad_arena_conf *conf, uid_t uid, gid_t gid,
			   const gid_t *groups, size_t n_groups);

/* May such a peer read the section's arena only: not a writer, but in its
 * reader_uids/reader_gids? */
bool vad_arena_conf_reads_only(const struct vad_arena_conf *conf, uid_t uid, gid_t gid,
			       const gid_t *groups, size_t n_groups);

#endif
