/* dead_tokens.c - the bounded memory of dead share tokens and why each died; see
 * registry_types.h (struct vad_dead_tokens) and registry_internal.h. Every call runs with
 * token_lock held. */
#include "registry_internal.h"

#include <stdio.h>
#include <string.h>

_Static_assert(VAD_DEAD_TOKENS < 65536, "slots are named by 16-bit links");

/* The bucket of a token. Remembered tokens are the daemon's own random ones, so their first
 * bytes spread them evenly; a client choosing what it looks up only picks which short chain
 * it walks. */
static unsigned bucket_of(const char *token)
{
	uint64_t k;
	memcpy(&k, token, sizeof(k));
	return (unsigned)((k * 0x9E3779B97F4A7C15ull) >> 32) % VAD_DEAD_TOKENS;
}

/* Take slot i (in use) out of its bucket's chain. */
static void unlink_slot(struct vad_dead_tokens *d, unsigned i)
{
	uint16_t *link = &d->bucket[bucket_of(d->ring[i].token)];
	while (*link && *link != i + 1)
		link = &d->ring[*link - 1].next;
	if (*link)
		*link = d->ring[i].next;
}

void dead_token_add(struct vad_dead_tokens *d, const char *token, enum vad_token_death why)
{
	unsigned i = d->oldest;
	d->oldest = (i + 1) % VAD_DEAD_TOKENS;
	struct vad_dead_token *slot = &d->ring[i];
	if (slot->why)
		unlink_slot(d, i); /* the oldest is forgotten: from now on it is just unknown */
	memcpy(slot->token, token, VAD_TOKEN_CHARS);
	slot->why = (uint8_t)why;
	unsigned b = bucket_of(token);
	slot->next = d->bucket[b];
	d->bucket[b] = (uint16_t)(i + 1);
}

enum vad_token_death dead_token_find(const struct vad_dead_tokens *d, const char *token)
{
	for (uint16_t at = d->bucket[bucket_of(token)]; at; at = d->ring[at - 1].next)
		if (memcmp(d->ring[at - 1].token, token, VAD_TOKEN_CHARS) == 0)
			return (enum vad_token_death)d->ring[at - 1].why;
	return VAD_TOKEN_ALIVE;
}

int dead_token_check(const struct vad_dead_tokens *d, char *msg, size_t msg_len)
{
	unsigned chained = 0, used = 0;
	for (unsigned b = 0; b < VAD_DEAD_TOKENS; b++) {
		for (uint16_t at = d->bucket[b]; at; at = d->ring[at - 1].next) {
			const struct vad_dead_token *t = &d->ring[at - 1];
			if (at > VAD_DEAD_TOKENS || !t->why || bucket_of(t->token) != b ||
			    ++chained > VAD_DEAD_TOKENS) {
				snprintf(msg, msg_len,
					 "the memory of dead share tokens is corrupt: bucket %u "
					 "chains slot %u",
					 b, (unsigned)at - 1);
				return -1;
			}
		}
	}
	for (unsigned i = 0; i < VAD_DEAD_TOKENS; i++)
		used += d->ring[i].why != 0;
	if (used != chained) {
		snprintf(msg, msg_len,
			 "%u dead share tokens are remembered but %u are reachable by their hash",
			 used, chained);
		return -1;
	}
	return 0;
}
