/*
 * test_daemon_session.c - the session and handler layer driven directly with byte streams,
 * no sockets: every operation, every reachable error code, malformed frames, backpressure,
 * fd marks, and reference counting across sessions (share/attach/free/disconnect), with the
 * registry's and the allocator's consistency checks after each test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "frame.h"
#include "log.h"
#include "registry.h"
#include "service.h"
#include "session.h"

#define MiB	     (1024ull * 1024ull)
#define DEFAULT_SIZE (64 * MiB)
#define PRIVATE_SIZE (16 * MiB)
#define PRIVATE_UID  12345
#define ADMIN_GID    4242

static const uid_t private_uids[] = {PRIVATE_UID};
#define READER_UID 23456 /* may only read "private" */
static const uid_t reader_uids[] = {READER_UID};

struct fixture {
	struct vad_config cfg;
	struct vad_service *svc;
	char conf_path[64];
};

/* A test client: one session plus the bytes and fds it has received. */
struct tclient {
	struct vad_session *s;
	uint8_t *buf;
	size_t head, len, cap; /* received bytes [head, len) not yet parsed */
	int fds[64];
	size_t fd_pos[64]; /* offset in buf where each fd arrived (from 0 after a full read) */
	size_t n_fds;
	uint64_t next_id;
};

static struct fixture *fx;
static bool took_event(const char *kind, const char *text);

/* ---- fixture ------------------------------------------------------------------------------ */

static void conf_arena(struct vad_arena_conf *c, const char *name, uint64_t size, bool any)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->size = size;
	c->quantum = 4096;
	c->allow_any = any;
	if (!any) {
		c->allow_uids = (uid_t *)private_uids;
		c->n_allow_uids = 1;
		c->reader_uids = (uid_t *)reader_uids;
		c->n_reader_uids = 1;
	}
}

/* A service with "default" (anyone) and "private" (uid 12345 writes, uid 23456 reads); cfg
 * tweaks first. */
static void start_service(void (*tweak)(struct vad_config *))
{
	fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	vad_config_defaults(&fx->cfg);
	fx->cfg.nodes = 2;
	fx->cfg.max_batch = 64;
	fx->cfg.has_admin_group = true;
	fx->cfg.admin_gid = ADMIN_GID;
	if (tweak)
		tweak(&fx->cfg);
	struct vad_arena_conf confs[2];
	conf_arena(&confs[0], "default", DEFAULT_SIZE, true);
	conf_arena(&confs[1], "private", PRIVATE_SIZE, false);
	struct vad_arena **arenas = calloc(2, sizeof(*arenas));
	assert_non_null(arenas);
	char err[512] = "";
	for (unsigned i = 0; i < 2; i++)
		if (vad_arena_open(&confs[i], &fx->cfg, i, &arenas[i], err, sizeof(err)) != 0)
			fail_msg("vad_arena_open: %s", err);
	if (vad_service_create(&fx->cfg, arenas, 2, &fx->svc, err, sizeof(err)) != 0)
		fail_msg("vad_service_create: %s", err);
}

static int teardown(void **state)
{
	(void)state;
	if (!fx)
		return 0;
	char msg[512];
	int rc = vad_registry_check(fx->svc->reg, msg, sizeof(msg));
	vad_service_destroy(fx->svc);
	if (fx->conf_path[0])
		unlink(fx->conf_path);
	free(fx);
	fx = NULL;
	if (rc != 0)
		fail_msg("registry check at teardown: %s", msg);
	return 0;
}

static int setup_plain(void **state)
{
	(void)state;
	vad_log_set_level(VAD_LOG_ERR); /* expected refusals are logged at info */
	start_service(NULL);
	return 0;
}

static void check_consistent(void)
{
	char msg[512];
	if (vad_registry_check(fx->svc->reg, msg, sizeof(msg)) != 0)
		fail_msg("registry check: %s", msg);
	for (size_t i = 0; i < fx->svc->n_arenas; i++)
		if (va_check(fx->svc->arenas[i]->vs, msg, sizeof(msg)) != 0)
			fail_msg("va_check: %s", msg);
}

/* ---- test client -------------------------------------------------------------------------- */

static struct tclient *tc_new_peer(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups)
{
	struct tclient *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	struct vad_peer p = {.pid = 4000 + (pid_t)uid,
			     .uid = uid,
			     .gid = gid,
			     .groups = (gid_t *)groups,
			     .n_groups = n_groups};
	c->s = vad_session_new(fx->svc, &p);
	assert_non_null(c->s);
	c->next_id = 1;
	return c;
}

/* Move every pending output byte of the session into c->buf, noting fds. */
static void tc_drain(struct tclient *c)
{
	const uint8_t *data;
	size_t len;
	int fd;
	while (vad_session_next_output(c->s, &data, &len, &fd)) {
		if (c->head == c->len) {
			c->head = c->len = 0; /* all consumed: positions count from 0 again */
		} else if (c->head && c->cap - c->len < len) {
			memmove(c->buf, c->buf + c->head, c->len - c->head);
			for (size_t i = 0; i < c->n_fds; i++)
				c->fd_pos[i] -= c->fd_pos[i] >= c->head ? c->head : c->fd_pos[i];
			c->len -= c->head;
			c->head = 0;
		}
		if (c->cap - c->len < len) {
			size_t cap = c->cap ? c->cap : 4096;
			while (cap - c->len < len)
				cap *= 2;
			c->buf = realloc(c->buf, cap);
			assert_non_null(c->buf);
			c->cap = cap;
		}
		if (fd >= 0) {
			assert_true(c->n_fds < 64);
			c->fds[c->n_fds] = fd;
			c->fd_pos[c->n_fds] = c->len;
			c->n_fds++;
		}
		memcpy(c->buf + c->len, data, len);
		c->len += len;
		vad_session_output_done(c->s, len);
	}
}

static void tc_free(struct tclient *c)
{
	if (!c)
		return;
	struct vad_registry *reg = c->s->svc->reg;
	vad_session_free(c->s);
	vad_registry_reap_wait(reg); /* big holders are torn down by the reaper thread */
	free(c->buf);
	free(c);
}

static void tc_send_bytes(struct tclient *c, const void *data, size_t len)
{
	size_t taken = vad_session_feed(c->s, data, len);
	assert_int_equal(taken, len);
}

static void tc_send(struct tclient *c, Vad__Request *req)
{
	uint8_t buf[70000];
	if (!req->id)
		req->id = c->next_id++;
	size_t n = vad_frame_encode_request(req, buf, sizeof(buf));
	assert_true(n > 0);
	tc_send_bytes(c, buf, n);
}

/* The next response frame received (caller frees with vad__response__free_unpacked). */
static Vad__Response *tc_recv(struct tclient *c)
{
	tc_drain(c);
	size_t plen;
	enum vad_frame_status st =
	    vad_frame_peek(c->buf + c->head, c->len - c->head, 1u << 30, &plen);
	assert_int_equal(st, VAD_FRAME_READY);
	Vad__Response *r = vad__response__unpack(NULL, plen, c->buf + c->head + VAD_FRAME_HEADER);
	assert_non_null(r);
	c->head += VAD_FRAME_HEADER + plen; /* no memmove per reply: long streams stay linear */
	return r;
}

static bool tc_has_reply(struct tclient *c)
{
	tc_drain(c);
	size_t plen;
	return vad_frame_peek(c->buf + c->head, c->len - c->head, 1u << 30, &plen) ==
	       VAD_FRAME_READY;
}

static Vad__Response *tc_call(struct tclient *c, Vad__Request *req)
{
	tc_send(c, req);
	Vad__Response *r = tc_recv(c);
	assert_int_equal(r->id, req->id);
	assert_false(tc_has_reply(c));
	return r;
}

/* Expect an error reply; returns it for message checks. */
static Vad__Response *expect_error(Vad__Response *r, Vad__Error code)
{
	if (r->error != code)
		fail_msg("expected error %d, got %d: %s", code, r->error, r->message);
	assert_true(strlen(r->message) > 10); /* a sentence, not a bare code */
	return r;
}

static void expect_ok(Vad__Response *r, Vad__Response__ResultCase rc)
{
	if (r->error != VAD__ERROR__OK)
		fail_msg("expected success, got error %d: %s", r->error, r->message);
	assert_int_equal(r->result_case, rc);
}

static void done(Vad__Response *r)
{
	vad__response__free_unpacked(r, NULL);
}

/* ---- request builders --------------------------------------------------------------------- */

static Vad__Response *do_hello(struct tclient *c, const char *name, uint32_t version)
{
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = (char *)name;
	h.version = version;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_HELLO;
	req.hello = &h;
	return tc_call(c, &req);
}

static struct tclient *tc_hello(uid_t uid, gid_t gid, const char *name)
{
	struct tclient *c = tc_new_peer(uid, gid, NULL, 0);
	Vad__Response *r = do_hello(c, name, VAD_PROTOCOL_VERSION);
	expect_ok(r, VAD__RESPONSE__RESULT_HELLO);
	done(r);
	return c;
}

static Vad__Response *do_alloc(struct tclient *c, const char *arena, uint64_t size, uint64_t align,
			       uint32_t count, const uint64_t *sizes, size_t n_sizes)
{
	Vad__Alloc a = VAD__ALLOC__INIT;
	a.arena = (char *)(arena ? arena : "");
	a.size = size;
	a.align = align;
	a.count = count;
	a.sizes = (uint64_t *)sizes;
	a.n_sizes = n_sizes;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_ALLOC;
	req.alloc = &a;
	return tc_call(c, &req);
}

/* Allocate one range of size in arena; returns its offset. */
static uint64_t alloc_one(struct tclient *c, const char *arena, uint64_t size)
{
	Vad__Response *r = do_alloc(c, arena, size, 0, 0, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	assert_int_equal(r->alloc->n_offsets, 1);
	uint64_t off = r->alloc->offsets[0];
	done(r);
	return off;
}

static Vad__Response *do_free(struct tclient *c, const char *arena, const uint64_t *offs, size_t n)
{
	Vad__Free f = VAD__FREE__INIT;
	f.arena = (char *)(arena ? arena : "");
	f.offsets = (uint64_t *)offs;
	f.n_offsets = n;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_FREE;
	req.free = &f;
	return tc_call(c, &req);
}

static void free_ok(struct tclient *c, const char *arena, uint64_t off)
{
	Vad__Response *r = do_free(c, arena, &off, 1);
	expect_ok(r, VAD__RESPONSE__RESULT_FREE);
	assert_int_equal(r->free->freed, 1);
	done(r);
}

static Vad__Response *do_share(struct tclient *c, const char *arena, uint64_t off)
{
	Vad__Share sh = VAD__SHARE__INIT;
	sh.arena = (char *)(arena ? arena : "");
	sh.offset = off;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_SHARE;
	req.share = &sh;
	return tc_call(c, &req);
}

static void share_ok(struct tclient *c, const char *arena, uint64_t off, char token[33])
{
	Vad__Response *r = do_share(c, arena, off);
	expect_ok(r, VAD__RESPONSE__RESULT_SHARE);
	assert_int_equal(strlen(r->share->token), 32);
	memcpy(token, r->share->token, 33);
	done(r);
}

static Vad__Response *do_attach(struct tclient *c, const char *token)
{
	Vad__Attach at = VAD__ATTACH__INIT;
	at.token = (char *)token;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_ATTACH;
	req.attach = &at;
	return tc_call(c, &req);
}

static Vad__Response *do_stats(struct tclient *c, const char *arena)
{
	Vad__StatsRequest st = VAD__STATS_REQUEST__INIT;
	st.arena = (char *)(arena ? arena : "");
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_STATS;
	req.stats = &st;
	return tc_call(c, &req);
}

static uint64_t held_bytes(struct tclient *c)
{
	Vad__Response *r = do_stats(c, NULL);
	expect_ok(r, VAD__RESPONSE__RESULT_STATS);
	uint64_t v = r->stats->held_bytes;
	done(r);
	return v;
}

/* Send an operation with an empty message body (arenas, clients, reload, check, purge). */
static Vad__Response *do_simple(struct tclient *c, Vad__Request__OpCase op)
{
	Vad__ArenasRequest ar = VAD__ARENAS_REQUEST__INIT;
	Vad__ClientsRequest cl = VAD__CLIENTS_REQUEST__INIT;
	Vad__Purge pu = VAD__PURGE__INIT;
	Vad__Reload re = VAD__RELOAD__INIT;
	Vad__Check ch = VAD__CHECK__INIT;
	Vad__MapArena ma = VAD__MAP_ARENA__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = op;
	switch (op) {
	case VAD__REQUEST__OP_ARENAS:
		req.arenas = &ar;
		break;
	case VAD__REQUEST__OP_CLIENTS:
		req.clients = &cl;
		break;
	case VAD__REQUEST__OP_PURGE:
		req.purge = &pu;
		break;
	case VAD__REQUEST__OP_RELOAD:
		req.reload = &re;
		break;
	case VAD__REQUEST__OP_CHECK:
		req.check = &ch;
		break;
	case VAD__REQUEST__OP_MAP_ARENA:
		req.map_arena = &ma;
		break;
	default:
		fail_msg("do_simple: op %d", op);
	}
	return tc_call(c, &req);
}

/* ---- tests: hello ------------------------------------------------------------------------- */

static void test_hello_first(void **state)
{
	(void)state;
	struct tclient *c = tc_new_peer(1000, 1000, NULL, 0);

	Vad__Response *r = do_stats(c, NULL);
	expect_error(r, VAD__ERROR__ENOHELLO);
	assert_non_null(strstr(r->message, "stats"));
	done(r);

	r = do_hello(c, "enc", 7);
	expect_error(r, VAD__ERROR__EVERSION);
	assert_non_null(strstr(r->message, "version 7"));
	assert_non_null(strstr(r->message, "version 1"));
	done(r);

	r = do_alloc(c, NULL, 4096, 0, 0, NULL, 0); /* a refused hello is no hello */
	expect_error(r, VAD__ERROR__ENOHELLO);
	done(r);

	r = do_hello(c, "encoder\x01", VAD_PROTOCOL_VERSION);
	expect_ok(r, VAD__RESPONSE__RESULT_HELLO);
	assert_int_equal(r->hello->version, VAD_PROTOCOL_VERSION);
	assert_string_equal(r->hello->default_arena, "default");
	assert_non_null(strstr(r->hello->server, "vad "));
	assert_int_equal(r->hello->session_id, c->s->id);
	assert_false(r->hello->admin);
	done(r);
	assert_string_equal(c->s->name,
			    "encoder\\x01"); /* control characters reach listings escaped */

	r = do_hello(c, "again", VAD_PROTOCOL_VERSION);
	expect_error(r, VAD__ERROR__EINVAL);
	assert_non_null(strstr(r->message, "encoder"));
	done(r);

	struct tclient *anon = tc_new_peer(1000, 1000, NULL, 0);
	r = do_hello(anon, "", VAD_PROTOCOL_VERSION);
	expect_ok(r, VAD__RESPONSE__RESULT_HELLO);
	done(r);
	assert_non_null(strstr(anon->s->name, "pid"));

	struct tclient *root = tc_new_peer(0, 0, NULL, 0);
	r = do_hello(root, "root", VAD_PROTOCOL_VERSION);
	expect_ok(r, VAD__RESPONSE__RESULT_HELLO);
	assert_true(r->hello->admin);
	done(r);
	tc_free(c);
	tc_free(anon);
	tc_free(root);
}

/* ---- tests: alloc / free ------------------------------------------------------------------ */

static void test_alloc_free(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "t");
	Vad__Response *r = do_alloc(c, NULL, 5000, 0, 0, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	assert_string_equal(r->alloc->arena, "default");
	assert_int_equal(r->alloc->n_offsets, 1);
	assert_int_equal(r->alloc->n_sizes, 1);
	assert_int_equal(r->alloc->sizes[0], 8192); /* rounded to the quantum */
	uint64_t off = r->alloc->offsets[0];
	done(r);
	assert_int_equal(held_bytes(c), 8192);

	uint64_t aligned = 0;
	r = do_alloc(c, "default", 4096, 1 * MiB, 0, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	aligned = r->alloc->offsets[0];
	assert_int_equal(aligned % MiB, 0);
	done(r);
	check_consistent();

	free_ok(c, NULL, off);
	r = do_free(c, NULL, &off, 1);
	expect_error(r, VAD__ERROR__ENOTHELD);
	char want[128];
	snprintf(want, sizeof(want), "range 0x%llx in arena 'default' is not held by this client",
		 (unsigned long long)off);
	assert_string_equal(r->message, want);
	assert_int_equal(r->result_case, VAD__RESPONSE__RESULT_FREE);
	assert_int_equal(r->free->freed, 0);
	done(r);

	uint64_t inside = aligned + 4096 - 4096 / 2; /* not a range start */
	r = do_free(c, NULL, &inside, 1);
	expect_error(r, VAD__ERROR__ENOTHELD);
	done(r);
	assert_int_equal(held_bytes(c), 4096);
	free_ok(c, "default", aligned);
	assert_int_equal(held_bytes(c), 0);

	/* Batch by count and by sizes. */
	r = do_alloc(c, NULL, 4096, 0, 5, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	assert_int_equal(r->alloc->n_offsets, 5);
	uint64_t five[5];
	memcpy(five, r->alloc->offsets, sizeof(five));
	done(r);
	for (int i = 0; i < 5; i++)
		for (int j = i + 1; j < 5; j++)
			assert_true(five[i] != five[j]);
	const uint64_t sizes[3] = {1, 4097, 3 * 4096};
	r = do_alloc(c, NULL, 0, 0, 0, sizes, 3);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	assert_int_equal(r->alloc->n_offsets, 3);
	assert_int_equal(r->alloc->sizes[0], 4096);
	assert_int_equal(r->alloc->sizes[1], 8192);
	assert_int_equal(r->alloc->sizes[2], 12288);
	done(r);
	assert_int_equal(held_bytes(c), 5 * 4096 + 4096 + 8192 + 12288);
	r = do_free(c, NULL, five, 5);
	expect_ok(r, VAD__RESPONSE__RESULT_FREE);
	assert_int_equal(r->free->freed, 5);
	done(r);
	check_consistent();
	tc_free(c);
}

static void test_alloc_errors(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "t");
	Vad__Response *r;

	r = expect_error(do_alloc(c, NULL, 0, 0, 0, NULL, 0), VAD__ERROR__ESIZE);
	done(r);
	r = expect_error(do_alloc(c, NULL, DEFAULT_SIZE + 1, 0, 0, NULL, 0), VAD__ERROR__ESIZE);
	assert_non_null(strstr(r->message, "exceeds arena 'default'"));
	done(r);
	const uint64_t with_zero[2] = {4096, 0};
	r = expect_error(do_alloc(c, NULL, 0, 0, 0, with_zero, 2), VAD__ERROR__ESIZE);
	assert_non_null(strstr(r->message, "range 2 of 2"));
	done(r);
	const uint64_t too_much[2] = {40 * MiB, 40 * MiB};
	r = expect_error(do_alloc(c, NULL, 0, 0, 0, too_much, 2), VAD__ERROR__ESIZE);
	done(r);
	r = expect_error(do_alloc(c, NULL, 4096, 3, 0, NULL, 0), VAD__ERROR__EALIGN);
	assert_non_null(strstr(r->message, "power of two"));
	done(r);
	r = expect_error(do_alloc(c, NULL, 4096, 2 * DEFAULT_SIZE, 0, NULL, 0), VAD__ERROR__EALIGN);
	done(r);
	r = expect_error(do_alloc(c, "nope", 4096, 0, 0, NULL, 0), VAD__ERROR__ENOARENA);
	assert_non_null(strstr(r->message, "'nope'"));
	done(r);
	r = expect_error(do_alloc(c, "private", 4096, 0, 0, NULL, 0), VAD__ERROR__EPERM);
	assert_non_null(strstr(r->message, "uid 1000"));
	done(r);
	r = expect_error(do_alloc(c, NULL, 4096, 0, 65, NULL, 0), VAD__ERROR__ETOOBIG);
	assert_non_null(strstr(r->message, "max_batch 64"));
	done(r);

	/* Full arena: half of it is held, the request wants more than what is left. */
	uint64_t big = alloc_one(c, NULL, 40 * MiB);
	r = expect_error(do_alloc(c, NULL, 30 * MiB, 0, 0, NULL, 0), VAD__ERROR__ENOSPC);
	assert_non_null(strstr(r->message, "arena 'default' has no free range of 30 MiB"));
	assert_non_null(strstr(r->message, "largest free block 24 MiB"));
	done(r);
	/* The failure is an event for the stats database. */
	assert_true(took_event("alloc-failed", "no free range of 30 MiB"));
	assert_int_equal(held_bytes(c), 40 * MiB);

	/* All or nothing: the third range cannot fit, so the first two are given back. */
	const uint64_t batch[3] = {1 * MiB, 1 * MiB, 23 * MiB};
	r = expect_error(do_alloc(c, NULL, 0, 0, 0, batch, 3), VAD__ERROR__ENOSPC);
	assert_non_null(strstr(r->message, "range 3 of 3"));
	done(r);
	assert_int_equal(held_bytes(c), 40 * MiB);
	check_consistent();
	free_ok(c, NULL, big);

	/* The private arena works for its uid and for root. */
	struct tclient *p = tc_hello(PRIVATE_UID, 1, "private");
	uint64_t poff = alloc_one(p, "private", 4096);
	struct tclient *root = tc_hello(0, 0, "root");
	uint64_t roff = alloc_one(root, "private", 4096);
	assert_true(poff != roff);
	tc_free(p);
	tc_free(root);
	tc_free(c);
}

static void test_free_batch_and_errors(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "t");
	Vad__Response *r = do_alloc(c, NULL, 4096, 0, 3, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	uint64_t offs[3];
	memcpy(offs, r->alloc->offsets, sizeof(offs));
	done(r);

	uint64_t mixed[3] = {offs[0], 60 * MiB, offs[2]};
	r = expect_error(do_free(c, NULL, mixed, 3), VAD__ERROR__ENOTHELD);
	assert_int_equal(r->result_case, VAD__RESPONSE__RESULT_FREE);
	assert_int_equal(r->free->freed, 1);
	assert_non_null(strstr(r->message, "freed 1 of 3"));
	done(r);
	assert_int_equal(held_bytes(c), 2 * 4096); /* offs[0] went, offs[2] was not tried */

	r = expect_error(do_free(c, NULL, NULL, 0), VAD__ERROR__EINVAL);
	done(r);
	r = expect_error(do_free(c, "nope", offs, 1), VAD__ERROR__ENOARENA);
	done(r);
	r = expect_error(do_free(c, "private", &offs[1], 1), VAD__ERROR__ENOTHELD);
	assert_non_null(strstr(r->message, "arena 'private'"));
	done(r);
	uint64_t many[65] = {0};
	r = expect_error(do_free(c, NULL, many, 65), VAD__ERROR__ETOOBIG);
	done(r);
	uint64_t rest[2] = {offs[1], offs[2]};
	r = do_free(c, NULL, rest, 2);
	expect_ok(r, VAD__RESPONSE__RESULT_FREE);
	assert_int_equal(r->free->freed, 2);
	done(r);
	assert_int_equal(held_bytes(c), 0);

	/* Another session cannot free what it does not hold. */
	uint64_t mine = alloc_one(c, NULL, 4096);
	struct tclient *other = tc_hello(1000, 1000, "other");
	r = expect_error(do_free(other, NULL, &mine, 1), VAD__ERROR__ENOTHELD);
	done(r);
	free_ok(c, NULL, mine);
	tc_free(other);
	tc_free(c);
}

/* ---- tests: share / attach / reference counts --------------------------------------------- */

static uint64_t busy_bytes(unsigned arena)
{
	struct va_stats st;
	va_get_stats(fx->svc->arenas[arena]->vs, &st);
	return st.busy_bytes;
}

static void test_share_attach_refcount(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "a");
	struct tclient *b = tc_hello(1001, 1001, "b");
	struct tclient *c = tc_hello(1002, 1002, "c");
	uint64_t off = alloc_one(a, NULL, 3 * 4096);
	char tok[33], again[33];
	share_ok(a, NULL, off, tok);
	share_ok(a, NULL, off, again);
	assert_string_equal(tok, again); /* one token per range */
	for (int i = 0; i < 32; i++)
		assert_non_null(strchr(
		    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", tok[i]));

	Vad__Response *r = do_stats(a, NULL);
	expect_ok(r, VAD__RESPONSE__RESULT_STATS);
	assert_int_equal(r->stats->shares, 1);
	done(r);

	r = do_attach(b, tok);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	assert_string_equal(r->attach->arena, "default");
	assert_int_equal(r->attach->offset, off);
	assert_int_equal(r->attach->size, 3 * 4096);
	done(r);
	r = do_attach(b, tok); /* a second reference of the same session */
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	assert_int_equal(held_bytes(b), 2 * 3 * 4096);
	check_consistent();

	/* b may share it too (it holds it): same token. */
	share_ok(b, NULL, off, again);
	assert_string_equal(tok, again);

	free_ok(a, NULL, off);
	r = expect_error(do_free(a, NULL, &off, 1), VAD__ERROR__ENOTHELD);
	done(r);
	assert_int_equal(busy_bytes(0), 3 * 4096); /* b still holds it */
	r = do_attach(c, tok);			   /* the token lives as long as the range */
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	free_ok(b, NULL, off);
	free_ok(b, NULL, off);
	assert_int_equal(busy_bytes(0), 3 * 4096);
	check_consistent();
	free_ok(c, NULL, off);
	assert_int_equal(busy_bytes(0), 0); /* the last reference gave the range back */

	r = expect_error(do_attach(b, tok), VAD__ERROR__ETOKEN);
	done(r);
	r = do_stats(a, NULL);
	expect_ok(r, VAD__RESPONSE__RESULT_STATS);
	assert_int_equal(r->stats->shares, 0);
	done(r);
	check_consistent();
	tc_free(a);
	tc_free(b);
	tc_free(c);
}

static void small_frame_tweak(struct vad_config *cfg)
{
	cfg->max_frame = 4096;
	cfg->max_batch = 4096;
}

static int setup_small_frame(void **state)
{
	(void)state;
	vad_log_set_level(VAD_LOG_ERR);
	start_service(small_frame_tweak);
	return 0;
}

/* Free batches longer than one lock hold, with repeats and a failure in a later chunk. */
static void test_free_batch_chunks(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "chunks");
	Vad__Response *r = do_alloc(c, NULL, 4096, 0, 64, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	uint64_t offs[64];
	memcpy(offs, r->alloc->offsets, sizeof(offs));
	done(r);
	r = do_alloc(c, NULL, 4096, 0, 30, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	uint64_t more[30];
	memcpy(more, r->alloc->offsets, sizeof(more));
	done(r);

	/* A range held twice may be named twice; a third time fails there. */
	char tok[33];
	share_ok(c, NULL, offs[5], tok);
	r = do_attach(c, tok);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	uint64_t batch[64 + 30 + 1];
	memcpy(batch, offs, sizeof(offs));
	memcpy(batch + 64, more, sizeof(more));
	batch[64 + 29] = offs[5]; /* its second reference, in the second chunk */
	batch[64 + 30] = offs[5]; /* no third */
	r = expect_error(do_free(c, NULL, batch, 95), VAD__ERROR__ENOTHELD);
	assert_int_equal(r->free->freed, 94);
	assert_non_null(strstr(r->message, "freed 94 of 95"));
	done(r);
	assert_int_equal(held_bytes(c), 4096); /* more[29] was not reached */
	assert_int_equal(busy_bytes(0), 4096);
	free_ok(c, NULL, more[29]);
	check_consistent();
	tc_free(c);
}

static void test_share_attach_errors(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "a");
	Vad__Response *r = expect_error(do_share(a, NULL, 0), VAD__ERROR__ENOTHELD);
	assert_non_null(strstr(r->message, "only a holder can share it"));
	done(r);
	r = expect_error(do_share(a, "nope", 0), VAD__ERROR__ENOARENA);
	done(r);
	r = expect_error(do_attach(a, "short"), VAD__ERROR__ETOKEN);
	assert_non_null(strstr(r->message, "malformed"));
	done(r);
	r = expect_error(do_attach(a, "0123456789abcdef0123456789abcde!"), VAD__ERROR__ETOKEN);
	done(r);
	r = expect_error(do_attach(a, "0123456789abcdef0123456789abcdef0"), VAD__ERROR__ETOKEN);
	done(r);
	r = expect_error(do_attach(a, "0123456789abcdef0123456789abcdef"), VAD__ERROR__ETOKEN);
	assert_non_null(strstr(r->message, "no shared range"));
	done(r);

	/* A token for a range of the private arena does not open it to others. */
	struct tclient *p = tc_hello(PRIVATE_UID, 1, "p");
	uint64_t off = alloc_one(p, "private", 4096);
	char tok[33];
	share_ok(p, "private", off, tok);
	r = expect_error(do_attach(a, tok), VAD__ERROR__EPERM);
	assert_non_null(strstr(r->message, "arena 'private'"));
	done(r);
	assert_int_equal(held_bytes(a), 0);
	tc_free(p); /* disconnect frees the range and its token */
	r = expect_error(do_attach(a, tok), VAD__ERROR__ETOKEN);
	done(r);
	tc_free(a);
}

static void test_disconnect_drops_references(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "a");
	struct tclient *b = tc_hello(1001, 1001, "b");
	Vad__Response *r = do_alloc(a, NULL, 8192, 0, 10, NULL, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	uint64_t kept = r->alloc->offsets[3];
	done(r);
	char tok[33];
	share_ok(a, NULL, kept, tok);
	r = do_attach(b, tok);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	assert_int_equal(busy_bytes(0), 10 * 8192);

	tc_free(a); /* crash, kill or EOF: the same path */
	assert_int_equal(busy_bytes(0), 8192);
	check_consistent();
	assert_int_equal(held_bytes(b), 8192);
	r = do_stats(b, NULL);
	expect_ok(r, VAD__RESPONSE__RESULT_STATS);
	assert_int_equal(r->stats->clients, 1);
	assert_int_equal(r->stats->shares, 1);
	done(r);

	tc_free(b);
	assert_int_equal(busy_bytes(0), 0);
	assert_int_equal(vad_registry_tokens(fx->svc->reg), 0);
	check_consistent();
}

static Vad__Response *do_share_with(struct tclient *c, uint64_t off, bool single_use,
				    uint64_t ttl_ms)
{
	Vad__Share sh = VAD__SHARE__INIT;
	sh.arena = "";
	sh.offset = off;
	sh.single_use = single_use;
	sh.ttl_ms = ttl_ms;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_SHARE;
	req.share = &sh;
	return tc_call(c, &req);
}

static void share_with_ok(struct tclient *c, uint64_t off, bool single_use, uint64_t ttl_ms,
			  char token[33])
{
	Vad__Response *r = do_share_with(c, off, single_use, ttl_ms);
	expect_ok(r, VAD__RESPONSE__RESULT_SHARE);
	assert_int_equal(strlen(r->share->token), 32);
	memcpy(token, r->share->token, 33);
	done(r);
}

/* Unshare the range at off; returns whether it had a live token. */
static bool unshare_ok(struct tclient *c, uint64_t off)
{
	Vad__Unshare un = VAD__UNSHARE__INIT;
	un.arena = "";
	un.offset = off;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_UNSHARE;
	req.unshare = &un;
	Vad__Response *r = tc_call(c, &req);
	expect_ok(r, VAD__RESPONSE__RESULT_UNSHARE);
	bool revoked = r->unshare->revoked;
	done(r);
	return revoked;
}

/* Attach token as c, expecting code; frees the reference again when it succeeds. */
static void attach_expect(struct tclient *c, const char *token, Vad__Error code)
{
	Vad__Response *r = do_attach(c, token);
	if (code == VAD__ERROR__OK) {
		expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
		uint64_t off = r->attach->offset;
		done(r);
		free_ok(c, NULL, off);
		return;
	}
	done(expect_error(r, code));
}

/* Each way a token dies gets its own refusal; the range and its other holders stay. */
static void test_share_options(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "a"), *b = tc_hello(1001, 1001, "b");
	uint64_t off = alloc_one(a, NULL, 4096);
	char plain[33], again[33], once[33], brief[33], fresh[33];

	/* Revoked: holders keep their references, new attaches are refused. */
	share_ok(a, NULL, off, plain);
	Vad__Response *r = do_attach(b, plain);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	assert_true(unshare_ok(a, off));
	assert_false(unshare_ok(a, off)); /* nothing left to revoke */
	attach_expect(b, plain, VAD__ERROR__EREVOKED);
	assert_int_equal(held_bytes(b), 4096);
	share_ok(a, NULL, off, again); /* a plain share after an unshare: a new token */
	assert_string_not_equal(plain, again);
	attach_expect(b, again, VAD__ERROR__OK);

	/* Single use: the first attach uses it up; the options replace the plain token. */
	share_with_ok(a, off, true, 0, once);
	attach_expect(b, again, VAD__ERROR__EREVOKED);
	r = expect_error(do_attach(b, again), VAD__ERROR__EREVOKED);
	assert_non_null(strstr(r->message, "newer token replaced it"));
	done(r);
	attach_expect(b, once, VAD__ERROR__OK);
	attach_expect(b, once, VAD__ERROR__ETOKENUSED);
	attach_expect(a, once, VAD__ERROR__ETOKENUSED);

	/* Expiring: a ttl of 1 ms has passed once 2 ms have. */
	share_with_ok(a, off, false, 1, brief);
	struct timespec ts = {.tv_nsec = 2000000};
	nanosleep(&ts, NULL);
	attach_expect(b, brief, VAD__ERROR__EEXPIRED);
	attach_expect(b, brief, VAD__ERROR__EEXPIRED); /* removed, remembered */
	share_with_ok(a, off, false, 3600000, brief);
	attach_expect(b, brief, VAD__ERROR__OK); /* an hour is not over yet */

	/* A plain share replaces a token with options. */
	share_ok(a, NULL, off, fresh);
	assert_string_not_equal(fresh, brief);
	attach_expect(b, brief, VAD__ERROR__EREVOKED);
	assert_int_equal(vad_registry_tokens(fx->svc->reg), 1);
	check_consistent();

	/* The range dies: its token is refused as freed, and is no guess. */
	tc_free(b);
	free_ok(a, NULL, off);
	r = expect_error(do_attach(a, fresh), VAD__ERROR__ETOKEN);
	assert_non_null(strstr(r->message, "freed by every holder"));
	done(r);
	assert_int_equal(a->s->guesses, 0);
	assert_int_equal(a->s->attach_failures, 2); /* used, freed */
	assert_int_equal(vad_registry_tokens(fx->svc->reg), 0);
	check_consistent();
	tc_free(a);
}

/* The ring of dead tokens is bounded: past VAD_DEAD_TOKENS deaths the oldest is just unknown. */
static void test_dead_tokens_bounded(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "a");
	uint64_t off = alloc_one(a, NULL, 4096);
	char first[33], tok[33];
	share_with_ok(a, off, true, 0, first);
	for (unsigned i = 0; i < VAD_DEAD_TOKENS; i++)
		share_with_ok(a, off, true, 0, tok);   /* each one replaces the one before */
	attach_expect(a, first, VAD__ERROR__EREVOKED); /* the oldest, still remembered */
	share_with_ok(a, off, true, 0, tok);	       /* one more death pushes it out */
	Vad__Response *r = expect_error(do_attach(a, first), VAD__ERROR__ETOKEN);
	assert_non_null(strstr(r->message, "no shared range"));
	done(r);
	assert_int_equal(a->s->guesses, 1);
	check_consistent();
	free_ok(a, NULL, off);
	tc_free(a);
}

/* A session that guesses tokens is paused past VAD_GUESS_FREE guesses, for a growing time,
 * and closed at VAD_GUESS_CLOSE; refusals of real tokens do not count. */
static void test_guessing_pauses_then_closes(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "guesser");
	uint32_t last = 0;
	for (unsigned i = 1; i < VAD_GUESS_CLOSE; i++) {
		attach_expect(a, i % 2 ? "0123456789abcdef0123456789abcdef" : "short",
			      VAD__ERROR__ETOKEN);
		uint32_t pause = vad_session_pause_ms(a->s);
		if (i <= VAD_GUESS_FREE) {
			assert_false(vad_session_paused(a->s));
			continue;
		}
		assert_true(vad_session_paused(a->s));
		assert_true(pause >= last && pause <= VAD_GUESS_PAUSE_MAX_MS);
		assert_int_equal(pause, vad_guess_pause_ms(i));
		last = pause;
		/* Paused: a request sent now waits, unanswered, until the pause ends. */
		uint8_t buf[256];
		Vad__Request req = VAD__REQUEST__INIT;
		Vad__StatsRequest st = VAD__STATS_REQUEST__INIT;
		req.op_case = VAD__REQUEST__OP_STATS;
		req.stats = &st;
		req.id = a->next_id++;
		size_t n = vad_frame_encode_request(&req, buf, sizeof(buf));
		assert_int_equal(vad_session_feed(a->s, buf, n), 0);
		vad_session_resume(a->s);
		assert_int_equal(vad_session_feed(a->s, buf, n), n);
		Vad__Response *r = tc_recv(a);
		expect_ok(r, VAD__RESPONSE__RESULT_STATS);
		done(r);
	}
	assert_int_equal(last, VAD_GUESS_PAUSE_MAX_MS);
	assert_false(vad_session_closing(a->s));
	vad_session_resume(a->s);
	attach_expect(a, "0123456789abcdef0123456789abcdef", VAD__ERROR__ETOKEN);
	assert_true(vad_session_closing(a->s));
	assert_true(took_event("token-guessing", "'guesser'"));
	tc_free(a);

	/* A consumer that loses races for single-use tokens is no guesser. */
	struct tclient *p = tc_hello(1000, 1000, "producer"), *c = tc_hello(1001, 1001, "c");
	uint64_t off = alloc_one(p, NULL, 4096);
	char tok[33];
	for (unsigned i = 0; i < VAD_GUESS_CLOSE + 1; i++) {
		share_with_ok(p, off, true, 0, tok);
		attach_expect(c, tok, VAD__ERROR__OK);
		attach_expect(c, tok, VAD__ERROR__ETOKENUSED);
	}
	assert_false(vad_session_paused(c->s) || vad_session_closing(c->s));
	assert_int_equal(c->s->attach_failures, VAD_GUESS_CLOSE + 1);
	free_ok(p, NULL, off);
	tc_free(c);
	tc_free(p);
}

/* A disconnect with many references in two arenas, some shared, some held twice. */
static void test_disconnect_many(void **state)
{
	(void)state;
	struct tclient *root = tc_hello(0, 0, "root");
	struct tclient *other = tc_hello(1000, 1000, "other");
	for (int i = 0; i < 3; i++) {
		Vad__Response *r = do_alloc(root, NULL, 4096, 0, 64, NULL, 0);
		expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
		done(r);
		r = do_alloc(root, "private", 8192, 0, 50, NULL, 0);
		expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
		done(r);
	}
	uint64_t kept = alloc_one(root, NULL, 4096);
	char tok[33];
	share_ok(root, NULL, kept, tok);
	for (int i = 0; i < 2; i++) {
		Vad__Response *r = do_attach(root, tok); /* root holds it three times */
		expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
		done(r);
	}
	Vad__Response *r = do_attach(other, tok);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	assert_int_equal(busy_bytes(0), (3 * 64 + 1) * 4096);
	assert_int_equal(busy_bytes(1), 3 * 50 * 8192);
	tc_free(root);
	assert_int_equal(busy_bytes(0), 4096);
	assert_int_equal(busy_bytes(1), 0);
	assert_int_equal(vad_registry_tokens(fx->svc->reg), 1);
	check_consistent();
	tc_free(other);
	assert_int_equal(busy_bytes(0), 0);
	assert_int_equal(vad_registry_tokens(fx->svc->reg), 0);
}

/* The consistency check is not a rubber stamp: it notices broken books. */
static void test_check_detects_corruption(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "a");
	struct tclient *b = tc_hello(1001, 1001, "b");
	uint64_t off = alloc_one(a, NULL, 8192);
	char tok[33];
	share_ok(a, NULL, off, tok);
	Vad__Response *r = do_attach(b, tok);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	check_consistent();
	char msg[512];
	struct vad_hold *o = vad_holder_find(&a->s->holder, 0, off);
	assert_non_null(o);

	o->range->refs++; /* a reference nobody holds */
	assert_int_equal(vad_registry_check(fx->svc->reg, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "arena 0 totals"));
	o->range->refs--;

	a->s->holder.held_bytes += 4096; /* a session's total off by a page */
	assert_int_equal(vad_registry_check(fx->svc->reg, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "session's totals"));
	a->s->holder.held_bytes -= 4096;

	o->range->size += 4096; /* the allocator disagrees about the range */
	assert_int_equal(vad_registry_check(fx->svc->reg, msg, sizeof(msg)), -1);
	o->range->size -= 4096;

	fx->svc->reg->n_tokens++; /* a token count that lies */
	assert_int_equal(vad_registry_check(fx->svc->reg, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "share tokens"));
	fx->svc->reg->n_tokens--;

	check_consistent();
	tc_free(a);
	tc_free(b);
}

/* Does the event queue hold an event of this kind whose detail contains text? Takes
 * (and frees) every queued event. */
static bool took_event(const char *kind, const char *text)
{
	struct vad_event *ev = vad_service_take_events(fx->svc);
	bool found = false;
	for (struct vad_event *e = ev; e; e = e->next)
		if (strcmp(e->kind, kind) == 0 && e->detail && strstr(e->detail, text))
			found = true;
	vad_events_free(ev);
	return found;
}

/* ---- tests: quotas ------------------------------------------------------------------------ */

static void quota_tweak(struct vad_config *cfg)
{
	cfg->quota_client = 1 * MiB;
	cfg->quota_uid = 3 * MiB / 2;
}

static int setup_quota(void **state)
{
	(void)state;
	vad_log_set_level(VAD_LOG_ERR);
	start_service(quota_tweak);
	return 0;
}

static void test_quotas(void **state)
{
	(void)state;
	struct tclient *a = tc_hello(1000, 1000, "encoder");
	uint64_t off = alloc_one(a, NULL, 1 * MiB);
	Vad__Response *r = expect_error(do_alloc(a, NULL, 4096, 0, 0, NULL, 0), VAD__ERROR__EQUOTA);
	assert_non_null(
	    strstr(r->message, "quota exceeded: client 'encoder' holds 1 MiB of 1 MiB"));
	done(r);
	assert_true(took_event("quota-refused", "client 'encoder'"));

	/* Same uid, another session: the uid quota (1.5 MiB) binds first. */
	struct tclient *b = tc_hello(1000, 1000, "decoder");
	r = expect_error(do_alloc(b, NULL, 768 * 1024, 0, 0, NULL, 0), VAD__ERROR__EQUOTA);
	assert_non_null(strstr(
	    r->message,
	    "quota exceeded: uid 1000 holds 1048576 B (1 MiB) of 1572864 B (1 MiB + 512 KiB)"));
	done(r);
	uint64_t half = alloc_one(b, NULL, 512 * 1024);

	/* Attach counts too. */
	char tok[33];
	share_ok(b, NULL, half, tok);
	r = expect_error(do_attach(a, tok), VAD__ERROR__EQUOTA);
	done(r);
	struct tclient *other = tc_hello(2000, 2000, "other");
	r = do_attach(other, tok);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	r = do_attach(other, tok);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	done(r);
	r = expect_error(do_attach(other, tok), VAD__ERROR__EQUOTA); /* 1.5 MiB > 1 MiB */
	assert_non_null(strstr(r->message, "client 'other' holds 1 MiB"));
	done(r);

	/* A batch is charged as a whole. */
	free_ok(a, NULL, off);
	r = expect_error(do_alloc(a, NULL, 256 * 1024, 0, 5, NULL, 0), VAD__ERROR__EQUOTA);
	done(r);
	assert_int_equal(held_bytes(a), 0);

	/* Disconnect gives the uid's bytes back. */
	tc_free(b);
	off = alloc_one(a, NULL, 1 * MiB);
	free_ok(a, NULL, off);
	check_consistent();
	tc_free(other);
	tc_free(a);
}

/* ---- tests: map-arena, stats, arenas ------------------------------------------------------ */

static void test_map_arena_fd(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "m");
	Vad__Response *r;

	/* Pipelined: stats, map, stats. The fd must ride on the first byte of the map reply. */
	Vad__StatsRequest st = VAD__STATS_REQUEST__INIT;
	Vad__MapArena ma = VAD__MAP_ARENA__INIT;
	Vad__Request q1 = VAD__REQUEST__INIT, q2 = VAD__REQUEST__INIT, q3 = VAD__REQUEST__INIT;
	q1.op_case = VAD__REQUEST__OP_STATS;
	q1.stats = &st;
	q2.op_case = VAD__REQUEST__OP_MAP_ARENA;
	q2.map_arena = &ma;
	q3.op_case = VAD__REQUEST__OP_STATS;
	q3.stats = &st;
	uint8_t buf[1024];
	size_t n = 0;
	q1.id = 11;
	q2.id = 12;
	q3.id = 13;
	n += vad_frame_encode_request(&q1, buf + n, sizeof(buf) - n);
	n += vad_frame_encode_request(&q2, buf + n, sizeof(buf) - n);
	n += vad_frame_encode_request(&q3, buf + n, sizeof(buf) - n);
	tc_send_bytes(c, buf, n);

	/* Three chunks: before the mark, the marked frame to the end (no other mark). */
	const uint8_t *data;
	size_t len;
	int fd;
	assert_true(vad_session_next_output(c->s, &data, &len, &fd));
	assert_int_equal(fd, -1);
	size_t first = len;
	tc_drain(c);
	assert_int_equal(c->n_fds, 1);
	assert_int_equal(c->fds[0], fx->svc->arenas[0]->fd);
	assert_int_equal(c->fd_pos[0], first);

	r = tc_recv(c);
	assert_int_equal(r->id, 11);
	done(r);
	r = tc_recv(c);
	assert_int_equal(r->id, 12);
	expect_ok(r, VAD__RESPONSE__RESULT_MAP_ARENA);
	assert_string_equal(r->map_arena->arena->name, "default");
	assert_int_equal(r->map_arena->arena->size, DEFAULT_SIZE);
	assert_int_equal(r->map_arena->arena->quantum, 4096);
	assert_string_equal(r->map_arena->arena->backing, "memfd");
	assert_true(r->map_arena->arena->allowed);
	done(r);
	r = tc_recv(c);
	assert_int_equal(r->id, 13);
	done(r);

	/* Two maps in a row: two marked chunks. */
	c->n_fds = 0;
	n = 0;
	n += vad_frame_encode_request(&q2, buf + n, sizeof(buf) - n);
	n += vad_frame_encode_request(&q2, buf + n, sizeof(buf) - n);
	tc_send_bytes(c, buf, n);
	tc_drain(c);
	assert_int_equal(c->n_fds, 2);
	assert_int_equal(c->fd_pos[0], 0);
	assert_true(c->fd_pos[1] > 0);
	done(tc_recv(c));
	done(tc_recv(c));

	ma.arena = (char *)"private";
	r = expect_error(tc_call(c, &q2), VAD__ERROR__EPERM);
	done(r);
	ma.arena = (char *)"nope";
	q2.id = 0;
	r = expect_error(tc_call(c, &q2), VAD__ERROR__ENOARENA);
	done(r);
	tc_free(c);
}

static bool fake_read_all(void *ctx)
{
	return *(bool *)ctx;
}

/* A client that asks for the arena fd again and again without reading gets refused once
 * VAD_FDS_UNREAD_MAX fds may be unread; once it has read them, it is served again. */
/* A reader of "private": map-arena sends it the read-only fd, marked read_only; alloc is
 * refused with EREADONLY and a sentence; attach, stats and free work. The writer's map is
 * unchanged. */
static void test_reader_session(void **state)
{
	(void)state;
	struct tclient *w = tc_hello(PRIVATE_UID, PRIVATE_UID, "writer");
	struct tclient *rd = tc_hello(READER_UID, READER_UID, "reader");
	const struct vad_arena *priv = fx->svc->arenas[1];
	Vad__MapArena ma = VAD__MAP_ARENA__INIT;
	ma.arena = (char *)"private";
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_MAP_ARENA;
	q.map_arena = &ma;

	Vad__Response *r = tc_call(w, &q);
	expect_ok(r, VAD__RESPONSE__RESULT_MAP_ARENA);
	assert_false(r->map_arena->arena->read_only);
	done(r);
	tc_drain(w);
	assert_int_equal(w->n_fds, 1);
	assert_int_equal(w->fds[0], priv->fd);

	r = tc_call(rd, &q);
	expect_ok(r, VAD__RESPONSE__RESULT_MAP_ARENA);
	assert_true(r->map_arena->arena->allowed);
	assert_true(r->map_arena->arena->read_only);
	done(r);
	tc_drain(rd);
	assert_int_equal(rd->n_fds, 1);
	assert_int_equal(rd->fds[0], priv->ro_fd);

	r = expect_error(do_alloc(rd, "private", 4096, 0, 0, NULL, 0), VAD__ERROR__EREADONLY);
	assert_non_null(strstr(r->message, "uid 23456 may only read arena 'private'"));
	done(r);
	assert_int_equal(held_bytes(rd), 0);

	uint64_t off = alloc_one(w, "private", 8192);
	char token[33];
	share_ok(w, "private", off, token);
	r = do_attach(rd, token);
	expect_ok(r, VAD__RESPONSE__RESULT_ATTACH);
	assert_int_equal(r->attach->offset, off);
	done(r);
	assert_int_equal(held_bytes(rd), 8192);
	r = do_stats(rd, "private");
	expect_ok(r, VAD__RESPONSE__RESULT_STATS);
	assert_int_equal(r->stats->n_arenas, 1);
	done(r);
	r = do_simple(rd, VAD__REQUEST__OP_ARENAS);
	expect_ok(r, VAD__RESPONSE__RESULT_ARENAS);
	assert_false(r->arenas->arenas[0]->read_only); /* default: open, so it writes there */
	assert_true(r->arenas->arenas[1]->read_only);
	done(r);
	free_ok(rd, "private", off);
	free_ok(w, "private", off);
	/* it writes where it may */
	free_ok(rd, NULL, alloc_one(rd, NULL, 4096));
	check_consistent();
	tc_free(rd);
	tc_free(w);
}

static void test_map_arena_fd_budget(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "hoarder");
	bool read_all = false;
	c->s->peer_read_all = fake_read_all;
	c->s->io_ctx = &read_all;
	Vad__MapArena ma = VAD__MAP_ARENA__INIT;
	ma.arena = (char *)"";
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_MAP_ARENA;
	q.map_arena = &ma;
	uint8_t buf[64 * 16];
	size_t n = 0;
	for (int i = 0; i < VAD_FDS_UNREAD_MAX + 3; i++) {
		q.id = (uint64_t)i + 1;
		n += vad_frame_encode_request(&q, buf + n, sizeof(buf) - n);
	}
	tc_send_bytes(c, buf, n);
	tc_drain(c);
	assert_int_equal(c->n_fds,
			 VAD_FDS_UNREAD_MAX); /* one per reply served, none for refusals */
	for (int i = 0; i < VAD_FDS_UNREAD_MAX + 3; i++) {
		Vad__Response *r = tc_recv(c);
		if (i < VAD_FDS_UNREAD_MAX) {
			expect_ok(r, VAD__RESPONSE__RESULT_MAP_ARENA);
		} else {
			expect_error(r, VAD__ERROR__EBUSY);
			assert_non_null(strstr(r->message, "still unread"));
		}
		done(r);
	}
	/* The socket says the client read everything: served again. */
	read_all = true;
	q.id = 0;
	Vad__Response *r = tc_call(c, &q);
	expect_ok(r, VAD__RESPONSE__RESULT_MAP_ARENA);
	done(r);
	tc_free(c);
}

static void test_stats_and_arenas(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "s");
	uint64_t off = alloc_one(c, NULL, 2 * MiB);
	Vad__Response *r = do_stats(c, NULL);
	expect_ok(r, VAD__RESPONSE__RESULT_STATS);
	assert_int_equal(r->stats->n_arenas, 1); /* "private" is not for uid 1000 */
	assert_string_equal(r->stats->arenas[0]->name, "default");
	assert_int_equal(r->stats->arenas[0]->size, DEFAULT_SIZE);
	assert_int_equal(r->stats->arenas[0]->busy_bytes, 2 * MiB);
	assert_true(r->stats->arenas[0]->allocs >= 1);
	assert_int_equal(r->stats->held_bytes, 2 * MiB);
	assert_int_equal(r->stats->held_ranges, 1);
	assert_int_equal(r->stats->clients, 1);
	assert_int_equal(r->stats->requests, 3); /* hello, alloc, this stats */
	done(r);
	r = expect_error(do_stats(c, "private"), VAD__ERROR__EPERM);
	done(r);
	r = expect_error(do_stats(c, "nope"), VAD__ERROR__ENOARENA);
	done(r);
	r = do_stats(c, "default");
	expect_ok(r, VAD__RESPONSE__RESULT_STATS);
	assert_int_equal(r->stats->n_arenas, 1);
	done(r);

	r = do_simple(c, VAD__REQUEST__OP_ARENAS); /* not an admin operation */
	expect_ok(r, VAD__RESPONSE__RESULT_ARENAS);
	assert_int_equal(r->arenas->n_arenas, 2);
	assert_string_equal(r->arenas->arenas[0]->name, "default");
	assert_true(r->arenas->arenas[0]->allowed);
	assert_string_equal(r->arenas->arenas[1]->name, "private");
	assert_false(r->arenas->arenas[1]->allowed);
	assert_int_equal(r->arenas->arenas[1]->size, PRIVATE_SIZE);
	done(r);
	free_ok(c, NULL, off);
	tc_free(c);
}

/* ---- tests: admin ------------------------------------------------------------------------- */

static void test_admin_refused(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "user");
	const Vad__Request__OpCase ops[] = {VAD__REQUEST__OP_CLIENTS, VAD__REQUEST__OP_PURGE,
					    VAD__REQUEST__OP_RELOAD, VAD__REQUEST__OP_CHECK};
	const char *names[] = {"clients", "purge", "reload", "check"};
	for (int i = 0; i < 4; i++) {
		Vad__Response *r = expect_error(do_simple(c, ops[i]), VAD__ERROR__EPERM);
		char want[96];
		snprintf(want, sizeof(want), "admin operation '%s' needs root or group", names[i]);
		assert_non_null(strstr(r->message, want));
		done(r);
	}
	tc_free(c);

	/* A member of admin_group, by a supplementary group, may. */
	const gid_t groups[] = {27, ADMIN_GID};
	struct tclient *m = tc_new_peer(1000, 1000, groups, 2);
	Vad__Response *r = do_hello(m, "member", VAD_PROTOCOL_VERSION);
	expect_ok(r, VAD__RESPONSE__RESULT_HELLO);
	assert_true(r->hello->admin);
	done(r);
	r = do_simple(m, VAD__REQUEST__OP_CHECK);
	expect_ok(r, VAD__RESPONSE__RESULT_CHECK);
	assert_true(r->check->ok);
	done(r);
	tc_free(m);

	/* And so does the daemon's own uid. */
	struct tclient *self = tc_hello(geteuid(), 1, "self");
	r = do_simple(self, VAD__REQUEST__OP_CHECK);
	expect_ok(r, VAD__RESPONSE__RESULT_CHECK);
	done(r);
	tc_free(self);
}

static void test_admin_ops(void **state)
{
	(void)state;
	struct tclient *root = tc_hello(0, 0, "root");
	struct tclient *u = tc_hello(1000, 1000, "worker");
	struct tclient *silent = tc_new_peer(1001, 1001, NULL, 0); /* no hello yet */
	uint64_t off = alloc_one(u, NULL, 4 * MiB);
	alloc_one(u, NULL, 4096);

	Vad__Response *r = do_simple(root, VAD__REQUEST__OP_CLIENTS);
	expect_ok(r, VAD__RESPONSE__RESULT_CLIENTS);
	assert_int_equal(r->clients->n_clients, 3);
	bool seen = false;
	for (size_t i = 0; i < r->clients->n_clients; i++) {
		Vad__ClientInfo *ci = r->clients->clients[i];
		if (strcmp(ci->name, "worker") == 0) {
			seen = true;
			assert_int_equal(ci->uid, 1000);
			assert_int_equal(ci->pid, 5000);
			assert_int_equal(ci->held_bytes, 4 * MiB + 4096);
			assert_int_equal(ci->held_ranges, 2);
			assert_int_equal(ci->allocs, 2);
			assert_int_equal(ci->session_id, u->s->id);
			assert_true(ci->connected_ms > 0);
		}
	}
	assert_true(seen);
	done(r);

	/* The idle drain thread may release some of it first: count both. */
	struct va_stats before, after;
	va_get_stats(fx->svc->arenas[0]->vs, &before);
	free_ok(u, NULL, off);
	r = do_simple(root, VAD__REQUEST__OP_PURGE);
	expect_ok(r, VAD__RESPONSE__RESULT_PURGE);
	va_get_stats(fx->svc->arenas[0]->vs, &after);
	assert_true(after.released_bytes - before.released_bytes >= 4 * MiB);
	assert_true(r->purge->released_bytes <= after.released_bytes - before.released_bytes);
	assert_int_equal(after.lazy_bytes, 0);
	done(r);
	Vad__Purge pu = VAD__PURGE__INIT;
	pu.arena = (char *)"nope";
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_PURGE;
	req.purge = &pu;
	r = expect_error(tc_call(root, &req), VAD__ERROR__ENOARENA);
	done(r);
	pu.arena = (char *)"private";
	req.id = 0;
	r = tc_call(root, &req);
	expect_ok(r, VAD__RESPONSE__RESULT_PURGE);
	done(r);

	r = do_simple(root, VAD__REQUEST__OP_CHECK);
	expect_ok(r, VAD__RESPONSE__RESULT_CHECK);
	assert_true(r->check->ok);
	assert_non_null(strstr(r->check->detail, "consistent"));
	done(r);

	/* Started without a config file: reload has nothing to read. */
	r = expect_error(do_simple(root, VAD__REQUEST__OP_RELOAD), VAD__ERROR__EINVAL);
	done(r);
	tc_free(silent);
	tc_free(u);
	tc_free(root);
}

static Vad__Response *do_walk(struct tclient *c, const char *arena, uint64_t from, uint32_t max)
{
	Vad__Walk w = VAD__WALK__INIT;
	w.arena = (char *)(arena ? arena : "");
	w.from = from;
	w.max_blocks = max;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_WALK;
	req.walk = &w;
	return tc_call(c, &req);
}

static void test_walk(void **state)
{
	(void)state;
	struct tclient *root = tc_hello(0, 0, "root");
	struct tclient *u = tc_hello(1000, 1000, "user");
	Vad__Response *r = expect_error(do_walk(u, NULL, 0, 0), VAD__ERROR__EPERM);
	assert_non_null(strstr(r->message, "admin operation 'walk'"));
	done(r);
	r = expect_error(do_walk(root, "nope", 0, 0), VAD__ERROR__ENOARENA);
	done(r);

	/* Some busy ranges with freed (lazy or pooled) ones between them. */
	uint64_t offs[12];
	for (int i = 0; i < 12; i++)
		offs[i] = alloc_one(u, NULL, 4096 * (uint64_t)(1 + i % 3));
	for (int i = 0; i < 12; i += 3)
		free_ok(u, NULL, offs[i]);

	/* One page: the blocks tile the whole arena in address order. */
	r = do_walk(root, NULL, 0, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_WALK);
	Vad__WalkReply *w = r->walk;
	assert_string_equal(w->arena, "default");
	assert_int_equal(w->size, DEFAULT_SIZE);
	assert_int_equal(w->quantum, 4096);
	assert_false(w->more);
	uint64_t at = 0, busy = 0;
	size_t n_all = w->n_blocks;
	uint64_t *starts = malloc(n_all * sizeof(*starts));
	assert_non_null(starts);
	for (size_t i = 0; i < n_all; i++) {
		assert_int_equal(w->blocks[i]->offset, at);
		at += w->blocks[i]->size;
		starts[i] = w->blocks[i]->offset;
		if (w->blocks[i]->kind == VAD__BLOCK_KIND__BUSY)
			busy += w->blocks[i]->size;
	}
	assert_int_equal(at, DEFAULT_SIZE);
	assert_int_equal(busy, held_bytes(u));
	done(r);

	/* Pages of 2 blocks give the same blocks, each page starting where the last ended. */
	uint64_t from = 0;
	size_t seen = 0;
	for (;;) {
		r = do_walk(root, NULL, from, 2);
		expect_ok(r, VAD__RESPONSE__RESULT_WALK);
		assert_true(r->walk->n_blocks >= 1 && r->walk->n_blocks <= 2);
		for (size_t i = 0; i < r->walk->n_blocks; i++) {
			assert_true(seen < n_all);
			assert_int_equal(r->walk->blocks[i]->offset, starts[seen++]);
		}
		bool more = r->walk->more;
		if (more) {
			assert_true(r->walk->next > from);
			from = r->walk->next;
		}
		done(r);
		if (!more)
			break;
	}
	assert_int_equal(seen, n_all);

	/* From inside a block: that block comes first. */
	r = do_walk(root, NULL, starts[1] + 1, 1);
	expect_ok(r, VAD__RESPONSE__RESULT_WALK);
	assert_int_equal(r->walk->blocks[0]->offset, starts[1]);
	done(r);
	/* Past the end: nothing. */
	r = do_walk(root, NULL, DEFAULT_SIZE, 0);
	expect_ok(r, VAD__RESPONSE__RESULT_WALK);
	assert_int_equal(r->walk->n_blocks, 0);
	assert_false(r->walk->more);
	done(r);
	free(starts);
	tc_free(u);
	tc_free(root);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_reload(void **state)
{
	(void)state;
	snprintf(fx->conf_path, sizeof(fx->conf_path), "/tmp/vad-test-reload-%d.conf",
		 (int)getpid());
	write_file(fx->conf_path, "[vad]\nmax_batch = 8\nquota_client = 64K\nmax_frame = 128K\n"
				  "log_level = err\n[arena default]\nsize = 64M\n");
	snprintf(fx->svc->config_path, sizeof(fx->svc->config_path), "%s", fx->conf_path);

	struct tclient *root = tc_hello(0, 0, "root");
	Vad__Response *r = do_simple(root, VAD__REQUEST__OP_RELOAD);
	expect_ok(r, VAD__RESPONSE__RESULT_RELOAD);
	assert_non_null(strstr(r->reload->detail, "max_batch 8"));
	done(r);
	struct vad_limits l = vad_service_limits(fx->svc);
	assert_int_equal(l.max_batch, 8);
	assert_int_equal(l.quota_client, 64 * 1024);
	assert_int_equal(l.max_frame, 128 * 1024);
	r = expect_error(do_alloc(root, NULL, 4096, 0, 9, NULL, 0), VAD__ERROR__ETOOBIG);
	done(r);
	r = expect_error(do_alloc(root, NULL, 128 * 1024, 0, 0, NULL, 0), VAD__ERROR__EQUOTA);
	done(r);

	/* A broken file keeps the old limits and says where it broke. */
	write_file(fx->conf_path, "[vad]\nmax_batch = 4\nmax_clients = lots\n");
	r = expect_error(do_simple(root, VAD__REQUEST__OP_RELOAD), VAD__ERROR__EINVAL);
	char where[96];
	snprintf(where, sizeof(where), "%s:3", fx->conf_path);
	assert_non_null(strstr(r->message, where));
	assert_non_null(strstr(r->message, "old limits stay"));
	done(r);
	assert_int_equal(vad_service_limits(fx->svc).max_batch, 8);
	tc_free(root);
	vad_log_set_level(VAD_LOG_ERR);
}

/* ---- tests: malformed input --------------------------------------------------------------- */

static void put_le32(uint8_t *p, uint32_t v)
{
	vad_frame_put_header(p, v);
}

static void test_malformed_frames(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "fuzz");
	Vad__Response *r;

	/* Undecodable protobuf: an error reply, and the connection stays usable. */
	uint8_t junk[12] = {0};
	put_le32(junk, 8);
	memset(junk + 4, 0xff, 8);
	tc_send_bytes(c, junk, sizeof(junk));
	r = expect_error(tc_recv(c), VAD__ERROR__EPROTO);
	assert_int_equal(r->id, 0);
	done(r);
	assert_false(vad_session_closing(c->s));

	/* A request without an operation, and one with an operation from the future. */
	Vad__Request none = VAD__REQUEST__INIT;
	none.id = 77;
	r = expect_error(tc_call(c, &none), VAD__ERROR__EUNSUPPORTED);
	done(r);
	uint8_t future[] = {0, 0, 0, 0, 0x08, 0x05, 0xf8, 0x06, 0x01}; /* id 5, field 111 */
	put_le32(future, sizeof(future) - 4);
	tc_send_bytes(c, future, sizeof(future));
	r = expect_error(tc_recv(c), VAD__ERROR__EUNSUPPORTED);
	assert_int_equal(r->id, 5);
	done(r);

	/* A request split into single bytes still arrives whole. */
	Vad__ArenasRequest ar = VAD__ARENAS_REQUEST__INIT;
	Vad__Request q = VAD__REQUEST__INIT;
	q.id = 99;
	q.op_case = VAD__REQUEST__OP_ARENAS;
	q.arenas = &ar;
	uint8_t buf[64];
	size_t n = vad_frame_encode_request(&q, buf, sizeof(buf));
	for (size_t i = 0; i < n; i++) {
		assert_false(tc_has_reply(c));
		tc_send_bytes(c, buf + i, 1);
	}
	r = tc_recv(c);
	expect_ok(r, VAD__RESPONSE__RESULT_ARENAS);
	assert_int_equal(r->id, 99);
	done(r);

	/* An empty frame breaks the framing: EPROTO, then the session closes. */
	uint8_t empty[4] = {0};
	tc_send_bytes(c, empty, 4);
	r = expect_error(tc_recv(c), VAD__ERROR__EPROTO);
	done(r);
	assert_true(vad_session_closing(c->s));
	assert_true(vad_session_input_blocked(c->s));
	assert_int_equal(vad_session_feed(c->s, buf, n), 0); /* nothing more is read */
	tc_free(c);

	/* A frame over max_frame: ETOOBIG naming both sizes, then close; what follows is dropped.
	 */
	struct tclient *d = tc_hello(1000, 1000, "big");
	uint8_t big[4 + 16];
	put_le32(big, 1u << 20);
	memset(big + 4, 0, 16);
	vad_session_feed(d->s, big, sizeof(big));
	r = expect_error(tc_recv(d), VAD__ERROR__ETOOBIG);
	assert_non_null(strstr(r->message, "1048576"));
	assert_non_null(strstr(r->message, "65536"));
	done(r);
	assert_true(vad_session_closing(d->s));
	assert_false(tc_has_reply(d));
	tc_free(d);

	/* Before hello, garbage gets EPROTO too (not ENOHELLO: it is not a request). */
	struct tclient *e = tc_new_peer(1000, 1000, NULL, 0);
	tc_send_bytes(e, junk, sizeof(junk));
	r = expect_error(tc_recv(e), VAD__ERROR__EPROTO);
	done(r);
	tc_free(e);
}

/* A frame larger than the idle input buffer, fed in pieces, arrives whole. */
static void test_large_frame(void **state)
{
	(void)state;
	struct tclient *c = tc_new_peer(1000, 1000, NULL, 0);
	size_t name_len = 60000;
	char *name = malloc(name_len + 1);
	assert_non_null(name);
	memset(name, 'n', name_len);
	name[name_len] = '\0';
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = name;
	h.version = VAD_PROTOCOL_VERSION;
	Vad__Request q = VAD__REQUEST__INIT;
	q.id = 3;
	q.op_case = VAD__REQUEST__OP_HELLO;
	q.hello = &h;
	uint8_t *buf = malloc(name_len + 64);
	assert_non_null(buf);
	size_t n = vad_frame_encode_request(&q, buf, name_len + 64);
	assert_true(n > 60000 && n < 65536);
	for (size_t i = 0; i < n; i += 1000) {
		assert_false(tc_has_reply(c));
		tc_send_bytes(c, buf + i, n - i < 1000 ? n - i : 1000);
	}
	Vad__Response *r = tc_recv(c);
	expect_ok(r, VAD__RESPONSE__RESULT_HELLO);
	assert_int_equal(r->id, 3);
	done(r);
	assert_int_equal(strlen(c->s->name), VAD_NAME_MAX);
	free(buf);
	free(name);
	tc_free(c);
}

/* ---- tests: backpressure ------------------------------------------------------------------ */

static void test_backpressure(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "slow");
	Vad__ArenasRequest ar = VAD__ARENAS_REQUEST__INIT;
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_ARENAS;
	q.arenas = &ar;
	const unsigned total = 40000;
	size_t high = vad_service_high_watermark(fx->svc);

	/* The client writes everything and reads nothing until the daemon stops taking input. */
	uint8_t *stream = malloc((size_t)total * 16);
	assert_non_null(stream);
	size_t len = 0;
	for (unsigned i = 0; i < total; i++) {
		q.id = i + 1;
		len += vad_frame_encode_request(&q, stream + len, 16);
	}
	size_t fed = 0;
	unsigned got = 0, stalls = 0;
	while (got < total) {
		size_t taken = vad_session_feed(c->s, stream + fed, len - fed);
		fed += taken;
		size_t pending = vad_session_output_pending(c->s);
		/* Bounded: one reply over the watermark at most. */
		assert_true(pending < high + 4096);
		if (fed < len) {
			assert_true(vad_session_input_blocked(c->s));
			stalls++;
		}
		tc_drain(c);
		vad_session_process(c->s); /* what the server does once the output drained */
		while (tc_has_reply(c)) {
			Vad__Response *r = tc_recv(c);
			assert_int_equal(r->id, ++got); /* in order, none lost */
			done(r);
		}
	}
	assert_true(stalls > 0);
	assert_int_equal(fed, len);
	free(stream);
	tc_free(c);
}

/* What one alloc request allocated, one free request can free: a batch whose reply or whose
 * free request could pass max_frame is refused up front. */
static void test_batch_fits_max_frame(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "frames");
	Vad__Response *r =
	    expect_error(do_alloc(c, NULL, 4096, 0, 2000, NULL, 0), VAD__ERROR__ETOOBIG);
	assert_non_null(strstr(r->message, "max_frame 4096 B (4 KiB)"));
	done(r);

	/* The largest batch accepted: its reply and its free request both fit. */
	uint32_t n = 2000;
	for (;;) {
		r = do_alloc(c, NULL, 4096, 0, n, NULL, 0);
		if (r->error == VAD__ERROR__OK)
			break;
		assert_int_equal(r->error, VAD__ERROR__ETOOBIG);
		done(r);
		n -= 10;
		assert_true(n > 100);
	}
	assert_int_equal(r->alloc->n_offsets, n);
	assert_true(vad__response__get_packed_size(r) <= 4096);
	uint64_t *offs = malloc(n * sizeof(*offs));
	assert_non_null(offs);
	memcpy(offs, r->alloc->offsets, n * sizeof(*offs));
	done(r);
	Vad__Free f = VAD__FREE__INIT;
	f.arena = (char *)"";
	f.offsets = offs;
	f.n_offsets = n;
	Vad__Request q = VAD__REQUEST__INIT;
	q.id = 1u << 30;
	q.op_case = VAD__REQUEST__OP_FREE;
	q.free = &f;
	assert_true(vad__request__get_packed_size(&q) <= 4096);
	r = tc_call(c, &q);
	expect_ok(r, VAD__RESPONSE__RESULT_FREE);
	assert_int_equal(r->free->freed, n);
	done(r);
	free(offs);
	tc_free(c);
}

/* ---- tests: big batches and threads ------------------------------------------------------- */

static void test_full_batch(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "batch");
	uint64_t sizes[64];
	for (int i = 0; i < 64; i++)
		sizes[i] = 4096 * (uint64_t)(1 + i % 7);
	Vad__Response *r = do_alloc(c, NULL, 0, 0, 0, sizes, 64);
	expect_ok(r, VAD__RESPONSE__RESULT_ALLOC);
	assert_int_equal(r->alloc->n_offsets, 64);
	uint64_t offs[64];
	memcpy(offs, r->alloc->offsets, sizeof(offs));
	done(r);
	check_consistent();
	r = do_free(c, NULL, offs, 64);
	expect_ok(r, VAD__RESPONSE__RESULT_FREE);
	assert_int_equal(r->free->freed, 64);
	done(r);
	assert_int_equal(held_bytes(c), 0);
	tc_free(c);
}

struct thread_arg {
	unsigned index;
	unsigned rounds;
	char shared_token[33];
	int failures;
};

/* Up to 8 offsets of a session's holds, gathered by collect_offset. */
struct first_offsets {
	uint64_t offs[8];
	size_t k;
};

static void collect_offset(void *ctx, const struct vad_hold *o)
{
	struct first_offsets *got = ctx;
	if (got->k < 8)
		got->offs[got->k++] = o->offset;
}
static void *session_thread(void *p)
{
	struct thread_arg *t = p;
	struct vad_peer peer = {.pid = 1, .uid = 1000 + t->index, .gid = 1000};
	struct vad_session *s = vad_session_new(fx->svc, &peer);
	if (!s) {
		t->failures++;
		return NULL;
	}
	uint8_t buf[512];
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = (char *)"thread";
	h.version = VAD_PROTOCOL_VERSION;
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_HELLO;
	q.hello = &h;
	size_t n = vad_frame_encode_request(&q, buf, sizeof(buf));
	vad_session_feed(s, buf, n);
	for (unsigned i = 0; i < t->rounds; i++) {
		/* Pipeline: alloc, attach the common token, then drain and free what we got. */
		Vad__Alloc a = VAD__ALLOC__INIT;
		a.arena = (char *)"";
		a.size = 4096 * (1 + (i + t->index) % 5);
		a.count = 1 + i % 3;
		Vad__Attach at = VAD__ATTACH__INIT;
		at.token = t->shared_token;
		Vad__Request qa = VAD__REQUEST__INIT, qt = VAD__REQUEST__INIT;
		qa.op_case = VAD__REQUEST__OP_ALLOC;
		qa.alloc = &a;
		qt.op_case = VAD__REQUEST__OP_ATTACH;
		qt.attach = &at;
		n = vad_frame_encode_request(&qa, buf, sizeof(buf));
		n += vad_frame_encode_request(&qt, buf + n, sizeof(buf) - n);
		vad_session_feed(s, buf, n);
		vad_session_output_done(s, vad_session_output_pending(s));
		struct first_offsets got = {.k = 0};
		vad_holder_for_each(&s->holder, collect_offset, &got);
		uint64_t *offs = got.offs;
		size_t k = got.k;
		Vad__Free f = VAD__FREE__INIT;
		f.arena = (char *)"";
		f.offsets = offs;
		f.n_offsets = k;
		Vad__Request qf = VAD__REQUEST__INIT;
		qf.op_case = VAD__REQUEST__OP_FREE;
		qf.free = &f;
		n = vad_frame_encode_request(&qf, buf, sizeof(buf));
		vad_session_feed(s, buf, n);
		vad_session_output_done(s, vad_session_output_pending(s));
	}
	vad_session_free(s); /* whatever is left is dropped here */
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	const char *mode = getenv("VAD_TEST_MODE");
	unsigned rounds = (mode && strcmp(mode, "normal") != 0) ? 200 : 2000;
	struct tclient *owner = tc_hello(1000, 1000, "owner");
	uint64_t off = alloc_one(owner, NULL, 8192);
	char tok[33];
	share_ok(owner, NULL, off, tok);

	enum { N = 4 };
	pthread_t th[N];
	struct thread_arg args[N];
	for (unsigned i = 0; i < N; i++) {
		memset(&args[i], 0, sizeof(args[i]));
		args[i].index = i;
		args[i].rounds = rounds;
		memcpy(args[i].shared_token, tok, 33);
		assert_int_equal(pthread_create(&th[i], NULL, session_thread, &args[i]), 0);
	}
	/* Meanwhile the consistency check runs against moving state. */
	for (int i = 0; i < 20; i++)
		check_consistent();
	for (unsigned i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
	check_consistent();
	assert_int_equal(held_bytes(owner), 8192);
	assert_int_equal(busy_bytes(0), 8192);
	free_ok(owner, NULL, off);
	assert_int_equal(busy_bytes(0), 0);
	tc_free(owner);
}

/* ---- tests: rate limits and the event queue ---------------------------------------------- */

static void test_rate_bucket(void **state)
{
	(void)state;
	struct vad_rate b = {0};
	uint64_t t = 5000, span;
	for (unsigned i = 0; i < VAD_RATE_BURST; i++)
		assert_true(vad_rate_take(&b, t));
	assert_false(vad_rate_take(&b, t));
	assert_false(vad_rate_take(&b, t + VAD_RATE_PERIOD_MS - 1));
	assert_true(vad_rate_take(&b, t + VAD_RATE_PERIOD_MS)); /* one more per period */
	assert_false(vad_rate_take(&b, t + VAD_RATE_PERIOD_MS));
	assert_int_equal(3, vad_rate_collect(&b, t + 2 * VAD_RATE_PERIOD_MS, &span));
	assert_int_equal(2 * VAD_RATE_PERIOD_MS, span); /* from the first one suppressed */
	assert_int_equal(0, vad_rate_collect(&b, t + 2 * VAD_RATE_PERIOD_MS, &span));
	/* A long pause refills the burst, never more. */
	t += 1000 * VAD_RATE_PERIOD_MS;
	for (unsigned i = 0; i < VAD_RATE_BURST; i++)
		assert_true(vad_rate_take(&b, t));
	assert_false(vad_rate_take(&b, t));
	/* A clock that seems to go back gives nothing. */
	assert_false(vad_rate_take(&b, t - 5 * VAD_RATE_PERIOD_MS));
}

/* Count the queued events of kind (every one if kind is NULL), taking them all. */
static unsigned take_count(const char *kind, char *detail, size_t len)
{
	struct vad_event *ev = vad_service_take_events(fx->svc);
	unsigned n = 0;
	for (struct vad_event *e = ev; e; e = e->next) {
		if (kind && strcmp(e->kind, kind) != 0)
			continue;
		n++;
		if (detail && e->detail)
			snprintf(detail, len, "%s", e->detail);
	}
	vad_events_free(ev);
	return n;
}

static void test_event_queue_keeps_daemon_events(void **state)
{
	(void)state;
	take_count(NULL, NULL, 0);
	vad_service_event(fx->svc, "reload", "first");
	for (unsigned i = 0; i < 4 * VAD_EVENTS_CLIENT_MAX; i++)
		vad_service_client_event(fx->svc, "alloc-failed", "client");
	vad_service_event(fx->svc, "stop", NULL);
	struct vad_event *ev = vad_service_take_events(fx->svc);
	unsigned daemon = 0, client = 0, dropped_rows = 0;
	for (struct vad_event *e = ev; e; e = e->next) {
		if (strcmp(e->kind, "events-dropped") == 0) {
			dropped_rows++;
			assert_non_null(e->detail);
			assert_int_equal(3 * VAD_EVENTS_CLIENT_MAX, strtoull(e->detail, NULL, 10));
		} else if (e->client) {
			client++;
		} else {
			daemon++;
		}
	}
	vad_events_free(ev);
	assert_int_equal(2, daemon);
	assert_int_equal(VAD_EVENTS_CLIENT_MAX, client);
	assert_int_equal(1, dropped_rows);
	assert_int_equal(0, take_count(NULL, NULL, 0)); /* counted once */

	/* Daemon events only push out daemon events, oldest first. */
	for (unsigned i = 0; i < 10; i++)
		vad_service_client_event(fx->svc, "alloc-failed", "client");
	for (unsigned i = 0; i < VAD_EVENTS_DAEMON_MAX + 5; i++) {
		char d[16];
		snprintf(d, sizeof(d), "%u", i);
		vad_service_event(fx->svc, "reload", d);
	}
	ev = vad_service_take_events(fx->svc);
	daemon = client = 0;
	const char *oldest = NULL;
	for (struct vad_event *e = ev; e; e = e->next) {
		if (e->client) {
			client++;
		} else {
			if (!oldest)
				oldest = e->detail;
			daemon++;
		}
	}
	assert_int_equal(10, client);
	assert_int_equal(VAD_EVENTS_DAEMON_MAX, daemon);
	assert_string_equal("5", oldest);
	vad_events_free(ev);
	/* The tail still works after the oldest went. */
	vad_service_event(fx->svc, "stop", NULL);
	assert_int_equal(1, take_count("stop", NULL, 0));
}

/* A session's failing allocations: a burst of events, then a count when it ends. */
static void test_session_events_rate_limited(void **state)
{
	(void)state;
	struct tclient *c = tc_hello(1000, 1000, "noisy");
	take_count(NULL, NULL, 0);
	unsigned n = 100;
	for (unsigned i = 0; i < n; i++)
		done(expect_error(do_alloc(c, NULL, DEFAULT_SIZE, 0, 2, NULL, 0),
				  VAD__ERROR__ESIZE));
	/* Whole-arena pairs are refused before the allocator: no events; ENOSPC makes them. */
	assert_int_equal(0, take_count(NULL, NULL, 0));
	uint64_t off = alloc_one(c, NULL, DEFAULT_SIZE);
	uint64_t t0 = vad_rate_now_ms();
	for (unsigned i = 0; i < n; i++)
		done(expect_error(do_alloc(c, NULL, 4096, 0, 0, NULL, 0), VAD__ERROR__ENOSPC));
	uint64_t refills = (vad_rate_now_ms() - t0) / VAD_RATE_PERIOD_MS + 1;
	unsigned passed = take_count("alloc-failed", NULL, 0);
	assert_true(passed >= VAD_RATE_BURST);
	assert_true(passed <= VAD_RATE_BURST + refills); /* a slow machine refills a few */
	free_ok(c, NULL, off);
	tc_free(c);
	char detail[512] = "";
	assert_int_equal(1, take_count("rate-limited", detail, sizeof(detail)));
	char want[64];
	snprintf(want, sizeof(want), "%u events suppressed", n - passed);
	if (!strstr(detail, want) || !strstr(detail, "'noisy', uid 1000"))
		fail_msg("rate-limited event \"%s\" does not say \"%s\"", detail, want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hello_first, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_alloc_free, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_alloc_errors, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_free_batch_and_errors, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_share_attach_refcount, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_share_attach_errors, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_share_options, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_dead_tokens_bounded, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_guessing_pauses_then_closes, setup_plain,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_free_batch_chunks, setup_small_frame, teardown),
	    cmocka_unit_test_setup_teardown(test_disconnect_drops_references, setup_plain,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_disconnect_many, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_check_detects_corruption, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_quotas, setup_quota, teardown),
	    cmocka_unit_test_setup_teardown(test_map_arena_fd, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_map_arena_fd_budget, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_reader_session, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_stats_and_arenas, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_admin_refused, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_admin_ops, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_walk, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_reload, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed_frames, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_large_frame, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_backpressure, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_full_batch, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_batch_fits_max_frame, setup_small_frame, teardown),
	    cmocka_unit_test_setup_teardown(test_threads, setup_plain, teardown),
	    cmocka_unit_test(test_rate_bucket),
	    cmocka_unit_test_setup_teardown(test_event_queue_keeps_daemon_events, setup_plain,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_session_events_rate_limited, setup_plain,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
