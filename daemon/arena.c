/* arena.c - a sealed sparse shared-memory file plus its allocator; see arena.h.
 *
 * The file is a memfd ("vad:NAME"; MFD_HUGETLB of the configured page size for backing =
 * hugetlb, which takes seals like any memfd), or an unlinked file in the configured directory (e.g.
 * a hugetlbfs mount). It is sized once and sealed against shrinking and growing, so a client
 * holding the fd can neither SIGBUS the others nor grow the daemon's memory. Only a memfd
 * takes seals: a file in a directory is refused unless its section says accept_unsealed =
 * yes (then it runs unsealed, marked so). Freed ranges are released with
 * fallocate(PUNCH_HOLE): the pages go back to the system and a reused range reads as zeros,
 * so no data passes from one holder of a range to the next.
 */
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "numa.h"
#include "zero.h"

#define LOGGED_ERRNOS_MAX 8
#define VAD_MFD_HUGE_SHIFT                                                                         \
	26 /* linux/memfd.h MFD_HUGE_SHIFT (its header clashes with sys/mman.h) */

/* The public arena plus what only this file needs. */
struct arena_impl {
	struct vad_arena pub;
	pthread_mutex_t log_lock;
	int logged_errnos[LOGGED_ERRNOS_MAX]; /* punch errors already logged, once each kind */
	size_t n_logged;
};

static struct arena_impl *impl_of(struct vad_arena *a)
{
	return (struct arena_impl *)((char *)a - offsetof(struct arena_impl, pub));
}

/* True the first time this errno is seen for this arena. */
static bool first_of_kind(struct arena_impl *ai, int err)
{
	bool first = true;
	pthread_mutex_lock(&ai->log_lock);
	for (size_t i = 0; i < ai->n_logged; i++)
		if (ai->logged_errnos[i] == err)
			first = false;
	if (first && ai->n_logged < LOGGED_ERRNOS_MAX)
		ai->logged_errnos[ai->n_logged++] = err;
	else if (first)
		first = false; /* too many kinds already: stay quiet, the counter still counts */
	pthread_mutex_unlock(&ai->log_lock);
	return first;
}

/* When punching fails the range must still read as zeros before anyone gets it again. */
static int zero_by_mapping(int fd, uint64_t start, uint64_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
	if (p == MAP_FAILED)
		return -1;
	memset(p, 0, size);
	munmap(p, size);
	return 0;
}

/* va_release_fn: give [start, start + size) back to the system. Holes are skipped first: the
 * idle drain and a purge pass every free block here, most of which nobody ever wrote, and a
 * punch walks every client's mapping of the range while one SEEK_DATA only looks up the
 * file's pages. (Where SEEK_DATA is not supported, all of the file counts as data.) */
void vad_arena_release(void *ctx, uint64_t start, uint64_t size)
{
	struct vad_arena *a = ctx;
	if (__atomic_load_n(&a->keep_pages, __ATOMIC_RELAXED))
		return; /* stopping with the state kept: the next daemon gives back what is free */
	/* Pages the daemon committed (commit = reserve) and nobody wrote read as holes to
	 * SEEK_DATA on shmem, yet hold memory: such an arena always punches. */
	off_t data = a->conf.commit == VAD_COMMIT_RESERVE ? (off_t)start
							  : lseek(a->fd, (off_t)start, SEEK_DATA);
	if (data < 0 && errno == ENXIO)
		return; /* no data from start to the end of the file */
	if (data >= 0 && (uint64_t)data > start) {
		if ((uint64_t)data - start >= size)
			return;			/* [start, start + size) is one hole */
		size -= (uint64_t)data - start; /* punch from the first written page on */
		start = (uint64_t)data;
	}
	if (fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
		      (off_t)size) == 0)
		return;
	int err = errno;
	__atomic_add_fetch(&a->punch_failures, 1, __ATOMIC_RELAXED);
	int zero_rc = zero_by_mapping(a->fd, start, size);
	if (first_of_kind(impl_of(a), err))
		log_err("arena %s: punching a hole at offset %llu (%llu bytes) failed: %s; %s "
			"(further failures of this kind are only counted)",
			a->conf.name, (unsigned long long)start, (unsigned long long)size,
			strerror(err),
			zero_rc == 0 ? "zeroed the range by hand, its memory stays allocated"
				     : "zeroing it by hand failed too");
}

/* A fresh copy of n ids at *ids (NULL when n is 0); -1 when out of memory. */
static int copy_ids(uint32_t **ids, size_t n)
{
	const uint32_t *src = *ids;
	*ids = NULL;
	if (!n)
		return 0;
	*ids = malloc(n * sizeof(**ids));
	if (!*ids)
		return -1;
	memcpy(*ids, src, n * sizeof(**ids));
	return 0;
}

void vad_arena_conf_free(struct vad_arena_conf *c)
{
	free(c->allow_uids);
	free(c->allow_gids);
	free(c->reader_uids);
	free(c->reader_gids);
}

int vad_arena_conf_copy(struct vad_arena_conf *dst, const struct vad_arena_conf *src)
{
	*dst = *src;
	/* every list is copied (or NULL), so vad_arena_conf_free is safe whatever failed */
	int rc = copy_ids(&dst->allow_uids, src->n_allow_uids);
	rc |= copy_ids(&dst->allow_gids, src->n_allow_gids);
	rc |= copy_ids(&dst->reader_uids, src->n_reader_uids);
	rc |= copy_ids(&dst->reader_gids, src->n_reader_gids);
	if (rc) {
		vad_arena_conf_free(dst);
		memset(dst, 0, sizeof(*dst));
		return -1;
	}
	return 0;
}

/* An unnamed file in dir: O_TMPFILE, else a mkstemp file unlinked at once. */
static int open_in_directory(const char *dir, const char *name, char *err, size_t err_len)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	int tmpfile_errno = errno;
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/vad-%s-XXXXXX", dir, name) >= (int)sizeof(path)) {
		snprintf(err, err_len, "backing directory path %s is too long", dir);
		return -1;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, err_len, "cannot create a file in %s: %s (O_TMPFILE: %s)", dir,
			 strerror(errno), strerror(tmpfile_errno));
		return -1;
	}
	unlink(path);
	return fd;
}

/* "FILE:LINE: " of the arena's section, or "" for an arena not read from a file. */
static const char *section_of(const struct vad_arena_conf *conf, const struct vad_config *cfg,
			      char *buf, size_t len)
{
	buf[0] = '\0';
	if (cfg->path[0] && conf->line > 0)
		snprintf(buf, len, "%s:%d: ", cfg->path, conf->line);
	return buf;
}

/* Seal the file against shrinking and growing (then against new seals), one seal at a time
 * so a refusal names the one that failed. A memfd must take them. A file in a directory
 * that cannot be sealed is refused unless its section says accept_unsealed = yes: then the
 * arena runs unsealed, with a warning, and says so in ArenaInfo. */
static int seal_file(struct vad_arena *a, const struct vad_config *cfg, bool memfd, char *err,
		     size_t err_len)
{
	static const struct {
		int seal;
		const char *name;
	} seals[] = {
	    {F_SEAL_SHRINK, "F_SEAL_SHRINK"},
	    {F_SEAL_GROW, "F_SEAL_GROW"},
	    {F_SEAL_SEAL, "F_SEAL_SEAL"},
	};
	const char *failed = NULL;
	int seal_errno = 0;
	for (size_t i = 0; i < sizeof(seals) / sizeof(seals[0]) && !failed; i++) {
		if (fcntl(a->fd, F_ADD_SEALS, seals[i].seal) != 0) {
			failed = seals[i].name;
			seal_errno = errno;
		}
	}
	if (!failed)
		return 0;
	char where[PATH_MAX + 32];
	section_of(&a->conf, cfg, where, sizeof(where));
	if (memfd) {
		snprintf(err, err_len, "%sarena %s: cannot seal the memfd: %s: %s", where,
			 a->conf.name, failed, strerror(seal_errno));
		return -1;
	}
	if (!a->conf.accept_unsealed) {
		snprintf(err, err_len,
			 "%s[arena %s]: its file in %s cannot be sealed (%s: %s): any client "
			 "could resize it and make every other client die of SIGBUS; use "
			 "backing = memfd, or add accept_unsealed = yes to the section to take "
			 "that risk",
			 where, a->conf.name, a->conf.backing, failed, strerror(seal_errno));
		return -1;
	}
	a->unsealed = true;
	log_warn("%sarena %s runs UNSEALED (accept_unsealed = yes): its file in %s cannot be "
		 "sealed (%s: %s), so any client that maps it can resize it and make every "
		 "other client die of SIGBUS",
		 where, a->conf.name, a->conf.backing, failed, strerror(seal_errno));
	return 0;
}

/* A file kept by the service manager (persist.h): it must be the arena the config describes,
 * a file of its size, sealed as this daemon seals a memfd. */
static int check_adopted(struct vad_arena *a, char *err, size_t err_len)
{
	struct stat st;
	char sbuf[32], fbuf[32];
	if (fstat(a->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, err_len, "arena %s: the stored fd is not a file", a->conf.name);
		return -1;
	}
	if ((uint64_t)st.st_size != a->conf.size) {
		snprintf(err, err_len,
			 "arena %s: the stored file is %s but the config says %s (an arena's size "
			 "cannot change across a restart)",
			 a->conf.name, vad_format_size((uint64_t)st.st_size, fbuf, sizeof(fbuf)),
			 vad_format_size(a->conf.size, sbuf, sizeof(sbuf)));
		return -1;
	}
	int seals = fcntl(a->fd, F_GET_SEALS);
	int want = F_SEAL_SHRINK | F_SEAL_GROW;
	if (seals < 0 || (seals & want) != want) {
		if (a->conf.backing[0] && a->conf.accept_unsealed) {
			a->unsealed = true;
			return 0;
		}
		snprintf(err, err_len,
			 "arena %s: the stored file is not sealed against shrinking and growing",
			 a->conf.name);
		return -1;
	}
	return 0;
}

/* The arena's file (a memfd, or a file in its backing directory), sized to the arena (sparse:
 * nothing is committed until a client touches a page) and sealed. 0, or -1 with err set. */
static int open_backing(struct vad_arena *a, const struct vad_config *cfg, char *err,
			size_t err_len)
{
	const struct vad_arena_conf *conf = &a->conf;
	char sbuf[32];
	bool memfd = conf->backing[0] == '\0';
	if (a->fd >= 0)
		return check_adopted(a, err, err_len);
	if (memfd) {
		char name[VAD_NAME_MAX + 8];
		snprintf(name, sizeof(name), "vad:%s", conf->name);
		unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
		if (conf->hugetlb_page) /* log2 of the page size in the MFD_HUGE_SHIFT bits */
			flags |= MFD_HUGETLB | ((unsigned)__builtin_ctzll(conf->hugetlb_page)
						<< VAD_MFD_HUGE_SHIFT);
		a->fd = memfd_create(name, flags);
		if (a->fd < 0) {
			snprintf(err, err_len, "arena %s: memfd_create%s: %s%s", conf->name,
				 conf->hugetlb_page ? " (MFD_HUGETLB)" : "", strerror(errno),
				 conf->hugetlb_page && errno == EINVAL
				     ? " (this kernel or its configuration has no such huge pages)"
				     : "");
			return -1;
		}
	} else {
		char why[PATH_MAX + 128];
		a->fd = open_in_directory(conf->backing, conf->name, why, sizeof(why));
		if (a->fd < 0) {
			snprintf(err, err_len, "arena %s: %s", conf->name, why);
			return -1;
		}
	}
	if (ftruncate(a->fd, (off_t)conf->size) != 0) {
		snprintf(err, err_len, "arena %s: cannot size the %s to %s: %s", conf->name,
			 memfd ? "memfd" : "file", vad_format_size(conf->size, sbuf, sizeof(sbuf)),
			 strerror(errno));
		return -1;
	}
	return seal_file(a, cfg, memfd, err, err_len);
}

static uint64_t next_generation = 1; /* atomic */
/* The file reopened O_RDONLY, the fd readers are sent: the kernel then refuses them a
 * writable shared mapping (mmap and mprotect fail with EACCES), and ftruncate and fallocate
 * through it. Opened after sealing, so it is the sealed file. The file is made 0600 first: a
 * memfd is created 0777, and a reader could otherwise reopen it read-write through its own
 * /proc/self/fd. Needed only by an arena with readers, so only there is a failure fatal. */
static int open_read_only(struct vad_arena *a, const struct vad_config *cfg, char *err,
			  size_t err_len)
{
	char path[64], why[128];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", a->fd);
	if (fchmod(a->fd, 0600) != 0)
		snprintf(why, sizeof(why), "fchmod 0600: %s", strerror(errno));
	else if ((a->ro_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		snprintf(why, sizeof(why), "open %s read-only: %s", path, strerror(errno));
	else
		return 0;
	if (!a->conf.n_reader_uids && !a->conf.n_reader_gids) {
		log_debug("arena %s has no read-only fd (%s); it has no readers to send one",
			  a->conf.name, why);
		return 0;
	}
	char where[PATH_MAX + 32];
	section_of(&a->conf, cfg, where, sizeof(where));
	snprintf(err, err_len,
		 "%s[arena %s]: cannot make the read-only fd its readers (reader_uids, "
		 "reader_gids) are sent: %s (the daemon needs /proc mounted)",
		 where, a->conf.name, why);
	return -1;
}

int vad_arena_open(const struct vad_arena_conf *conf, const struct vad_config *cfg, unsigned index,
		   struct vad_arena **out, char *err, size_t err_len)
{
	return vad_arena_adopt(conf, cfg, index, -1, out, err, err_len);
}

int vad_arena_adopt(const struct vad_arena_conf *conf, const struct vad_config *cfg, unsigned index,
		    int fd, struct vad_arena **out, char *err, size_t err_len)
{
	if (!conf || !cfg || !out) {
		snprintf(err, err_len, "vad_arena_open: missing argument");
		goto refuse;
	}
	*out = NULL;
	if (conf->size == 0 || conf->quantum == 0 || conf->size % conf->quantum) {
		snprintf(err, err_len, "arena %s: size %llu is not a non-zero multiple of %llu",
			 conf->name, (unsigned long long)conf->size,
			 (unsigned long long)conf->quantum);
		goto refuse;
	}
	struct arena_impl *ai = calloc(1, sizeof(*ai));
	if (!ai) {
		snprintf(err, err_len, "arena %s: out of memory", conf->name);
		goto refuse;
	}
	struct vad_arena *a = &ai->pub;
	pthread_mutex_init(&ai->log_lock, NULL);
	a->fd = fd; /* -1: made by open_backing */
	a->ro_fd = -1;
	a->index = index;
	a->section = index;
	a->generation = __atomic_fetch_add(&next_generation, 1, __ATOMIC_RELAXED);
	snprintf(a->client_name, sizeof(a->client_name), "%s", conf->name);
	a->alloc_latency = aligned_alloc(64, sizeof(*a->alloc_latency));
	if (!a->alloc_latency || vad_arena_conf_copy(&a->conf, conf)) {
		snprintf(err, err_len, "arena %s: out of memory", conf->name);
		goto fail;
	}
	memset(a->alloc_latency, 0, sizeof(*a->alloc_latency));

	if (open_backing(a, cfg, err, err_len) != 0 || open_read_only(a, cfg, err, err_len) != 0 ||
	    vad_numa_apply(a, err, err_len) != 0)
		goto fail;

	struct va_config vc = {
	    .base = 0,
	    .size = conf->size,
	    .quantum = conf->quantum,
	    .nodes = cfg->nodes,
	    .lazy_max = cfg->lazy_max,
	    .release = vad_arena_release,
	    .release_ctx = a,
	};
	if (vad_zero_possible(a)) {
		/* without the mapping (address space short: many large arenas) it only punches */
		char why[256];
		if (vad_zero_map(a, why, sizeof(why)) == 0) {
			vc.zero = vad_zero_block;
			vc.zero_many = vad_zero_many; /* recycling starts on: zero.c switches it */
		} else
			log_info("%s; its freed ranges are punched, never zeroed in place", why);
	}
	int rc = va_create(&vc, &a->vs);
	if (rc != VA_OK) {
		snprintf(err, err_len, "arena %s: allocator: %s", conf->name, va_strerror(rc));
		goto fail;
	}
	*out = a;
	return 0;

fail:
	vad_zero_unmap(a);
	vad_numa_unmap(a);
	if (a->ro_fd >= 0)
		close(a->ro_fd);
	if (a->fd >= 0)
		close(a->fd);
	free(a->alloc_latency);
	vad_arena_conf_free(&a->conf);
	pthread_mutex_destroy(&ai->log_lock);
	free(ai);
	return -1;
refuse:
	if (fd >= 0)
		close(fd);
	return -1;
}

void vad_arena_close(struct vad_arena *a)
{
	if (!a)
		return;
	struct arena_impl *ai = impl_of(a);
	if (a->vs)
		va_destroy(a->vs); /* first: its background thread may still call its callbacks */
	vad_zero_unmap(a);
	vad_numa_unmap(a);
	if (a->ro_fd >= 0)
		close(a->ro_fd);
	if (a->fd >= 0)
		close(a->fd);
	free(a->alloc_latency);
	vad_arena_conf_free(&a->conf);
	pthread_mutex_destroy(&ai->log_lock);
	free(ai);
}

int vad_arena_open_tenant(const struct vad_arena_conf *section, const struct vad_config *cfg,
			  unsigned index, unsigned section_index, uint32_t tenant_id,
			  struct vad_arena **out, char *err, size_t err_len)
{
	return vad_arena_adopt_tenant(section, cfg, index, section_index, tenant_id, -1, out, err,
				      err_len);
}

int vad_arena_adopt_tenant(const struct vad_arena_conf *section, const struct vad_config *cfg,
			   unsigned index, unsigned section_index, uint32_t tenant_id, int fd,
			   struct vad_arena **out, char *err, size_t err_len)
{
	struct vad_arena_conf conf = *section; /* vad_arena_conf_copy copies the lists */
	if (snprintf(conf.name, sizeof(conf.name), "%s@%u", section->name, tenant_id) >=
	    (int)sizeof(conf.name)) {
		snprintf(err, err_len, "arena %s: the tenant arena's name is too long",
			 section->name);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (vad_arena_adopt(&conf, cfg, index, fd, out, err, err_len) != 0)
		return -1;
	struct vad_arena *a = *out;
	snprintf(a->client_name, sizeof(a->client_name), "%s", section->name);
	a->section = section_index;
	a->tenant = true;
	a->tenant_id = tenant_id;
	return 0;
}

void vad_arena_release_all(struct vad_arena *a)
{
	if (fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)a->conf.size) !=
	    0)
		log_warn("arena %s: giving its memory back on close failed: %s", a->conf.name,
			 strerror(errno));
}

uint64_t vad_arena_resident_bytes(const struct vad_arena *a)
{
	struct stat st;
	if (!a || fstat(a->fd, &st) != 0 || st.st_blocks <= 0)
		return 0;
	if ((uint64_t)st.st_blocks > UINT64_MAX / 512)
		return UINT64_MAX;
	return (uint64_t)st.st_blocks * 512;
}

/* Does an id list of uids and one of gids admit the peer (its primary or a supplementary
 * group)? */
static bool ids_admit(const uid_t *uids, size_t n_uids, const gid_t *gids, size_t n_gids, uid_t uid,
		      gid_t gid, const gid_t *groups, size_t n_groups)
{
	for (size_t i = 0; i < n_uids; i++)
		if (uids[i] == uid)
			return true;
	for (size_t i = 0; i < n_gids; i++) {
		if (gids[i] == gid)
			return true;
		for (size_t j = 0; groups && j < n_groups; j++)
			if (gids[i] == groups[j])
				return true;
	}
	return false;
}

bool vad_arena_allows(const struct vad_arena *a, uid_t uid, gid_t gid, const gid_t *groups,
		      size_t n_groups)
{
	return a && vad_arena_conf_allows(&a->conf, uid, gid, groups, n_groups);
}

bool vad_arena_conf_allows(const struct vad_arena_conf *conf, uid_t uid, gid_t gid,
			   const gid_t *groups, size_t n_groups)
{
	if (uid == 0 || conf->allow_any)
		return true;
	return ids_admit(conf->allow_uids, conf->n_allow_uids, conf->allow_gids, conf->n_allow_gids,
			 uid, gid, groups, n_groups);
}

bool vad_arena_conf_reads_only(const struct vad_arena_conf *conf, uid_t uid, gid_t gid,
			       const gid_t *groups, size_t n_groups)
{
	if (vad_arena_conf_allows(conf, uid, gid, groups, n_groups))
		return false;
	return ids_admit(conf->reader_uids, conf->n_reader_uids, conf->reader_gids,
			 conf->n_reader_gids, uid, gid, groups, n_groups);
}
