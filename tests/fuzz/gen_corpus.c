/*
 * gen_corpus.c - writes the seed corpora of the fuzz targets from real requests, encoded
 * with the same protobuf-c code and framing libvad uses:
 *   OUT/frame/    streams of request frames (every operation, bogus ones, cut short)
 *   OUT/session/  session_script.h scripts: conversations of up to three clients, their
 *                 frames cut into chunks of varying sizes, with reads, attaches, disconnects
 *   OUT/config/   the shipped vad.conf and small valid and invalid configs
 * Usage: gen_corpus OUT_DIR [CONF_FILE]
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frame.h"
#include "session_script.h"

#define MiB (1024ull * 1024ull)

/* A growing byte buffer. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

static const char *out_dir;
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_id = 1;

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, detail);
	exit(1);
}

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static void put(struct buf *b, const void *data, size_t len)
{
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + len)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			die("out of memory", "");
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void put_byte(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void save(const char *sub, const char *name, const struct buf *b)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", out_dir, sub);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("mkdir", path);
	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, sub, name);
	FILE *f = fopen(path, "w");
	if (!f || (b->len && fwrite(b->p, 1, b->len, f) != b->len) || fclose(f) != 0)
		die("cannot write", path);
}

/* ---- requests ---------------------------------------------------------------------------- */

static void frame(struct buf *b, Vad__Request *req)
{
	if (!req->id)
		req->id = next_id++;
	size_t n = vad_frame_request_size(req);
	uint8_t *tmp = malloc(n);
	if (!tmp || vad_frame_encode_request(req, tmp, n) != n)
		die("cannot encode a request", "");
	put(b, tmp, n);
	free(tmp);
}

static void req_hello(struct buf *b, const char *name, uint32_t version)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = (char *)name;
	h.version = version;
	r.op_case = VAD__REQUEST__OP_HELLO;
	r.hello = &h;
	frame(b, &r);
}

static void req_alloc(struct buf *b, const char *arena, uint64_t size, uint64_t align,
		      uint32_t count, size_t n_sizes, const uint64_t *sizes)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__Alloc a = VAD__ALLOC__INIT;
	a.arena = (char *)(arena ? arena : "");
	a.size = size;
	a.align = align;
	a.count = count;
	a.n_sizes = n_sizes;
	a.sizes = (uint64_t *)sizes;
	r.op_case = VAD__REQUEST__OP_ALLOC;
	r.alloc = &a;
	frame(b, &r);
}

static void req_free(struct buf *b, const char *arena, size_t n, const uint64_t *offsets)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__Free f = VAD__FREE__INIT;
	f.arena = (char *)(arena ? arena : "");
	f.n_offsets = n;
	f.offsets = (uint64_t *)offsets;
	r.op_case = VAD__REQUEST__OP_FREE;
	r.free = &f;
	frame(b, &r);
}

static void req_map(struct buf *b, const char *arena)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__MapArena m = VAD__MAP_ARENA__INIT;
	m.arena = (char *)arena;
	r.op_case = VAD__REQUEST__OP_MAP_ARENA;
	r.map_arena = &m;
	frame(b, &r);
}

static void req_share(struct buf *b, const char *arena, uint64_t offset)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__Share s = VAD__SHARE__INIT;
	s.arena = (char *)arena;
	s.offset = offset;
	r.op_case = VAD__REQUEST__OP_SHARE;
	r.share = &s;
	frame(b, &r);
}

static void req_attach(struct buf *b, const char *token)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__Attach a = VAD__ATTACH__INIT;
	a.token = (char *)token;
	r.op_case = VAD__REQUEST__OP_ATTACH;
	r.attach = &a;
	frame(b, &r);
}

static void req_stats(struct buf *b, const char *arena)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__StatsRequest s = VAD__STATS_REQUEST__INIT;
	s.arena = (char *)arena;
	r.op_case = VAD__REQUEST__OP_STATS;
	r.stats = &s;
	frame(b, &r);
}

/* The admin and listing operations without arguments (and purge of one arena). */
static void req_simple(struct buf *b, Vad__Request__OpCase op, const char *purge_arena)
{
	Vad__Request r = VAD__REQUEST__INIT;
	Vad__ArenasRequest ar = VAD__ARENAS_REQUEST__INIT;
	Vad__ClientsRequest cl = VAD__CLIENTS_REQUEST__INIT;
	Vad__Purge pu = VAD__PURGE__INIT;
	Vad__Reload re = VAD__RELOAD__INIT;
	Vad__Check ch = VAD__CHECK__INIT;
	r.op_case = op;
	switch (op) {
	case VAD__REQUEST__OP_ARENAS:
		r.arenas = &ar;
		break;
	case VAD__REQUEST__OP_CLIENTS:
		r.clients = &cl;
		break;
	case VAD__REQUEST__OP_PURGE:
		pu.arena = (char *)(purge_arena ? purge_arena : "");
		r.purge = &pu;
		break;
	case VAD__REQUEST__OP_RELOAD:
		r.reload = &re;
		break;
	case VAD__REQUEST__OP_CHECK:
		r.check = &ch;
		break;
	default:
		break; /* OP__NOT_SET: a request with no operation */
	}
	frame(b, &r);
}

/* A frame whose payload is raw bytes (not necessarily a valid message). */
static void raw_frame(struct buf *b, const void *payload, uint32_t len)
{
	uint8_t h[4];
	vad_frame_put_header(h, len);
	put(b, h, 4);
	put(b, payload, len);
}

/* Request{id: 7, field 99 (an operation from a newer protocol): empty message}. */
static void req_unknown_op(struct buf *b)
{
	static const uint8_t p[] = {0x08, 0x07, 0x9a, 0x06, 0x00};
	raw_frame(b, p, sizeof(p));
}

/* Every bogus request the daemon must refuse politely, after a valid hello. */
static void bogus_requests(struct buf *b)
{
	static const uint64_t huge[] = {4096, UINT64_MAX};
	static const uint64_t offs[] = {4096, 4096, 123};
	req_hello(b, "again", VAD_PROTOCOL_VERSION);
	req_simple(b, VAD__REQUEST__OP__NOT_SET, NULL);
	req_unknown_op(b);
	req_alloc(b, NULL, 0, 0, 0, 0, NULL);
	req_alloc(b, NULL, UINT64_MAX, 0, 0, 0, NULL);
	req_alloc(b, NULL, 4096, 3, 0, 0, NULL);
	req_alloc(b, NULL, 4096, 1ull << 63, 0, 0, NULL);
	req_alloc(b, "nosuch", 4096, 0, 0, 0, NULL);
	req_alloc(b, NULL, 4096, 0, 100000, 0, NULL);
	req_alloc(b, NULL, 0, 0, 0, 2, huge);
	req_free(b, NULL, 3, offs);
	req_free(b, "nosuch", 1, offs);
	req_share(b, "", 8 * MiB);
	req_attach(b, "short");
	req_attach(b, "0123456789abcdefghijABCDEFGHIJxy");
	req_map(b, "nosuch");
	req_stats(b, "nosuch");
	req_simple(b, VAD__REQUEST__OP_PURGE, "nosuch");
	static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12};
	raw_frame(b, garbage, sizeof(garbage));
}

/* A reply frame, as the daemon sends them (the frame target decodes both directions). */
static void resp_frame(struct buf *b, Vad__Response *resp)
{
	size_t n = vad_frame_response_size(resp);
	uint8_t *tmp = malloc(n);
	if (!tmp || vad_frame_encode_response(resp, tmp, n) != n)
		die("cannot encode a response", "");
	put(b, tmp, n);
	free(tmp);
}

static void replies(struct buf *b)
{
	static uint64_t offs[] = {0, 4096, 1u << 20, 1ull << 36};
	static uint64_t sizes[] = {4096, 8192, 65536, 1u << 21};
	Vad__Response r = VAD__RESPONSE__INIT;
	Vad__AllocReply a = VAD__ALLOC_REPLY__INIT;
	a.arena = (char *)"default";
	a.n_offsets = a.n_sizes = 4;
	a.offsets = offs;
	a.sizes = sizes;
	r.id = 42;
	r.result_case = VAD__RESPONSE__RESULT_ALLOC;
	r.alloc = &a;
	resp_frame(b, &r);
	Vad__FreeReply f = VAD__FREE_REPLY__INIT;
	f.freed = 3;
	r.id = 43;
	r.result_case = VAD__RESPONSE__RESULT_FREE;
	r.free = &f;
	resp_frame(b, &r);
	r.id = 44;
	r.error = VAD__ERROR__ENOSPC;
	r.message = (char *)"arena 'default' has no free range of 1.0 GiB";
	r.result_case = VAD__RESPONSE__RESULT__NOT_SET;
	resp_frame(b, &r);
}

/* ---- frame corpus ------------------------------------------------------------------------ */

static void gen_frames(void)
{
	struct buf b = {0};
	static const uint64_t sizes[] = {4096, 8192, 65536, 12288};
	static const uint64_t offs[] = {0, 4096, 12288, 20480};
#define ONE(name, stmt)                                                                            \
	do {                                                                                       \
		b.len = 0;                                                                         \
		stmt;                                                                              \
		save("frame", name, &b);                                                           \
	} while (0)
	ONE("hello", req_hello(&b, "seed", VAD_PROTOCOL_VERSION));
	ONE("hello_version", req_hello(&b, "old", 0));
	ONE("alloc", req_alloc(&b, NULL, 4096, 0, 0, 0, NULL));
	ONE("alloc_aligned", req_alloc(&b, "default", 1 << 20, 1 << 21, 0, 0, NULL));
	ONE("alloc_count", req_alloc(&b, NULL, 65536, 0, 16, 0, NULL));
	ONE("alloc_sizes", req_alloc(&b, "private", 0, 0, 0, 4, sizes));
	ONE("free", req_free(&b, NULL, 1, offs));
	ONE("free_batch", req_free(&b, "default", 4, offs));
	ONE("map", req_map(&b, "default"));
	ONE("share", req_share(&b, "", 4096));
	ONE("attach", req_attach(&b, "Zx81ab0QpLm2Rt7YcV4kHw9sEj3uNd6F"));
	ONE("stats", req_stats(&b, ""));
	ONE("arenas", req_simple(&b, VAD__REQUEST__OP_ARENAS, NULL));
	ONE("clients", req_simple(&b, VAD__REQUEST__OP_CLIENTS, NULL));
	ONE("purge", req_simple(&b, VAD__REQUEST__OP_PURGE, "default"));
	ONE("reload", req_simple(&b, VAD__REQUEST__OP_RELOAD, NULL));
	ONE("check", req_simple(&b, VAD__REQUEST__OP_CHECK, NULL));
	ONE("no_op", req_simple(&b, VAD__REQUEST__OP__NOT_SET, NULL));
	ONE("unknown_op", req_unknown_op(&b));
	ONE("bogus", bogus_requests(&b));
	ONE("empty_frame", raw_frame(&b, "", 0));
	ONE("replies", replies(&b));
	ONE(
	    "too_big", do {
		    uint8_t h[4];
		    vad_frame_put_header(h, 70000);
		    put(&b, h, 4);
		    put(&b, "\x08\x01", 2);
	    } while (0));
	/* A whole conversation, then the same cut short in its last frame. */
	b.len = 0;
	req_hello(&b, "stream", VAD_PROTOCOL_VERSION);
	req_alloc(&b, NULL, 4096, 0, 0, 0, NULL);
	req_alloc(&b, NULL, 65536, 0, 8, 0, NULL);
	req_share(&b, "", 0);
	req_stats(&b, "");
	req_free(&b, NULL, 2, offs);
	req_map(&b, "");
	save("frame", "stream", &b);
	b.len -= 3;
	save("frame", "stream_cut", &b);
#undef ONE
	free(b.p);
}

/* ---- session corpus ---------------------------------------------------------------------- */

/* How frames are cut into FS_FEED steps. */
enum cut { CUT_WHOLE, CUT_BYTES, CUT_RANDOM };

/* Feed the frames in f to session s as script steps in s. */
static void feed(struct buf *script, unsigned s, const struct buf *f, enum cut cut)
{
	size_t pos = 0;
	while (pos < f->len) {
		size_t n = f->len - pos;
		if (cut == CUT_BYTES)
			n = 1;
		else if (cut == CUT_RANDOM && n > 1)
			n = 1 + rnd(n < 40 ? (unsigned)n : 40);
		if (n > 256) {
			if (n > 65536)
				n = 65536;
			put_byte(script, FS_CTL(s, FS_FEED_BIG, 0));
			put_byte(script, (uint8_t)(n - 1));
			put_byte(script, (uint8_t)((n - 1) >> 8));
		} else {
			put_byte(script, FS_CTL(s, FS_FEED, 0));
			put_byte(script, (uint8_t)(n - 1));
		}
		put(script, f->p + pos, n);
		pos += n;
	}
}

static void step(struct buf *script, unsigned s, enum fs_action a, unsigned arg)
{
	put_byte(script, FS_CTL(s, a, arg));
}

static void gen_sessions(void)
{
	struct buf sc = {0}, f = {0};
	static const uint64_t offs[] = {0, 65536, 131072, 196608, 262144, 327680, 393216, 458752};
	static const uint64_t sizes[] = {4096, 8192, 16384, 1 << 20, 12288};

	/* share and attach across two clients, frees in every order */
	f.len = 0;
	req_hello(&f, "writer", VAD_PROTOCOL_VERSION);
	req_alloc(&f, NULL, 16384, 0, 0, 0, NULL);
	req_share(&f, "", 0);
	feed(&sc, 0, &f, CUT_RANDOM);
	step(&sc, 0, FS_DRAIN, 0);
	f.len = 0;
	req_hello(&f, "reader", VAD_PROTOCOL_VERSION);
	feed(&sc, 1, &f, CUT_WHOLE);
	step(&sc, 1, FS_ATTACH, 0);
	step(&sc, 1, FS_ATTACH, 0);
	step(&sc, 1, FS_DRAIN, 0);
	f.len = 0;
	req_free(&f, NULL, 1, offs);
	feed(&sc, 0, &f, CUT_BYTES);
	feed(&sc, 1, &f, CUT_WHOLE);
	step(&sc, 2, FS_CHECK, 0);
	feed(&sc, 1, &f, CUT_WHOLE);
	feed(&sc, 1, &f, CUT_WHOLE);
	step(&sc, 0, FS_DRAIN, 0);
	step(&sc, 1, FS_DRAIN, 0);
	save("session", "share_attach", &sc);

	/* batches: count, sizes, aligned, then batch free and stats */
	sc.len = 0;
	f.len = 0;
	req_hello(&f, "batcher", VAD_PROTOCOL_VERSION);
	req_alloc(&f, NULL, 65536, 0, 8, 0, NULL);
	req_alloc(&f, "", 0, 0, 0, 5, sizes);
	req_alloc(&f, "default", 1 << 20, 1 << 21, 0, 0, NULL);
	req_free(&f, "", 8, offs);
	req_stats(&f, "");
	req_stats(&f, "default");
	feed(&sc, 1, &f, CUT_RANDOM);
	step(&sc, 1, FS_DRAIN_SOME, 2);
	step(&sc, 1, FS_DRAIN, 0);
	save("session", "batches", &sc);

	/* arenas and the private allow-list: map, alloc in private as allowed and not */
	sc.len = 0;
	f.len = 0;
	req_hello(&f, "mapper", VAD_PROTOCOL_VERSION);
	req_map(&f, "default");
	req_map(&f, "private");
	req_alloc(&f, "private", 8192, 0, 0, 0, NULL);
	req_simple(&f, VAD__REQUEST__OP_ARENAS, NULL);
	feed(&sc, 1, &f, CUT_WHOLE);
	feed(&sc, 2, &f, CUT_RANDOM);
	step(&sc, 1, FS_DRAIN_SOME, 0);
	step(&sc, 2, FS_DRAIN_SOME, 7);
	step(&sc, 1, FS_DRAIN, 0);
	step(&sc, 2, FS_DRAIN, 0);
	save("session", "arenas_maps", &sc);

	/* admin operations from root, from the admin group, and from a plain uid */
	sc.len = 0;
	f.len = 0;
	req_hello(&f, "admin", VAD_PROTOCOL_VERSION);
	req_simple(&f, VAD__REQUEST__OP_CLIENTS, NULL);
	req_simple(&f, VAD__REQUEST__OP_PURGE, NULL);
	req_simple(&f, VAD__REQUEST__OP_PURGE, "private");
	req_simple(&f, VAD__REQUEST__OP_RELOAD, NULL);
	req_simple(&f, VAD__REQUEST__OP_CHECK, NULL);
	feed(&sc, 0, &f, CUT_WHOLE);
	feed(&sc, 1, &f, CUT_WHOLE);
	step(&sc, 2, FS_REOPEN, 3);
	feed(&sc, 2, &f, CUT_RANDOM);
	step(&sc, 0, FS_DRAIN, 0);
	step(&sc, 1, FS_DRAIN, 0);
	step(&sc, 2, FS_DRAIN, 0);
	save("session", "admin", &sc);

	/* bogus requests, one client; requests before hello from another */
	sc.len = 0;
	f.len = 0;
	req_hello(&f, "bogus", VAD_PROTOCOL_VERSION);
	bogus_requests(&f);
	feed(&sc, 0, &f, CUT_RANDOM);
	f.len = 0;
	req_alloc(&f, NULL, 4096, 0, 0, 0, NULL);
	req_hello(&f, "late", 99);
	req_hello(&f, "late", VAD_PROTOCOL_VERSION);
	feed(&sc, 1, &f, CUT_WHOLE);
	step(&sc, 0, FS_DRAIN, 0);
	step(&sc, 1, FS_DRAIN, 0);
	save("session", "bogus", &sc);

	/* quotas and an exhausted arena */
	sc.len = 0;
	f.len = 0;
	req_hello(&f, "greedy", VAD_PROTOCOL_VERSION);
	req_alloc(&f, NULL, 5 * MiB, 0, 0, 0, NULL);
	req_alloc(&f, NULL, 5 * MiB, 0, 0, 0, NULL);
	req_alloc(&f, "private", 3 * MiB, 0, 0, 0, NULL);
	req_alloc(&f, "private", 3 * MiB, 0, 0, 0, NULL);
	req_alloc(&f, NULL, 17 * MiB, 0, 0, 0, NULL);
	feed(&sc, 1, &f, CUT_WHOLE);
	feed(&sc, 2, &f, CUT_WHOLE);
	step(&sc, 1, FS_DRAIN, 0);
	step(&sc, 2, FS_DRAIN, 0);
	save("session", "quota_nospc", &sc);

	/* a pipelining client that does not read until the daemon stops taking its input */
	sc.len = 0;
	f.len = 0;
	req_hello(&f, "pipeliner", VAD_PROTOCOL_VERSION);
	for (int i = 0; i < 3000; i++)
		req_stats(&f, "");
	feed(&sc, 0, &f, CUT_WHOLE);
	step(&sc, 0, FS_DRAIN, 0);
	save("session", "pipeline", &sc);

	/* broken framing mid-stream, disconnects with half a frame and with ranges held */
	sc.len = 0;
	f.len = 0;
	req_hello(&f, "broken", VAD_PROTOCOL_VERSION);
	req_alloc(&f, NULL, 4096, 0, 4, 0, NULL);
	raw_frame(&f, "", 0);
	req_alloc(&f, NULL, 4096, 0, 0, 0, NULL);
	feed(&sc, 0, &f, CUT_RANDOM);
	f.len = 0;
	req_hello(&f, "quitter", VAD_PROTOCOL_VERSION);
	req_alloc(&f, NULL, 8192, 0, 3, 0, NULL);
	req_share(&f, "", 0);
	f.len -= 2;
	feed(&sc, 1, &f, CUT_WHOLE);
	step(&sc, 1, FS_REOPEN, 1);
	step(&sc, 0, FS_DRAIN, 0);
	step(&sc, 0, FS_PURGE, 0);
	step(&sc, 0, FS_CHECK, 0);
	save("session", "broken_framing", &sc);

	free(sc.p);
	free(f.p);
}

/* ---- config corpus ----------------------------------------------------------------------- */

static void text(const char *name, const char *t)
{
	struct buf b = {(uint8_t *)t, strlen(t), strlen(t)};
	save("config", name, &b);
}

static void gen_configs(const char *shipped)
{
	if (shipped) {
		FILE *f = fopen(shipped, "r");
		if (!f)
			die("cannot read", shipped);
		struct buf b = {0};
		char chunk[4096];
		size_t n;
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			put(&b, chunk, n);
		fclose(f);
		save("config", "shipped", &b);
		free(b.p);
	}
	text("empty", "");
	text("minimal", "[arena default]\nsize = 4G\n");
	text("dev", "[vad]\nsocket = /tmp/vad-dev/vad.sock\nworkers = 2\nlog_level = debug\n"
		    "stats_interval = 500ms\n[arena default]\nsize = 4G\n");
	text("limits", "[vad]\nmax_frame = 16K\nmax_clients = 8\nmax_batch = 16\n"
		       "quota_client = 1.5M\nquota_uid = unlimited\nlazy_max = 64M\n"
		       "nodes = auto\nworkers = 0\nstats_retention = 1w\n");
	text("arenas", "; two arenas\n[vad]\nadmin_group = root\n[arena default]\nsize = 64G\n"
		       "quantum = 64K\nbacking = memfd\n[arena gpu.frames-1]\nsize = 1T\n"
		       "allow_uids = root, 1000\nallow_gids = 0, video\n");
	text("readers", "[arena feed]\nsize = 1G\nallow_uids = 1000\nreader_uids = root, 1001\n"
			"reader_gids = 0\n");
	text("hugetlb", "[arena huge]\nsize = 2G\nbacking = /dev/hugepages\nquantum = 2M\n");
	text("bom_comments", "\xef\xbb\xbf# comment\n[vad]\nsocket_mode = 0600 ; trailing\n"
			     "  log_level=warning\n[arena a]\nsize=8M\n");
	text("bad_unit", "[vad]\nmax_frame = 64Q\n");
	text("bad_section", "[vad\nsize = 1G\n");
	text("bad_key", "[arena x]\nsize = 4G\ncolour = blue\n");
	text("bad_quantum", "[arena x]\nsize = 12K\nquantum = 8K\n");
	text("dup_arena", "[arena x]\nsize = 4M\n[arena x]\nsize = 8M\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: gen_corpus OUT_DIR [SHIPPED_CONF]\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
		die("mkdir", out_dir);
	gen_frames();
	gen_sessions();
	gen_configs(argc == 3 ? argv[2] : NULL);
	return 0;
}
