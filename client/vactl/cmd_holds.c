/* cmd_holds.c - who holds what: vactl ranges (one session's ranges), vactl tokens (live share
 * tokens) and vactl kill (disconnect a session, admin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vactl.h"

#define SZ(v)  vactl_fmt_size((v), (char[32]){0}, 32)
#define DUR(v) vactl_fmt_duration((v), (char[32]){0}, 32)

static const char *num(char *buf, size_t len, unsigned long long v)
{
	snprintf(buf, len, "%llu", v);
	return buf;
}
#define N(v) num((char[32]){0}, 32, (v))

/* --limit N: how many entries at most (0: all). */
struct list_args {
	size_t limit;
	bool show_tokens;
};

enum { OPT_LIMIT = 0x5300, OPT_SHOW_TOKENS };

static int on_list_opt(int opt, const char *arg, void *ctx)
{
	struct list_args *a = ctx;
	switch (opt) {
	case OPT_LIMIT: {
		char *end;
		unsigned long long v = strtoull(arg, &end, 10);
		if (!*arg || *end || arg[0] == '-')
			return vactl_usage_error(NULL, "bad --limit '%s' (a count, 0 for all)",
						 arg);
		a->limit = (size_t)v;
		return VACTL_EXIT_OK;
	}
	case OPT_SHOW_TOKENS:
		a->show_tokens = true;
		return VACTL_EXIT_OK;
	}
	return VACTL_EXIT_USAGE;
}

static const struct option list_opts[] = {
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"show-tokens", no_argument, NULL, OPT_SHOW_TOKENS},
    {0},
};

/* Parse options and at most max operands (exactly max when need), then connect. */
static bool begin(const struct vactl_cmd *cmd, struct vactl_opts *o, int argc, char **argv, int max,
		  bool need, struct list_args *a, int *first, vad_client **c, int *rc)
{
	*rc = vactl_parse_cmd(cmd, o, argc, argv, NULL, list_opts, on_list_opt, a, first);
	if (*rc) {
		*rc = *rc < 0 ? VACTL_EXIT_OK : *rc;
		return false;
	}
	if ((*rc = vactl_check_operands(cmd, argc, argv, *first, max)))
		return false;
	if (need && argc - *first < max) {
		*rc = vactl_usage_error(cmd, "name a session: its id (vactl clients), pid or name");
		return false;
	}
	return (*rc = vactl_connect(o, c)) == VACTL_EXIT_OK;
}

/* ---- ranges --------------------------------------------------------------------------------- */

static int run_ranges(struct vactl_opts *o, int argc, char **argv)
{
	struct list_args a = {0};
	int first, rc;
	vad_client *c;
	if (!begin(&vactl_cmd_ranges, o, argc, argv, 1, true, &a, &first, &c, &rc))
		return rc;
	struct vad_held_list *l;
	int err = vad_session_ranges(c, argv[first], a.limit, &l);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < l->n; i++) {
			const struct vad_held_range *h = &l->ranges[i];
			json_object *jr = json_object_new_object();
			vactl_json_add_str(jr, "arena", h->arena);
			vactl_json_add_u64(jr, "offset", h->offset);
			vactl_json_add_u64(jr, "size", h->size);
			vactl_json_add_u64(jr, "refs", h->refs);
			vactl_json_add_u64(jr, "holders", h->holders);
			json_object_object_add(
			    jr, "shared",
			    json_object_new_boolean(h->shared || h->holders > h->refs));
			vactl_json_add_u64(jr, "age_ms", h->age_ms);
			json_object_array_add(arr, jr);
		}
		json_object *j = json_object_new_object();
		vactl_json_add_u64(j, "session_id", l->session_id);
		vactl_json_add_u64(j, "total", l->total);
		json_object_object_add(j, "truncated", json_object_new_boolean(l->truncated));
		json_object_object_add(j, "ranges", arr);
		vactl_json_print(j);
	} else {
		static const char *const heads[] = {"ARENA",  "OFFSET",	 "SIZE",
						    "SHARED", "HOLDERS", "AGE"};
		struct vactl_table *t = vactl_table_new(6, heads);
		uint64_t bytes = 0;
		for (size_t i = 0; i < l->n; i++) {
			const struct vad_held_range *h = &l->ranges[i];
			char off[32];
			snprintf(off, sizeof(off), "0x%llx", (unsigned long long)h->offset);
			vactl_sum_into(&bytes, h->size);
			const char *shared = h->holders > h->refs ? "yes"
					     : h->shared	  ? "token"
								  : "no";
			vactl_table_row(t, h->arena, off, SZ(h->size), shared, N(h->holders),
					DUR(h->age_ms));
		}
		vactl_table_print(t);
		printf("session %llu: %zu range%s listed, %s%s\n",
		       (unsigned long long)l->session_id, l->n, l->n == 1 ? "" : "s", SZ(bytes),
		       l->truncated ? " (more left: --limit)" : "");
	}
	free(l);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_ranges = {
    .name = "ranges",
    .args = "CLIENT [--limit N]",
    .summary = "the ranges one session holds",
    .help = "Lists the ranges session CLIENT holds: its session id as 'vactl clients' shows it,\n"
	    "or a pid or name only one session has. A non-admin may name only sessions of its\n"
	    "own uid. The list comes a page at a time in the daemon's table order (not sorted);\n"
	    "ranges allocated or freed meanwhile may be missed or listed twice. SHARED is 'yes'\n"
	    "when another session holds the range too, 'token' when it has (or had) a share\n"
	    "token but no other holder; HOLDERS counts references over every session; AGE is\n"
	    "since the range was allocated. --limit N stops after N ranges (0: all).\n"
	    "JSON: {session_id, total, truncated, ranges: [{arena, offset, size, refs, holders,\n"
	    "shared, age_ms}]}\n",
    .run = run_ranges,
};

/* ---- tokens --------------------------------------------------------------------------------- */

static int run_tokens(struct vactl_opts *o, int argc, char **argv)
{
	struct list_args a = {0};
	int first, rc;
	vad_client *c;
	if (!begin(&vactl_cmd_tokens, o, argc, argv, 0, false, &a, &first, &c, &rc))
		return rc;
	struct vad_token_list *l;
	int err = vad_tokens(c, a.show_tokens, a.limit, &l);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < l->n; i++) {
			const struct vad_token_info *t = &l->tokens[i];
			json_object *jt = json_object_new_object();
			vactl_json_add_str(jt, "arena", t->arena);
			vactl_json_add_u64(jt, "offset", t->offset);
			vactl_json_add_u64(jt, "size", t->size);
			vactl_json_add_u64(jt, "age_ms", t->age_ms);
			if (t->expires)
				vactl_json_add_u64(jt, "ttl_left_ms", t->ttl_left_ms);
			else
				json_object_object_add(jt, "ttl_left_ms", NULL);
			json_object_object_add(jt, "single_use",
					       json_object_new_boolean(t->single_use));
			vactl_json_add_u64(jt, "holders", t->holders);
			vactl_json_add_u64(jt, "uid", t->uid);
			if (a.show_tokens)
				vactl_json_add_str(jt, "token", t->token);
			json_object_array_add(arr, jt);
		}
		json_object *j = json_object_new_object();
		vactl_json_add_u64(j, "total", l->total);
		json_object_object_add(j, "truncated", json_object_new_boolean(l->truncated));
		json_object_object_add(j, "tokens", arr);
		vactl_json_print(j);
	} else {
		static const char *const heads[] = {"ARENA",   "OFFSET",   "SIZE",
						    "AGE",     "TTL-LEFT", "SINGLE-USE",
						    "HOLDERS", "UID",	   "TOKEN"};
		struct vactl_table *t = vactl_table_new(a.show_tokens ? 9 : 8, heads);
		for (size_t i = 0; i < l->n; i++) {
			const struct vad_token_info *x = &l->tokens[i];
			char off[32];
			snprintf(off, sizeof(off), "0x%llx", (unsigned long long)x->offset);
			vactl_table_row(t, x->arena, off, SZ(x->size), DUR(x->age_ms),
					x->expires ? DUR(x->ttl_left_ms) : "never",
					x->single_use ? "yes" : "no", N(x->holders), N(x->uid),
					x->token);
		}
		vactl_table_print(t);
		printf("%zu live token%s listed%s\n", l->n, l->n == 1 ? "" : "s",
		       l->truncated ? " (more left: --limit)" : "");
	}
	free(l);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_tokens = {
    .name = "tokens",
    .args = "[--show-tokens] [--limit N]",
    .summary = "live share tokens by range and age",
    .help = "Lists the live share tokens, oldest first: the range each shares (arena, offset,\n"
	    "size), its age, the time left before it expires, whether it is single use, how\n"
	    "many references its range has over every session, and the uid that shared it.\n"
	    "An admin sees every token, anyone else the tokens its own uid made. The token\n"
	    "strings (which let anyone attach) are shown only to an admin who asks with\n"
	    "--show-tokens. --limit N stops after N tokens (0: all).\n"
	    "JSON: {total (every live token; admins only), truncated, tokens: [{arena, offset,\n"
	    "size, age_ms, ttl_left_ms (null: never expires), single_use, holders, uid, token\n"
	    "(with --show-tokens)}]}\n",
    .run = run_tokens,
};

/* ---- kill ----------------------------------------------------------------------------------- */

static int run_kill(struct vactl_opts *o, int argc, char **argv)
{
	struct list_args a = {0};
	int first, rc;
	vad_client *c;
	if (!begin(&vactl_cmd_kill, o, argc, argv, 1, true, &a, &first, &c, &rc))
		return rc;
	struct vad_killed k;
	int err = vad_kill(c, argv[first], &k);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		json_object *j = json_object_new_object();
		vactl_json_add_u64(j, "session_id", k.session_id);
		vactl_json_add_u64(j, "pid", k.pid);
		vactl_json_add_u64(j, "uid", k.uid);
		vactl_json_add_str(j, "name", k.name);
		vactl_json_add_u64(j, "held_bytes", k.held_bytes);
		vactl_json_add_u64(j, "held_ranges", k.held_ranges);
		vactl_json_print(j);
	} else {
		printf("session %llu ('%s', pid %u, uid %u) disconnected; %llu reference%s (%s) "
		       "dropped as on a disconnect\n",
		       (unsigned long long)k.session_id, k.name, k.pid, k.uid,
		       (unsigned long long)k.held_ranges, k.held_ranges == 1 ? "" : "s",
		       SZ(k.held_bytes));
	}
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_kill = {
    .name = "kill",
    .args = "CLIENT",
    .summary = "disconnect a session, dropping its references (admin)",
    .help = "Disconnects session CLIENT (its id as 'vactl clients' shows it, or a pid or name\n"
	    "only one session has) and drops its references as a disconnect would: ranges only\n"
	    "it held go back to the arena, shared ranges stay with their other holders. Its\n"
	    "client gets VAD_EKILLED with the sentence \"disconnected by an administrator\n"
	    "(vactl kill from uid N)\" on every later call. The daemon logs the kill and records\n"
	    "a session-killed event (vactl history). Admin only.\n"
	    "JSON: {session_id, pid, uid, name, held_bytes, held_ranges} (what it held when told\n"
	    "to go)\n",
    .run = run_kill,
};

/* ---- config --------------------------------------------------------------------------------- */

static int run_config(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_config, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	struct vad_config_list *l;
	int err = vad_config(c, &l);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < l->n; i++) {
			json_object *jk = json_object_new_object();
			vactl_json_add_str(jk, "section", l->keys[i].section);
			vactl_json_add_str(jk, "key", l->keys[i].key);
			vactl_json_add_str(jk, "value", l->keys[i].value);
			vactl_json_add_str(jk, "source", l->keys[i].source);
			json_object_array_add(arr, jk);
		}
		json_object *j = json_object_new_object();
		vactl_json_add_str(j, "path", l->path);
		json_object_object_add(j, "truncated", json_object_new_boolean(l->truncated));
		json_object_object_add(j, "keys", arr);
		vactl_json_print(j);
	} else {
		static const char *const heads[] = {"SECTION", "KEY", "VALUE", "SOURCE"};
		struct vactl_table *t = vactl_table_new(4, heads);
		for (size_t i = 0; i < l->n; i++)
			vactl_table_row(t, l->keys[i].section, l->keys[i].key, l->keys[i].value,
					l->keys[i].source);
		vactl_table_print(t);
		printf("configuration file: %s%s\n",
		       l->path[0] ? l->path : "(none: built-in defaults)",
		       l->truncated ? " (keys left out: the daemon's max_frame is too small)" : "");
	}
	free(l);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_config = {
    .name = "config",
    .args = "",
    .summary = "the running configuration, each value's source (admin)",
    .help = "Prints every [vad] key of the running daemon, then every key of each [arena]\n"
	    "section, with its value and its source: 'default', FILE:LINE of the configuration\n"
	    "file, 'command line' (vad --socket), or 'reload FILE:LINE' for a [vad] value a\n"
	    "reload set or changed ('reload (default)': a reload found the key gone; arena\n"
	    "sections need a restart). Admin only.\n"
	    "JSON: {path, truncated, keys: [{section (\"vad\" or \"arena NAME\"), key, value,\n"
	    "source}]}\n",
    .run = run_config,
};
