/* top_view.c - vactl top's frame: a header, then the arenas, clients and latency panes,
 * each given rows of the terminal by what it has to show. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top.h"
#include "units.h"

#define SZ(v, buf) vactl_fmt_size((v), (buf), sizeof(buf))

/* A pane: a fitted table, or one line of text when there is nothing to tabulate. */
struct pane {
	struct vactl_fit *t;
	char note[200];
	const char *what; /* "arenas": the noun of "... 3 more arenas" */
	int want, give;
};

static const struct vad_arena_stats *find_arena(const struct top_sample *t, const char *name)
{
	for (size_t i = 0; t && i < t->stats->n_arenas; i++)
		if (strcmp(t->stats->arenas[i].name, name) == 0)
			return &t->stats->arenas[i];
	return NULL;
}

static void arenas_pane(struct pane *p, const struct top_sample *now, const struct top_sample *prev)
{
	static const struct vactl_fit_col cols[] = {
	    {"ARENA", 0}, {"SIZE", 80},	   {"BUSY", 95},     {"USE", 90},
	    {"FREE", 30}, {"LAZY", 40},	   {"RESIDENT", 50}, {"LARGEST FREE", 20},
	    {"FRAG", 60}, {"ALLOC/S", 88}, {"FREE/S", 87},   {"FAILS", 45},
	};
	p->what = "arenas";
	p->t = vactl_fit_new(sizeof(cols) / sizeof(cols[0]), cols, 12);
	uint64_t ms = prev ? now->at_ms - prev->at_ms : 0;
	for (size_t i = 0; i < now->stats->n_arenas; i++) {
		const struct vad_arena_stats *a = &now->stats->arenas[i];
		const struct vad_arena_stats *b = find_arena(prev, a->name);
		char size[32], busy[32], use[16], fr[32], lazy[32], res[32], lf[32], frag[16],
		    ar[24], fs[24], fails[24];
		snprintf(use, sizeof(use), "%.1f%%",
			 a->size ? 100.0 * (double)a->busy_bytes / (double)a->size : 0.0);
		snprintf(frag, sizeof(frag), "%.1f%%",
			 100.0 * vactl_fragmentation(a->free_bytes, a->largest_free));
		snprintf(ar, sizeof(ar), "%.0f",
			 top_rate(a->allocs, b ? b->allocs : a->allocs, ms));
		snprintf(fs, sizeof(fs), "%.0f", top_rate(a->frees, b ? b->frees : a->frees, ms));
		snprintf(fails, sizeof(fails), "%llu", (unsigned long long)a->fails);
		const char *cells[] = {a->name,
				       SZ(a->size, size),
				       SZ(a->busy_bytes, busy),
				       use,
				       SZ(a->free_bytes, fr),
				       SZ(a->lazy_bytes, lazy),
				       SZ(a->resident_bytes, res),
				       SZ(a->largest_free, lf),
				       frag,
				       ar,
				       fs,
				       fails};
		vactl_fit_row(p->t, cells);
	}
	if (!now->stats->n_arenas) {
		vactl_fit_free(p->t);
		p->t = NULL;
		snprintf(p->note, sizeof(p->note), "ARENAS: none this peer may use");
	}
}

struct ranked {
	const struct vad_client_info *ci;
	double rate;
};

/* Busiest first, then the largest holders, then the oldest sessions. */
static int by_activity(const void *x, const void *y)
{
	const struct ranked *a = x, *b = y;
	if (a->rate != b->rate)
		return a->rate < b->rate ? 1 : -1;
	if (a->ci->held_bytes != b->ci->held_bytes)
		return a->ci->held_bytes < b->ci->held_bytes ? 1 : -1;
	return a->ci->session_id < b->ci->session_id ? -1 : a->ci->session_id > b->ci->session_id;
}

static void clients_pane(struct pane *p, const struct top_sample *now,
			 const struct top_sample *prev, uint64_t self)
{
	static const struct vactl_fit_col cols[] = {
	    {"CLIENT", 0},  {"SESSION", 30}, {"PID", 20},   {"UID", 70},
	    {"RANGES", 80}, {"BYTES", 85},   {"REQ/S", 90},
	};
	p->what = "clients";
	if (now->clients_err) {
		snprintf(p->note, sizeof(p->note),
			 "CLIENTS: the daemon lists sessions to admins only (vactl clients)");
		return;
	}
	uint64_t ms = prev ? now->at_ms - prev->at_ms : 0;
	struct ranked *r = calloc(now->n_clients ? now->n_clients : 1, sizeof(*r));
	size_t n = 0;
	for (size_t i = 0; r && i < now->n_clients; i++)
		if (now->clients[i].session_id != self)
			r[n++] = (struct ranked){&now->clients[i],
						 top_client_rate(&now->clients[i], prev, ms)};
	if (!n) {
		free(r);
		snprintf(p->note, sizeof(p->note), "CLIENTS: none connected but this one");
		return;
	}
	qsort(r, n, sizeof(*r), by_activity);
	p->t = vactl_fit_new(sizeof(cols) / sizeof(cols[0]), cols, 12);
	for (size_t i = 0; i < n; i++) {
		const struct vad_client_info *ci = r[i].ci;
		char id[24], pid[16], uid[16], ranges[24], bytes[32], rate[24];
		snprintf(id, sizeof(id), "%llu", (unsigned long long)ci->session_id);
		snprintf(pid, sizeof(pid), "%u", ci->pid);
		snprintf(uid, sizeof(uid), "%u", ci->uid);
		snprintf(ranges, sizeof(ranges), "%llu", (unsigned long long)ci->held_ranges);
		snprintf(rate, sizeof(rate), "%.0f", r[i].rate);
		const char *cells[] = {ci->name[0] ? ci->name : "(unnamed)",
				       id,
				       pid,
				       uid,
				       ranges,
				       SZ(ci->held_bytes, bytes),
				       rate};
		vactl_fit_row(p->t, cells);
	}
	free(r);
}

/* Give each pane its heading, then the remaining rows one at a time to the panes that
 * want more, so a long list cannot push the others off the screen. */
static void share_rows(struct pane *p, size_t n, int rows)
{
	for (size_t i = 0; i < n; i++) {
		p[i].want = p[i].t ? vactl_fit_rows(p[i].t) : 1;
		p[i].give = rows > 0 ? 1 : 0;
		rows -= p[i].give;
	}
	for (bool more = true; rows > 0 && more;) {
		more = false;
		for (size_t i = 0; i < n && rows > 0; i++)
			if (p[i].give < p[i].want) {
				p[i].give++;
				rows--;
				more = true;
			}
	}
}

void top_view(struct vactl_screen *scr, const struct vad_session *sess, const struct top_samples *s,
	      bool keys)
{
	const struct top_sample *now = top_samples_last(s), *prev = top_samples_prev(s);
	const struct vad_daemon_stats *d = now->stats;
	uint64_t ms = prev ? now->at_ms - prev->at_ms : 0;
	char up[32];
	vactl_screen_line(scr, "%s - up %s, %u client%s, %.0f req/s%s - %s", sess->server,
			  vactl_fmt_duration(d->uptime_ms, up, sizeof(up)), d->clients,
			  vad_plural(d->clients),
			  top_rate(d->requests, prev ? prev->stats->requests : d->requests, ms),
			  keys ? " - q quits" : "", sess->socket_path);
	struct pane p[3];
	memset(p, 0, sizeof(p));
	arenas_pane(&p[0], now, prev);
	clients_pane(&p[1], now, prev, sess->session_id);
	top_latency_pane(&p[2].t, p[2].note, sizeof(p[2].note), s);
	p[2].what = "operations";
	const size_t n = sizeof(p) / sizeof(p[0]);
	/* the header, and a blank line above each pane */
	share_rows(p, n, scr->rows ? scr->rows - 1 - (int)n : 1 << 20);

	for (size_t i = 0; i < n; i++) {
		vactl_screen_line(scr, "%s", "");
		if (p[i].t)
			vactl_fit_emit(p[i].t, scr, p[i].give, p[i].what);
		else if (p[i].give)
			vactl_screen_line(scr, "%s", p[i].note);
	}
}
