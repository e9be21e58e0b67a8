/* commit.c - committing a range's memory before it is granted; see commit.h.
 *
 * A range of a commit = reserve arena is backed when it is granted and given back (punched)
 * when it is freed, so its holder never meets a missing page. The page a client writes is the
 * page the daemon allocated: nothing is copied. Failure undoes what this batch committed at
 * once (the allocator's lazy release would get to it only later). Memory runs short also
 * because freed ranges wait on the allocator's lazy list with their pages still backed, so a
 * commit that fails drains the allocator (every freed range punched) and tries again, once.
 */
#include "commit.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdbool.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>

#include "arena.h"
#include "units.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static void punch(struct vad_arena *a, uint64_t off, uint64_t size)
{
	if (fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)size))
		__atomic_add_fetch(&a->punch_failures, 1, __ATOMIC_RELAXED);
}

/* Back one range: through the daemon's mapping where the placement or huge-page advice lives
 * there (a hugetlb file keeps no shared policy; shmem THP under "advise" needs the advised
 * mapping), else with fallocate, which a memfd's shared NUMA policy also governs. A signal may
 * interrupt either: retried. */
static int commit_one(struct vad_arena *a, uint64_t off, uint64_t size)
{
	bool via_map = a->map && (a->conf.thp || a->conf.hugetlb_page);
	for (int tries = 0; tries < 8; tries++) {
		int rc = via_map ? madvise((char *)a->map + off, size, MADV_POPULATE_WRITE)
				 : fallocate(a->fd, 0, (off_t)off, (off_t)size);
		if (rc == 0)
			return 0;
		if (errno != EINTR && errno != EAGAIN)
			return errno == EFAULT ? ENOMEM
					       : errno; /* EFAULT: a SIGBUS would-be fault */
	}
	return EINTR;
}

int vad_commit_ranges(struct vad_arena *a, size_t n, const uint64_t *offsets, const uint64_t *sizes,
		      size_t *failed, int *err)
{
	bool drained = false;
	for (size_t i = 0; i < n; i++) {
		int e = commit_one(a, offsets[i], sizes[i]);
		if (e && !drained && (e == ENOSPC || e == ENOMEM)) {
			/* Freed ranges keep their memory until the allocator's lazy release punches
			 * them: give that back first, then try once more. */
			va_drain(a->vs);
			drained = true;
			e = commit_one(a, offsets[i], sizes[i]);
		}
		if (e == 0)
			continue;
		for (size_t j = 0; j <= i; j++) /* range i may be partly backed */
			punch(a, offsets[j], sizes[j]);
		__atomic_add_fetch(&a->commit_failures, 1, __ATOMIC_RELAXED);
		*failed = i;
		*err = e;
		return -1;
	}
	return 0;
}

static unsigned long long read_count(const char *dir, const char *file)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "re");
	unsigned long long v = 0;
	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* What ran short, as the end of the sentence. */
static void why_short(const struct vad_arena *a, int err, char *buf, size_t len)
{
	char b1[32], b2[32];
	if (a->conf.hugetlb_page) {
		char dir[96];
		snprintf(dir, sizeof(dir), "/sys/kernel/mm/hugepages/hugepages-%llukB",
			 (unsigned long long)(a->conf.hugetlb_page >> 10));
		unsigned long long total = read_count(dir, "nr_hugepages");
		unsigned long long free = read_count(dir, "free_hugepages");
		unsigned long long resv = read_count(dir, "resv_hugepages");
		unsigned long long avail = free > resv ? free - resv : 0;
		if (a->conf.hugetlb_page >= 1ull << 30)
			snprintf(b1, sizeof(b1), "%llu GiB",
				 (unsigned long long)(a->conf.hugetlb_page >> 30));
		else
			snprintf(b1, sizeof(b1), "%llu MiB",
				 (unsigned long long)(a->conf.hugetlb_page >> 20));
		snprintf(buf, len,
			 "the %s huge page pool has %llu of %llu pages free (%s; raise "
			 "/proc/sys/vm/nr_hugepages)",
			 b1, avail, total, strerror(err));
		return;
	}
	struct statfs sf;
	if (a->conf.backing[0] && statfs(a->conf.backing, &sf) == 0 && err == ENOSPC) {
		snprintf(
		    buf, len, "the file system of %s has %s of %s free", a->conf.backing,
		    vad_format_size((uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize, b1, sizeof(b1)),
		    vad_format_size((uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize, b2, sizeof(b2)));
		return;
	}
	if (err == ENOMEM || err == ENOSPC)
		snprintf(buf, len,
			 "the system (or the daemon's memory cgroup) has no memory to back it "
			 "(%s)",
			 strerror(err));
	else
		snprintf(buf, len, "%s", strerror(err));
}

void vad_commit_refusal(struct vad_reply *r, struct vad_arena *a, uint64_t size, int err, size_t i,
			size_t n)
{
	char sb[32], why[PATH_MAX + 128], which[80] = "";
	if (n > 1)
		snprintf(which, sizeof(which), " (range %zu of %zu; none kept)", i + 1, n);
	why_short(a, err, why, sizeof(why));
	vad_reply_error(r, VAD__ERROR__ECOMMIT, "arena '%s' cannot commit %s: %s%s", a->conf.name,
			vad_format_size(size, sb, sizeof(sb)), why, which);
}

uint64_t vad_arena_committed_bytes(const struct vad_arena *a, const struct va_stats *st)
{
	return a->conf.commit == VAD_COMMIT_RESERVE ? st->busy_bytes : 0;
}

void vad_commit_fill_info(Vad__ArenaInfo *info, const struct vad_arena_conf *c)
{
	info->commit = (char *)(c->commit == VAD_COMMIT_RESERVE ? "reserve" : "touch");
	info->huge = (char *)(c->hugetlb_page == 1ull << 30 ? "1 GiB"
			      : c->hugetlb_page		    ? "2 MiB"
			      : c->thp			    ? "thp"
							    : "");
	info->numa = (char *)c->numa_text;
}

void vad_commit_fill_stats(Vad__ArenaStats *o, const struct vad_arena *a, const struct va_stats *st)
{
	o->committed_bytes = vad_arena_committed_bytes(a, st);
	o->commit_failures = __atomic_load_n(&a->commit_failures, __ATOMIC_RELAXED);
}
