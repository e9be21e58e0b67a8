/*
 * test_service_readers.c - read-only peers (reader_uids, reader_gids), held to reading by the
 * kernel: a writer and its readers run as different real uids, each a forked child of this
 * test (which must be root to switch uids). A reader is refused allocation (EREADONLY), but
 * attaches a writer's token and reads the writer's bytes, old and new; a write through its
 * pointer faults, and neither mprotect nor a fresh mmap of the fd it was sent can make its
 * mapping writable, nor can reopening that fd through /proc. A peer on neither list is
 * refused as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "uid_peers.h"
#include "vtassert.h"

#define PAGE	      4096u
#define RANGE_SIZE    (2 * PAGE)
#define CHILD_TIMEOUT vt_timeout_ms(30000)
#define SEED_FIRST    0xFEED1
#define SEED_SECOND   0xFEED2
#define FIRST_ID      61000 /* ids are searched from here for ones no user or group has */
#define CAUGHT_SEGV   42    /* a grandchild's exit: its write faulted as a protection fault */
#define WRONG_SEGV    43    /* it faulted, but not as a write to a read-only page there */

/* The uids (and gids) the peers run as, none of them used by anyone on this machine. */
struct ids {
	unsigned writer, reader, group_reader, stranger;
	unsigned reader_group; /* the group reader's supplementary group, in reader_gids */
};

struct fixture {
	struct vt_daemon d; /* first: vt_group_fixture_setup */
	struct ids ids;
};

/* The test's arena "feed": one writer uid, readers by uid and by group. */
static const char *feed_arena(const struct ids *ids, char *buf, size_t len)
{
	snprintf(buf, len,
		 "[arena default]\n"
		 "size = 64M\n"
		 "\n"
		 "[arena feed]\n"
		 "size = 16M\n"
		 "allow_uids = %u\n"
		 "reader_uids = %u\n"
		 "reader_gids = %u\n",
		 ids->writer, ids->reader, ids->reader_group);
	return buf;
}

static int pick_ids(struct ids *ids)
{
	unsigned got[5];
	if (vt_pick_unused_ids(FIRST_ID, got, 5) != 0)
		return -1;
	*ids = (struct ids){.writer = got[0],
			    .reader = got[1],
			    .group_reader = got[2],
			    .stranger = got[3],
			    .reader_group = got[4]};
	return 0;
}

static int group_setup(void **state)
{
	struct ids ids;
	char arenas[512];
	if (pick_ids(&ids) != 0)
		return -1;
	int rc = VT_GROUP_FIXTURE_SETUP(state, struct fixture, NULL,
					feed_arena(&ids, arenas, sizeof(arenas)));
	if (*state)
		((struct fixture *)*state)->ids = ids;
	return rc;
}

/* ---- in the children ---------------------------------------------------------------- */

/* An allocation in feed is refused with EREADONLY and a sentence naming the arena and the
 * uid and saying the peer may only read. */
static void child_alloc_refused_readonly(vad_client *c)
{
	void *p;
	int rc = vad_alloc_in(c, "feed", PAGE, 0, &p);
	VT_CHILD_CHECK(rc == VAD_EREADONLY, "alloc in feed as uid %u: %d (%s), expected EREADONLY",
		       (unsigned)getuid(), rc, vad_last_error(c));
	const char *msg = vad_last_error(c);
	char uid[32];
	snprintf(uid, sizeof(uid), "uid %u", (unsigned)getuid());
	VT_CHILD_CHECK(vt_contains(msg, "'feed'") && vt_contains(msg, uid) &&
			   vt_contains(msg, "may only read"),
		       "the EREADONLY sentence \"%s\" does not name 'feed', %s and \"may only "
		       "read\"",
		       msg, uid);
	VT_CHILD_CHECK(strcmp(vad_strerror(rc), "unknown vad error code") != 0,
		       "EREADONLY has no sentence of its own");
}

/* With feed mapped read-only (after an attach), VAD_POPULATE is refused by libvad itself
 * with a sentence saying why, before any request. */
static void child_populate_refused_readonly(vad_client *c)
{
	void *p;
	int rc = vad_alloc_flags(c, "feed", PAGE, 0, VAD_POPULATE, &p);
	VT_CHILD_CHECK(rc == VAD_EREADONLY,
		       "alloc with VAD_POPULATE in read-only feed: %d (%s), expected EREADONLY", rc,
		       vad_last_error(c));
	const char *msg = vad_last_error(c);
	VT_CHILD_CHECK(vt_contains(msg, "VAD_POPULATE") && vt_contains(msg, "'feed'") &&
			   vt_contains(msg, "read-only"),
		       "the VAD_POPULATE refusal \"%s\" does not name the flag, 'feed' and "
		       "read-only",
		       msg);
}

/* Attach token, check the range holds seed's pattern; its address. */
static uint8_t *child_attach(vad_client *c, const char *token, uint64_t seed)
{
	void *p = NULL;
	size_t size = 0;
	int rc = vad_attach(c, token, &p, &size);
	VT_CHILD_CHECK(rc == 0, "attach as uid %u: %d (%s)", (unsigned)getuid(), rc,
		       vad_last_error(c));
	VT_CHILD_CHECK(size == RANGE_SIZE, "attached %zu bytes, expected %u", size, RANGE_SIZE);
	ssize_t bad = vt_check_pattern(p, size, seed);
	VT_CHILD_CHECK(bad < 0, "byte %zd of the attached range is not the writer's", bad);
	return p;
}

static volatile uint8_t *fault_expected;

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
	(void)sig;
	(void)uctx;
	_exit(si->si_addr == (void *)fault_expected && si->si_code == SEGV_ACCERR ? CAUGHT_SEGV
										  : WRONG_SEGV);
}

/* A grandchild writes through p: it must fault (a write to a present, read-only page). */
static void child_write_faults(volatile uint8_t *p)
{
	fflush(NULL);
	pid_t pid = fork();
	VT_CHILD_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, NULL);
		fault_expected = p;
		*p = (uint8_t)(*p + 1);
		_exit(0); /* the write went through */
	}
	int rc = vt_wait_child(pid, CHILD_TIMEOUT);
	VT_CHILD_CHECK(rc == CAUGHT_SEGV || rc == 128 + SIGSEGV,
		       "a write through the reader's pointer %s (exit %d)",
		       rc == 0		  ? "went through"
		       : rc == WRONG_SEGV ? "faulted, but not as a write to a read-only page"
					  : "did not fault",
		       rc);
}

/* The fd of arena's memfd in this process (libvad keeps it open), found by its link name
 * "/memfd:vad:NAME (deleted)". */
static int child_arena_fd(const char *arena)
{
	char name[96];
	snprintf(name, sizeof(name), "vad:%s", arena);
	int fd = vt_memfd_named(getpid(), name);
	VT_CHILD_CHECK(fd >= 0, "no fd of this process links to /memfd:%s", name);
	return fd;
}

/* Nothing this process holds can be made to write the arena: mprotect of its mapping, a
 * writable shared mmap of the fd it was sent, reopening that fd read-write through /proc. */
static void child_cannot_make_writable(uint8_t *p)
{
	uint8_t *page = (uint8_t *)((uintptr_t)p & ~(uintptr_t)(PAGE - 1));
	errno = 0;
	VT_CHILD_CHECK(mprotect(page, PAGE, PROT_READ | PROT_WRITE) == -1 && errno == EACCES,
		       "mprotect(PROT_WRITE) on the reader's mapping: %s, expected EACCES",
		       errno ? strerror(errno) : "it worked");

	int fd = child_arena_fd("feed");
	int flags = fcntl(fd, F_GETFL);
	VT_CHILD_CHECK(flags >= 0 && (flags & O_ACCMODE) == O_RDONLY,
		       "the reader's arena fd %d is not read-only (flags 0x%x)", fd, flags);
	errno = 0;
	void *w = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	VT_CHILD_CHECK(w == MAP_FAILED && errno == EACCES,
		       "a writable shared mmap of the reader's fd: %s, expected EACCES",
		       w == MAP_FAILED ? strerror(errno) : "it worked");
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	errno = 0;
	int rw = open(path, O_RDWR | O_CLOEXEC);
	VT_CHILD_CHECK(rw < 0 && errno == EACCES,
		       "reopening the reader's fd read-write through %s: %s, expected EACCES", path,
		       rw >= 0 ? "it worked" : strerror(errno));
	/* reading is what it may do */
	uint8_t *r = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	VT_CHILD_CHECK(r != MAP_FAILED, "a read-only mmap of the reader's fd: %s", strerror(errno));
	munmap(r, PAGE);
}

static size_t child_held_ranges(vad_client *c)
{
	struct vad_stats st;
	int rc = vad_stats(c, &st);
	VT_CHILD_CHECK(rc == 0, "stats as a reader: %s", vad_last_error(c));
	return (size_t)st.held_ranges;
}

/* The writer: allocates in feed, writes, shares; writes again when asked; frees at the end. */
static void writer_main(void *ctx, int in, int out)
{
	const struct vt_daemon *d = ctx;
	vad_client *c = vt_child_connect(d, "writer");
	void *p;
	int rc = vad_alloc_in(c, "feed", RANGE_SIZE, 0, &p);
	VT_CHILD_CHECK(rc == 0, "alloc in feed as the writer: %s", vad_last_error(c));
	vt_fill_pattern(p, RANGE_SIZE, SEED_FIRST);
	char token[VAD_TOKEN_LEN + 1], line[256];
	rc = vad_share(c, p, token);
	VT_CHILD_CHECK(rc == 0, "share: %s", vad_last_error(c));
	vt_child_send(out, "token %s", token);
	vt_child_expect(in, "write", line, sizeof(line));
	vt_fill_pattern(p, RANGE_SIZE, SEED_SECOND);
	vt_child_send(out, "written");
	vt_child_expect(in, "bye", line, sizeof(line));
	rc = vad_free(c, p);
	VT_CHILD_CHECK(rc == 0, "free as the writer: %s", vad_last_error(c));
	vad_close(c);
}

/* The reader by uid: refused allocation, attaches and reads, cannot write, reads the new
 * bytes once the writer wrote them, frees its reference. */
static void reader_main(void *ctx, int in, int out)
{
	const struct vt_daemon *d = ctx;
	char line[256];
	const char *token = vt_child_expect(in, "token", line, sizeof(line));
	vad_client *c = vt_child_connect(d, "reader");
	child_alloc_refused_readonly(c);
	uint8_t *p = child_attach(c, token, SEED_FIRST);
	VT_CHILD_CHECK(child_held_ranges(c) == 1, "the attach took no reference");
	child_populate_refused_readonly(c);
	/* Tokens are the writers': a reader revoking or replacing one would cut off the others. */
	char again[VAD_TOKEN_LEN + 1];
	int refused = vad_share(c, p, again);
	VT_CHILD_CHECK(refused == VAD_EREADONLY, "share as a reader: %d (%s), expected EREADONLY",
		       refused, vad_last_error(c));
	refused = vad_unshare(c, p);
	VT_CHILD_CHECK(refused == VAD_EREADONLY, "unshare as a reader: %d (%s), expected EREADONLY",
		       refused, vad_last_error(c));
	child_write_faults(p);
	child_cannot_make_writable(p);
	void *base;
	int rc = vad_pointer(c, "feed", 0, &base);
	VT_CHILD_CHECK(rc == 0 && base <= (void *)p, "vad_pointer in feed: %s", vad_last_error(c));
	/* in an arena open to everyone the same peer writes as before */
	void *q;
	rc = vad_alloc(c, PAGE, 0, &q);
	VT_CHILD_CHECK(rc == 0, "alloc in default as the reader: %s", vad_last_error(c));
	memset(q, 0x77, PAGE);
	VT_CHILD_CHECK(vad_free(c, q) == 0, "free in default: %s", vad_last_error(c));

	vt_child_send(out, "ready");
	vt_child_expect(in, "check", line, sizeof(line));
	ssize_t bad = vt_check_pattern(p, RANGE_SIZE, SEED_SECOND);
	VT_CHILD_CHECK(bad < 0, "byte %zd does not show what the writer wrote since", bad);
	rc = vad_free(c, p);
	VT_CHILD_CHECK(rc == 0, "free as the reader: %s", vad_last_error(c));
	VT_CHILD_CHECK(child_held_ranges(c) == 0, "the reader's free dropped no reference");
	vad_close(c);
	vt_child_send(out, "done");
}

/* The reader by supplementary group: the same refusal, the same read-only fd. */
static void group_reader_main(void *ctx, int in, int out)
{
	const struct vt_daemon *d = ctx;
	char line[256];
	const char *token = vt_child_expect(in, "token", line, sizeof(line));
	vad_client *c = vt_child_connect(d, "group-reader");
	child_alloc_refused_readonly(c);
	uint8_t *p = child_attach(c, token, SEED_FIRST);
	child_write_faults(p);
	int fd = child_arena_fd("feed");
	VT_CHILD_CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY,
		       "the group reader's fd is not read-only");
	VT_CHILD_CHECK(vad_free(c, p) == 0, "free: %s", vad_last_error(c));
	vad_close(c);
	vt_child_send(out, "done");
}

/* On neither list: refused as before, allocation and attach alike. */
static void stranger_main(void *ctx, int in, int out)
{
	const struct vt_daemon *d = ctx;
	char line[256];
	const char *token = vt_child_expect(in, "token", line, sizeof(line));
	vad_client *c = vt_child_connect(d, "stranger");
	void *p;
	size_t size;
	int rc = vad_alloc_in(c, "feed", PAGE, 0, &p);
	VT_CHILD_CHECK(rc == VAD_EPERM, "alloc in feed as a stranger: %d (%s), expected EPERM", rc,
		       vad_last_error(c));
	rc = vad_attach(c, token, &p, &size);
	VT_CHILD_CHECK(rc == VAD_EPERM, "attach in feed as a stranger: %d (%s), expected EPERM", rc,
		       vad_last_error(c));
	vad_close(c);
	vt_child_send(out, "done");
}

/* ---- in the test -------------------------------------------------------------------- */

static void send_token(struct vt_peer *p, const char *token)
{
	char line[64];
	snprintf(line, sizeof(line), "token %s", token);
	vt_peer_send(p, line);
}

static void skip_unless_root(void)
{
	if (!vt_is_root()) {
		print_message("skipped: the writer and the readers run as other uids, which needs "
			      "root\n");
		skip();
	}
}

static void test_reader_reads_and_cannot_write(void **state)
{
	skip_unless_root();
	struct fixture *f = *state;
	const struct vt_daemon *d = &f->d;
	char line[256], token[VAD_TOKEN_LEN + 1];
	struct vt_peer writer, reader;
	vt_peer_start(f->ids.writer, NULL, 0, writer_main, (void *)d, &writer);
	snprintf(token, sizeof(token), "%s", vt_peer_expect(&writer, "token", line, sizeof(line)));
	assert_int_equal(strlen(token), VAD_TOKEN_LEN);

	vt_peer_start(f->ids.reader, NULL, 0, reader_main, (void *)d, &reader);
	send_token(&reader, token);
	vt_peer_expect(&reader, "ready", line, sizeof(line));
	/* the writer still writes while the reader holds the range */
	vt_peer_send(&writer, "write");
	vt_peer_expect(&writer, "written", line, sizeof(line));
	vt_peer_send(&reader, "check");
	vt_peer_expect(&reader, "done", line, sizeof(line));
	vt_peer_finish(&reader, "reader");
	vt_peer_send(&writer, "bye");
	vt_peer_finish(&writer, "writer");

	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, vt_timeout_ms(10000), NULL));
	assert_int_equal(0, vt_check_invariants(d));
}

static void test_group_reader_and_stranger(void **state)
{
	skip_unless_root();
	struct fixture *f = *state;
	const struct vt_daemon *d = &f->d;
	char line[256], token[VAD_TOKEN_LEN + 1];
	struct vt_peer writer, group_reader, stranger;
	vt_peer_start(f->ids.writer, NULL, 0, writer_main, (void *)d, &writer);
	snprintf(token, sizeof(token), "%s", vt_peer_expect(&writer, "token", line, sizeof(line)));

	gid_t groups[] = {(gid_t)f->ids.reader_group};
	vt_peer_start(f->ids.group_reader, groups, 1, group_reader_main, (void *)d, &group_reader);
	send_token(&group_reader, token);
	vt_peer_expect(&group_reader, "done", line, sizeof(line));
	vt_peer_finish(&group_reader, "group reader");

	vt_peer_start(f->ids.stranger, NULL, 0, stranger_main, (void *)d, &stranger);
	send_token(&stranger, token);
	vt_peer_expect(&stranger, "done", line, sizeof(line));
	vt_peer_finish(&stranger, "stranger");

	vt_peer_send(&writer, "write");
	vt_peer_expect(&writer, "written", line, sizeof(line));
	vt_peer_send(&writer, "bye");
	vt_peer_finish(&writer, "writer");
	assert_int_equal(0, vt_wait_busy(d, 0, UINT32_MAX, vt_timeout_ms(10000), NULL));
}

/* Root is a writer of every arena, readers or not. */
static void test_root_writes(void **state)
{
	struct fixture *f = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(&f->d, "root", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "feed", PAGE, 0, &p));
	memset(p, 0x5a, PAGE);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reader_reads_and_cannot_write),
	    cmocka_unit_test(test_group_reader_and_stranger),
	    cmocka_unit_test(test_root_writes),
	};
	return cmocka_run_group_tests_name("service readers", tests, group_setup,
					   vt_group_daemon_stop);
}
