/*
 * test_service_arenas.c - the arenas themselves as a client sees them: the memfd a
 * client receives is sealed against resizing and is the very memory libvad hands out;
 * several arenas with their own quanta stay independent; a directory-backed arena, whose
 * file cannot be sealed, is refused at start with its file:line unless its section says
 * accept_unsealed = yes, and then is marked unsealed (vad_arenas, vactl arenas) and works
 * like a memfd one (sharing across processes, zeros on reuse) and leaves no file behind.
 */
#include <dirent.h>
#include <json-c/json.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "rawclient.h"
#include "vtassert.h"

#define PAGE	      4096u
#define REPLY_TIMEOUT vt_timeout_ms(5000)

/* Ask the daemon for arena's fd on a raw connection; returns it (caller closes). */
static int raw_map_arena(const struct vt_daemon *d, const char *arena, uint64_t *size)
{
	struct vt_raw r;
	assert_int_equal(0, vt_raw_connect(&r, d->socket_path));
	assert_int_equal(0, vt_raw_hello(&r, "mapper"));
	r.keep_fd = true;
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(&r, vt_req_map_arena(&q, arena), REPLY_TIMEOUT);
	assert_non_null(resp);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	*size = resp->map_arena->arena->size;
	vt_raw_response_free(resp);
	int fd = r.kept_fd;
	vt_raw_close(&r);
	assert_true(fd >= 0);
	return fd;
}

static void test_memfd_is_sealed_and_shared(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, "[arena default]\nsize = 64M\n"));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "writer", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 3 * PAGE, 0, &p));
	strcpy(p, "written through libvad");
	struct vad_range range;
	VT_ASSERT_OK(c, vad_range_info(c, p, &range));

	uint64_t size = 0;
	int fd = raw_map_arena(d, "default", &size);
	assert_int_equal(64u << 20, size);
	struct stat st;
	assert_int_equal(0, fstat(fd, &st));
	assert_int_equal(64u << 20, st.st_size);
	/* A client cannot shrink (SIGBUS for everyone) or grow the arena. */
	int seals = fcntl(fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_true(seals & F_SEAL_SHRINK);
	assert_true(seals & F_SEAL_GROW);
	assert_true(seals & F_SEAL_SEAL);
	assert_int_equal(-1, ftruncate(fd, 0));
	assert_int_equal(-1, ftruncate(fd, (off_t)size * 2));
	assert_int_equal(-1, fallocate(fd, 0, 0, (off_t)size * 2));
	assert_int_equal(-1, fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE)); /* sealed seals */

	/* The fd is the memory libvad gave out: the same bytes at the range's offset. */
	uint8_t *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_string_equal("written through libvad", (char *)map + range.offset);
	strcpy((char *)map + range.offset + PAGE, "written through the fd");
	assert_string_equal("written through the fd", (char *)p + PAGE);
	munmap(map, size);
	close(fd);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

static const char *const three_arenas = "[arena default]\n"
					"size = 64M\n"
					"\n"
					"[arena big]\n"
					"size = 1G\n"
					"quantum = 2M\n"
					"\n"
					"[arena tiny]\n"
					"size = 256K\n"
					"quantum = 64K\n";

static void test_arenas_are_independent(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, three_arenas));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "arenas", &c));
	struct vad_arena_info *info;
	size_t n;
	VT_ASSERT_OK(c, vad_arenas(c, &info, &n));
	assert_int_equal(3, n);
	free(info);

	void *pd, *pb, *pt;
	VT_ASSERT_OK(c, vad_alloc(c, 1, 0, &pd));
	VT_ASSERT_OK(c, vad_alloc_in(c, "big", 1, 0, &pb));
	VT_ASSERT_OK(c, vad_alloc_in(c, "tiny", 1, 0, &pt));
	struct vad_range rd, rb, rt;
	VT_ASSERT_OK(c, vad_range_info(c, pd, &rd));
	VT_ASSERT_OK(c, vad_range_info(c, pb, &rb));
	VT_ASSERT_OK(c, vad_range_info(c, pt, &rt));
	/* sizes round up to each arena's quantum, offsets are aligned to it */
	assert_int_equal(PAGE, rd.size);
	assert_int_equal(2u << 20, rb.size);
	assert_int_equal(64u << 10, rt.size);
	assert_int_equal(0, rb.offset % (2u << 20));
	assert_int_equal(0, rt.offset % (64u << 10));
	assert_string_equal("default", rd.arena);
	assert_string_equal("big", rb.arena);
	assert_string_equal("tiny", rt.arena);
	/* separate memory: writing one does not touch the others */
	memset(pd, 0xD0, PAGE);
	memset(pb, 0xB0, 2u << 20);
	memset(pt, 0x70, 64u << 10);
	assert_int_equal(0xD0, ((uint8_t *)pd)[PAGE - 1]);
	assert_int_equal(0x70, ((uint8_t *)pt)[0]);

	/* filling tiny (4 quanta) does not affect the others */
	void *more[3];
	for (int i = 0; i < 3; i++)
		VT_ASSERT_OK(c, vad_alloc_in(c, "tiny", 64u << 10, 0, &more[i]));
	void *p;
	VT_ASSERT_ERR(c, VAD_ENOSPC, vad_alloc_in(c, "tiny", 1, 0, &p));
	VT_ASSERT_OK(c, vad_alloc_in(c, "big", 64u << 20, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));

	struct vad_daemon_stats *ds;
	VT_ASSERT_OK(c, vad_stats_detail(c, NULL, &ds));
	assert_int_equal(3, ds->n_arenas);
	for (size_t i = 0; i < ds->n_arenas; i++) {
		const struct vad_arena_stats *a = &ds->arenas[i];
		if (strcmp(a->name, "tiny") == 0)
			assert_int_equal(256u << 10, a->busy_bytes);
		else if (strcmp(a->name, "big") == 0)
			assert_int_equal(2u << 20, a->busy_bytes);
		else
			assert_int_equal(PAGE, a->busy_bytes);
	}
	free(ds);
	for (int i = 0; i < 3; i++)
		VT_ASSERT_OK(c, vad_free(c, more[i]));
	VT_ASSERT_OK(c, vad_free(c, pd));
	VT_ASSERT_OK(c, vad_free(c, pb));
	VT_ASSERT_OK(c, vad_free(c, pt));
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

static int count_entries(const char *dir)
{
	DIR *dh = opendir(dir);
	if (!dh)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dh)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, ".."))
			n++;
	closedir(dh);
	return n;
}

/* The line of the config file that holds text, or 0. */
static int config_line_of(const struct vt_daemon *d, const char *text)
{
	FILE *f = fopen(d->conf_path, "r");
	assert_non_null(f);
	char line[PATH_MAX + 64];
	int n = 0, found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		n++;
		if (strncmp(line, text, strlen(text)) == 0)
			found = n;
	}
	fclose(f);
	return found;
}

/* vt_daemon_init, and an empty directory "backing" in its temporary directory. */
static void init_with_backing_dir(struct vt_daemon *d, char *backing, size_t len)
{
	assert_int_equal(0, vt_daemon_init(d));
	snprintf(backing, len, "%s/backing", d->dir);
	assert_int_equal(0, mkdir(backing, 0700));
}

/* Files in a directory take no seals: without accept_unsealed the daemon refuses to start,
 * naming the section's file:line, the seal that failed and the way out. */
static void test_unsealed_backing_refused_at_start(void **state)
{
	struct vt_daemon *d = *state;
	char backing[PATH_MAX];
	init_with_backing_dir(d, backing, sizeof(backing));
	char arenas[PATH_MAX + 128];
	snprintf(arenas, sizeof(arenas),
		 "[arena default]\nsize = 64M\n\n[arena disk]\nsize = 64M\nbacking = %s\n",
		 backing);
	assert_int_equal(0, vt_daemon_write_config(d, NULL, arenas));
	int line = config_line_of(d, "[arena disk]");
	assert_true(line > 0);
	char bin[PATH_MAX], want[2 * PATH_MAX + 128];
	snprintf(bin, sizeof(bin), "%s/vad", vt_build_dir());
	char *argv[] = {bin, "-c", d->conf_path, "--foreground", NULL};
	struct vt_output o;
	assert_int_equal(0, vt_run(argv, NULL, vt_timeout_ms(20000), &o));
	snprintf(want, sizeof(want),
		 "%s:%d: [arena disk]: its file in %s cannot be sealed (F_SEAL_", d->conf_path,
		 line, backing);
	if (o.exit_code != 3 || !vt_contains(o.err, want) ||
	    !vt_contains(o.err, "accept_unsealed = yes")) {
		vt_output_print("vad with an unsealable backing", &o);
		fail_msg("expected exit 3 and \"%s...\" naming accept_unsealed", want);
	}
	print_message("refused: %s", o.err);
	vt_output_free(&o);
	assert_int_equal(0, count_entries(backing)); /* nothing left behind */
}

static void test_directory_backed_arena(void **state)
{
	struct vt_daemon *d = *state;
	char backing[PATH_MAX];
	init_with_backing_dir(d, backing, sizeof(backing));
	char arenas[PATH_MAX + 128];
	snprintf(arenas, sizeof(arenas),
		 "[arena disk]\nsize = 64M\nbacking = %s\naccept_unsealed = yes\n\n"
		 "[arena mem]\nsize = 64M\n",
		 backing);
	assert_int_equal(0, vt_daemon_write_config(d, NULL, arenas));
	assert_int_equal(0, vt_daemon_start(d));
	/* the backing file is unnamed: nothing to clean up after a crash */
	assert_int_equal(0, count_entries(backing));
	assert_true(vt_daemon_log_contains(d, "arena disk runs UNSEALED (accept_unsealed = yes)"));

	vad_client *c;
	assert_int_equal(0, vt_connect(d, "disk", &c));
	/* marked unsealed for every client (vad_arenas) and in vactl arenas */
	struct vad_arena_info *info;
	size_t n_info;
	VT_ASSERT_OK(c, vad_arenas(c, &info, &n_info));
	assert_int_equal(2, n_info);
	assert_string_equal("disk", info[0].name);
	assert_true(info[0].unsealed);
	assert_string_equal("mem", info[1].name);
	assert_false(info[1].unsealed);
	free(info);
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "arenas", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl arenas");
	char want[PATH_MAX + 32];
	snprintf(want, sizeof(want), "%s UNSEALED", backing);
	assert_true(vt_contains(o.out, want));
	assert_true(vt_contains(o.out, "UNSEALED: the arena's file cannot be sealed"));
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "arenas", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json arenas");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_true(json_object_get_boolean(vt_json_path(j, "arenas.0.unsealed")));
	assert_false(json_object_get_boolean(vt_json_path(j, "arenas.1.unsealed")));
	assert_int_equal(json_type_boolean,
			 json_object_get_type(vt_json_path(j, "arenas.1.unsealed")));
	json_object_put(j);
	vt_output_free(&o);

	struct vad_session s;
	VT_ASSERT_OK(c, vad_session_info(c, &s));
	assert_string_equal("disk", s.default_arena);
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 16 * PAGE, 0, &p));
	vt_fill_pattern(p, 16 * PAGE, 77);
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, p, token));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		vad_client *b;
		int rc = vad_connect(d->socket_path, "disk-reader", &b);
		VT_CHILD_CHECK(rc == 0, "connect: %d", rc);
		void *q;
		size_t size;
		rc = vad_attach(b, token, &q, &size);
		VT_CHILD_CHECK(rc == 0, "attach: %s", vad_last_error(b));
		VT_CHILD_CHECK(vt_check_pattern(q, 16 * PAGE, 77) < 0, "other bytes in the child");
		vad_close(b);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(20000)));
	VT_ASSERT_OK(c, vad_free(c, p));
	assert_int_equal(0, vt_purge(d));
	/* reuse reads zeros (hole punching works on this file system too) */
	VT_ASSERT_OK(c, vad_alloc(c, 64u << 20, 0, &p));
	ssize_t nz = vt_first_nonzero(p, 16 * PAGE);
	if (nz >= 0)
		fail_msg("reused range of a directory-backed arena has 0x%02x at %zd",
			 ((uint8_t *)p)[nz], nz);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
	assert_int_equal(0, count_entries(backing));
}

/* lazy_max bounds the freed-but-unreclaimed memory: past lazy_max a background drain
 * starts, past 2 x lazy_max the freeing path drains itself, so lazy bytes never pile up
 * beyond 2 x lazy_max plus the range being freed; and the books always balance. */
static void test_lazy_max_bounds_lazy_bytes(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0,
			 vt_daemon_setup(d, "lazy_max = 1M\n", "[arena default]\nsize = 256M\n"));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "lazy", &c));
	enum { RANGE = 16 * 1024 };
	int n = vt_scale(2000);
	if (n < 400)
		n = 400; /* at least 6 MiB, three times 2 x lazy_max */
	void **ptrs = calloc((size_t)n, sizeof(*ptrs));
	assert_non_null(ptrs);
	for (int i = 0; i < n; i += 64) {
		int k = n - i < 64 ? n - i : 64;
		size_t sizes[64];
		for (int j = 0; j < k; j++)
			sizes[j] = RANGE;
		VT_ASSERT_OK(c, vad_alloc_batch(c, (size_t)k, sizes, 0, ptrs + i));
	}
	uint64_t worst = 0;
	for (int i = 0; i < n; i++) {
		VT_ASSERT_OK(c, vad_free(c, ptrs[i]));
		if (i % 16 != 15)
			continue;
		struct vad_daemon_stats *ds;
		VT_ASSERT_OK(c, vad_stats_detail(c, "default", &ds));
		const struct vad_arena_stats *a = &ds->arenas[0];
		if (a->lazy_bytes > worst)
			worst = a->lazy_bytes;
		/* the free has been answered, so its drain (if it needed one) is done: lazy
		 * bytes are within 2 x lazy_max, nothing on top (this client is the only one) */
		if (a->lazy_bytes > 2 * (1u << 20))
			fail_msg("after %d frees lazy_bytes is %llu, over 2 x lazy_max (2 MiB)",
				 i + 1, (unsigned long long)a->lazy_bytes);
		free(ds);
	}
	struct vad_daemon_stats *ds;
	VT_ASSERT_OK(c, vad_stats_detail(c, "default", &ds));
	print_message("freed %d x 16 KiB: worst lazy_bytes %llu, %llu drains, %llu bytes released "
		      "in %llu calls\n",
		      n, (unsigned long long)worst, (unsigned long long)ds->arenas[0].drains,
		      (unsigned long long)ds->arenas[0].released_bytes,
		      (unsigned long long)ds->arenas[0].release_calls);
	/* drains ran without any purge, and released memory in coalesced runs */
	assert_true(ds->arenas[0].drains >= 1);
	assert_true(ds->arenas[0].released_bytes >= (uint64_t)n * RANGE / 2);
	assert_true(ds->arenas[0].release_calls < ds->arenas[0].released_bytes / RANGE);
	free(ds);
	/* Once quiet (a drain may move blocks while stats are read), the books balance. */
	assert_int_equal(0, vt_purge(d));
	VT_ASSERT_OK(c, vad_stats_detail(c, "default", &ds));
	const struct vad_arena_stats *a = &ds->arenas[0];
	uint64_t sum = a->busy_bytes + a->free_bytes + a->lazy_bytes + a->pooled_bytes;
	if (sum != a->size)
		fail_msg("busy %llu + free %llu + lazy %llu + pooled %llu != size %llu",
			 (unsigned long long)a->busy_bytes, (unsigned long long)a->free_bytes,
			 (unsigned long long)a->lazy_bytes, (unsigned long long)a->pooled_bytes,
			 (unsigned long long)a->size);
	assert_int_equal(0, a->busy_bytes);
	free(ds);
	free(ptrs);
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    VT_OWN_DAEMON_TEST(test_memfd_is_sealed_and_shared),
	    VT_OWN_DAEMON_TEST(test_arenas_are_independent),
	    VT_OWN_DAEMON_TEST(test_unsealed_backing_refused_at_start),
	    VT_OWN_DAEMON_TEST(test_directory_backed_arena),
	    VT_OWN_DAEMON_TEST(test_lazy_max_bounds_lazy_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
