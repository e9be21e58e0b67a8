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

/* [pos, end) reads zeros, given data = lseek(fd, pos, SEEK_DATA) just before (errno set if
 * negative): only written pages are written. */
static void zero_from(struct vad_arena *a, uint64_t pos, uint64_t end, off_t data)
{
	uint8_t *map = a->map ? a->map : a->zero_map;

	for (;;) {
		if (data < 0 && errno == ENXIO)
			return; /* no data from pos to the end of the file */
		if (data >= 0 && (uint64_t)data >= end)
			return;
		off_t hole = data < 0 ? -1 : lseek(a->fd, data, SEEK_HOLE);
		if (hole < 0 || !map) {
			/* the extents are unknown: writing could hit a hole, so punch instead */
			vad_arena_release(a, pos, end - pos);
			return;
		}
		uint64_t stop = (uint64_t)hole < end ? (uint64_t)hole : end;
		memset(map + data, 0, stop - (uint64_t)data);
		pos = stop;
		if (pos >= end)
			return;
		data = lseek(a->fd, (off_t)pos, SEEK_DATA);
	}
}

void vad_zero_block(void *ctx, uint64_t start, uint64_t size)
{
	struct vad_arena *a = ctx;
	zero_from(a, start, start + size, lseek(a->fd, (off_t)start, SEEK_DATA));
}

void vad_zero_many(void *ctx, const struct va_extent *r, size_t n)
{
	struct vad_arena *a = ctx;
	/* One SEEK_DATA at `from` said: nothing written in [from, data) (data == UINT64_MAX: up
	 * to the end of the file). It holds for every block of the call it covers, as they are
	 * all free until the call returns. has_from false: nothing asked yet. */
	bool has_from = false;
	uint64_t from = 0, data = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t s = r[i].start, e = s + r[i].size;
		if (!has_from || s < from || data < s) {
			off_t d = lseek(a->fd, (off_t)s, SEEK_DATA);
			if (d < 0 && errno != ENXIO) {
				zero_from(a, s, e, d); /* the extents are unknown: it punches */
				has_from = false;
				continue;
			}
			has_from = true;
			from = s;
			data = d < 0 ? UINT64_MAX : (uint64_t)d;
		}
		if (data >= e)
			continue; /* nobody wrote [s, e) */
		zero_from(a, data, e, (off_t)data);
		has_from = false; /* what lies past e is not known */
	}
}
