/* ratelimit.c - per-session token buckets; see ratelimit.h. */
#include "ratelimit.h"

#include <time.h>

uint64_t vad_rate_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void refill(struct vad_rate *b, uint64_t now_ms)
{
	unsigned burst = b->burst ? b->burst : VAD_RATE_BURST;
	unsigned period = b->period_ms ? b->period_ms : VAD_RATE_PERIOD_MS;
	if (b->refill_ms == 0) { /* first use: a full burst */
		b->tokens = burst;
		b->refill_ms = now_ms ? now_ms : 1;
		return;
	}
	if (now_ms <= b->refill_ms)
		return;
	uint64_t gained = (now_ms - b->refill_ms) / period;
	if (gained >= burst - b->tokens) {
		b->tokens = burst;
		b->refill_ms = now_ms;
	} else {
		b->tokens += (unsigned)gained;
		b->refill_ms += gained * period; /* keep the partial period */
	}
}

bool vad_rate_take(struct vad_rate *b, uint64_t now_ms)
{
	refill(b, now_ms);
	if (b->tokens) {
		b->tokens--;
		return true;
	}
	if (b->suppressed++ == 0)
		b->first_ms = now_ms;
	return false;
}

uint64_t vad_rate_collect(struct vad_rate *b, uint64_t now_ms, uint64_t *span_ms)
{
	uint64_t n = b->suppressed;
	*span_ms = n && now_ms > b->first_ms ? now_ms - b->first_ms : 0;
	b->suppressed = 0;
	return n;
}
