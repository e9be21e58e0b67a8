/*
 * daemon_raw.c - the raw-protocol load generator: requests encoded with protobuf-c, P in
 * flight per connection, written in one send per round and read in large reads, so the
 * client costs as little as it can and the figures are the daemon's.
 *
 * Each connection keeps a ring of P slots in the order they were sent (the daemon answers a
 * connection's requests in order). A slot alternates: alloc of B ranges, then free of the
 * ranges its alloc got; each slot refills as its reply comes (a window), or with --burst all P
 * refill together once the last reply is in, as redis-benchmark -P does. A driver that owns
 * one connection uses blocking reads; one that owns
 * several multiplexes them with epoll (level-triggered), like redis-benchmark.
 *
 * With --resp (DB_RESP) the same loops speak Redis's protocol instead: every request is
 * redis-benchmark -t set's "SET key:__rand_int__ xxx", so a Redis server is measured by the
 * very client that measures vad (the same stamping, loop and histogram).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon_bench.h"
#include "fdpass.h"
#include "frame.h"
#include "vad.pb-c.h"

#define IN_CAP	     (256u * 1024u)
#define DECODE_ARENA (256u * 1024u) /* a reply of 1024 ranges decodes into ~20 KiB */
#define DRAIN_NS     (5ull * 1000000000ull)

/* A bump allocator for protobuf-c decoding, reset after every reply: no malloc per reply. */
struct bump {
	ProtobufCAllocator pb;
	uint8_t *buf;
	size_t used, cap;
};

static void *bump_alloc(void *ctx, size_t len)
{
	struct bump *b = ctx;
	size_t need = (len + 15) & ~(size_t)15;
	if (need > b->cap - b->used)
		return NULL;
	void *p = b->buf + b->used;
	b->used += need;
	return p;
}

static void bump_free(void *ctx, void *ptr)
{
	(void)ctx;
	(void)ptr;
}

struct slot {
	uint64_t id;
	uint64_t t0;
	bool is_alloc;
	unsigned n;	   /* ranges this request carries (alloc: asked; free: offsets) */
	uint64_t *offsets; /* batch capacity */
};

struct rconn {
	int fd;
	struct slot *slots;
	unsigned head, inflight, unstamped;
	uint64_t next_id, issued;
	uint64_t rng;
	uint8_t *in;
	size_t in_len;
	uint8_t *out;
	size_t out_len, out_off, out_cap;
	bool want_out, done;
	uint8_t *map;
	uint64_t map_size;
};

struct rdriver {
	struct db_driver *d;
	const struct db_params *p;
	struct rconn *conns;
	unsigned n;
	struct bump bump;
	uint64_t *sizes; /* scratch for random batches */
	bool stopping;
	uint64_t deadline;
	uint64_t last_reply;
};

/* Who is at the other end, for messages: vad, or the Redis server of --resp. */
static const char *peer(const struct rdriver *rd)
{
	return rd->p->mode == DB_RESP ? "the server" : "the daemon";
}

/* ---- encoding ----------------------------------------------------------------------------- */

static int out_reserve(struct rconn *c, size_t need)
{
	if (c->out_cap - c->out_len >= need)
		return 0;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		if (c->out_cap - c->out_len >= need)
			return 0;
	}
	size_t cap = c->out_cap ? c->out_cap : 4096;
	while (cap - c->out_len < need)
		cap *= 2;
	uint8_t *n = realloc(c->out, cap);
	if (!n)
		return -1;
	c->out = n;
	c->out_cap = cap;
	return 0;
}

static int put_request(struct rconn *c, Vad__Request *req)
{
	size_t len = vad__request__get_packed_size(req);
	if (out_reserve(c, VAD_FRAME_HEADER + len) < 0)
		return -1;
	vad_frame_put_header(c->out + c->out_len, (uint32_t)len);
	vad__request__pack(req, c->out + c->out_len + VAD_FRAME_HEADER);
	c->out_len += VAD_FRAME_HEADER + len;
	return 0;
}

/* Fill the alloc request of one slot (sizes come from the shape). */
static void build_alloc(struct rdriver *rd, struct rconn *c, Vad__Alloc *a)
{
	const struct db_params *p = rd->p;
	uint64_t size, align;
	vad__alloc__init(a);
	a->arena = (char *)p->arena;
	p->shape->next(p->unit, &c->rng, &size, &align);
	a->align = align;
	if (p->shape->next == db_shapes[0]->next) { /* fix_size: count, no list */
		a->size = size;
		a->count = p->batch > 1 ? p->batch : 0;
		return;
	}
	if (p->batch == 1) {
		a->size = size;
		return;
	}
	rd->sizes[0] = size;
	for (unsigned i = 1; i < p->batch; i++)
		p->shape->next(p->unit, &c->rng, &rd->sizes[i], &align);
	a->n_sizes = p->batch;
	a->sizes = rd->sizes;
}

/* redis-benchmark -t set's request with its defaults (no -r: one key; -d 3). */
static const char resp_set[] = "*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nxxx\r\n";

/* Append a SET (one range's worth of work); -1 when out of memory. */
static int put_resp_set(struct rconn *c)
{
	if (out_reserve(c, sizeof(resp_set) - 1) < 0)
		return -1;
	memcpy(c->out + c->out_len, resp_set, sizeof(resp_set) - 1);
	c->out_len += sizeof(resp_set) - 1;
	return 0;
}

/* Append the slot's next request (alloc, or free of what its alloc got) at the ring's tail. */
static int issue(struct rdriver *rd, struct rconn *c, bool alloc)
{
	const struct db_params *p = rd->p;
	unsigned P = p->pipeline;
	struct slot *s = &c->slots[(c->head + c->inflight) % P];
	Vad__Request req = VAD__REQUEST__INIT;
	Vad__Alloc a;
	Vad__Free f = VAD__FREE__INIT;
	int rc;
	req.id = ++c->next_id;
	if (p->mode == DB_RESP) {
		/* Every request a SET; "not an alloc", so the slot's next one is a SET too. */
		alloc = false;
		s->n = 1;
		rc = put_resp_set(c);
	} else {
		if (alloc) {
			build_alloc(rd, c, &a);
			req.op_case = VAD__REQUEST__OP_ALLOC;
			req.alloc = &a;
			s->n = p->batch;
		} else {
			f.arena = (char *)p->arena;
			f.n_offsets = s->n;
			f.offsets = s->offsets;
			req.op_case = VAD__REQUEST__OP_FREE;
			req.free = &f;
		}
		rc = put_request(c, &req);
	}
	if (rc < 0)
		return -1;
	s->id = req.id;
	s->is_alloc = alloc;
	c->inflight++;
	c->unstamped++;
	c->issued++;
	return 0;
}

static bool may_issue(const struct rdriver *rd, const struct rconn *c)
{
	if (rd->stopping)
		return false;
	return rd->p->ops == 0 || c->issued < rd->p->ops;
}

/* ---- sending -------------------------------------------------------------------------------- */

/* Stamp what was appended since the last send with the send time. */
static void stamp(struct rdriver *rd, struct rconn *c, uint64_t now)
{
	unsigned P = rd->p->pipeline;
	for (unsigned k = c->inflight - c->unstamped; k < c->inflight; k++)
		c->slots[(c->head + k) % P].t0 = now;
	c->unstamped = 0;
}

/* Send pending output. blocking: until all is sent; else until EAGAIN. -1 on failure. */
static int flush(struct rdriver *rd, struct rconn *c, bool blocking)
{
	if (c->unstamped)
		stamp(rd, c, db_now_ns());
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | (blocking ? 0 : MSG_DONTWAIT));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (!blocking && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			db_fail(&rd->d->r, "send to %s failed: %s", peer(rd), strerror(errno));
			return -1;
		}
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

/* ---- replies -------------------------------------------------------------------------------- */

static void touch(struct rconn *c, uint64_t off, uint64_t size)
{
	if (off > c->map_size || size > c->map_size - off)
		return;
	for (uint64_t o = 0; o < size; o += 4096)
		c->map[off + o] = 1;
}

/* Burst pipelining (redis-benchmark's -P): once all P replies are in, send every slot's
 * next request together: a free of what its alloc got, or a new alloc. */
static int refill_burst(struct rdriver *rd, struct rconn *c)
{
	unsigned P = rd->p->pipeline;
	for (unsigned k = 0; k < P; k++) {
		struct slot *src = &c->slots[(c->head + k) % P];
		bool alloc = !src->is_alloc;
		if (alloc && !may_issue(rd, c))
			continue;
		/* A skipped slot shifts the tail: the free takes its offsets along. */
		struct slot *t = &c->slots[(c->head + c->inflight) % P];
		if (!alloc && t != src) {
			memcpy(t->offsets, src->offsets, src->n * sizeof(uint64_t));
			t->n = src->n;
			src->is_alloc = false; /* its ranges are t's to free now */
		}
		if (issue(rd, c, alloc) < 0) {
			db_fail(&rd->d->r, "out of memory");
			return -1;
		}
	}
	return 0;
}

static int retire(struct rdriver *rd, struct rconn *c, uint64_t now, uint64_t lat);

/* Round trip of the request at the ring's head answered at now, or UINT64_MAX when the
 * answer came after the measured window (not counted). */
static uint64_t reply_latency(const struct rdriver *rd, const struct rconn *c, uint64_t now)
{
	if (!rd->p->ops && now > rd->deadline)
		return UINT64_MAX;
	return now - c->slots[c->head].t0;
}

/* Handle one reply frame of c at time now. -1 stops the driver (failure recorded). */
static int on_reply(struct rdriver *rd, struct rconn *c, const uint8_t *payload, size_t len,
		    uint64_t now)
{
	struct db_result *r = &rd->d->r;
	struct slot *s = &c->slots[c->head];
	rd->bump.used = 0;
	Vad__Response *resp = vad__response__unpack(&rd->bump.pb, len, payload);
	if (!resp) {
		db_fail(r, "undecodable reply of %zu bytes", len);
		return -1;
	}
	if (resp->id != s->id) {
		db_fail(r, "reply id %llu, expected %llu (replies out of order)",
			(unsigned long long)resp->id, (unsigned long long)s->id);
		return -1;
	}
	if (resp->error != VAD__ERROR__OK) {
		r->errors++;
		db_fail(r, "the daemon answered %s with error %d: %s",
			s->is_alloc ? "alloc" : "free", (int)resp->error, resp->message);
		return -1;
	}
	uint64_t lat = reply_latency(rd, c, now);
	if (s->is_alloc) {
		if (resp->result_case != VAD__RESPONSE__RESULT_ALLOC ||
		    resp->alloc->n_offsets != s->n) {
			db_fail(r, "alloc reply of kind %d with %zu offsets for %u asked",
				(int)resp->result_case,
				resp->result_case == VAD__RESPONSE__RESULT_ALLOC
				    ? resp->alloc->n_offsets
				    : 0,
				s->n);
			return -1;
		}
		memcpy(s->offsets, resp->alloc->offsets, s->n * sizeof(uint64_t));
		if (c->map && resp->alloc->n_sizes == s->n)
			for (unsigned i = 0; i < s->n; i++)
				touch(c, s->offsets[i], resp->alloc->sizes[i]);
		if (lat != UINT64_MAX) {
			db_hist_add(&r->alloc_lat, lat);
			r->allocs++;
			if (!r->resp_bytes)
				r->resp_bytes = len + VAD_FRAME_HEADER;
		}
	} else if (resp->result_case != VAD__RESPONSE__RESULT_FREE || resp->free->freed != s->n) {
		db_fail(r, "free reply of kind %d freed %u of %u", (int)resp->result_case,
			resp->result_case == VAD__RESPONSE__RESULT_FREE ? resp->free->freed : 0,
			s->n);
		return -1;
	}
	return retire(rd, c, now, lat);
}

/* The request at the ring's head is answered (lat UINT64_MAX: after the measured window):
 * count it, then send what comes next. */
static int retire(struct rdriver *rd, struct rconn *c, uint64_t now, uint64_t lat)
{
	struct db_result *r = &rd->d->r;
	const struct db_params *p = rd->p;
	unsigned P = p->pipeline;
	struct slot *s = &c->slots[c->head];
	if (lat != UINT64_MAX) {
		db_hist_add(&r->all_lat, lat);
		r->requests++;
		r->items += s->n;
		rd->last_reply = now;
	}
	bool was_alloc = s->is_alloc;
	c->head = (c->head + 1) % P;
	c->inflight--;
	if (p->burst)
		return c->inflight ? 0 : refill_burst(rd, c);
	/* The next request goes at the tail; with fewer than P in flight (the end of a run)
	 * that is not this slot, so the free takes the offsets along. */
	struct slot *t = &c->slots[(c->head + c->inflight) % P];
	if (was_alloc && t != s) {
		memcpy(t->offsets, s->offsets, s->n * sizeof(uint64_t));
		t->n = s->n;
	}
	if (was_alloc) {
		/* The ranges are held: free them even when stopping, so the daemon ends clean. */
		return issue(rd, c, false) < 0 ? (db_fail(r, "out of memory"), -1) : 0;
	}
	if (may_issue(rd, c) && issue(rd, c, true) < 0) {
		db_fail(r, "out of memory");
		return -1;
	}
	return 0;
}

/* Handle one Redis reply line (line_len bytes, without its CRLF) to the SET at the head. */
static int on_resp_reply(struct rdriver *rd, struct rconn *c, const uint8_t *line, size_t line_len,
			 uint64_t now)
{
	struct db_result *r = &rd->d->r;
	if (line_len != 3 || memcmp(line, "+OK", 3) != 0) {
		if (line_len && line[0] == '-')
			r->errors++;
		db_fail(r, "SET answered \"%.*s\", not +OK", (int)(line_len > 200 ? 200 : line_len),
			(const char *)line);
		return -1;
	}
	uint64_t lat = reply_latency(rd, c, now);
	if (lat != UINT64_MAX) {
		db_hist_add(&r->alloc_lat, lat);
		r->allocs++;
		r->resp_bytes = 5;
	}
	return retire(rd, c, now, lat);
}

/* Position after the next whole reply in c's input from pos (*len: its payload, without a
 * frame header or CRLF), 0 when it is not all there yet, SIZE_MAX when the framing broke. */
static size_t next_reply(struct rdriver *rd, struct rconn *c, size_t pos, size_t *len)
{
	if (rd->p->mode == DB_RESP) {
		const uint8_t *nl = memchr(c->in + pos, '\n', c->in_len - pos);
		if (!nl)
			return 0;
		size_t end = (size_t)(nl - c->in) + 1;
		*len = end - pos - (end - pos >= 2 && nl[-1] == '\r' ? 2 : 1);
		return end;
	}
	size_t plen;
	enum vad_frame_status st =
	    vad_frame_peek(c->in + pos, c->in_len - pos, IN_CAP - VAD_FRAME_HEADER, &plen);
	if (st == VAD_FRAME_NEED_MORE)
		return 0;
	if (st != VAD_FRAME_READY)
		return SIZE_MAX;
	*len = plen;
	return pos + VAD_FRAME_HEADER + plen;
}

/* Handle every whole reply in c's input. */
static int process_input(struct rdriver *rd, struct rconn *c, uint64_t now)
{
	size_t pos = 0;
	for (;;) {
		size_t len = 0;
		size_t end = next_reply(rd, c, pos, &len);
		if (end == SIZE_MAX) {
			db_fail(&rd->d->r, "broken framing from the daemon");
			return -1;
		}
		if (!end && c->in_len - pos == IN_CAP) {
			db_fail(&rd->d->r, "a reply longer than %u bytes", IN_CAP);
			return -1;
		}
		if (!end)
			break;
		if (!c->inflight) {
			db_fail(&rd->d->r, "a reply (%zu bytes) arrived with no request in flight",
				len);
			return -1;
		}
		int rc = rd->p->mode == DB_RESP ? on_resp_reply(rd, c, c->in + pos, len, now)
						: on_reply(rd, c, c->in + end - len, len, now);
		if (rc < 0)
			return -1;
		pos = end;
	}
	if (pos) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
	if (!c->inflight)
		c->done = true;
	return 0;
}

/* One read into c's input; 1 if bytes came, 0 on EAGAIN, -1 on failure or end of stream. */
static int read_some(struct rdriver *rd, struct rconn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
		if (n > 0) {
			c->in_len += (size_t)n;
			return 1;
		}
		if (n == 0) {
			db_fail(&rd->d->r, "%s closed the connection", peer(rd));
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		db_fail(&rd->d->r, "read from %s failed: %s", peer(rd), strerror(errno));
		return -1;
	}
}

/* ---- setup ---------------------------------------------------------------------------------- */

/* Send req and wait for its reply (blocking), collecting a passed fd. */
static Vad__Response *sync_call(struct rdriver *rd, struct rconn *c, Vad__Request *req, int *fd)
{
	req->id = ++c->next_id;
	if (put_request(c, req) < 0 || flush(rd, c, true) < 0)
		return NULL;
	for (;;) {
		size_t plen;
		if (vad_frame_peek(c->in, c->in_len, IN_CAP - VAD_FRAME_HEADER, &plen) ==
		    VAD_FRAME_READY) {
			rd->bump.used = 0;
			Vad__Response *resp =
			    vad__response__unpack(&rd->bump.pb, plen, c->in + VAD_FRAME_HEADER);
			memmove(c->in, c->in + VAD_FRAME_HEADER + plen,
				c->in_len - VAD_FRAME_HEADER - plen);
			c->in_len -= VAD_FRAME_HEADER + plen;
			if (!resp)
				db_fail(&rd->d->r, "undecodable reply during setup");
			return resp;
		}
		int fds[4];
		size_t nfds = 0;
		ssize_t n =
		    vad_recv_with_fds(c->fd, c->in + c->in_len, IN_CAP - c->in_len, fds, 4, &nfds);
		for (size_t i = 0; i < nfds; i++) {
			if (fd && *fd < 0)
				*fd = fds[i];
			else
				close(fds[i]);
		}
		if (n <= 0) {
			db_fail(&rd->d->r, "the daemon closed the connection during setup%s%s",
				n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
			return NULL;
		}
		c->in_len += (size_t)n;
	}
}

static int conn_open(struct rdriver *rd, struct rconn *c, unsigned index)
{
	const struct db_params *p = rd->p;
	struct db_result *r = &rd->d->r;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	c->fd = -1;
	c->rng = p->seed * 0x9e3779b97f4a7c15ull + index + 1;
	c->in = malloc(IN_CAP);
	c->slots = calloc(p->pipeline, sizeof(*c->slots));
	if (!c->in || !c->slots) {
		db_fail(r, "out of memory");
		return -1;
	}
	for (unsigned i = 0; i < p->pipeline; i++) {
		c->slots[i].offsets = calloc(p->batch, sizeof(uint64_t));
		if (!c->slots[i].offsets) {
			db_fail(r, "out of memory");
			return -1;
		}
	}
	if (strlen(p->socket) >= sizeof(sa.sun_path)) {
		db_fail(r, "socket path too long: %s", p->socket);
		return -1;
	}
	strcpy(sa.sun_path, p->socket);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		db_fail(r, "cannot connect to %s: %s", p->socket, strerror(errno));
		return -1;
	}
	if (p->mode == DB_RESP)
		return 0; /* Redis: nothing to say before the first SET */
	Vad__Request req = VAD__REQUEST__INIT;
	Vad__Hello hello = VAD__HELLO__INIT;
	hello.name = (char *)"vabench";
	hello.version = VAD_PROTOCOL_VERSION;
	req.op_case = VAD__REQUEST__OP_HELLO;
	req.hello = &hello;
	Vad__Response *resp = sync_call(rd, c, &req, NULL);
	if (!resp)
		return -1;
	if (resp->error != VAD__ERROR__OK) {
		db_fail(r, "hello refused: %s", resp->message);
		return -1;
	}
	if (!p->touch)
		return 0;
	Vad__MapArena ma = VAD__MAP_ARENA__INIT;
	ma.arena = (char *)p->arena;
	vad__request__init(&req);
	req.op_case = VAD__REQUEST__OP_MAP_ARENA;
	req.map_arena = &ma;
	int fd = -1;
	resp = sync_call(rd, c, &req, &fd);
	if (!resp || resp->error != VAD__ERROR__OK ||
	    resp->result_case != VAD__RESPONSE__RESULT_MAP_ARENA || fd < 0) {
		db_fail(r, "map-arena failed: %s", resp ? resp->message : "no reply");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	c->map_size = resp->map_arena->arena->size;
	void *m = mmap(NULL, c->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		db_fail(r, "mmap of the arena (%llu bytes) failed: %s",
			(unsigned long long)c->map_size, strerror(errno));
		return -1;
	}
	c->map = m;
	return 0;
}

static void conn_close(const struct db_params *p, struct rconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->map)
		munmap(c->map, c->map_size);
	for (unsigned i = 0; c->slots && i < p->pipeline; i++)
		free(c->slots[i].offsets);
	free(c->slots);
	free(c->in);
	free(c->out);
}

/* ---- loops ---------------------------------------------------------------------------------- */

static int prime(struct rdriver *rd, struct rconn *c, bool blocking)
{
	for (unsigned k = 0; !rd->p->burst && k < rd->p->pipeline && may_issue(rd, c); k++)
		if (issue(rd, c, true) < 0) {
			db_fail(&rd->d->r, "out of memory");
			return -1;
		}
	if (rd->p->burst && refill_burst(rd, c) < 0)
		return -1;
	if (!c->inflight)
		c->done = true;
	return flush(rd, c, blocking);
}

static void check_deadline(struct rdriver *rd, uint64_t now)
{
	if (!rd->p->ops && !rd->stopping && now >= rd->deadline) {
		rd->stopping = true;
		rd->deadline = now; /* replies read after this are not counted */
	}
}

static void loop_blocking(struct rdriver *rd)
{
	struct rconn *c = &rd->conns[0];
	if (prime(rd, c, true) < 0)
		return;
	while (!c->done) {
		int rc = read_some(rd, c);
		if (rc < 0)
			return;
		uint64_t now = db_now_ns();
		if (process_input(rd, c, now) < 0 || flush(rd, c, true) < 0)
			return;
		check_deadline(rd, now);
		if (rd->stopping && now > rd->deadline + DRAIN_NS) {
			db_fail(&rd->d->r, "%s did not answer within 5 s", peer(rd));
			return;
		}
	}
}

static int want_out(struct rdriver *rd, int ep, struct rconn *c, bool want)
{
	if (c->want_out == want)
		return 0;
	struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
	if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
		db_fail(&rd->d->r, "epoll_ctl: %s", strerror(errno));
		return -1;
	}
	c->want_out = want;
	return 0;
}

static void loop_epoll(struct rdriver *rd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		db_fail(&rd->d->r, "epoll_create1: %s", strerror(errno));
		return;
	}
	unsigned active = 0;
	for (unsigned i = 0; i < rd->n; i++) {
		struct rconn *c = &rd->conns[i];
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
			db_fail(&rd->d->r, "epoll_ctl: %s", strerror(errno));
			goto out;
		}
		if (prime(rd, c, false) < 0 || want_out(rd, ep, c, c->out_len > 0) < 0)
			goto out;
		if (!c->done)
			active++;
	}
	struct epoll_event evs[64];
	while (active) {
		int n = epoll_wait(ep, evs, 64, 20);
		if (n < 0 && errno != EINTR) {
			db_fail(&rd->d->r, "epoll_wait: %s", strerror(errno));
			goto out;
		}
		uint64_t now = db_now_ns();
		for (int i = 0; i < n; i++) {
			struct rconn *c = evs[i].data.ptr;
			if (c->done)
				continue;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				int rc = read_some(rd, c);
				if (rc < 0 || (rc > 0 && process_input(rd, c, now) < 0))
					goto out;
			}
			if (flush(rd, c, false) < 0 || want_out(rd, ep, c, c->out_len > 0) < 0)
				goto out;
			if (c->done)
				active--;
		}
		check_deadline(rd, now);
		if (rd->stopping && now > rd->deadline + DRAIN_NS) {
			db_fail(&rd->d->r, "%s did not answer within 5 s", peer(rd));
			goto out;
		}
	}
out:
	close(ep);
}

void db_raw_driver(struct db_driver *d)
{
	const struct db_params *p = d->p;
	struct rdriver rd = {.d = d, .p = p, .n = d->n_conns};
	rd.conns = calloc(d->n_conns, sizeof(*rd.conns));
	rd.bump.buf = malloc(DECODE_ARENA);
	rd.bump.cap = DECODE_ARENA;
	rd.bump.pb.alloc = bump_alloc;
	rd.bump.pb.free = bump_free;
	rd.bump.pb.allocator_data = &rd.bump;
	rd.sizes = calloc(p->batch, sizeof(uint64_t));
	bool ok = rd.conns && rd.bump.buf && rd.sizes;
	if (!ok)
		db_fail(&d->r, "out of memory");
	for (unsigned i = 0; ok && i < d->n_conns; i++) {
		rd.conns[i].fd = -1;
		if (conn_open(&rd, &rd.conns[i], d->first_conn + i) < 0)
			ok = false;
	}
	for (unsigned i = 0; ok && d->n_conns > 1 && i < d->n_conns; i++) {
		int fl = fcntl(rd.conns[i].fd, F_GETFL);
		if (fl < 0 || fcntl(rd.conns[i].fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			db_fail(&d->r, "cannot make a socket non-blocking: %s", strerror(errno));
			ok = false;
		}
	}
	/* Everyone starts together, also when this driver failed (the others wait for it). */
	pthread_barrier_wait(d->barrier);
	uint64_t cpu0 = 0;
	if (ok) {
		struct timespec ts;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		cpu0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		d->t_start = db_now_ns();
		rd.deadline = p->ops ? UINT64_MAX : d->t_start + (uint64_t)(p->seconds * 1e9);
		if (d->n_conns == 1)
			loop_blocking(&rd);
		else if (d->n_conns > 1)
			loop_epoll(&rd);
		d->t_end = p->ops ? rd.last_reply : rd.deadline;
		if (d->t_end < d->t_start)
			d->t_end = d->t_start;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		d->r.cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - cpu0;
	}
	for (unsigned i = 0; rd.conns && i < d->n_conns; i++)
		conn_close(p, &rd.conns[i]);
	free(rd.conns);
	free(rd.bump.buf);
	free(rd.sizes);
}
