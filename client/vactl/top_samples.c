/* top_samples.c - the samples vactl top keeps: the last few seconds of statistics. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "top.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sample_free(struct top_sample *t)
{
	free(t->stats);
	free(t->clients);
}

int top_samples_take(struct top_samples *s, vad_client *c)
{
	struct top_sample t = {0};
	int err = vad_stats_detail(c, NULL, &t.stats);
	if (err)
		return err;
	t.clients_err = vad_clients(c, &t.clients, &t.n_clients);
	if (t.clients_err) {
		t.clients = NULL;
		t.n_clients = 0;
		if (t.clients_err != VAD_EPERM && t.clients_err != VAD_EUNSUPPORTED) {
			free(t.stats);
			return t.clients_err;
		}
	}
	t.at_ms = now_ms();
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		struct top_sample *v = realloc(s->v, cap * sizeof(*v));
		if (!v) {
			sample_free(&t);
			return VAD_ENOMEM;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = t;
	/* Keep the newest sample that is a whole window old, so the latency pane spans it. */
	size_t drop = 0;
	while (s->n - drop > 2 && t.at_ms - s->v[drop + 1].at_ms >= TOP_LATENCY_WINDOW_MS)
		sample_free(&s->v[drop++]);
	if (drop) {
		memmove(s->v, s->v + drop, (s->n - drop) * sizeof(*s->v));
		s->n -= drop;
	}
	return VAD_OK;
}

const struct top_sample *top_samples_last(const struct top_samples *s)
{
	return s->n ? &s->v[s->n - 1] : NULL;
}

const struct top_sample *top_samples_prev(const struct top_samples *s)
{
	return s->n > 1 ? &s->v[s->n - 2] : NULL;
}

const struct top_sample *top_samples_first(const struct top_samples *s)
{
	return s->n ? &s->v[0] : NULL;
}

void top_samples_free(struct top_samples *s)
{
	for (size_t i = 0; i < s->n; i++)
		sample_free(&s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

double top_rate(uint64_t now, uint64_t before, uint64_t ms)
{
	return ms && now >= before ? (double)(now - before) * 1000.0 / (double)ms : 0.0;
}

double top_client_rate(const struct vad_client_info *ci, const struct top_sample *prev, uint64_t ms)
{
	for (size_t i = 0; prev && i < prev->n_clients; i++)
		if (prev->clients[i].session_id == ci->session_id)
			return top_rate(ci->allocs + ci->frees,
					prev->clients[i].allocs + prev->clients[i].frees, ms);
	return 0.0; /* a new session: no rate yet */
}
