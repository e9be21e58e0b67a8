/* test_daemon_arena.c - sealed sparse arenas, hole punching on reclaim, allow-lists, readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "log.h"
#include "zero.h"

#define ARENA_SIZE (64ull << 20)

static struct vad_config cfg;

static int setup(void **state)
{
	(void)state;
	vad_config_defaults(&cfg);
	cfg.nodes = 2;
	vad_log_set_level(VAD_LOG_WARNING); /* keep expected notices out of the test output */
	return 0;
}

static void conf_init(struct vad_arena_conf *c, const char *name, uint64_t size)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->size = size;
	c->quantum = (uint64_t)sysconf(_SC_PAGESIZE);
	c->allow_any = true;
}

static struct vad_arena *open_ok(const struct vad_arena_conf *c)
{
	struct vad_arena *a = NULL;
	char err[512] = "";
	if (vad_arena_open(c, &cfg, 3, &a, err, sizeof(err)) != 0)
		fail_msg("vad_arena_open: %s", err);
	assert_non_null(a);
	assert_int_equal(a->index, 3);
	assert_true(a->fd >= 0);
	assert_non_null(a->vs);
	return a;
}

static uint64_t allocated_bytes(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

/* Write a pattern into [off, off + len) of the file, as a client does through its mapping. */
static void write_range(int fd, uint64_t off, size_t len)
{
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	assert_true(p != MAP_FAILED);
	memset(p, 0x77, len);
	munmap(p, len);
}

/* Put a read-only fd on the arena's file in place of its own (fallocate on it: EBADF;
 * lseek still works); returns it, and the real fd in *real for the caller to put back. */
static int swap_in_read_only(struct vad_arena *a, int *real)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", a->fd);
	int ro = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(ro >= 0);
	*real = a->fd;
	a->fd = ro;
	return ro;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void test_memfd_sealed_and_sparse(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	conf_init(&c, "sealtest", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);

	assert_string_equal(a->conf.name, "sealtest");
	int seals = fcntl(a->fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_true(seals & F_SEAL_SHRINK);
	assert_true(seals & F_SEAL_GROW);
	assert_true(seals & F_SEAL_SEAL);
	assert_false(seals & F_SEAL_WRITE); /* clients must be able to write */

	struct stat st;
	assert_int_equal(fstat(a->fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)ARENA_SIZE);
	assert_int_equal(allocated_bytes(a->fd), 0); /* sparse until touched */
	assert_true(fcntl(a->fd, F_GETFD) & FD_CLOEXEC);

	char link[128], path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", a->fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	assert_true(n > 0);
	link[n] = '\0';
	assert_non_null(strstr(link, "memfd:vad:sealtest"));

	/* the allocator got the daemon-wide node count and the arena's geometry */
	struct va_stats vs;
	va_get_stats(a->vs, &vs);
	assert_int_equal(vs.size, ARENA_SIZE);
	assert_int_equal(vs.quantum, c.quantum);
	assert_int_equal(vs.nodes, 2);
	assert_int_equal(a->punch_failures, 0);
	vad_arena_close(a);
}

/* A client holds the same open file (passed by SCM_RIGHTS): it can neither shrink, grow
 * nor unseal the arena. */
static void test_client_cannot_resize(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	conf_init(&c, "resize", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);
	int client = dup(a->fd);
	assert_true(client >= 0);

	errno = 0;
	assert_int_equal(ftruncate(client, 4096), -1);
	assert_int_equal(errno, EPERM);
	errno = 0;
	assert_int_equal(ftruncate(client, (off_t)ARENA_SIZE * 2), -1);
	assert_int_equal(errno, EPERM);
	errno = 0;
	assert_int_equal(fallocate(client, 0, (off_t)ARENA_SIZE, 4096), -1);
	assert_int_equal(errno, EPERM);
	errno = 0;
	assert_int_equal(fcntl(client, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);

	struct stat st;
	assert_int_equal(fstat(a->fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)ARENA_SIZE);
	close(client);
	vad_arena_close(a);
}

/* Allocate, write through a shared mapping, free, drain: the release callback punched the
 * range out, so it reads zeros again and its memory went back to the system. */
static void check_reclaim_zeroes(struct vad_arena *a)
{
	uint8_t *map = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	assert_true(map != MAP_FAILED);

	uint64_t offs[8];
	const uint64_t len = 256 * 1024;
	for (int i = 0; i < 8; i++) {
		assert_int_equal(va_alloc(a->vs, len, 0, NULL, &offs[i]), VA_OK);
		assert_true(offs[i] + len <= ARENA_SIZE);
		memset(map + offs[i], 0xA5, len);
	}
	assert_true(allocated_bytes(a->fd) >= 8 * len);

	struct va_stats before;
	va_get_stats(a->vs, &before);
	for (int i = 0; i < 8; i++)
		assert_int_equal(va_free(a->vs, offs[i], NULL), VA_OK);
	va_drain(a->vs);
	struct va_stats after;
	va_get_stats(a->vs, &after);
	assert_true(after.release_calls > before.release_calls);
	assert_true(after.released_bytes >= before.released_bytes + 8 * len);
	assert_int_equal(after.lazy_bytes, 0);

	for (int i = 0; i < 8; i++)
		assert_true(all_zero(map + offs[i], len));
	/* and the next allocations, wherever they land, start zeroed too; all live at once, so
	 * they cover the ranges read above (a read of a memfd hole allocates a page) and the
	 * drain punches them all (one freed and taken again would be reused in place) */
	uint64_t again[8];
	for (int i = 0; i < 8; i++) {
		assert_int_equal(va_alloc(a->vs, len, 0, NULL, &again[i]), VA_OK);
		assert_true(all_zero(map + again[i], len));
	}
	for (int i = 0; i < 8; i++)
		assert_int_equal(va_free(a->vs, again[i], NULL), VA_OK);
	va_drain(a->vs);
	munmap(map, ARENA_SIZE);
}

static void test_reclaim_punches_memfd(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	conf_init(&c, "punch", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);
	check_reclaim_zeroes(a);
	assert_int_equal(a->punch_failures, 0);
	assert_int_equal(allocated_bytes(a->fd), 0); /* every page went back */
	char msg[256];
	assert_int_equal(va_check(a->vs, msg, sizeof(msg)), VA_OK);
	vad_arena_close(a);
}

/* Pooled blocks are zeroed in place (zero.c) instead of punched: a client writes into every
 * range it gets before freeing it, every range handed out again reads zeros, most reuse is
 * zeroed rather than punched, and only pooled or lazy blocks keep memory. Ranges never
 * written cost no memory: zeroing touches only written pages. A full drain gives it all back. */
static void test_pooled_reuse_zeroed_in_place(void **state)
{
	(void)state;
	struct vad_config saved = cfg;
	cfg.lazy_max = 256 * 4096; /* drains (and pool refills) every few rounds */
	struct vad_arena_conf c;
	conf_init(&c, "zero", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);
	cfg = saved;
	const uint64_t q = c.quantum;
	uint8_t *map = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	assert_true(map != MAP_FAILED);
	enum { ROUNDS = 400, PER = 16 };
	uint64_t offs[PER], lens[PER];

	/* never written: pooled and zeroed blocks allocate no page */
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < PER; i++)
			assert_int_equal(
			    va_alloc(a->vs, (1 + (uint64_t)(i % 8)) * q, 0, NULL, &offs[i]), VA_OK);
		for (int i = 0; i < PER; i++)
			assert_int_equal(va_free(a->vs, offs[i], NULL), VA_OK);
	}
	struct va_stats st;
	va_get_stats(a->vs, &st);
	assert_true(st.zero_calls > 0);
	assert_int_equal(allocated_bytes(a->fd), 0);

	/* written: every range handed out reads zeros, nearly none is punched */
	struct va_stats before = st;
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < PER; i++) {
			lens[i] = (1 + (uint64_t)((r + i) % 8)) * q;
			assert_int_equal(va_alloc(a->vs, lens[i], 0, NULL, &offs[i]), VA_OK);
			for (uint64_t k = 0; k < lens[i]; k += 8)
				if (*(uint64_t *)(map + offs[i] + k) != 0)
					fail_msg("round %d: reused range [%llu, +%llu) is not zero "
						 "at +%llu",
						 r, (unsigned long long)offs[i],
						 (unsigned long long)lens[i],
						 (unsigned long long)k);
			memset(map + offs[i], 0xA5, lens[i]);
		}
		for (int i = 0; i < PER; i++)
			assert_int_equal(va_free(a->vs, offs[i], NULL), VA_OK);
	}
	va_get_stats(a->vs, &st);
	uint64_t frees = st.frees - before.frees;
	uint64_t zeroed = st.zero_calls - before.zero_calls;
	uint64_t released = st.release_calls - before.release_calls;
	print_message("pooled reuse: %llu frees, %llu zeroed in place, %llu release calls\n",
		      (unsigned long long)frees, (unsigned long long)zeroed,
		      (unsigned long long)released);
	assert_true(st.pool_hits > before.pool_hits);
	assert_true(zeroed > frees / 2);
	if (released * 2 > zeroed)
		fail_msg("%llu release calls, %llu zero calls for %llu frees: most reuse should "
			 "zero in place",
			 (unsigned long long)released, (unsigned long long)zeroed,
			 (unsigned long long)frees);
	assert_int_equal(a->punch_failures, 0);
	/* only pooled (and lazy) blocks keep their memory; what decayed to the tree was punched
	 * (read until the drain thread is between passes: a stats snapshot is not atomic) */
	uint64_t held = 0;
	for (int tries = 0; tries < 1000; tries++) {
		held = allocated_bytes(a->fd);
		va_get_stats(a->vs, &st);
		if (held <= st.pooled_bytes + st.lazy_bytes)
			break;
		usleep(10000);
	}
	if (held > st.pooled_bytes + st.lazy_bytes)
		fail_msg("the file holds %llu bytes, more than the %llu pooled and %llu lazy",
			 (unsigned long long)held, (unsigned long long)st.pooled_bytes,
			 (unsigned long long)st.lazy_bytes);

	va_drain(a->vs); /* pools empty into the tree: released */
	assert_int_equal(allocated_bytes(a->fd), 0);
	char msg[256];
	assert_int_equal(va_check(a->vs, msg, sizeof(msg)), VA_OK);
	munmap(map, ARENA_SIZE);
	vad_arena_close(a);
}

/* vad_zero_many over a sorted batch (as the drain passes it): blocks nobody wrote, one written
 * throughout, one only in its middle page, one only in its last page, two written blocks side
 * by side, and a last one out of order. Afterwards every block reads zeros, what was written
 * outside them is intact, and the file holds no more memory than before: no hole was
 * written to. */
static void test_zero_many_batch(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	conf_init(&c, "many", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);
	assert_non_null(a->zero_map);
	const uint64_t P = 4096;
	/* {start page, pages, first written page (relative), pages written} */
	static const struct {
		uint64_t page, pages, wfrom, wpages;
	} b[] = {
	    {0, 2, 0, 0},  {4, 3, 0, 0},   {10, 4, 0, 4},  {20, 3, 1, 1},
	    {30, 2, 0, 0}, {40, 5, 4, 1},  {50, 2, 0, 2},  {52, 2, 0, 1},
	    {60, 1, 0, 0}, {100, 8, 0, 0}, {200, 2, 0, 0}, {8, 1, 0, 1},
	};
	enum { N = sizeof(b) / sizeof(b[0]) };
	struct va_extent r[N];
	for (size_t i = 0; i < N; i++) {
		r[i] = (struct va_extent){b[i].page * P, b[i].pages * P};
		if (b[i].wpages)
			write_range(a->fd, (b[i].page + b[i].wfrom) * P, b[i].wpages * P);
	}
	/* written elsewhere, between and after the blocks: must stay as it is */
	write_range(a->fd, 7 * P, P);
	write_range(a->fd, 300 * P, P);
	/* (the kernel may back a write with a folio of several pages: compare, do not count) */
	uint64_t held = allocated_bytes(a->fd);
	assert_true(held > 0);
	vad_zero_many(a, r, N);
	/* read with pread: a read fault on a hole of shmem would allocate the page */
	static uint8_t buf[8 * 4096];
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(pread(a->fd, buf, r[i].size, (off_t)r[i].start),
				 (ssize_t)r[i].size);
		if (!all_zero(buf, r[i].size))
			fail_msg("block %zu at page %llu does not read zeros", i,
				 (unsigned long long)b[i].page);
	}
	uint8_t byte;
	assert_int_equal(pread(a->fd, &byte, 1, (off_t)(7 * P)), 1);
	assert_int_equal(byte, 0x77);
	assert_int_equal(pread(a->fd, &byte, 1, (off_t)(301 * P - 1)), 1);
	assert_int_equal(byte, 0x77);
	assert_int_equal(allocated_bytes(a->fd), held); /* no hole was written */
	vad_arena_close(a);
}

/* rounds x PER allocations of one page, each written if `write`, then freed; returns the
 * frees that went straight back into a pool (va_stats.recycled) in the last half. */
static uint64_t recycled_in_rounds(struct vad_arena *a, uint8_t *map, int rounds, bool write)
{
	enum { PER = 32 };
	uint64_t offs[PER];
	struct va_stats st;
	uint64_t mid = 0;
	for (int r = 0; r < rounds; r++) {
		if (r == rounds / 2) {
			va_get_stats(a->vs, &st);
			mid = st.recycled;
		}
		for (int i = 0; i < PER; i++) {
			assert_int_equal(va_alloc(a->vs, 4096, 0, NULL, &offs[i]), VA_OK);
			uint8_t byte; /* pread: a read fault on a hole would allocate the page */
			assert_int_equal(pread(a->fd, &byte, 1, (off_t)offs[i]), 1);
			if (byte != 0)
				fail_msg("round %d: range at %llu handed out unzeroed", r,
					 (unsigned long long)offs[i]);
			if (write)
				map[offs[i]] = 0x5A;
		}
		for (int i = 0; i < PER; i++)
			assert_int_equal(va_free(a->vs, offs[i], NULL), VA_OK);
	}
	va_get_stats(a->vs, &st);
	return st.recycled - mid;
}

/* Recycling follows what the clients do (zero.c): frees nobody wrote into stop going straight
 * back to the pools but for a sample (each would cost its next allocation a SEEK_DATA), and
 * once the clients write again, every free recycles again (the next holder keeps the pages).
 * Every range handed out reads zeros throughout. */
static void test_recycling_follows_writes(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	conf_init(&c, "follow", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);
	uint8_t *map = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	assert_true(map != MAP_FAILED);
	enum { ROUNDS = 400, HALF = ROUNDS / 2 * 32 };
	uint64_t clean = recycled_in_rounds(a, map, ROUNDS, false);
	uint64_t written = recycled_in_rounds(a, map, ROUNDS, true);
	uint64_t clean_again = recycled_in_rounds(a, map, ROUNDS, false);
	print_message("recycled of %d frees: %llu not written, %llu written, %llu not written\n",
		      HALF, (unsigned long long)clean, (unsigned long long)written,
		      (unsigned long long)clean_again);
	assert_true(clean < HALF / 16);
	assert_true(written > HALF / 2);
	assert_true(clean_again < HALF / 16);
	assert_int_equal(a->punch_failures, 0);
	munmap(map, ARENA_SIZE);
	vad_arena_close(a);
}

/* Bytes of address space in use now. */
static rlim_t address_space_now(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	assert_non_null(f);
	unsigned long pages;
	assert_int_equal(1, fscanf(f, "%lu", &pages));
	fclose(f);
	return (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
}

/* An arena whose mapping for zeroing cannot be made (address space short) still opens, and
 * then punches every freed range: reuse reads zeros, nothing is zeroed in place. */
static void test_zero_without_mapping_punches(void **state)
{
	(void)state;
	const char *m = getenv("VAD_TEST_MODE");
	if (m && (strcmp(m, "asan") == 0 || strcmp(m, "tsan") == 0))
		skip(); /* the sanitizers' runtimes need their huge address space reservations */
	const uint64_t size = 1ull << 30;
	struct vad_config saved = cfg;
	cfg.lazy_max = 64 * 4096;
	struct vad_arena_conf c;
	conf_init(&c, "nomap", size);
	struct rlimit old, tight;
	assert_int_equal(0, getrlimit(RLIMIT_AS, &old));
	tight = old;
	/* room for the allocator and its drain thread's stack, not for a 1 GiB mapping */
	tight.rlim_cur = address_space_now() + (64u << 20);
	assert_int_equal(0, setrlimit(RLIMIT_AS, &tight));
	struct vad_arena *a = NULL;
	char err[512] = "";
	int rc = vad_arena_open(&c, &cfg, 3, &a, err, sizeof(err));
	assert_int_equal(0, setrlimit(RLIMIT_AS, &old));
	cfg = saved;
	if (rc != 0)
		fail_msg("vad_arena_open without room for its zeroing mapping: %s", err);
	assert_null(a->zero_map);
	assert_null(a->map);

	uint64_t offs[16];
	const uint64_t q = c.quantum;
	for (int r = 0; r < 200; r++) {
		for (int i = 0; i < 16; i++) {
			assert_int_equal(
			    va_alloc(a->vs, (1 + (uint64_t)(i % 4)) * q, 0, NULL, &offs[i]), VA_OK);
			uint8_t byte = 0;
			assert_int_equal(pread(a->fd, &byte, 1, (off_t)offs[i]), 1);
			if (byte)
				fail_msg("round %d: reused range at %llu is not zero", r,
					 (unsigned long long)offs[i]);
			assert_int_equal(pwrite(a->fd, "\xa5", 1, (off_t)offs[i]), 1);
		}
		for (int i = 0; i < 16; i++)
			assert_int_equal(va_free(a->vs, offs[i], NULL), VA_OK);
	}
	struct va_stats st;
	va_get_stats(a->vs, &st);
	assert_int_equal(st.zero_calls, 0);
	assert_true(st.pool_hits > 0);
	assert_true(st.release_calls > 0);
	vad_arena_close(a);
}

/* A directory backing: an unlinked file there (O_TMPFILE or mkstemp + unlink). Such a file
 * cannot be sealed, so it opens only with accept_unsealed, and is marked unsealed. */
static void test_directory_backing(void **state)
{
	(void)state;
	char dir[] = "/tmp/vad-test-arena-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct vad_arena_conf c;
	conf_init(&c, "indir", ARENA_SIZE);
	snprintf(c.backing, sizeof(c.backing), "%s", dir);
	c.accept_unsealed = true;
	struct vad_arena *a = open_ok(&c);
	assert_true(a->unsealed);
	int seals = fcntl(a->fd, F_GET_SEALS); /* -1 (EINVAL) where files take no seals */
	assert_true(seals < 0 || !(seals & (F_SEAL_SHRINK | F_SEAL_GROW)));

	struct stat st;
	assert_int_equal(fstat(a->fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)ARENA_SIZE);
	assert_int_equal(st.st_nlink, 0); /* nothing left behind in the directory */
	assert_int_equal(rmdir(dir), 0);  /* so the directory is empty */

	check_reclaim_zeroes(a);
	assert_string_equal(a->conf.backing, dir);
	vad_arena_close(a);
}

/* Without accept_unsealed a directory file that cannot be sealed is refused, naming the
 * section's file:line, the seal that failed and its errno, and what to do. */
static void test_unsealable_directory_refused(void **state)
{
	(void)state;
	char dir[] = "/tmp/vad-test-arena-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct vad_config withpath = cfg;
	snprintf(withpath.path, sizeof(withpath.path), "/etc/vad/test.conf");
	struct vad_arena_conf c;
	conf_init(&c, "disk", ARENA_SIZE);
	snprintf(c.backing, sizeof(c.backing), "%s", dir);
	c.line = 17;
	struct vad_arena *a = (struct vad_arena *)1;
	char err[1024] = "";
	assert_int_equal(vad_arena_open(&c, &withpath, 0, &a, err, sizeof(err)), -1);
	assert_null(a);
	print_message("refused: %s\n", err);
	assert_true(strncmp(err, "/etc/vad/test.conf:17: [arena disk]", 35) == 0);
	assert_non_null(strstr(err, dir));
	assert_non_null(strstr(err, "cannot be sealed (F_SEAL_SHRINK: "));
	assert_non_null(strstr(err, "accept_unsealed = yes"));
	/* nothing left behind */
	assert_int_equal(rmdir(dir), 0);

	/* a memfd arena is always sealed: accept_unsealed changes nothing there */
	conf_init(&c, "mem", ARENA_SIZE);
	c.accept_unsealed = true;
	a = open_ok(&c);
	assert_false(a->unsealed);
	vad_arena_close(a);
}

static void test_open_failures(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	struct vad_arena *a = (struct vad_arena *)1;
	char err[512];

	conf_init(&c, "nodir", ARENA_SIZE);
	snprintf(c.backing, sizeof(c.backing), "/nonexistent-vad-test-dir");
	assert_int_equal(vad_arena_open(&c, &cfg, 0, &a, err, sizeof(err)), -1);
	assert_null(a);
	assert_non_null(strstr(err, "arena nodir"));
	assert_non_null(strstr(err, "/nonexistent-vad-test-dir"));

	conf_init(&c, "odd", 5000);
	assert_int_equal(vad_arena_open(&c, &cfg, 0, &a, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "arena odd"));

	conf_init(&c, "zero", 0);
	assert_int_equal(vad_arena_open(&c, &cfg, 0, &a, err, sizeof(err)), -1);

	assert_int_equal(vad_arena_open(NULL, &cfg, 0, &a, err, sizeof(err)), -1);
}

/* A punch that fails is counted; the daemon keeps going. Simulated by swapping the arena's
 * fd for a read-only one (fallocate: EBADF; the zeroing fallback cannot map it either). */
static void test_punch_failure_counted(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	conf_init(&c, "failing", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);
	int real;
	int ro = swap_in_read_only(a, &real);

	/* expected in the output: one "punching a hole ... failed" error line. The ranges are
	 * written first: a range nobody wrote is a hole, and holes are not punched. */
	uint64_t off;
	assert_int_equal(va_alloc(a->vs, 65536, 0, NULL, &off), VA_OK);
	write_range(real, off, 65536);
	assert_int_equal(va_free(a->vs, off, NULL), VA_OK);
	va_drain(a->vs);
	uint64_t failures = __atomic_load_n(&a->punch_failures, __ATOMIC_RELAXED);
	assert_true(failures >= 1);
	assert_int_equal(va_alloc(a->vs, 65536, 0, NULL, &off), VA_OK);
	write_range(real, off, 65536);
	assert_int_equal(va_free(a->vs, off, NULL), VA_OK);
	va_drain(a->vs);
	assert_true(__atomic_load_n(&a->punch_failures, __ATOMIC_RELAXED) > failures);

	a->fd = real;
	close(ro);
	vad_arena_close(a);
}

/* The release callback looks for data first and leaves holes alone: with an fd that can
 * look (lseek) but not punch (read-only), releasing ranges nobody wrote counts no punch at
 * all, wherever the written pages lie; releasing a written one does try to punch. */
static void test_release_skips_holes(void **state)
{
	(void)state;
	struct vad_arena_conf c;
	conf_init(&c, "holes", ARENA_SIZE);
	struct vad_arena *a = open_ok(&c);
	uint64_t before, written, after;
	assert_int_equal(va_alloc(a->vs, 1u << 20, 0, NULL, &before), VA_OK);
	assert_int_equal(va_alloc(a->vs, 1u << 20, 0, NULL, &written), VA_OK);
	assert_int_equal(va_alloc(a->vs, 1u << 20, 0, NULL, &after), VA_OK);
	assert_true(before < written && written < after);
	write_range(a->fd, written + 4096, 4096); /* one page inside the middle range */
	int real;
	int ro = swap_in_read_only(a, &real);

	/* a hole before data and a hole after the last data: skipped */
	assert_int_equal(va_free(a->vs, before, NULL), VA_OK);
	assert_int_equal(va_free(a->vs, after, NULL), VA_OK);
	va_drain(a->vs);
	assert_int_equal(__atomic_load_n(&a->punch_failures, __ATOMIC_RELAXED), 0);
	/* written: the punch is tried (and fails on this fd; the log says so once) */
	assert_int_equal(va_free(a->vs, written, NULL), VA_OK);
	va_drain(a->vs);
	assert_true(__atomic_load_n(&a->punch_failures, __ATOMIC_RELAXED) >= 1);

	a->fd = real;
	close(ro);
	/* with the real fd the page goes back */
	assert_int_equal(va_alloc(a->vs, 1u << 20, 0, NULL, &written), VA_OK);
	write_range(a->fd, written, 4096);
	assert_int_equal(allocated_bytes(a->fd), 8192); /* this page and the unpunched one */
	assert_int_equal(va_free(a->vs, written, NULL), VA_OK);
	va_drain(a->vs);
	assert_true(allocated_bytes(a->fd) <= 4096);
	vad_arena_close(a);
}

static void test_allow_lists(void **state)
{
	(void)state;
	uid_t uids[] = {1000, 1002};
	gid_t gids[] = {50};
	struct vad_arena_conf c;
	conf_init(&c, "private", 1u << 20);
	c.allow_any = false;
	c.allow_uids = uids;
	c.n_allow_uids = 2;
	c.allow_gids = gids;
	c.n_allow_gids = 1;
	struct vad_arena *a = open_ok(&c);
	/* a deep copy: the caller's arrays may go away */
	assert_ptr_not_equal(a->conf.allow_uids, uids);
	uids[0] = 7777;
	gids[0] = 7777;

	gid_t g_with[] = {7, 50}, g_without[] = {7, 8};
	assert_true(vad_arena_allows(a, 0, 0, NULL, 0)); /* root always */
	assert_true(vad_arena_allows(a, 1000, 100, NULL, 0));
	assert_true(vad_arena_allows(a, 1002, 100, g_without, 2));
	assert_true(vad_arena_allows(a, 1001, 50, NULL, 0));	/* primary group */
	assert_true(vad_arena_allows(a, 1001, 100, g_with, 2)); /* supplementary */
	assert_false(vad_arena_allows(a, 1001, 100, g_without, 2));
	assert_false(vad_arena_allows(a, 1001, 100, NULL, 0));
	assert_false(vad_arena_allows(a, 7777, 7777, NULL, 0)); /* the copy did not change */
	assert_false(vad_arena_allows(NULL, 0, 0, NULL, 0));
	vad_arena_close(a);

	/* only groups given: uids are not a free pass */
	conf_init(&c, "groups", 1u << 20);
	c.allow_any = false;
	c.allow_gids = gids;
	c.n_allow_gids = 1;
	gids[0] = 50;
	a = open_ok(&c);
	assert_true(vad_arena_allows(a, 1000, 50, NULL, 0));
	assert_false(vad_arena_allows(a, 1000, 51, NULL, 0));
	vad_arena_close(a);

	conf_init(&c, "open", 1u << 20);
	a = open_ok(&c);
	assert_true(vad_arena_allows(a, 12345, 12345, NULL, 0));
	vad_arena_close(a);
}

/* Readers: admitted only when no allow-list admits them (a writer stays a writer, root
 * always writes), and sent a read-only fd of the same file that cannot be made writable. */
static void test_readers(void **state)
{
	(void)state;
	uid_t writers[] = {1000}, readers[] = {1000, 1001};
	gid_t reader_gids[] = {60};
	struct vad_arena_conf c;
	conf_init(&c, "feed", 1u << 20);
	c.allow_any = false;
	c.allow_uids = writers;
	c.n_allow_uids = 1;
	c.reader_uids = readers;
	c.n_reader_uids = 2;
	c.reader_gids = reader_gids;
	c.n_reader_gids = 1;
	struct vad_arena *a = open_ok(&c);
	assert_ptr_not_equal(a->conf.reader_uids, readers);
	readers[1] = 7777;
	reader_gids[0] = 7777;

	gid_t g_with[] = {7, 60};
	assert_false(vad_arena_conf_reads_only(&a->conf, 0, 0, NULL, 0)); /* root writes */
	assert_false(
	    vad_arena_conf_reads_only(&a->conf, 1000, 0, NULL, 0)); /* on both lists: writes */
	assert_true(vad_arena_allows(a, 1000, 0, NULL, 0));
	assert_true(vad_arena_conf_reads_only(&a->conf, 1001, 100, NULL, 0));
	assert_false(vad_arena_allows(a, 1001, 100, NULL, 0));
	assert_true(vad_arena_conf_reads_only(&a->conf, 1002, 60, NULL, 0));	/* primary group */
	assert_true(vad_arena_conf_reads_only(&a->conf, 1002, 100, g_with, 2)); /* supplementary */
	assert_false(vad_arena_conf_reads_only(&a->conf, 1002, 100, NULL, 0));
	assert_false(
	    vad_arena_conf_reads_only(&a->conf, 7777, 7777, NULL, 0)); /* the copy did not change */

	/* the read-only fd: the same file, opened O_RDONLY, the file itself 0600 */
	assert_true(a->ro_fd >= 0 && a->ro_fd != a->fd);
	assert_int_equal(fcntl(a->ro_fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	assert_true(fcntl(a->ro_fd, F_GETFD) & FD_CLOEXEC);
	struct stat rw, ro;
	assert_int_equal(fstat(a->fd, &rw), 0);
	assert_int_equal(fstat(a->ro_fd, &ro), 0);
	assert_true(rw.st_ino == ro.st_ino && rw.st_dev == ro.st_dev);
	assert_int_equal(ro.st_mode & 07777, 0600);
	assert_int_equal(fcntl(a->ro_fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	void *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a->ro_fd, 0);
	assert_true(w == MAP_FAILED && errno == EACCES);
	uint8_t *r = mmap(NULL, 4096, PROT_READ, MAP_SHARED, a->ro_fd, 0);
	assert_true(r != MAP_FAILED);
	assert_int_equal(mprotect(r, 4096, PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	/* what the rw fd writes, the ro fd reads */
	uint8_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	assert_true(p != MAP_FAILED);
	p[100] = 0x5a;
	assert_int_equal(r[100], 0x5a);
	munmap(p, 4096);
	munmap(r, 4096);
	assert_int_equal(ftruncate(a->ro_fd, 0), -1);
	assert_int_equal(fallocate(a->ro_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096),
			 -1);
	assert_int_equal(errno, EBADF); /* through the rw fd the daemon punches holes */
	vad_arena_close(a);

	/* an arena without readers keeps one too */
	conf_init(&c, "open", 1u << 20);
	a = open_ok(&c);
	assert_true(a->ro_fd >= 0);
	assert_false(vad_arena_conf_reads_only(&a->conf, 1001, 0, NULL, 0));
	vad_arena_close(a);
}

/* An arena built from a parsed config, as the daemon does it. */
static void test_from_config(void **state)
{
	(void)state;
	struct vad_config parsed;
	char err[256];
	assert_int_equal(vad_config_load(NULL, &parsed, err, sizeof(err)), 0);
	struct vad_arena *a = NULL;
	assert_int_equal(vad_arena_open(&parsed.arenas[0], &parsed, 0, &a, err, sizeof(err)), 0);
	vad_config_free(&parsed); /* the arena keeps its own copy */
	assert_string_equal(a->conf.name, "default");
	struct stat st;
	assert_int_equal(fstat(a->fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)(4ull << 30));
	assert_int_equal(allocated_bytes(a->fd), 0);
	vad_arena_close(a);
	vad_arena_close(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_memfd_sealed_and_sparse),
	    cmocka_unit_test(test_client_cannot_resize),
	    cmocka_unit_test(test_reclaim_punches_memfd),
	    cmocka_unit_test(test_directory_backing),
	    cmocka_unit_test(test_unsealable_directory_refused),
	    cmocka_unit_test(test_open_failures),
	    cmocka_unit_test(test_punch_failure_counted),
	    cmocka_unit_test(test_release_skips_holes),
	    cmocka_unit_test(test_allow_lists),
	    cmocka_unit_test(test_readers),
	    cmocka_unit_test(test_from_config),
	    cmocka_unit_test(test_pooled_reuse_zeroed_in_place),
	    cmocka_unit_test(test_zero_many_batch),
	    cmocka_unit_test(test_recycling_follows_writes),
	    cmocka_unit_test(test_zero_without_mapping_punches),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
