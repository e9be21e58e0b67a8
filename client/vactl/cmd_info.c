/* cmd_info.c - read-only views: status, arenas, clients, stats. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vactl.h"

#define SZ(v) vactl_fmt_size((v), (char[32]){0}, 32)

/* Format an unsigned number into a compound-literal buffer. */
static const char *num(char *buf, size_t len, uint64_t v)
{
	snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}
#define N(v) num((char[32]){0}, 32, (v))

static const char *pct(char *buf, size_t len, uint64_t part, uint64_t whole)
{
	snprintf(buf, len, "%.1f%%", whole ? 100.0 * (double)part / (double)whole : 0.0);
	return buf;
}
#define PCT(p, w) pct((char[16]){0}, 16, (p), (w))

/* The daemon-wide counters status and stats both print. */
static void add_daemon_counts(json_object *j, const struct vad_daemon_stats *d)
{
	vactl_json_add_u64(j, "uptime_ms", d->uptime_ms);
	vactl_json_add_u64(j, "clients", d->clients);
	vactl_json_add_u64(j, "requests", d->requests);
	vactl_json_add_u64(j, "shares", d->shares);
}

/* ---- status ----------------------------------------------------------------------- */

static int run_status(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_status, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	struct vad_session s;
	vad_session_info(c, &s);
	struct vad_daemon_stats *d;
	int err = vad_stats_detail(c, NULL, &d);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		json_object *j = json_object_new_object();
		vactl_json_add_str(j, "server", s.server);
		vactl_json_add_str(j, "socket", s.socket_path);
		vactl_json_add_u64(j, "protocol_version", s.protocol_version);
		add_daemon_counts(j, d);
		vactl_json_add_u64(j, "session_id", s.session_id);
		json_object_object_add(j, "admin", json_object_new_boolean(s.admin));
		vactl_json_add_str(j, "default_arena", s.default_arena);
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < d->n_arenas; i++) {
			const struct vad_arena_stats *a = &d->arenas[i];
			json_object *ja = json_object_new_object();
			vactl_json_add_str(ja, "name", a->name);
			vactl_json_add_u64(ja, "size", a->size);
			vactl_json_add_u64(ja, "busy_bytes", a->busy_bytes);
			vactl_json_add_u64(ja, "free_bytes", a->free_bytes);
			vactl_json_add_u64(ja, "lazy_bytes", a->lazy_bytes);
			vactl_json_add_u64(ja, "pooled_bytes", a->pooled_bytes);
			vactl_json_add_u64(ja, "largest_free", a->largest_free);
			json_object_array_add(arr, ja);
		}
		json_object_object_add(j, "arenas", arr);
		vactl_json_print(j);
	} else {
		char up[32];
		printf("%s at %s: up %s, %u client%s (this one included), %llu request%s, "
		       "%llu share token%s\n",
		       s.server, s.socket_path, vactl_fmt_duration(d->uptime_ms, up, sizeof(up)),
		       d->clients, vad_plural(d->clients), (unsigned long long)d->requests,
		       vad_plural(d->requests), (unsigned long long)d->shares,
		       vad_plural(d->shares));
		printf("this session: id %llu%s; default arena '%s'\n",
		       (unsigned long long)s.session_id, s.admin ? ", admin" : "", s.default_arena);
		for (size_t i = 0; i < d->n_arenas; i++) {
			const struct vad_arena_stats *a = &d->arenas[i];
			printf(
			    "  %-12s %9s  busy %9s (%5s)  free %9s  lazy %9s  largest free %9s\n",
			    a->name, SZ(a->size), SZ(a->busy_bytes), PCT(a->busy_bytes, a->size),
			    SZ(a->free_bytes), SZ(a->lazy_bytes), SZ(a->largest_free));
		}
	}
	free(d);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_status = {
    .name = "status",
    .args = "",
    .summary = "daemon version, uptime, clients and one line per arena",
    .help = "Connects, asks for statistics and prints the daemon's version and uptime, the\n"
	    "number of connected sessions (vactl's own included), and each arena's size,\n"
	    "busy, free and lazy bytes and largest free block.\n"
	    "JSON: {server, socket, protocol_version, uptime_ms, clients, requests, shares,\n"
	    "session_id, admin, default_arena, arenas: [{name, size, busy_bytes, free_bytes,\n"
	    "lazy_bytes, pooled_bytes, largest_free}]}\n",
    .run = run_status,
};

/* ---- arenas ----------------------------------------------------------------------- */

static int run_arenas(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_arenas, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	struct vad_arena_info *info = NULL;
	size_t n_info = 0;
	int err = vad_arenas(c, &info, &n_info);
	if (err && err != VAD_EPERM && err != VAD_EUNSUPPORTED)
		return vactl_report_close(o, c, err);
	struct vad_daemon_stats *d;
	err = vad_stats_detail(c, NULL, &d);
	if (err) {
		free(info);
		return vactl_report_close(o, c, err);
	}
	json_object *arr = o->json ? json_object_new_array() : NULL;
	static const char *const heads[] = {"NAME", "SIZE", "QUANTUM", "BACKING",      "BUSY",
					    "FREE", "LAZY", "POOLED",  "LARGEST FREE", "FRAG"};
	struct vactl_table *t = o->json ? NULL : vactl_table_new(10, heads);
	bool any_unsealed = false;
	for (size_t i = 0; i < d->n_arenas; i++) {
		const struct vad_arena_stats *a = &d->arenas[i];
		const struct vad_arena_info *ai = NULL;
		for (size_t k = 0; k < n_info; k++)
			if (strcmp(info[k].name, a->name) == 0)
				ai = &info[k];
		double frag = vactl_fragmentation(a->free_bytes, a->largest_free);
		if (arr) {
			json_object *ja = json_object_new_object();
			vactl_json_add_str(ja, "name", a->name);
			vactl_json_add_u64(ja, "size", a->size);
			vactl_json_add_u64(ja, "quantum", a->quantum);
			vactl_json_add_str(ja, "backing", ai ? ai->backing : NULL);
			json_object_object_add(ja, "allowed",
					       ai ? json_object_new_boolean(ai->allowed) : NULL);
			json_object_object_add(ja, "unsealed",
					       ai ? json_object_new_boolean(ai->unsealed) : NULL);
			vactl_json_add_str(ja, "tenancy",
					   ai && ai->tenancy[0] ? ai->tenancy : NULL);
			vactl_json_add_str(ja, "commit", ai ? ai->commit : NULL);
			vactl_json_add_str(ja, "huge", ai && ai->huge[0] ? ai->huge : NULL);
			vactl_json_add_str(ja, "numa", ai && ai->numa[0] ? ai->numa : NULL);
			vactl_json_add_u64(ja, "committed_bytes", a->committed_bytes);
			vactl_json_add_u64(ja, "busy_bytes", a->busy_bytes);
			vactl_json_add_u64(ja, "free_bytes", a->free_bytes);
			vactl_json_add_u64(ja, "lazy_bytes", a->lazy_bytes);
			vactl_json_add_u64(ja, "pooled_bytes", a->pooled_bytes);
			vactl_json_add_u64(ja, "largest_free", a->largest_free);
			json_object_object_add(ja, "fragmentation", json_object_new_double(frag));
			json_object_array_add(arr, ja);
		} else {
			char fr[16], backing[PATH_MAX + 16];
			snprintf(fr, sizeof(fr), "%.1f%%", 100.0 * frag);
			/* "hugetlb 2 MiB reserve node 0": what kind of memory, and when */
			snprintf(backing, sizeof(backing), "%s%s%s%s%s%s%s", ai ? ai->backing : "?",
				 ai && ai->unsealed ? " UNSEALED" : "",
				 ai && ai->huge[0] ? " " : "", ai ? ai->huge : "",
				 ai && strcmp(ai->commit, "reserve") == 0 ? " reserve" : "",
				 ai && ai->numa[0] ? " " : "", ai ? ai->numa : "");
			any_unsealed |= ai && ai->unsealed;
			vactl_table_row(t, a->name, SZ(a->size), SZ(a->quantum), backing,
					SZ(a->busy_bytes), SZ(a->free_bytes), SZ(a->lazy_bytes),
					SZ(a->pooled_bytes), SZ(a->largest_free), fr);
		}
	}
	if (arr) {
		vactl_json_print_field("arenas", arr);
	} else {
		vactl_table_print(t);
		if (!info)
			printf("(backing unknown: the daemon lists arenas to admins only)\n");
		for (size_t k = 0; k < n_info; k++)
			if (info[k].tenancy[0] && !strchr(info[k].name, '@'))
				printf("%s: one arena per %s, named %s@%s (%u open)\n",
				       info[k].name, info[k].tenancy, info[k].name,
				       strcmp(info[k].tenancy, "uid") == 0 ? "UID" : "GID",
				       info[k].tenants);
		if (any_unsealed)
			printf(
			    "UNSEALED: the arena's file cannot be sealed (accept_unsealed = yes): "
			    "any client that maps it can resize it and make the others die of "
			    "SIGBUS\n");
	}
	free(d);
	free(info);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_arenas = {
    .name = "arenas",
    .args = "",
    .summary = "arenas: size, quantum, backing, occupancy, fragmentation",
    .help = "Lists the arenas this peer may use with their occupancy. FRAG is the share of\n"
	    "free space outside the largest free block (0% = one contiguous hole).\n"
	    "An arena whose file could not be sealed (accept_unsealed = yes in vad.conf) shows\n"
	    "UNSEALED after its backing: any client that maps it can resize it.\n"
	    "A section with tenancy = uid or gid has one arena per tenant: each open one shows\n"
	    "as NAME@UID (or NAME@GID); a peer sees its own, an admin every one.\n"
	    "BACKING also says hugetlb pages and their size (backing = hugetlb) or thp (huge =\n"
	    "thp), reserve (commit = reserve: the daemon commits a range's memory before it\n"
	    "grants it) and the NUMA policy (node N, interleave).\n"
	    "JSON: {arenas: [{name, size, quantum, backing, allowed, unsealed, tenancy,\n"
	    "commit, huge, numa, committed_bytes, busy_bytes, free_bytes, lazy_bytes, "
	    "pooled_bytes, largest_free, fragmentation\n"
	    "(0..1)}]}; backing, allowed, unsealed, tenancy, commit, huge and numa are null\n"
	    "when the daemon does not list arenas to this peer (tenancy, huge and numa also\n"
	    "when the arena has none).\n",
    .run = run_arenas,
};

/* ---- clients ---------------------------------------------------------------------- */

static int run_clients(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_clients, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	struct vad_client_info *v;
	size_t n;
	int err = vad_clients(c, &v, &n);
	if (err)
		return vactl_report_close(o, c, err);
	struct vad_session s;
	vad_session_info(c, &s);
	if (o->json) {
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < n; i++) {
			json_object *jc = json_object_new_object();
			vactl_json_add_u64(jc, "session_id", v[i].session_id);
			vactl_json_add_u64(jc, "pid", v[i].pid);
			vactl_json_add_u64(jc, "uid", v[i].uid);
			vactl_json_add_u64(jc, "gid", v[i].gid);
			vactl_json_add_str(jc, "name", v[i].name);
			vactl_json_add_u64(jc, "held_bytes", v[i].held_bytes);
			vactl_json_add_u64(jc, "held_ranges", v[i].held_ranges);
			vactl_json_add_u64(jc, "allocs", v[i].allocs);
			vactl_json_add_u64(jc, "frees", v[i].frees);
			vactl_json_add_u64(jc, "connected_ms", v[i].connected_ms);
			vactl_json_add_u64(jc, "failed_attaches", v[i].failed_attaches);
			vactl_json_add_u64(jc, "uid_held_bytes", v[i].uid_held_bytes);
			vactl_json_add_u64(jc, "uid_held_ranges", v[i].uid_held_ranges);
			vactl_json_add_u64(jc, "uid_quota_bytes", v[i].uid_quota_bytes);
			vactl_json_add_u64(jc, "uid_max_ranges", v[i].uid_max_ranges);
			json_object_object_add(
			    jc, "self", json_object_new_boolean(v[i].session_id == s.session_id));
			json_object_array_add(arr, jc);
		}
		vactl_json_print_field("clients", arr);
	} else {
		static const char *const heads[] = {
		    "SESSION", "PID",	"UID",		"NAME",	     "HELD",	 "RANGES",
		    "ALLOCS",  "FREES", "BAD-ATTACHES", "CONNECTED", "UID-HELD", "UID-RANGES"};
		struct vactl_table *t = vactl_table_new(12, heads);
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		uint64_t now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
		for (size_t i = 0; i < n; i++) {
			char sess[40], age[48], dur[32];
			snprintf(sess, sizeof(sess), "%llu%s", (unsigned long long)v[i].session_id,
				 v[i].session_id == s.session_id ? "*" : "");
			uint64_t since =
			    now_ms > v[i].connected_ms ? now_ms - v[i].connected_ms : 0;
			snprintf(age, sizeof(age), "%s ago",
				 vactl_fmt_duration(since, dur, sizeof(dur)));
			/* The uid's use over its limit ("-": none), every session of it. */
			char uheld[64], uranges[64], lim[32];
			snprintf(uheld, sizeof(uheld), "%s/%s", SZ(v[i].uid_held_bytes),
				 v[i].uid_quota_bytes
				     ? vactl_fmt_size(v[i].uid_quota_bytes, lim, sizeof(lim))
				     : "-");
			snprintf(lim, sizeof(lim), "%llu", (unsigned long long)v[i].uid_max_ranges);
			snprintf(uranges, sizeof(uranges), "%llu/%s",
				 (unsigned long long)v[i].uid_held_ranges,
				 v[i].uid_max_ranges ? lim : "-");
			vactl_table_row(t, sess, N(v[i].pid), N(v[i].uid), v[i].name,
					SZ(v[i].held_bytes), N(v[i].held_ranges), N(v[i].allocs),
					N(v[i].frees), N(v[i].failed_attaches), age, uheld,
					uranges);
		}
		vactl_table_print(t);
		printf("(* = this vactl)\n");
	}
	free(v);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_clients = {
    .name = "clients",
    .args = "",
    .summary = "connected sessions and what they hold (admin)",
    .help = "Lists every connected session, vactl's own marked with '*'. Admin only.\n"
	    "UID-HELD and UID-RANGES are what every session of that uid holds together against\n"
	    "the uid's limits (quota_uid, max_ranges_uid; '-': no limit).\n"
	    "JSON: {clients: [{session_id, pid, uid, gid, name, held_bytes, held_ranges,\n"
	    "allocs, frees, connected_ms (epoch ms), failed_attaches (attaches refused for\n"
	    "their token), uid_held_bytes, uid_held_ranges, uid_quota_bytes, uid_max_ranges\n"
	    "(0: no limit), self}]}\n",
    .run = run_clients,
};

/* ---- stats ------------------------------------------------------------------------ */

/* The counters a total adds up; largest_free is a maximum and quantum is per arena. */
#define SUMMED_STATS(X)                                                                            \
	X(size)                                                                                    \
	X(busy_bytes)                                                                              \
	X(free_bytes)                                                                              \
	X(lazy_bytes)                                                                              \
	X(pooled_bytes)                                                                            \
	X(resident_bytes)                                                                          \
	X(committed_bytes)                                                                         \
	X(commit_failures)                                                                         \
	X(busy_blocks)                                                                             \
	X(free_blocks)                                                                             \
	X(lazy_blocks)                                                                             \
	X(pooled_blocks)                                                                           \
	X(allocs)                                                                                  \
	X(frees)                                                                                   \
	X(fails)                                                                                   \
	X(drains)                                                                                  \
	X(released_bytes)                                                                          \
	X(release_calls)                                                                           \
	X(pool_hits)                                                                               \
	X(waits)                                                                                   \
	X(wait_grants)                                                                             \
	X(wait_timeouts)                                                                           \
	X(wait_cancels)                                                                            \
	X(wait_refusals)

static void add_totals(struct vad_arena_stats *t, const struct vad_arena_stats *a)
{
#define SUM_FIELD(f) vactl_sum_into(&t->f, a->f);
	SUMMED_STATS(SUM_FIELD)
#undef SUM_FIELD
	if (a->largest_free > t->largest_free)
		t->largest_free = a->largest_free;
	t->waiters += a->waiters; /* each at most max_waiters: no overflow */
	if (a->oldest_wait_ms > t->oldest_wait_ms)
		t->oldest_wait_ms = a->oldest_wait_ms;
}

static void print_arena_stats(const struct vad_arena_stats *a, bool total)
{
	if (total)
		printf("total over all arenas:\n");
	else
		printf("arena %s (quantum %s):\n", a->name, SZ(a->quantum));
	printf("  size            %12s  %llu\n", SZ(a->size), (unsigned long long)a->size);
	printf("  busy            %12s  in %llu block%s (%s)\n", SZ(a->busy_bytes),
	       (unsigned long long)a->busy_blocks, vad_plural(a->busy_blocks),
	       PCT(a->busy_bytes, a->size));
	printf("  free            %12s  in %llu block%s\n", SZ(a->free_bytes),
	       (unsigned long long)a->free_blocks, vad_plural(a->free_blocks));
	printf("  lazy            %12s  in %llu block%s (freed, waiting for reclaim)\n",
	       SZ(a->lazy_bytes), (unsigned long long)a->lazy_blocks, vad_plural(a->lazy_blocks));
	printf("  pooled          %12s  in %llu block%s (reclaimed, kept in node pools)\n",
	       SZ(a->pooled_bytes), (unsigned long long)a->pooled_blocks,
	       vad_plural(a->pooled_blocks));
	printf("  resident        %12s  %llu (memory behind the file, free space written to "
	       "included)\n",
	       SZ(a->resident_bytes), (unsigned long long)a->resident_bytes);
	if (a->committed_bytes || a->commit_failures)
		printf("  committed       %12s  %llu (commit = reserve: backed before granted; "
		       "%llu allocs refused for want of memory)\n",
		       SZ(a->committed_bytes), (unsigned long long)a->committed_bytes,
		       (unsigned long long)a->commit_failures);
	if (total)
		printf("  largest free    %12s  (of any arena)\n", SZ(a->largest_free));
	else
		printf("  largest free    %12s  fragmentation %.1f%%\n", SZ(a->largest_free),
		       100.0 * vactl_fragmentation(a->free_bytes, a->largest_free));
	printf("  allocs %llu  frees %llu  fails %llu  pool hits %llu\n",
	       (unsigned long long)a->allocs, (unsigned long long)a->frees,
	       (unsigned long long)a->fails, (unsigned long long)a->pool_hits);
	printf("  drains %llu  released %s in %llu release call%s\n", (unsigned long long)a->drains,
	       SZ(a->released_bytes), (unsigned long long)a->release_calls,
	       vad_plural(a->release_calls));
	if (a->waiters || a->waits) {
		char oldest[32];
		vactl_fmt_duration(a->oldest_wait_ms, oldest, sizeof(oldest));
		printf("  waiting         %12u  allocs (oldest for %s)\n", a->waiters,
		       a->waiters ? oldest : "-");
		printf("  waits %llu  granted %llu  timed out %llu  cancelled %llu  refused %llu\n",
		       (unsigned long long)a->waits, (unsigned long long)a->wait_grants,
		       (unsigned long long)a->wait_timeouts, (unsigned long long)a->wait_cancels,
		       (unsigned long long)a->wait_refusals);
	}
}

/* The p-th quantile of an operation's lifetime histogram: the bound below which it falls. */
static uint64_t op_quantile(const struct vad_op_counts *op, double p)
{
	if (!op->n_buckets)
		return 0;
	uint64_t total = op->bucket_count[op->n_buckets - 1];
	uint64_t rank = (uint64_t)(p * (double)total);
	if (rank < 1)
		rank = 1;
	for (size_t i = 0; i < op->n_buckets; i++)
		if (op->bucket_count[i] >= rank)
			return op->bucket_below_ns[i];
	return op->bucket_below_ns[op->n_buckets - 1];
}

static json_object *json_op_counts(const struct vad_daemon_stats *d)
{
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < d->n_ops; i++) {
		const struct vad_op_counts *op = &d->ops[i];
		json_object *jo = json_object_new_object();
		vactl_json_add_str(jo, "name", op->name);
		vactl_json_add_u64(jo, "count", op->count);
		vactl_json_add_u64(jo, "errors", op->errors);
		json_object *b = json_object_new_array();
		for (size_t k = 0; k < op->n_buckets; k++) {
			json_object *pair = json_object_new_array();
			json_object_array_add(pair, json_object_new_uint64(op->bucket_below_ns[k]));
			json_object_array_add(pair, json_object_new_uint64(op->bucket_count[k]));
			json_object_array_add(b, pair);
		}
		json_object_object_add(jo, "buckets", b);
		json_object_array_add(arr, jo);
	}
	return arr;
}

static json_object *json_error_counts(const struct vad_daemon_stats *d)
{
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < d->n_errors; i++) {
		json_object *je = json_object_new_object();
		vactl_json_add_str(je, "name", d->errors[i].name);
		json_object_object_add(je, "code", json_object_new_int(d->errors[i].code));
		vactl_json_add_u64(je, "count", d->errors[i].count);
		json_object_array_add(arr, je);
	}
	return arr;
}

/* The operations asked for at least once, then the error codes replied. */
static void print_op_counts(const struct vad_daemon_stats *d)
{
	static const char *const heads[] = {"OPERATION", "REQUESTS", "ERRORS", "P50", "P99"};
	struct vactl_table *t = vactl_table_new(5, heads);
	printf("requests by operation since start (latency: below this bound):\n");
	for (size_t i = 0; i < d->n_ops; i++) {
		const struct vad_op_counts *op = &d->ops[i];
		if (!op->count)
			continue;
		char p50[32], p99[32];
		vactl_table_row(t, op->name, N(op->count), N(op->errors),
				vactl_fmt_ns(op_quantile(op, 0.5), p50, sizeof(p50)),
				vactl_fmt_ns(op_quantile(op, 0.99), p99, sizeof(p99)));
	}
	vactl_table_print(t);
	if (!d->n_errors) {
		printf("errors by code: none\n");
		return;
	}
	printf("errors by code since start:\n");
	for (size_t i = 0; i < d->n_errors; i++)
		printf("  %-14s %10llu  %s\n", d->errors[i].name,
		       (unsigned long long)d->errors[i].count, vad_strerror(d->errors[i].code));
}

static int run_stats(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_stats, o, argc, argv, 1, &first, &c, &rc))
		return rc;
	const char *arena = first < argc ? argv[first] : NULL;
	struct vad_daemon_stats *d;
	int err = vad_stats_detail(c, arena, &d);
	if (err)
		return vactl_report_close(o, c, err);
	struct vad_arena_stats tot = {.name = "total"};
	for (size_t i = 0; i < d->n_arenas; i++)
		add_totals(&tot, &d->arenas[i]);
	tot.quantum = 0;
	if (o->json) {
		json_object *j = json_object_new_object();
		add_daemon_counts(j, d);
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < d->n_arenas; i++)
			json_object_array_add(arr, vactl_json_arena_stats(&d->arenas[i]));
		json_object_object_add(j, "arenas", arr);
		json_object *jt = vactl_json_arena_stats(&tot);
		json_object_object_del(jt, "name");
		json_object_object_del(jt, "quantum");
		json_object_object_del(jt, "fragmentation");
		json_object_object_add(j, "totals", jt);
		json_object_object_add(j, "ops", json_op_counts(d));
		json_object_object_add(j, "errors", json_error_counts(d));
		vactl_json_print(j);
	} else {
		char up[32];
		printf("up %s, %u client%s, %llu request%s, %llu share token%s\n",
		       vactl_fmt_duration(d->uptime_ms, up, sizeof(up)), d->clients,
		       vad_plural(d->clients), (unsigned long long)d->requests,
		       vad_plural(d->requests), (unsigned long long)d->shares,
		       vad_plural(d->shares));
		for (size_t i = 0; i < d->n_arenas; i++)
			print_arena_stats(&d->arenas[i], false);
		if (d->n_arenas > 1)
			print_arena_stats(&tot, true);
		print_op_counts(d);
	}
	free(d);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_stats = {
    .name = "stats",
    .args = "[ARENA]",
    .summary = "every allocator counter per arena, plus totals",
    .help = "Prints every statistic the daemon keeps for each arena (or only ARENA):\n"
	    "busy/free/lazy/pooled bytes and blocks, resident bytes (memory behind the arena's\n"
	    "file: busy and pooled ranges that were written, plus free space a client wrote\n"
	    "to, until a purge or the idle drain gives it back), largest free block, allocs,\n"
	    "frees, fails, drains, released bytes, release calls, pool hits.\n"
	    "JSON: {uptime_ms, clients, requests, shares, arenas: [{name, size, quantum,\n"
	    "busy_bytes, free_bytes, lazy_bytes, pooled_bytes, resident_bytes, committed_bytes,\n"
	    "commit_failures, busy_blocks,\n"
	    "free_blocks, lazy_blocks, pooled_blocks, largest_free, allocs, frees, fails,\n"
	    "drains, released_bytes, release_calls, pool_hits, waiters (allocs waiting for\n"
	    "room now), oldest_wait_ms, waits, wait_grants, wait_timeouts, wait_cancels,\n"
	    "wait_refusals,\n"
	    "fragmentation}], totals: {the\n"
	    "same summed (held at 2^64 - 1), without name and quantum; largest_free and\n"
	    "oldest_wait_ms are the maximum}, ops: [{name, count, errors, buckets: [[below_ns, "
	    "cumulative count]]}],\n"
	    "errors: [{name, code, count}]}\n"
	    "Then requests per operation since start (errors, p50 and p99 latency: the bound\n"
	    "of the histogram bucket the quantile falls in, 4 buckets per power of two) and\n"
	    "replies per error code.\n",
    .run = run_stats,
};
