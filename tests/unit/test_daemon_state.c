/* test_daemon_state.c - the state file (daemon/state.c): records written are read back, a
 * dropped record is gone, a count change is seen, slots are reused, and a truncated or
 * corrupted file is refused with a sentence (never a crash); share token records (version 3)
 * and tenant arena entries likewise, and files of versions 1 and 2 still load. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "state.h"

#define Q 4096ull

static struct vad_state_arena arenas[2] = {
    {.name = "default", .size = 1024 * Q, .quantum = Q, .dev = 1, .ino = 2},
    {.name = "big", .size = 64 * 1024 * Q, .quantum = 16 * Q, .dev = 1, .ino = 3},
};

struct seen {
	size_t n;
	struct vad_state_hold h[4096];
};

static int collect(void *ctx, const struct vad_state_hold *h)
{
	struct seen *s = ctx;
	if (s->n < 4096)
		s->h[s->n] = *h;
	s->n++;
	return 0;
}

static struct seen *scan_ok(int fd)
{
	struct vad_state *st;
	char err[256] = "";
	assert_int_equal(vad_state_open(fd, &st, err, sizeof(err)), 0);
	struct seen *s = calloc(1, sizeof(*s));
	assert_int_equal(vad_state_scan(st, collect, s, err, sizeof(err)), 0);
	vad_state_close(st);
	return s;
}

static void test_roundtrip(void **state)
{
	(void)state;
	struct vad_state *st;
	char err[256];
	assert_int_equal(vad_state_create(arenas, 2, 1000, 16, 77, &st, err, sizeof(err)), 0);
	uint32_t a = vad_state_put(st, 0, 4 * Q, 2 * Q, 5, 1000, 1);
	uint32_t b = vad_state_put(st, 1, 32 * Q, 16 * Q, 6, 1001, 1);
	uint32_t c = vad_state_put(st, 0, 8 * Q, Q, 6, 1001, 1);
	assert_true(a && b && c);
	vad_state_set_count(st, b, 3);
	vad_state_drop(st, c);
	assert_int_equal(vad_state_records(st), 2);

	struct seen *s = scan_ok(vad_state_fd(st));
	assert_int_equal(s->n, 2);
	assert_int_equal(s->h[0].arena, 0);
	assert_int_equal(s->h[0].offset, 4 * Q);
	assert_int_equal(s->h[0].size, 2 * Q);
	assert_int_equal(s->h[0].holder, 5);
	assert_int_equal(s->h[0].uid, 1000);
	assert_int_equal(s->h[0].count, 1);
	assert_int_equal(s->h[1].arena, 1);
	assert_int_equal(s->h[1].count, 3);
	assert_int_equal(s->h[1].holder, 6);
	free(s);

	/* The file's own facts come back. */
	struct vad_state *ro;
	assert_int_equal(vad_state_open(vad_state_fd(st), &ro, err, sizeof(err)), 0);
	size_t n;
	const struct vad_state_arena *ar = vad_state_arenas(ro, &n);
	assert_int_equal(n, 2);
	assert_string_equal(ar[1].name, "big");
	assert_int_equal(ar[1].ino, 3);
	assert_int_equal(vad_state_next_session(ro), 77);
	vad_state_close(ro);

	/* A dropped slot is reused before the file grows. */
	uint64_t used = vad_state_bytes_used(st);
	for (int i = 0; i < 10; i++)
		vad_state_drop(st, vad_state_put(st, 0, 0, Q, 9, 9, 1));
	assert_int_equal(vad_state_bytes_used(st), used);
	vad_state_close(st);
}

static void test_full(void **state)
{
	(void)state;
	struct vad_state *st;
	char err[256];
	assert_int_equal(vad_state_create(arenas, 1, 3, 16, 1, &st, err, sizeof(err)), 0);
	assert_true(vad_state_put(st, 0, 0, Q, 1, 1, 1));
	assert_true(vad_state_put(st, 0, Q, Q, 1, 1, 1));
	assert_true(vad_state_put(st, 0, 2 * Q, Q, 1, 1, 1));
	assert_int_equal(vad_state_put(st, 0, 3 * Q, Q, 1, 1, 1), 0);
	assert_int_equal(vad_state_full(st), 1);
	vad_state_close(st);
}

/* A copy of st's file in a fresh memfd, len bytes of it, for damaging. */
static int copy_file(struct vad_state *st, size_t len)
{
	int src = vad_state_fd(st);
	struct stat sb;
	assert_int_equal(fstat(src, &sb), 0);
	int fd = memfd_create("copy", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	char *buf = malloc(len);
	size_t have = len < (size_t)sb.st_size ? len : (size_t)sb.st_size;
	assert_int_equal(pread(src, buf, have, 0), (ssize_t)have);
	assert_int_equal(pwrite(fd, buf, have, 0), (ssize_t)have);
	free(buf);
	return fd;
}

static void test_truncated_refused(void **state)
{
	(void)state;
	struct vad_state *st, *ro;
	char err[256];
	assert_int_equal(vad_state_create(arenas, 2, 100, 16, 1, &st, err, sizeof(err)), 0);
	vad_state_put(st, 0, 0, Q, 1, 1, 1);
	struct stat sb;
	assert_int_equal(fstat(vad_state_fd(st), &sb), 0);
	size_t cuts[] = {0, 10, 63, 64, 200, 4096, (size_t)sb.st_size - 1};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		int fd = copy_file(st, cuts[i]);
		err[0] = '\0';
		assert_int_equal(vad_state_open(fd, &ro, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "state file: "));
		close(fd);
	}
	vad_state_close(st);
}

static void test_corruption_refused(void **state)
{
	(void)state;
	struct vad_state *st, *ro;
	char err[256];
	assert_int_equal(vad_state_create(arenas, 2, 64, 16, 1, &st, err, sizeof(err)), 0);
	for (unsigned i = 0; i < 32; i++)
		vad_state_put(st, i % 2, (uint64_t)i * 16 * Q, 16 * Q, i, 1000, 1 + i % 3);
	struct stat sb;
	assert_int_equal(fstat(vad_state_fd(st), &sb), 0);
	/* Every single flipped bit of a record is seen (or leaves a record that still makes
	 * sense: the valid bit cleared drops it). The header's fields are checked too. */
	size_t hdr = 4096, refused = 0, trials = 0;
	srand(17);
	for (size_t byte = hdr; byte < hdr + 32 * 32; byte += 3) {
		int fd = copy_file(st, (size_t)sb.st_size);
		unsigned char c;
		assert_int_equal(pread(fd, &c, 1, (off_t)byte), 1);
		c ^= (unsigned char)(1u << (rand() % 8));
		assert_int_equal(pwrite(fd, &c, 1, (off_t)byte), 1);
		assert_int_equal(vad_state_open(fd, &ro, err, sizeof(err)), 0);
		struct seen *s = calloc(1, sizeof(*s));
		err[0] = '\0';
		int rc = vad_state_scan(ro, collect, s, err, sizeof(err));
		trials++;
		if (rc != 0) {
			refused++;
			assert_non_null(strstr(err, "is corrupted"));
		} else {
			assert_true(s->n == 31 || s->n == 32); /* only the valid bit went */
		}
		free(s);
		vad_state_close(ro);
		close(fd);
	}
	assert_true(refused >= trials * 9 / 10);
	/* Random garbage over the header never crashes the loader. */
	for (int t = 0; t < 200; t++) {
		int fd = copy_file(st, (size_t)sb.st_size);
		unsigned char junk[64];
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (unsigned char)rand();
		size_t at = (size_t)(rand() % 8) * 8, len = 8 + (size_t)(rand() % 56);
		assert_int_equal(pwrite(fd, junk, len, (off_t)at), (ssize_t)len);
		if (vad_state_open(fd, &ro, err, sizeof(err)) == 0) {
			struct seen *s = calloc(1, sizeof(*s));
			(void)vad_state_scan(ro, collect, s, err, sizeof(err));
			free(s);
			vad_state_close(ro);
		}
		close(fd);
	}
	vad_state_close(st);
}

/* Threads recording and dropping at once (the workers and the reaper do): every record that
 * is still live comes back once, none that was dropped, and no slot is handed out twice. */
#define THREADS	   4
#define PER_THREAD 1000

struct worker_arg {
	struct vad_state *st;
	unsigned id;
	uint32_t rec[PER_THREAD];
};

static void *worker(void *p)
{
	struct worker_arg *w = p;
	for (unsigned i = 0; i < PER_THREAD; i++) {
		uint64_t off =
		    ((uint64_t)w->id * PER_THREAD + i) * 16 * Q; /* arena 1: 16 Q quanta */
		w->rec[i] = vad_state_put(w->st, 1, off, 16 * Q, w->id, 1000 + w->id, 1);
		if (i % 3 == 2) { /* drop every third one a little later */
			vad_state_drop(w->st, w->rec[i - 1]);
			w->rec[i - 1] = 0;
		}
	}
	return NULL;
}

static struct worker_arg w[THREADS];

static int count_live(void *ctx, const struct vad_state_hold *h)
{
	size_t *c = ctx;
	unsigned th = h->holder, i = (unsigned)(h->offset / (16 * Q)) - th * PER_THREAD;
	assert_true(th < THREADS && i < PER_THREAD);
	assert_int_equal(w[th].rec[i], h->slot + 1); /* live, and in its own slot */
	(*c)++;
	return 0;
}

static void test_threads(void **state)
{
	(void)state;
	struct vad_state *st;
	char err[256];
	assert_int_equal(
	    vad_state_create(arenas, 2, THREADS * PER_THREAD + 1024, 16, 1, &st, err, sizeof(err)),
	    0);
	pthread_t t[THREADS];
	for (unsigned i = 0; i < THREADS; i++) {
		w[i].st = st;
		w[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, worker, &w[i]), 0);
	}
	size_t live = 0;
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		for (unsigned k = 0; k < PER_THREAD; k++)
			live += w[i].rec[k] != 0;
	}
	assert_int_equal(vad_state_records(st), live);
	struct vad_state *ro;
	assert_int_equal(vad_state_open(vad_state_fd(st), &ro, err, sizeof(err)), 0);
	size_t n = 0;
	assert_int_equal(vad_state_scan(ro, count_live, &n, err, sizeof(err)), 0);
	assert_int_equal(n, live);
	vad_state_close(ro);
	vad_state_close(st);
}

struct sessions {
	size_t n;
	struct vad_state_session s[8];
};

static int collect_session(void *ctx, const struct vad_state_session *ss)
{
	struct sessions *s = ctx;
	if (s->n < 8)
		s->s[s->n] = *ss;
	s->n++;
	return 0;
}

/* Version 2: a session's resume secret is a record of its own, read back by
 * vad_state_scan_sessions and skipped by vad_state_scan and the hold count; a version 1 file
 * (no sessions) still loads; a damaged session record is refused. */
static void test_sessions(void **state)
{
	(void)state;
	struct vad_state *st, *ro;
	char err[256] = "";
	assert_int_equal(vad_state_create(arenas, 2, 100, 16, 1, &st, err, sizeof(err)), 0);
	uint8_t secret[VAD_STATE_SECRET_BYTES];
	for (size_t i = 0; i < sizeof(secret); i++)
		secret[i] = (uint8_t)(0xa0 + i);
	uint32_t srec = vad_state_put_session(st, 42, 1000, secret);
	uint32_t gone = vad_state_put_session(st, 43, 1000, secret);
	assert_true(srec && gone);
	vad_state_drop(st, gone);
	assert_true(vad_state_put(st, 0, 4 * Q, Q, 42, 1000, 1));
	assert_int_equal(vad_state_records(st), 1);

	struct seen *h = scan_ok(vad_state_fd(st));
	assert_int_equal(h->n, 1);
	assert_int_equal(h->h[0].holder, 42);
	free(h);
	struct sessions ss = {0};
	assert_int_equal(vad_state_open(vad_state_fd(st), &ro, err, sizeof(err)), 0);
	assert_int_equal(vad_state_scan_sessions(ro, collect_session, &ss, err, sizeof(err)), 0);
	vad_state_close(ro);
	assert_int_equal(ss.n, 1);
	assert_int_equal(ss.s[0].holder, 42);
	assert_int_equal(ss.s[0].uid, 1000);
	assert_memory_equal(ss.s[0].secret, secret, sizeof(secret));

	/* One bit of the secret flipped: the record's check bits catch it. */
	int fd = vad_state_fd(st);
	uint32_t header_size;
	assert_int_equal(pread(fd, &header_size, 4, 12), 4);
	off_t at = (off_t)header_size + (off_t)(srec - 1) * 32 + 8;
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 1;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	assert_int_equal(vad_state_open(fd, &ro, err, sizeof(err)), 0);
	ss.n = 0;
	assert_int_equal(vad_state_scan_sessions(ro, collect_session, &ss, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "corrupted"));
	vad_state_close(ro);

	/* The same file called version 1: no sessions, and a 0xffff arena is no arena. */
	uint32_t v1 = 1;
	assert_int_equal(pwrite(fd, &v1, 4, 8), 4);
	assert_int_equal(vad_state_open(fd, &ro, err, sizeof(err)), 0);
	ss.n = 0;
	assert_int_equal(vad_state_scan_sessions(ro, collect_session, &ss, err, sizeof(err)), 0);
	assert_int_equal(ss.n, 0);
	vad_state_close(ro);
	vad_state_close(st);
}

struct toks {
	size_t n;
	struct vad_state_token t[64];
};

static int collect_token(void *ctx, const struct vad_state_token *t)
{
	struct toks *s = ctx;
	if (s->n < 64)
		s->t[s->n] = *t;
	s->n++;
	return 0;
}

static struct vad_state_token make_token(char c, uint32_t arena, uint64_t offset)
{
	struct vad_state_token t = {.arena = arena, .uid = 1000, .offset = offset};
	memset(t.token, c, VAD_STATE_TOKEN_CHARS);
	return t;
}

/* Scan a copy of st's tokens: the scan's return, the tokens in *out. */
static int scan_tokens_of(int fd, struct toks *out, char *err, size_t err_len)
{
	struct vad_state *ro;
	assert_int_equal(vad_state_open(fd, &ro, err, err_len), 0);
	memset(out, 0, sizeof(*out));
	int rc = vad_state_scan_tokens(ro, collect_token, out, err, err_len);
	vad_state_close(ro);
	return rc;
}

/* Version 3: token records are written, cleared and read back with their terms, apart from
 * the holds; their slots are reused, so sharing and revoking in a loop never grows the file;
 * a full token area refuses (0) instead of growing. */
static void test_tokens(void **state)
{
	(void)state;
	struct vad_state *st;
	char err[256] = "";
	assert_int_equal(vad_state_create(arenas, 2, 100, 4, 1, &st, err, sizeof(err)), 0);
	assert_true(vad_state_put(st, 0, 4 * Q, Q, 5, 1000, 1));
	struct vad_state_token a = make_token('a', 0, 4 * Q), b = make_token('b', 1, 32 * Q);
	a.single_use = true;
	b.expires_ms = 1234567890123ull;
	b.uid = 1001;
	uint32_t ra = vad_state_put_token(st, &a), rb = vad_state_put_token(st, &b);
	uint32_t rc = vad_state_put_token(st, &a);
	assert_true(ra && rb && rc && ra != rb && rb != rc);
	vad_state_drop_token(st, rc);
	assert_int_equal(vad_state_tokens(st), 2);
	assert_int_equal(vad_state_records(st), 1); /* tokens are not holds */
	assert_true(vad_state_token_is(st, ra, a.token, 0, 4 * Q));
	assert_false(vad_state_token_is(st, ra, b.token, 0, 4 * Q));
	assert_false(vad_state_token_is(st, rc, a.token, 0, 4 * Q)); /* cleared */

	struct toks t;
	assert_int_equal(scan_tokens_of(vad_state_fd(st), &t, err, sizeof(err)), 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.t[0].slot, ra - 1);
	assert_memory_equal(t.t[0].token, a.token, VAD_STATE_TOKEN_CHARS);
	assert_true(t.t[0].single_use);
	assert_int_equal(t.t[0].expires_ms, 0);
	assert_int_equal(t.t[0].offset, 4 * Q);
	assert_int_equal(t.t[1].arena, 1);
	assert_false(t.t[1].single_use);
	assert_int_equal(t.t[1].expires_ms, 1234567890123ull);
	assert_int_equal(t.t[1].uid, 1001);
	struct seen *h = scan_ok(vad_state_fd(st)); /* the holds' scan does not see tokens */
	assert_int_equal(h->n, 1);
	free(h);

	/* A thousand shares and revokes: the slots come back, the file does not grow. */
	uint64_t used = vad_state_bytes_used(st);
	for (int i = 0; i < 1000; i++) {
		uint32_t r = vad_state_put_token(st, &b);
		assert_true(r);
		vad_state_drop_token(st, r);
	}
	assert_true(vad_state_bytes_used(st) <= used + VAD_STATE_TOKEN_BYTES);
	/* Full: 4 slots, 2 live; two more fit, the fifth is refused. */
	assert_true(vad_state_put_token(st, &b));
	assert_true(vad_state_put_token(st, &b));
	assert_int_equal(vad_state_put_token(st, &b), 0);
	assert_int_equal(vad_state_bytes_used(st), 4096 + 32 * 32 + 4 * VAD_STATE_TOKEN_BYTES);
	vad_state_close(st);
}

/* Every flipped bit of a token record is refused as corrupted (or, the valid bit, drops the
 * record); a record naming an arena the file lacks, bad characters or an offset outside its
 * arena are refused too. */
static void test_tokens_corruption_refused(void **state)
{
	(void)state;
	struct vad_state *st;
	char err[256] = "";
	assert_int_equal(vad_state_create(arenas, 2, 64, 8, 1, &st, err, sizeof(err)), 0);
	struct vad_state_token a = make_token('Z', 1, 16 * Q);
	a.expires_ms = 99;
	uint32_t ra = vad_state_put_token(st, &a);
	assert_int_equal(ra, 1);
	struct stat sb;
	assert_int_equal(fstat(vad_state_fd(st), &sb), 0);
	size_t at = 4096 + 64 * 32; /* the token area follows the 64 hold slots */
	struct toks t;
	for (size_t byte = at; byte < at + VAD_STATE_TOKEN_BYTES; byte++) {
		for (unsigned bit = 0; bit < 8; bit += 3) {
			int fd = copy_file(st, (size_t)sb.st_size);
			unsigned char c;
			assert_int_equal(pread(fd, &c, 1, (off_t)byte), 1);
			c ^= (unsigned char)(1u << bit);
			assert_int_equal(pwrite(fd, &c, 1, (off_t)byte), 1);
			err[0] = '\0';
			int rc = scan_tokens_of(fd, &t, err, sizeof(err));
			if (byte == at + 7 && bit == 7) { /* the valid bit: simply no token */
				assert_int_equal(rc, 0);
				assert_int_equal(t.n, 0);
			} else {
				assert_int_equal(rc, -1);
				assert_non_null(strstr(err, "token record 0 is corrupted"));
			}
			close(fd);
		}
	}
	vad_state_close(st);
	/* Well-formed records that make no sense are refused by their bounds. */
	struct vad_state_token bad[3] = {make_token('x', 1, 16 * Q + 1), make_token('-', 0, 0),
					 make_token('y', 1, 64 * 1024 * Q)};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(vad_state_create(arenas, 2, 64, 8, 1, &st, err, sizeof(err)), 0);
		assert_true(vad_state_put_token(st, &bad[i]));
		assert_int_equal(scan_tokens_of(vad_state_fd(st), &t, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "is corrupted"));
		vad_state_close(st);
	}
}

/* Version 3: a tenant slot's arena entry is empty until set; a hold naming an empty entry is
 * refused; the entry set is read back; an old file relabelled version 2 or 1 has no tokens
 * (its token area is not even looked at) and still loads. */
static void test_arena_entries_and_old_versions(void **state)
{
	(void)state;
	struct vad_state_arena three[3] = {arenas[0], arenas[1], {.quantum = 0}};
	struct vad_state *st, *ro;
	char err[256] = "";
	assert_int_equal(vad_state_create(three, 3, 64, 8, 1, &st, err, sizeof(err)), 0);
	assert_true(vad_state_put(st, 2, 0, Q, 1, 1000, 1));
	assert_int_equal(vad_state_open(vad_state_fd(st), &ro, err, sizeof(err)), 0);
	struct seen *s = calloc(1, sizeof(*s));
	assert_int_equal(vad_state_scan(ro, collect, s, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "names an arena the file does not have"));
	free(s);
	vad_state_close(ro);
	struct vad_state_arena tenant = {
	    .name = "own@1000", .size = 256 * Q, .quantum = Q, .dev = 7, .ino = 8};
	vad_state_set_arena(st, 2, &tenant);
	assert_true(
	    vad_state_put_token(st, &(struct vad_state_token){.arena = 2,
							      .offset = 0,
							      .token = "0123456789abcdefghij"
								       "ABCDEFGHIJKL"}));
	s = scan_ok(vad_state_fd(st));
	assert_int_equal(s->n, 1);
	free(s);
	assert_int_equal(vad_state_open(vad_state_fd(st), &ro, err, sizeof(err)), 0);
	size_t n;
	const struct vad_state_arena *ar = vad_state_arenas(ro, &n);
	assert_int_equal(n, 3);
	assert_string_equal(ar[2].name, "own@1000");
	assert_int_equal(ar[2].ino, 8);
	vad_state_close(ro);
	struct toks t;
	assert_int_equal(scan_tokens_of(vad_state_fd(st), &t, err, sizeof(err)), 0);
	assert_int_equal(t.n, 1);

	/* The same file called version 2, then 1: the token area is not theirs. */
	for (uint32_t v = 2; v >= 1; v--) {
		int fd = vad_state_fd(st);
		assert_int_equal(pwrite(fd, &v, 4, 8), 4);
		assert_int_equal(scan_tokens_of(fd, &t, err, sizeof(err)), 0);
		assert_int_equal(t.n, 0);
		s = scan_ok(fd);
		assert_int_equal(s->n, 1);
		free(s);
	}
	/* An empty entry is malformed in an old file. */
	struct vad_state *old;
	assert_int_equal(vad_state_create(three, 3, 64, 0, 1, &old, err, sizeof(err)), 0);
	uint32_t v2 = 2;
	assert_int_equal(pwrite(vad_state_fd(old), &v2, 4, 8), 4);
	assert_int_equal(vad_state_open(vad_state_fd(old), &ro, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "arena entry 2 is malformed"));
	vad_state_close(old);
	vad_state_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_full),
	    cmocka_unit_test(test_truncated_refused),
	    cmocka_unit_test(test_corruption_refused),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_sessions),
	    cmocka_unit_test(test_tokens),
	    cmocka_unit_test(test_tokens_corruption_refused),
	    cmocka_unit_test(test_arena_entries_and_old_versions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
