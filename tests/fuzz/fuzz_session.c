/*
 * fuzz_session.c - libFuzzer target for the request handler: a few sessions of one real
 * service (two sealed memfd arenas, their allocators, the registry) fed arbitrary byte
 * streams cut into chunks at arbitrary points, interleaved with reads of the replies,
 * attaches to tokens seen in replies, disconnects and purges (see session_script.h).
 *
 * What must hold, checked after every input (a failure aborts, which libFuzzer reports):
 * every reply frame decodes and every error carries a sentence; fds only travel with
 * MapArena replies and are arena fds; the registry and each allocator pass their own
 * consistency checks; and once every session is closed nothing is held: no reference, no
 * token, no holder, no per-uid usage, no busy range in any allocator. Leaks of
 * heap memory are LeakSanitizer's to find.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "frame.h"
#include "log.h"
#include "registry.h"
#include "service.h"
#include "session.h"
#include "session_script.h"

#define N_TOKENS       8
#define CLIENT_BUF_MAX (8u << 20) /* replies a fake client keeps unparsed, at most */
#define MID_CHECKS     4	  /* FS_CHECK steps honoured per input (va_check walks it all) */

/* The client end of one session: reply bytes read but not yet parsed. */
struct fake_client {
	struct vad_session *s;
	unsigned peer;
	uint8_t *buf;
	size_t len, cap;
	size_t fds; /* fds received with reply bytes whose frame is not parsed yet */
};

static struct vad_service *svc;
static struct vad_config cfg;
static char conf_path[64];
static struct fake_client clients[FS_SESSIONS];
static char tokens[N_TOKENS][VAD_TOKEN_CHARS + 1];
static unsigned n_tokens_seen;

static const char conf_text[] = "[vad]\n"
				"nodes = 2\n"
				"lazy_max = 1M\n"
				"max_batch = 64\n"
				"quota_client = 6M\n"
				"quota_uid = 10M\n"
				"admin_group = 4242\n"
				"log_level = err\n"
				"[arena default]\n"
				"size = 16M\n"
				"[arena private]\n"
				"size = 4M\n"
				"quantum = 8K\n"
				"allow_uids = 12345\n";

static void die(const char *fmt, const char *detail)
{
	fprintf(stderr, "fuzz_session: ");
	fprintf(stderr, fmt, detail);
	fputc('\n', stderr);
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	vad_log_set_level(VAD_LOG_ERR);
	const char *tmp = getenv("TMPDIR");
	snprintf(conf_path, sizeof(conf_path), "%s/fuzz_session.XXXXXX",
		 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	int fd = mkstemp(conf_path);
	if (fd < 0 || write(fd, conf_text, sizeof(conf_text) - 1) != sizeof(conf_text) - 1)
		die("cannot write the config %s", conf_path);
	close(fd);
	char err[512];
	if (vad_config_load(conf_path, &cfg, err, sizeof(err)) != 0)
		die("config: %s", err);
	struct vad_arena **arenas = calloc(cfg.n_arenas, sizeof(*arenas));
	if (!arenas)
		die("%s", "out of memory");
	for (size_t i = 0; i < cfg.n_arenas; i++)
		if (vad_arena_open(&cfg.arenas[i], &cfg, (unsigned)i, &arenas[i], err,
				   sizeof(err)) != 0)
			die("arena: %s", err);
	if (vad_service_create(&cfg, arenas, cfg.n_arenas, &svc, err, sizeof(err)) != 0)
		die("service: %s", err);
	/* Reload re-reads the same file: it must stay there for the whole run. */
	return 0;
}

static void open_session(struct fake_client *c, unsigned peer)
{
	static const gid_t admin_groups[] = {FS_GID_ADMIN};
	struct vad_peer p = {.pid = 1000 + (pid_t)peer, .uid = 0, .gid = 0};
	switch (peer % FS_PEERS) {
	case 0:
		break;
	case 1:
		p.uid = p.gid = FS_UID_PLAIN;
		break;
	case 2:
		p.uid = p.gid = FS_UID_PRIVATE;
		break;
	default:
		p.uid = p.gid = FS_UID_PLAIN + 1;
		p.groups = (gid_t *)admin_groups;
		p.n_groups = 1;
		break;
	}
	c->s = vad_session_new(svc, &p);
	if (!c->s)
		die("%s", "vad_session_new failed");
	c->peer = peer;
	c->len = 0;
	c->fds = 0;
}

static void close_session(struct fake_client *c)
{
	vad_session_free(c->s);
	c->s = NULL;
	c->len = 0;
}

static bool is_arena_fd(int fd)
{
	for (size_t i = 0; i < svc->n_arenas; i++)
		if (svc->arenas[i]->fd == fd)
			return true;
	return false;
}

/* Parse every whole reply frame in the client buffer. */
static void parse_replies(struct fake_client *c)
{
	size_t pos = 0;
	while (c->len > pos) {
		size_t plen;
		enum vad_frame_status st =
		    vad_frame_peek(c->buf + pos, c->len - pos, 1u << 30, &plen);
		if (st == VAD_FRAME_NEED_MORE)
			break;
		if (st != VAD_FRAME_READY)
			die("%s", "the daemon wrote an empty or absurd frame header");
		Vad__Response *resp =
		    vad__response__unpack(NULL, plen, c->buf + pos + VAD_FRAME_HEADER);
		if (!resp)
			die("%s", "the daemon wrote a reply that does not decode");
		if (resp->error != VAD__ERROR__OK && (!resp->message || !resp->message[0]))
			die("%s", "an error reply without a sentence");
		if (resp->result_case == VAD__RESPONSE__RESULT_MAP_ARENA) {
			if (c->fds == 0)
				die("%s", "a MapArena reply without its fd");
			c->fds--;
		}
		if (resp->result_case == VAD__RESPONSE__RESULT_SHARE && resp->share->token) {
			if (strlen(resp->share->token) != VAD_TOKEN_CHARS)
				die("share token of the wrong length: %s", resp->share->token);
			memcpy(tokens[n_tokens_seen % N_TOKENS], resp->share->token,
			       VAD_TOKEN_CHARS + 1);
			n_tokens_seen++;
		}
		vad__response__free_unpacked(resp, NULL);
		pos += VAD_FRAME_HEADER + plen;
	}
	if (pos) {
		memmove(c->buf, c->buf + pos, c->len - pos);
		c->len -= pos;
	}
	if (c->len == 0 && c->fds)
		die("%s", "an fd travelled with a reply that is not MapArena");
}

/* The client reads up to max reply bytes. */
static void drain(struct fake_client *c, size_t max)
{
	const uint8_t *data;
	size_t len;
	int fd;
	while (max && vad_session_next_output(c->s, &data, &len, &fd)) {
		if (len > max)
			len = max;
		if (fd >= 0) {
			if (!is_arena_fd(fd))
				die("%s", "an fd that is not an arena's travelled with a reply");
			c->fds++;
		}
		if (c->len + len > c->cap) {
			size_t cap = c->cap ? c->cap : 4096;
			while (cap < c->len + len)
				cap *= 2;
			uint8_t *n = realloc(c->buf, cap);
			if (!n)
				die("%s", "out of memory");
			c->buf = n;
			c->cap = cap;
		}
		memcpy(c->buf + c->len, data, len);
		c->len += len;
		vad_session_output_done(c->s, len);
		max -= len;
	}
	parse_replies(c);
	if (c->len > CLIENT_BUF_MAX)
		die("%s", "a reply frame larger than any reply can be");
	/* The server closes a broken connection once its last replies are out. */
	if (vad_session_closing(c->s) && vad_session_output_pending(c->s) == 0) {
		unsigned peer = c->peer;
		close_session(c);
		open_session(c, peer);
	}
}

/* Feed bytes the way the server does: whatever the session takes; when it stops taking
 * input because replies pile up, the client reads them and the rest goes in. */
static void feed(struct fake_client *c, const uint8_t *data, size_t len)
{
	while (len) {
		if (vad_session_paused(c->s))
			vad_session_resume(
			    c->s); /* a guesser's pause: the server's timer ends it */
		size_t n = vad_session_feed(c->s, data, len);
		data += n;
		len -= n;
		if (!len || vad_session_closing(c->s))
			return;
		if (vad_session_output_pending(c->s) == 0 && n == 0)
			die("%s", "the session refuses input with no output pending");
		drain(c, SIZE_MAX);
	}
}

static void feed_attach(struct fake_client *c, unsigned which)
{
	Vad__Request req = VAD__REQUEST__INIT;
	Vad__Attach at = VAD__ATTACH__INIT;
	char token[VAD_TOKEN_CHARS + 1] = "0123456789abcdefghijABCDEFGHIJxy";
	if (n_tokens_seen)
		memcpy(token, tokens[which % (n_tokens_seen < N_TOKENS ? n_tokens_seen : N_TOKENS)],
		       sizeof(token));
	at.token = token;
	req.id = 0xA77AC4;
	req.op_case = VAD__REQUEST__OP_ATTACH;
	req.attach = &at;
	uint8_t buf[128];
	size_t n = vad_frame_encode_request(&req, buf, sizeof(buf));
	if (!n)
		die("%s", "cannot encode an attach");
	feed(c, buf, n);
}

static void check_registry(const char *when)
{
	char msg[512];
	if (vad_registry_check(svc->reg, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "fuzz_session: %s: registry check failed:\n", when);
		die("%s", msg);
	}
}

static void check_all(const char *when)
{
	char msg[512];
	check_registry(when);
	for (size_t i = 0; i < svc->n_arenas; i++)
		if (va_check(svc->arenas[i]->vs, msg, sizeof(msg)) != 0) {
			fprintf(stderr, "fuzz_session: %s: va_check of arena %zu failed:\n", when,
				i);
			die("%s", msg);
		}
}

static void purge_all(void)
{
	for (size_t i = 0; i < svc->n_arenas; i++)
		va_drain(svc->arenas[i]->vs);
}

/* Nothing may be left once every session is gone. */
static void check_empty(void)
{
	struct vad_registry *reg = svc->reg;
	char what[160];
	if (__atomic_load_n(&reg->n_holders, __ATOMIC_RELAXED) != 0 || reg->holders)
		die("%s", "holders remain registered after every session closed");
	if (__atomic_load_n(&reg->n_tokens, __ATOMIC_RELAXED) != 0 || reg->tokens)
		die("%s", "share tokens outlive every session");
	if (reg->uids)
		die("%s", "per-uid usage entries outlive every session");
	for (size_t i = 0; i < reg->n_arenas; i++) {
		struct vad_registry_arena *ra = &reg->arenas[i];
		if (ra->refs || ra->ref_bytes) {
			snprintf(what, sizeof(what), "arena %zu: %llu refs, %llu bytes", i,
				 (unsigned long long)ra->refs, (unsigned long long)ra->ref_bytes);
			die("registry entries outlive every session: %s", what);
		}
		/* Ranges live only through holds and the allocator's busy areas now: no busy
		 * area may outlive the sessions. */
		struct va_stats st;
		va_get_stats(svc->arenas[i]->vs, &st);
		if (st.busy_bytes || st.busy_blocks) {
			snprintf(what, sizeof(what), "arena %zu: %llu busy bytes in %llu blocks", i,
				 (unsigned long long)st.busy_bytes,
				 (unsigned long long)st.busy_blocks);
			die("the allocator still has busy ranges: %s", what);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	n_tokens_seen = 0;
	unsigned checks = 0;
	for (unsigned i = 0; i < FS_SESSIONS; i++)
		open_session(&clients[i], i);

	size_t pos = 0;
	while (pos < size) {
		uint8_t ctl = data[pos++];
		struct fake_client *c = &clients[(ctl & 3) % FS_SESSIONS];
		unsigned arg = ctl >> 5;
		size_t n;
		switch ((ctl >> 2) & 7) {
		case FS_FEED:
			if (pos >= size)
				break;
			n = (size_t)data[pos++] + 1;
			if (n > size - pos)
				n = size - pos;
			feed(c, data + pos, n);
			pos += n;
			break;
		case FS_FEED_BIG:
			if (size - pos < 2) {
				pos = size;
				break;
			}
			n = ((size_t)data[pos] | (size_t)data[pos + 1] << 8) + 1;
			pos += 2;
			if (n > size - pos)
				n = size - pos;
			feed(c, data + pos, n);
			pos += n;
			break;
		case FS_DRAIN:
			drain(c, SIZE_MAX);
			break;
		case FS_DRAIN_SOME:
			drain(c, (arg + 1) * 61);
			break;
		case FS_ATTACH:
			feed_attach(c, arg);
			break;
		case FS_REOPEN:
			close_session(c);
			open_session(c, arg);
			break;
		case FS_PURGE:
			purge_all();
			break;
		case FS_CHECK:
			if (checks++ < MID_CHECKS)
				check_all("mid-script");
			break;
		}
	}

	for (unsigned i = 0; i < FS_SESSIONS; i++)
		drain(&clients[i], SIZE_MAX);
	check_registry("end of script");
	for (unsigned i = 0; i < FS_SESSIONS; i++) {
		close_session(&clients[i]);
		free(clients[i].buf);
		clients[i].buf = NULL;
		clients[i].cap = 0;
	}
	check_empty();
	/* Lazy and pooled ranges go back now, so inputs start from the same picture. */
	purge_all();
	check_all("after close");
	return 0;
}
