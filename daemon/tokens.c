/* tokens.c - share tokens: random base62 names, share (plain, single use, expiring), unshare,
 * attach, the count; the memory of dead tokens is dead_tokens.c. See registry.h. */
#include "registry_internal.h"

#include "latency.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

_Static_assert(VAD_TOKEN_CHARS == VAD_STATE_TOKEN_CHARS, "the state file keeps whole tokens");

static const char base62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* Random bytes from a per-thread pool refilled by getrandom, so a share costs no syscall. */
static __thread uint8_t rnd_pool[256];
static __thread size_t rnd_left;

static int random_byte(uint8_t *out)
{
	if (rnd_left == 0) {
		size_t got = 0;
		while (got < sizeof(rnd_pool)) {
			ssize_t n = getrandom(rnd_pool + got, sizeof(rnd_pool) - got, 0);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				return -1;
			}
			got += (size_t)n;
		}
		rnd_left = sizeof(rnd_pool);
	}
	*out = rnd_pool[--rnd_left];
	rnd_pool[rnd_left] = 0; /* never hand out the same bytes twice */
	return 0;
}

int vad_random_bytes(uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (random_byte(&buf[i]) < 0)
			return -1;
	return 0;
}

int vad_random_token(char *buf, size_t n_chars)
{
	for (size_t i = 0; i < n_chars;) {
		uint8_t b;
		if (random_byte(&b) < 0)
			return -1;
		if (b >= 248) /* 248 = 4 * 62: reject to keep the characters uniform */
			continue;
		buf[i++] = base62[b % 62];
	}
	buf[n_chars] = '\0';
	return 0;
}

static bool token_well_formed(const char *t)
{
	size_t i;
	for (i = 0; t[i]; i++) {
		char c = t[i];
		if (i >= VAD_TOKEN_CHARS ||
		    !((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
			return false;
	}
	return i == VAD_TOKEN_CHARS;
}

struct vad_token_entry vad_token_none;

static bool token_live(const struct vad_token_entry *t)
{
	return t && t != &vad_token_none;
}

static bool token_plain(const struct vad_token_entry *t)
{
	return !t->single_use && !t->expires_ns;
}

/* ---- the state file's token records ---- */

/* Record t (token_lock held) unless its arena is not kept: before the share's reply. */
static void token_record(struct vad_registry *reg, struct vad_token_entry *t)
{
	t->rec = 0;
	if (!state_keeps(reg, t->range->arena))
		return;
	struct vad_state_token st = {.arena = t->range->arena,
				     .uid = t->uid,
				     .single_use = t->single_use,
				     .offset = t->range->offset,
				     .expires_ms = t->expires_wall_ms};
	memcpy(st.token, t->token, VAD_TOKEN_CHARS);
	t->rec = vad_state_put_token(reg->state, &st);
}

void token_unrecord(struct vad_registry *reg, struct vad_token_entry *t)
{
	/* Frozen (a polite stop), the file keeps the picture of that moment. */
	if (t->rec && !__atomic_load_n(&reg->state_frozen, __ATOMIC_RELAXED))
		vad_state_drop_token(reg->state, t->rec);
	t->rec = 0;
}

int token_records_check(struct vad_registry *reg, char *msg, size_t msg_len)
{
	if (!reg->state || __atomic_load_n(&reg->state_frozen, __ATOMIC_RELAXED))
		return 0;
	uint64_t recorded = 0;
	struct vad_token_entry *t, *ttmp;
	HASH_ITER(hh, reg->tokens, t, ttmp)
	{
		if (!t->rec)
			continue;
		recorded++;
		if (!vad_state_token_is(reg->state, t->rec, t->token, t->range->arena,
					t->range->offset)) {
			snprintf(msg, msg_len,
				 "share token %.6s... is not what its state file record %u says",
				 t->token, t->rec - 1);
			return -1;
		}
	}
	uint64_t in_file = vad_state_tokens(reg->state);
	if (in_file != recorded) {
		snprintf(msg, msg_len,
			 "the state file has %" PRIu64 " token records but %" PRIu64
			 " live share tokens are recorded",
			 in_file, recorded);
		return -1;
	}
	return 0;
}

/* CLOCK_REALTIME now, in ms: what a token's expiry is kept as across a restart. */
static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Kill r's live token t for why (token_lock held): its record cleared, out of the table, into
 * the memory of dead tokens; r stays shared. The caller frees t after unlocking. */
static void token_kill(struct vad_registry *reg, struct vad_token_entry *t,
		       enum vad_token_death why)
{
	token_unrecord(reg, t);
	HASH_DEL(reg->tokens, t);
	HASH_DELETE(hh_seq, reg->tokens_seq, t);
	dead_token_add(&reg->dead, t->token, why);
	__atomic_store_n(&t->range->tok, &vad_token_none, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&reg->n_tokens, 1, __ATOMIC_RELAXED);
}

/* When a token with terms made now expires (0: never). */
static uint64_t expiry_ns(const struct vad_token_terms *terms)
{
	if (!terms || !terms->ttl_ms)
		return 0;
	uint64_t now = vad_now_ns();
	if (terms->ttl_ms > (UINT64_MAX - now) / 1000000u)
		return UINT64_MAX; /* half a million years: never, in effect */
	return now + terms->ttl_ms * 1000000u;
}

/* The same on the wall clock, in ms (0: never), rounded up. */
static uint64_t expiry_wall_ms(const struct vad_token_terms *terms)
{
	if (!terms || !terms->ttl_ms)
		return 0;
	uint64_t now = wall_ms() + 1;
	return terms->ttl_ms > UINT64_MAX - now ? UINT64_MAX : now + terms->ttl_ms;
}

/* Give r the fresh token t with terms (token_lock held), replacing its live one, which goes to
 * *old for the caller to free. Returns 0, -2 when out of memory, -3 without randomness. */
static int token_install(struct vad_registry *reg, struct vad_range *r, struct vad_token_entry *t,
			 const struct vad_token_terms *terms, uint32_t uid,
			 struct vad_token_entry **old)
{
	char fresh[VAD_TOKEN_CHARS + 1];
	for (;;) {
		if (vad_random_token(fresh, VAD_TOKEN_CHARS) < 0)
			return -3;
		struct vad_token_entry *dup;
		HASH_FIND(hh, reg->tokens, fresh, VAD_TOKEN_CHARS, dup);
		/* 2^-190: practically never, but never hand out a live or a remembered token */
		if (!dup && dead_token_find(&reg->dead, fresh) == VAD_TOKEN_ALIVE)
			break;
	}
	memcpy(t->token, fresh, sizeof(fresh));
	t->range = r;
	t->single_use = terms && terms->single_use;
	t->expires_ns = expiry_ns(terms);
	t->expires_wall_ms = expiry_wall_ms(terms);
	t->shared_ns = vad_now_ns();
	t->uid = uid;
	t->seq = reg->token_seq + 1;
	vad_hash_oom = false;
	HASH_ADD(hh, reg->tokens, token, VAD_TOKEN_CHARS, t);
	if (vad_hash_oom)
		return -2;
	HASH_ADD(hh_seq, reg->tokens_seq, seq, sizeof(t->seq), t);
	if (vad_hash_oom) {
		HASH_DEL(reg->tokens, t);
		return -2;
	}
	reg->token_seq = t->seq;
	/* The old record goes before the new one is written: a crash between leaves the range
	 * without a token (the new one was never answered), never with two. */
	if (token_live(r->tok)) {
		*old = r->tok;
		token_kill(reg, r->tok, VAD_TOKEN_REPLACED);
	}
	token_record(reg, t);
	__atomic_store_n(&r->tok, t, __ATOMIC_RELAXED);
	__atomic_add_fetch(&reg->n_tokens, 1, __ATOMIC_RELAXED);
	return 0;
}

int vad_registry_share_with(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			    uint64_t offset, const struct vad_token_terms *terms,
			    char token[VAD_TOKEN_CHARS + 1])
{
	struct vad_hold *o = vad_holder_find(h, arena, offset);
	if (!o)
		return -1;
	struct vad_range *r = o->range;
	bool plain = !terms || (!terms->single_use && !terms->ttl_ms);
	struct vad_token_entry *t = NULL, *old = NULL;
	int rc = 0;
	/* A plain share of a range with a live token most likely returns it: no allocation.
	 * Other threads may kill that token meanwhile (attaches), so the lock decides. */
	if (!plain || !token_live(__atomic_load_n(&r->tok, __ATOMIC_RELAXED))) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return -2;
	}
	pthread_mutex_lock(&reg->token_lock);
	bool reuse;
	while (!(reuse = plain && token_live(r->tok) && token_plain(r->tok)) && !t) {
		/* Its token died or has options: allocate without the lock, then look again,
		 * since another holder of r may have given it a plain token meanwhile. */
		pthread_mutex_unlock(&reg->token_lock);
		t = calloc(1, sizeof(*t));
		if (!t)
			return -2;
		pthread_mutex_lock(&reg->token_lock);
	}
	if (reuse) {
		memcpy(token, r->tok->token, VAD_TOKEN_CHARS + 1);
	} else {
		rc = token_install(reg, r, t, terms, (uint32_t)h->uid->uid, &old);
		if (rc == 0) {
			memcpy(token, t->token, VAD_TOKEN_CHARS + 1);
			t = NULL;
		}
	}
	pthread_mutex_unlock(&reg->token_lock);
	free(t);
	free(old);
	return rc;
}

int vad_registry_share(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
		       uint64_t offset, char token[VAD_TOKEN_CHARS + 1])
{
	return vad_registry_share_with(reg, h, arena, offset, NULL, token);
}

int vad_registry_unshare(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			 uint64_t offset)
{
	struct vad_hold *o = vad_holder_find(h, arena, offset);
	if (!o)
		return -1;
	struct vad_range *r = o->range;
	struct vad_token_entry *t = NULL;
	pthread_mutex_lock(&reg->token_lock);
	if (token_live(r->tok)) {
		t = r->tok;
		token_kill(reg, t, VAD_TOKEN_REVOKED);
	}
	pthread_mutex_unlock(&reg->token_lock);
	bool revoked = t != NULL;
	free(t);
	return revoked;
}

/* The status of an attach with a token that died for why. */
static enum vad_attach_status death_status(enum vad_token_death why)
{
	switch (why) {
	case VAD_TOKEN_REVOKED:
		return VAD_ATTACH_REVOKED;
	case VAD_TOKEN_REPLACED:
		return VAD_ATTACH_REPLACED;
	case VAD_TOKEN_EXPIRED:
		return VAD_ATTACH_EXPIRED;
	case VAD_TOKEN_USED:
		return VAD_ATTACH_USED;
	case VAD_TOKEN_FREED:
		return VAD_ATTACH_FREED;
	case VAD_TOKEN_ALIVE:
		break;
	}
	return VAD_ATTACH_UNKNOWN;
}

/* With h's lock and token_lock held: the live token in *tp and its range in *rp, with out's
 * arena, offset and size filled; a dead token's reason (VAD_ATTACH_UNKNOWN if it is not
 * remembered); VAD_ATTACH_DENIED if its arena is not allowed. A token found expired dies
 * here, into *expired for the caller to free. */
static enum vad_attach_status attach_lookup(struct vad_registry *reg, const char *token,
					    const bool *allowed, struct vad_attach_result *out,
					    struct vad_token_entry **tp, struct vad_range **rp,
					    struct vad_token_entry **expired)
{
	struct vad_token_entry *t;
	HASH_FIND(hh, reg->tokens, token, VAD_TOKEN_CHARS, t);
	if (!t)
		return death_status(dead_token_find(&reg->dead, token));
	if (t->expires_ns && vad_now_ns() >= t->expires_ns) {
		token_kill(reg, t, VAD_TOKEN_EXPIRED);
		*expired = t;
		return VAD_ATTACH_EXPIRED;
	}
	struct vad_range *r = t->range;
	/* Arena and size never change while the range is in the token table. */
	out->arena = r->arena;
	out->offset = r->offset;
	out->size = r->size;
	*tp = t;
	*rp = r;
	if (!allowed[r->arena])
		return VAD_ATTACH_DENIED;
	return VAD_ATTACH_OK;
}

/* Charge one reference to r against h's limits and r's arena total (locks as above); on
 * VAD_ATTACH_QUOTA, out->quota and out->held say why and nothing stays charged. */
static enum vad_attach_status attach_charge(struct vad_registry *reg, struct vad_holder *h,
					    const struct vad_range *r, const struct vad_quota *q,
					    struct vad_attach_result *out)
{
	out->quota = vad_registry_reserve(h, r->size, 1, q, &out->held);
	if (out->quota != VAD_QUOTA_OK)
		return VAD_ATTACH_QUOTA;
	/* Many uids may reference one range: the arena's byte total is bounded on its own. */
	if (!arena_charge(&reg->arenas[r->arena], 1, r->size, &out->held)) {
		out->quota = VAD_QUOTA_COUNTER;
		vad_registry_unreserve(h, out->size, 1);
		return VAD_ATTACH_QUOTA;
	}
	return VAD_ATTACH_OK;
}

/* Take the charged reference: h's hold on r (made room for beforehand), then r's count if r
 * is not dying (locks as above). On failure gives back the charges of attach_charge. */
static enum vad_attach_status attach_take(struct vad_registry *reg, struct vad_holder *h,
					  struct vad_range *r, struct vad_attach_result *out)
{
	enum vad_attach_status st = VAD_ATTACH_OK;
	/* The hold first, so that once the reference is taken nothing can fail (giving a
	 * reference back could make this attach the range's last holder). */
	struct vad_hold *o = vad_holder_find(h, r->arena, r->offset);
	bool fresh_hold = !o;
	if (o && o->count == VAD_HOLD_COUNT_MAX) {
		arena_add(&reg->arenas[r->arena], -1, -(int64_t)r->size);
		out->quota = VAD_QUOTA_COUNTER;
		out->held = load64(&h->held_bytes);
		st = VAD_ATTACH_QUOTA;
		goto unreserve;
	}
	if (!o) {
		o = slot_insert(h, r->arena, r->offset); /* room made above */
		o->range = r;
	}
	/* Take a reference only if one is left: at 0 its last holder is burying it and will
	 * remove the token next (which waits for token_lock, held here). */
	uint64_t refs = __atomic_load_n(&r->refs, __ATOMIC_RELAXED);
	do {
		if (refs == 0)
			break;
	} while (!__atomic_compare_exchange_n(&r->refs, &refs, refs + 1, true, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	if (refs == 0) {
		if (fresh_hold)
			slot_delete(h, o);
		arena_add(&reg->arenas[r->arena], -1, -(int64_t)r->size);
		st = VAD_ATTACH_FREED;
		goto unreserve;
	}
	o->count++;
	if (fresh_hold)
		o->rec = hold_record(reg, h, r, 1);
	else
		hold_record_count(reg, o);
	store64(&h->held_bytes, load64(&h->held_bytes) + r->size);
	store64(&h->held_refs, load64(&h->held_refs) + 1);
	return VAD_ATTACH_OK;
unreserve:
	vad_registry_unreserve(h, out->size, 1);
	return st;
}

enum vad_attach_status vad_registry_attach(struct vad_registry *reg, struct vad_holder *h,
					   const char *token, const bool *allowed,
					   const struct vad_quota *q, struct vad_attach_result *out)
{
	memset(out, 0, sizeof(*out));
	if (!token_well_formed(token))
		return VAD_ATTACH_MALFORMED;
	/* Room for one more hold, allocated before any lock (used even if the hold exists). */
	struct vad_hold *fresh, *old = NULL;
	size_t cap;
	if (table_prepare(h, 1, &fresh, &cap) < 0)
		return VAD_ATTACH_NOMEM;

	struct vad_range *r = NULL;
	struct vad_token_entry *t = NULL, *dead = NULL;
	pthread_mutex_lock(&h->lock);
	if (fresh)
		old = table_swap_locked(h, fresh, cap);
	pthread_mutex_lock(&reg->token_lock);
	enum vad_attach_status st = attach_lookup(reg, token, allowed, out, &t, &r, &dead);
	if (st == VAD_ATTACH_OK)
		st = attach_charge(reg, h, r, q, out);
	/* A single use is spent in the state file before the hold it gives is recorded: a
	 * crash between loses the use, never lets the token attach twice. */
	bool spent = st == VAD_ATTACH_OK && t->single_use && t->rec;
	if (spent)
		token_unrecord(reg, t);
	if (st == VAD_ATTACH_OK)
		st = attach_take(reg, h, r, out);
	if (st == VAD_ATTACH_OK && t->single_use) {
		token_kill(reg, t, VAD_TOKEN_USED); /* this attach used it up */
		dead = t;
	} else if (spent) {
		token_record(reg, t); /* not used after all */
	}
	pthread_mutex_unlock(&reg->token_lock);
	pthread_mutex_unlock(&h->lock);
	free(old);
	free(dead);
	return st;
}

uint64_t vad_registry_tokens(struct vad_registry *reg)
{
	return __atomic_load_n(&reg->n_tokens, __ATOMIC_RELAXED);
}

int vad_registry_restore_token(struct vad_registry *reg, struct vad_range *r, const char *token,
			       bool single_use, uint64_t expires_wall_ms, uint32_t uid)
{
	struct vad_token_entry *dup;
	HASH_FIND(hh, reg->tokens, token, VAD_TOKEN_CHARS, dup);
	if (dup || token_live(r->tok))
		return -1;
	uint64_t now_wall = wall_ms();
	if (expires_wall_ms && now_wall >= expires_wall_ms) {
		dead_token_add(&reg->dead, token, VAD_TOKEN_EXPIRED);
		return 1;
	}
	struct vad_token_entry *t = calloc(1, sizeof(*t));
	if (!t)
		return -2;
	memcpy(t->token, token, VAD_TOKEN_CHARS);
	t->token[VAD_TOKEN_CHARS] = '\0';
	t->range = r;
	t->single_use = single_use;
	t->expires_wall_ms = expires_wall_ms;
	uint64_t now = vad_now_ns();
	if (expires_wall_ms) { /* what is left of its time to live, on the monotonic clock */
		uint64_t left_ms = expires_wall_ms - now_wall;
		t->expires_ns =
		    left_ms > (UINT64_MAX - now) / 1000000u ? UINT64_MAX : now + left_ms * 1000000u;
	}
	t->shared_ns = now; /* its age starts again: the state file does not keep it */
	t->uid = uid;
	t->seq = reg->token_seq + 1;
	vad_hash_oom = false;
	HASH_ADD(hh, reg->tokens, token, VAD_TOKEN_CHARS, t);
	if (vad_hash_oom) {
		free(t);
		return -2;
	}
	HASH_ADD(hh_seq, reg->tokens_seq, seq, sizeof(t->seq), t);
	if (vad_hash_oom) {
		HASH_DEL(reg->tokens, t);
		free(t);
		return -2;
	}
	reg->token_seq = t->seq;
	token_record(reg, t);
	r->tok = t; /* shared from now on: its refs change atomically */
	reg->n_tokens++;
	return 0;
}
