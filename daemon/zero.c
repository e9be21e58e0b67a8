/*
 * zero.c - pooled blocks zeroed in place (va_config.zero).
 *
 * A freed block the allocator keeps in a pool is handed out again soon, mostly to the same
 * client. Punching it out (fallocate) costs a walk of every client's mapping of it and gives
 * the next holder one page fault per page; a memset of the pages it wrote costs neither and
 * still makes it read zeros. Only written pages (SEEK_DATA .. SEEK_HOLE) are touched: writing
 * a hole would allocate a page, which on a full tmpfs raises SIGBUS, and nobody needs it.
 * Blocks going back to the free tree are still punched (arena.c), so the memory that stays
 * resident is what the pools hold, and the idle pass gives that back too.
 */
#include "zero.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"

bool vad_zero_possible(const struct vad_arena *a)
{
	const struct vad_arena_conf *c = &a->conf;
	return c->backing[0] == '\0' && !c->hugetlb_page && c->commit == VAD_COMMIT_TOUCH &&
	       !a->unsealed;
}

int vad_zero_map(struct vad_arena *a, char *err, size_t err_len)
{
	if (a->map)
		return 0; /* the NUMA code's mapping serves (its policy applies to new pages) */
	void *p =
	    mmap(NULL, a->conf.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, a->fd, 0);
	if (p == MAP_FAILED) {
		snprintf(err, err_len, "arena %s: cannot map its memfd to zero freed ranges: %s",
			 a->conf.name, strerror(errno));
		return -1;
	}
	a->zero_map = p;
	return 0;
}

void vad_zero_unmap(struct vad_arena *a)
{
	if (a->zero_map)
		munmap(a->zero_map, a->conf.size);
	a->zero_map = NULL;
}

/*
 * Recycling (va_set_recycle: a free goes straight back into its pool, zeroed when taken) pays
 * when freed blocks hold written pages: the next holder reuses them in place, with no page
 * fault. A block nobody wrote gains nothing from it and costs its next allocation a SEEK_DATA,
 * a system call under the memfd's inode lock: a quarter of the daemon's CPU at 50 clients x 16
 * in flight, batch 1, none of them writing. Without recycling the drain looks at the blocks
 * for the pools in sorted batches, one SEEK_DATA for a run nobody wrote.
 *
 * So the arena recycles every free while at least one block in RECYCLE_WRITTEN held written
 * pages, else one in RECYCLE_SAMPLE: those samples keep telling whether the clients write, and
 * each stands for RECYCLE_SAMPLE frees in the count. Every ZERO_WINDOW blocks so counted
 * (about as many frees either way) the share decides again.
 */
#define ZERO_WINDOW	1024
#define RECYCLE_WRITTEN 8
#define RECYCLE_SAMPLE	64

/* n blocks looked at, written of them held written pages; weight: frees each stands for. */
static void note_blocks(struct vad_arena *a, uint64_t n, uint64_t written, uint64_t weight)
{
	uint64_t w = __atomic_add_fetch(&a->zero_written, written * weight, __ATOMIC_RELAXED);
	uint64_t seen = __atomic_add_fetch(&a->zero_seen, n * weight, __ATOMIC_RELAXED);
	if (seen < ZERO_WINDOW || !__atomic_compare_exchange_n(&a->zero_seen, &seen, 0, false,
							       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return; /* the window is not full, or another thread closes it */
	__atomic_sub_fetch(&a->zero_written, w, __ATOMIC_RELAXED);
	unsigned every = w * RECYCLE_WRITTEN >= seen ? 1 : RECYCLE_SAMPLE;
	va_set_recycle(a->vs, every);
}

/* Does [p, p + len) hold a byte other than zero? len: a multiple of 64 (whole pages). */
static bool any_nonzero(const uint8_t *p, uint64_t len)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (uint64_t i = 0; i < len / 8; i += 8)
		if (w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] |
		    w[i + 7])
			return true;
	return false;
}

/* [pos, end) reads zeros, given data = lseek(fd, pos, SEEK_DATA) just before (errno set if
 * negative): only pages that hold memory are looked at, and only those not all zeros are
 * written. True if a holder wrote something there: a page zeroed in place before still
 * holds memory, so SEEK_DATA alone cannot tell. */
static bool zero_from(struct vad_arena *a, uint64_t pos, uint64_t end, off_t data)
{
	uint8_t *map = a->map ? a->map : a->zero_map;
	bool written = false;

	for (;;) {
		if (data < 0 && errno == ENXIO)
			return written; /* no data from pos to the end of the file */
		if (data >= 0 && (uint64_t)data >= end)
			return written;
		off_t hole = data < 0 ? -1 : lseek(a->fd, data, SEEK_HOLE);
		if (hole < 0 || !map) {
			/* the extents are unknown: writing could hit a hole, so punch instead */
			vad_arena_release(a, pos, end - pos);
			return true;
		}
		uint64_t stop = (uint64_t)hole < end ? (uint64_t)hole : end;
		if (any_nonzero(map + data, stop - (uint64_t)data)) {
			memset(map + data, 0, stop - (uint64_t)data);
			written = true;
		}
		pos = stop;
		if (pos >= end)
			return written;
		data = lseek(a->fd, (off_t)pos, SEEK_DATA);
	}
}

void vad_zero_block(void *ctx, uint64_t start, uint64_t size)
{
	struct vad_arena *a = ctx;
	bool written = zero_from(a, start, start + size, lseek(a->fd, (off_t)start, SEEK_DATA));
	note_blocks(a, 1, written, va_recycle_every(a->vs));
}

void vad_zero_many(void *ctx, const struct va_extent *r, size_t n)
{
	struct vad_arena *a = ctx;
	/* One SEEK_DATA at `from` said: nothing written in [from, data) (data == UINT64_MAX: up
	 * to the end of the file). It holds for every block of the call it covers, as they are
	 * all free until the call returns. has_from false: nothing asked yet. */
	bool has_from = false;
	uint64_t from = 0, data = 0, written = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t s = r[i].start, e = s + r[i].size;
		if (!has_from || s < from || data < s) {
			off_t d = lseek(a->fd, (off_t)s, SEEK_DATA);
			if (d < 0 && errno != ENXIO) {
				written += zero_from(a, s, e, d); /* extents unknown: it punches */
				has_from = false;
				continue;
			}
			has_from = true;
			from = s;
			data = d < 0 ? UINT64_MAX : (uint64_t)d;
		}
		if (data >= e)
			continue; /* nobody wrote [s, e) */
		written += zero_from(a, data, e, (off_t)data);
		has_from = false; /* what lies past e is not known */
	}
	note_blocks(a, n, written, 1);
}
