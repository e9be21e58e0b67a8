/*
 * test_hostile_arena.c - a client that turns the arena fd it received against the others:
 * ftruncate (shrink, grow, to zero), fallocate past the end, adding seals (write, future
 * write, grow), all through its own fd, a dup of it and a reopened /proc/self/fd path. Every
 * attempt fails with EPERM (the daemon sealed the memfd with SHRINK|GROW|SEAL), the arena
 * keeps its size and seals, and another client's mapping stays whole: its pattern reads back
 * and touching every page of its range does not SIGBUS. The daemon then frees cleanly.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fdpass.h"
#include "hostile_util.h"
#include "vtassert.h"

#define MiB	      (1024u * 1024u)
#define ARENA_SIZE    (64u * MiB)
#define VICTIM_SIZE   (4u * MiB)
#define VICTIM_SEED   0x51C7
#define REPLY_TIMEOUT vt_timeout_ms(10000)

struct arena_fx {
	struct vt_daemon d;
	struct vt_baseline base;
	vad_client *victim;
	void *range;
};

static int group_setup(void **state)
{
	char arenas[128];
	snprintf(arenas, sizeof(arenas), "[arena default]\nsize = %uM\n", ARENA_SIZE / MiB);
	if (VT_GROUP_FIXTURE_SETUP(state, struct arena_fx, "stats_interval = 1h\n", arenas) != 0)
		return -1;
	struct arena_fx *a = *state;
	if (vt_baseline_take(&a->d, &a->base) != 0)
		return -1;
	if (vt_connect(&a->d, "victim", &a->victim) != 0)
		return -1;
	if (vad_alloc(a->victim, VICTIM_SIZE, 0, &a->range) != 0)
		return -1;
	vt_fill_pattern(a->range, VICTIM_SIZE, VICTIM_SEED);
	return 0;
}

static int group_teardown(void **state)
{
	struct arena_fx *a = *state;
	if (a->victim)
		vad_close(a->victim);
	int rc = 0;
	if (vt_baseline_check(&a->d, &a->base, vt_timeout_ms(5000)) != 0)
		rc = -1;
	if (vt_group_daemon_stop(state) != 0)
		rc = -1;
	return rc;
}

/* Ask for the default arena's fd over a raw connection; returns the fd (the connection
 * stays open in *r so the daemon keeps the session). */
static int get_arena_fd(struct arena_fx *a, struct vt_raw *r)
{
	assert_int_equal(0, vt_raw_connect(r, a->d.socket_path));
	assert_int_equal(0, vt_raw_hello(r, "attacker"));
	struct vt_req q;
	uint64_t id = vt_raw_send_request(r, vt_req_map_arena(&q, NULL));
	assert_true(id != 0);

	uint8_t buf[4096];
	size_t len = 0;
	int fd = -1;
	uint64_t deadline = vt_now_ns() + (uint64_t)REPLY_TIMEOUT * 1000000u;
	for (;;) {
		size_t plen;
		if (vad_frame_peek(buf, len, sizeof(buf), &plen) == VAD_FRAME_READY) {
			Vad__Response *resp = vad__response__unpack(NULL, plen, buf + 4);
			assert_non_null(resp);
			assert_int_equal(id, resp->id);
			if (resp->error != VAD__ERROR__OK)
				fail_msg("map_arena refused: %s", resp->message);
			assert_int_equal(ARENA_SIZE, resp->map_arena->arena->size);
			vad__response__free_unpacked(resp, NULL);
			break;
		}
		assert_true(vt_now_ns() < deadline);
		int fds[4];
		size_t nfds = 0;
		ssize_t n = vad_recv_with_fds(r->fd, buf + len, sizeof(buf) - len, fds, 4, &nfds);
		assert_true(n > 0);
		len += (size_t)n;
		for (size_t i = 0; i < nfds; i++) {
			assert_int_equal(-1, fd);
			fd = fds[i];
		}
	}
	assert_true(fd >= 0);
	return fd;
}

/* op must fail with EPERM (or, for a seal the kernel predates, EINVAL). */
#define ASSERT_REFUSED(expr, what)                                                                 \
	do {                                                                                       \
		errno = 0;                                                                         \
		int rc_ = (expr);                                                                  \
		if (rc_ != -1 || (errno != EPERM && errno != EINVAL))                              \
			fail_msg("%s on the arena fd: returned %d (%s), expected EPERM", what,     \
				 rc_, strerror(errno));                                            \
	} while (0)

static void attack_fd(int fd, const char *via)
{
	char what[128];
#define WHAT(s) (snprintf(what, sizeof(what), "%s via %s", s, via), what)
	ASSERT_REFUSED(ftruncate(fd, 0), WHAT("ftruncate to 0"));
	ASSERT_REFUSED(ftruncate(fd, ARENA_SIZE / 2), WHAT("ftruncate to half"));
	ASSERT_REFUSED(ftruncate(fd, (off_t)ARENA_SIZE * 2), WHAT("ftruncate to double"));
	ASSERT_REFUSED(fallocate(fd, 0, ARENA_SIZE, MiB), WHAT("fallocate past the end"));
	ASSERT_REFUSED(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), WHAT("F_SEAL_WRITE"));
#ifdef F_SEAL_FUTURE_WRITE
	ASSERT_REFUSED(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), WHAT("F_SEAL_FUTURE_WRITE"));
#endif
	ASSERT_REFUSED(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK), WHAT("re-sealing"));
	int seals = fcntl(fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_true(seals & F_SEAL_SHRINK);
	assert_true(seals & F_SEAL_GROW);
	assert_true(seals & F_SEAL_SEAL);
	assert_false(seals & F_SEAL_WRITE);
	struct stat st;
	assert_int_equal(0, fstat(fd, &st));
	assert_int_equal(ARENA_SIZE, st.st_size);
#undef WHAT
}

static void assert_victim_whole(struct arena_fx *a)
{
	/* Every page readable (a shrunk file would SIGBUS here) and the pattern intact. */
	ssize_t bad = vt_check_pattern(a->range, VICTIM_SIZE, VICTIM_SEED);
	if (bad >= 0)
		fail_msg("the victim's range changed at byte %zd", bad);
	void *p;
	VT_ASSERT_OK(a->victim, vad_alloc(a->victim, MiB, 0, &p));
	memset(p, 0x77, MiB);
	VT_ASSERT_OK(a->victim, vad_free(a->victim, p));
}

static void test_resize_and_reseal(void **state)
{
	struct arena_fx *a = *state;
	struct vt_raw r;
	int fd = get_arena_fd(a, &r);
	attack_fd(fd, "the received fd");
	int dup_fd = dup(fd);
	assert_true(dup_fd >= 0);
	attack_fd(dup_fd, "a dup");
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int reopened = open(path, O_RDWR | O_CLOEXEC);
	assert_true(reopened >= 0);
	attack_fd(reopened, "/proc/self/fd reopened");
	assert_victim_whole(a);
	close(reopened);
	close(dup_fd);
	close(fd);
	vt_raw_close(&r);
}

/* Another process uses libvad normally, then goes after the arena fd libvad keeps open. */
static void test_resize_from_another_process(void **state)
{
	struct arena_fx *a = *state;
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		vad_client *c = NULL;
		VT_CHILD_CHECK(vad_connect(a->d.socket_path, "child-libvad", &c) == 0, "%s",
			       vad_last_error(NULL));
		void *p;
		VT_CHILD_CHECK(vad_alloc(c, 4096, 0, &p) == 0, "%s", vad_last_error(c));
		int hits = 0;
		for (int fd = 3; fd < 256; fd++) {
			struct stat st;
			if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != ARENA_SIZE)
				continue;
			hits++;
			VT_CHILD_CHECK(ftruncate(fd, 0) == -1 && errno == EPERM,
				       "ftruncate of fd %d: %s", fd, strerror(errno));
			VT_CHILD_CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == -1 && errno == EPERM,
				       "F_SEAL_WRITE on fd %d: %s", fd, strerror(errno));
		}
		VT_CHILD_CHECK(hits >= 1, "found no arena fd in the child (%d)", hits);
		memset(p, 0xab, 4096);
		vad_close(c);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, REPLY_TIMEOUT));
	assert_victim_whole(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_resize_and_reseal),
	    cmocka_unit_test(test_resize_from_another_process),
	};
	return cmocka_run_group_tests_name("hostile_arena", tests, group_setup, group_teardown);
}
