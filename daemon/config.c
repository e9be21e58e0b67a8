/* config.c - vad.conf parsing and validation; see config.h and conf/vad.conf.
 *
 * inih splits lines into key = value and strips comments. Debian's libinih is built without
 * INI_HANDLER_LINENO, so the file is fed to ini_parse_stream through our own reader: it counts
 * lines, left-trims them (so inih never treats an indented line as a continuation of the
 * previous value), notices section headers itself (inih drops empty sections and truncates
 * long section names) and finds syntax errors itself (inih would only name the first). The
 * parse goes on after an error so that every error of a file is reported at once, each as
 * "FILE:LINE: reason", then their count; only running out of memory stops it.
 *
 * This file reads the file, its sections and the [arena] keys; the [vad] keys are one table
 * row each (VAD_KEYS in config_parse.h), parsed, defaulted and shown by config_keys.c.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "config_parse.h"
#include "units.h"

#define HUGETLBFS_MAGIC_NUMBER 0x958458f6
#define DEFAULT_ARENA_SIZE     (4ull << 30)
#define MAX_ARENAS	       256
#define MAX_ARENA_SIZE	       (1ull << 60)
#define MAX_QUANTUM	       (1ull << 30)

/* Out of memory: report it and stop reading the file. */
static int fail_oom(struct parse_state *ps)
{
	ps->aborted = true;
	return config_fail_at(ps, ps->lineno, "out of memory");
}

static bool is_power_of_two(uint64_t v)
{
	return v && !(v & (v - 1));
}

static void arena_conf_free(struct vad_arena_conf *a)
{
	free(a->allow_uids);
	free(a->allow_gids);
	free(a->reader_uids);
	free(a->reader_gids);
	a->allow_uids = NULL;
	a->allow_gids = NULL;
	a->reader_uids = NULL;
	a->reader_gids = NULL;
	a->n_allow_uids = 0;
	a->n_allow_gids = 0;
	a->n_reader_uids = 0;
	a->n_reader_gids = 0;
}

void vad_config_free(struct vad_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_arenas; i++)
		arena_conf_free(&cfg->arenas[i]);
	free(cfg->arenas);
	cfg->arenas = NULL;
	cfg->n_arenas = 0;
}

/* Parse "a, b, c" of user or group names/numbers into a fresh array *out of *n_out ids. */
static int key_id_list(struct parse_state *ps, const char *key, const char *v, bool groups,
		       uint32_t **out, size_t *n_out)
{
	char *copy = strdup(v);
	size_t cap = 1;
	for (const char *p = v; *p; p++)
		cap += *p == ',';
	_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t),
		       "ids are stored as 32-bit values");
	uint32_t *ids = calloc(cap, sizeof(*ids));
	if (!copy || !ids) {
		free(copy);
		free(ids);
		return fail_oom(ps);
	}
	size_t n = 0;
	char *save = NULL;
	bool ok = true;
	/* strtok_r skips empty fields; count commas to catch "a,,b" and trailing commas */
	size_t fields = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*tok))
			tok++;
		char *end = tok + strlen(tok);
		while (end > tok && isspace((unsigned char)end[-1]))
			*--end = '\0';
		fields++;
		if (!*tok) {
			ok = false;
			config_fail_at(ps, ps->lineno, "%s: empty entry in the list", key);
			break;
		}
		if (groups) {
			gid_t g = 0;
			if (config_lookup_gid(tok, &g)) {
				ok = false;
				config_fail_at(ps, ps->lineno, "%s: unknown group '%s'", key, tok);
				break;
			}
			ids[n++] = g;
		} else {
			uid_t u = 0;
			if (config_lookup_uid(tok, &u)) {
				ok = false;
				config_fail_at(ps, ps->lineno, "%s: unknown user '%s'", key, tok);
				break;
			}
			ids[n++] = u;
		}
	}
	if (ok && fields != cap) {
		ok = false;
		config_fail_at(ps, ps->lineno, "%s: empty entry in the list", key);
	}
	free(copy);
	if (!ok) {
		free(ids);
		return 0;
	}
	*out = ids;
	*n_out = n;
	return 1;
}

/* yes/no (also true/false, on/off, 1/0). */
static int key_yes_no(struct parse_state *ps, const char *key, const char *v, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return 1;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return 1;
		}
	}
	return config_fail_at(ps, ps->lineno, "%s = %s: expected yes or no", key, v);
}

static struct vad_arena_conf *current_arena(struct parse_state *ps)
{
	return &ps->cfg->arenas[ps->cfg->n_arenas - 1];
}

static int arena_size(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	if (!config_key_size(ps, key, v, &a->size))
		return 0;
	if (a->size == 0 || a->size > MAX_ARENA_SIZE)
		return config_fail_at(ps, ps->lineno, "size = %s: must be between 1 byte and 1 EiB",
				      v);
	return 1;
}

static int arena_quantum(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	if (!config_key_size(ps, key, v, &a->quantum))
		return 0;
	if (!is_power_of_two(a->quantum))
		return config_fail_at(ps, ps->lineno, "quantum = %s: not a power of two", v);
	if (a->quantum < (uint64_t)config_page_size())
		return config_fail_at(ps, ps->lineno,
				      "quantum = %s: smaller than the page size (%ld bytes)", v,
				      config_page_size());
	if (a->quantum > MAX_QUANTUM)
		return config_fail_at(ps, ps->lineno, "quantum = %s: larger than 1 GiB", v);
	return 1;
}

/* "memfd", "hugetlb[:SIZE]" (config_memory.c) or a directory; hugetlb or a hugetlbfs one gives the
 * quantum its default (finish_arena). */
static int arena_backing(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	ps->hugetlb_page = 0;
	a->hugetlb_page = 0;
	if (strncmp(v, "hugetlb", 7) == 0)
		return arena_backing_hugetlb(ps, key, v);
	if (strcmp(v, "memfd") == 0) {
		a->backing[0] = '\0';
		return 1;
	}
	if (!config_key_path(ps, key, v, a->backing, sizeof(a->backing)))
		return 0;
	struct stat st;
	if (stat(v, &st) != 0)
		return config_fail_at(ps, ps->lineno, "backing = %s: %s", v, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return config_fail_at(ps, ps->lineno,
				      "backing = %s: not a directory (write memfd or a directory)",
				      v);
	struct statfs sf;
	if (statfs(v, &sf) == 0 && (unsigned long)sf.f_type == HUGETLBFS_MAGIC_NUMBER)
		ps->hugetlb_page = (uint64_t)sf.f_bsize;
	return 1;
}

static int arena_allow_uids(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	return key_id_list(ps, key, v, false, &a->allow_uids, &a->n_allow_uids);
}

static int arena_allow_gids(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	return key_id_list(ps, key, v, true, &a->allow_gids, &a->n_allow_gids);
}

static int arena_reader_uids(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	return key_id_list(ps, key, v, false, &a->reader_uids, &a->n_reader_uids);
}

static int arena_reader_gids(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	return key_id_list(ps, key, v, true, &a->reader_gids, &a->n_reader_gids);
}

static int arena_accept_unsealed(struct parse_state *ps, const char *key, const char *v)
{
	return key_yes_no(ps, key, v, &current_arena(ps)->accept_unsealed);
}

static const char *const tenancy_names[] = {
    [VAD_TENANCY_NONE] = "none",
    [VAD_TENANCY_UID] = "uid",
    [VAD_TENANCY_GID] = "gid",
};

const char *vad_tenancy_name(enum vad_tenancy t)
{
	return (unsigned)t < sizeof(tenancy_names) / sizeof(tenancy_names[0]) ? tenancy_names[t]
									      : "none";
}

static int arena_tenancy(struct parse_state *ps, const char *key, const char *v)
{
	for (size_t i = 0; i < sizeof(tenancy_names) / sizeof(tenancy_names[0]); i++) {
		if (strcasecmp(v, tenancy_names[i]) == 0) {
			current_arena(ps)->tenancy = (enum vad_tenancy)i;
			return 1;
		}
	}
	return config_fail_at(ps, ps->lineno,
			      "%s = %s: expected none, uid (one arena per user) or gid (one per "
			      "primary group)",
			      key, v);
}

static int arena_tenant_idle(struct parse_state *ps, const char *key, const char *v)
{
	uint64_t ms;
	if (vad_parse_duration_ms(v, &ms) || ms == 0)
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: expected a duration above 0 with ms, s, m, h, d or "
				      "w (e.g. 5m)",
				      key, v);
	current_arena(ps)->tenant_idle_ms = ms;
	return 1;
}

static int arena_max_tenants(struct parse_state *ps, const char *key, const char *v)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || *end || end == v || v[0] == '-' || n == 0 || n > VAD_MAX_TENANTS_LIMIT)
		return config_fail_at(ps, ps->lineno, "%s = %s: expected a number from 1 to %u",
				      key, v, VAD_MAX_TENANTS_LIMIT);
	current_arena(ps)->max_tenants = (unsigned)n;
	return 1;
}

static const struct {
	const char *name;
	int (*parse)(struct parse_state *ps, const char *key, const char *v);
} arena_keys[N_ARENA_KEYS] = {
#define ARENA_KEY_ROW(id, key, fn) [id] = {key, fn},
    ARENA_KEYS(ARENA_KEY_ROW)
#undef ARENA_KEY_ROW
};

static int apply_arena_key(struct parse_state *ps, enum arena_key k, const char *v)
{
	if (!*v)
		return config_fail_at(ps, ps->lineno, "%s has an empty value", arena_keys[k].name);
	return arena_keys[k].parse(ps, arena_keys[k].name, v);
}

static int find_arena_key(const char *name)
{
	for (int k = 0; k < N_ARENA_KEYS; k++)
		if (strcasecmp(name, arena_keys[k].name) == 0)
			return k;
	return -1;
}

/* Refuse a key given twice in its section, else note where it was given. */
static int note_key_line(struct parse_state *ps, int *key_line, const char *name)
{
	if (*key_line)
		return config_fail_at(ps, ps->lineno, "duplicate key %s (first set at line %d)",
				      name, *key_line);
	*key_line = ps->lineno;
	return 1;
}

/* Strip one pair of surrounding double quotes: socket = "/run/vad/vad.sock". */
static const char *unquote(const char *v, char *buf, size_t cap)
{
	size_t n = strlen(v);
	if (n >= 2 && v[0] == '"' && v[n - 1] == '"' && n - 2 < cap) {
		memcpy(buf, v + 1, n - 2);
		buf[n - 2] = '\0';
		return buf;
	}
	return v;
}

static int ini_handler_fn(void *user, const char *section, const char *name, const char *value)
{
	struct parse_state *ps = user;
	(void)section; /* sections are tracked by the reader (see the top of the file) */
	if (ps->aborted || ps->section == SEC_SKIP)
		return 1; /* a refused header's keys: that error was reported */

	char buf[PATH_MAX];
	const char *v = unquote(value ? value : "", buf, sizeof(buf));
	if (!*name)
		return config_fail_at(ps, ps->lineno, "a value without a key name");

	int k;
	switch (ps->section) {
	case SEC_NONE:
		return config_fail_at(
		    ps, ps->lineno,
		    "%s = ... outside any section (start with [vad] or [arena NAME])", name);
	case SEC_VAD:
		k = config_find_vad_key(name);
		if (k < 0)
			return config_fail_at(ps, ps->lineno, "unknown key '%s' in [vad]", name);
		return note_key_line(ps, &ps->vad_key_line[k], name) &&
		       config_apply_vad_key(ps, (enum vad_key)k, v);
	case SEC_ARENA:
		k = find_arena_key(name);
		if (k < 0)
			return config_fail_at(ps, ps->lineno, "unknown key '%s' in [arena %s]",
					      name, current_arena(ps)->name);
		return note_key_line(ps, &ps->arena_key_line[k], name) &&
		       apply_arena_key(ps, (enum arena_key)k, v);
	case SEC_SKIP:
		break;
	}
	return 1;
}

/* ---- sections ----------------------------------------------------------------------- */

/* The tenancy keys belong together: tenant_idle and max_tenants mean nothing without
 * tenancy, and a tenant arena's name is its section's plus "@ID". */
static int finish_tenancy(struct parse_state *ps, struct vad_arena_conf *a)
{
	static const enum arena_key tenant_keys[] = {A_TENANT_IDLE, A_MAX_TENANTS};
	if (a->tenancy == VAD_TENANCY_NONE) {
		for (size_t i = 0; i < sizeof(tenant_keys) / sizeof(tenant_keys[0]); i++)
			if (ps->arena_key_line[tenant_keys[i]])
				return config_fail_at(
				    ps, ps->arena_key_line[tenant_keys[i]],
				    "%s in [arena %s], which has no tenancy: add tenancy = uid "
				    "(or gid), or remove the line",
				    arena_keys[tenant_keys[i]].name, a->name);
		return 1;
	}
	if (a->n_reader_uids || a->n_reader_gids)
		return config_fail_at(
		    ps, ps->arena_key_line[A_TENANCY],
		    "[arena %s] has tenancy and readers: each tenant's arena is its "
		    "own, so nobody else could read it; put the readers on an "
		    "arena without tenancy",
		    a->name);
	uint64_t slots = 0; /* every slot costs each session a byte or two: bound them all */
	for (size_t i = 0; i < ps->cfg->n_arenas; i++)
		if (ps->cfg->arenas[i].tenancy != VAD_TENANCY_NONE)
			slots += ps->cfg->arenas[i].max_tenants;
	if (slots > VAD_MAX_TENANTS_LIMIT)
		return config_fail_at(ps, ps->arena_key_line[A_TENANCY],
				      "[arena %s]: the sections with tenancy allow %llu tenant "
				      "arenas together (their max_tenants), more than %u; lower "
				      "max_tenants",
				      a->name, (unsigned long long)slots, VAD_MAX_TENANTS_LIMIT);
	if (strlen(a->name) + VAD_TENANT_SUFFIX_MAX > VAD_NAME_MAX)
		return config_fail_at(ps, ps->arena_key_line[A_TENANCY],
				      "[arena %s] has tenancy, so its tenants' arenas are named "
				      "%s@ID: the name may have at most %d characters",
				      a->name, a->name, VAD_NAME_MAX - VAD_TENANT_SUFFIX_MAX);
	return 1;
}

/* Readers need writers named: in an arena without an allow-list every peer writes, so a
 * reader list there would promise a read-only peer that does not exist. */
static int check_readers(struct parse_state *ps, const struct vad_arena_conf *a)
{
	if (!a->allow_any || (!a->n_reader_uids && !a->n_reader_gids))
		return 1;
	int line = ps->arena_key_line[A_READER_UIDS];
	const char *key = "reader_uids";
	if (!line ||
	    (ps->arena_key_line[A_READER_GIDS] && ps->arena_key_line[A_READER_GIDS] < line)) {
		line = ps->arena_key_line[A_READER_GIDS];
		key = "reader_gids";
	}
	return config_fail_at(ps, line,
			      "%s in [arena %s], which has neither allow_uids nor allow_gids: "
			      "such an arena is open to every peer, and every peer may write; "
			      "name the writers with allow_uids or allow_gids (root always "
			      "writes) so the readers can be held to reading",
			      key, a->name);
}

/* Checks that need the whole [arena] section: size given, quantum default, size multiple. */
static int finish_arena(struct parse_state *ps)
{
	if (ps->section != SEC_ARENA)
		return 1;
	struct vad_arena_conf *a = current_arena(ps);
	int header = ps->arena_lines[ps->cfg->n_arenas - 1];
	char qbuf[32], sbuf[32];
	memcpy(a->key_line, ps->arena_key_line, sizeof(ps->arena_key_line)); /* vactl config */

	if (!ps->arena_key_line[A_SIZE])
		return config_fail_at(ps, header, "[arena %s] has no size (e.g. size = 4G)",
				      a->name);
	/* The checks below combine the section's values: after an error in the section one
	 * of them may be missing or half-parsed, and that error was reported already. */
	if (ps->errors > ps->section_errors)
		return 0;
	if (!ps->arena_key_line[A_QUANTUM])
		a->quantum = ps->hugetlb_page ? ps->hugetlb_page : (uint64_t)config_page_size();
	else if (ps->hugetlb_page && a->quantum < ps->hugetlb_page)
		return config_fail_at(ps, ps->arena_key_line[A_QUANTUM],
				      "quantum %s is smaller than the huge page size %s of %s",
				      vad_format_size(a->quantum, qbuf, sizeof(qbuf)),
				      vad_format_size(ps->hugetlb_page, sbuf, sizeof(sbuf)),
				      a->backing[0] ? a->backing : "hugetlb");
	if (a->size % a->quantum)
		return config_fail_at(
		    ps, ps->arena_key_line[A_SIZE], "size %llu is not a multiple of the quantum %s",
		    (unsigned long long)a->size, vad_format_size(a->quantum, qbuf, sizeof(qbuf)));
	if (a->accept_unsealed && !a->backing[0])
		return config_fail_at(
		    ps, ps->arena_key_line[A_ACCEPT_UNSEALED],
		    "accept_unsealed = yes in [arena %s], whose backing is a memfd: a "
		    "memfd is always sealed, only a directory backing can be unsealed "
		    "(remove the line)",
		    a->name);
	a->allow_any = a->n_allow_uids == 0 && a->n_allow_gids == 0;
	if (!config_finish_memory(ps, a) || !check_readers(ps, a))
		return 0;
	return finish_tenancy(ps, a);
}

static bool valid_arena_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > VAD_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
			return false;
	return true;
}

static int add_arena(struct parse_state *ps, const char *name)
{
	struct vad_config *cfg = ps->cfg;
	if (!valid_arena_name(name))
		return config_fail_at(
		    ps, ps->lineno,
		    "bad arena name '%s' (1 to %d letters, digits, '_', '-' or '.')", name,
		    VAD_NAME_MAX);
	for (size_t i = 0; i < cfg->n_arenas; i++)
		if (strcmp(cfg->arenas[i].name, name) == 0)
			return config_fail_at(ps, ps->lineno,
					      "duplicate arena '%s' (first defined at line %d)",
					      name, ps->arena_lines[i]);
	if (cfg->n_arenas >= MAX_ARENAS)
		return config_fail_at(ps, ps->lineno, "too many arenas (at most %d)", MAX_ARENAS);
	if (cfg->n_arenas == ps->arenas_cap) {
		size_t cap = ps->arenas_cap ? ps->arenas_cap * 2 : 4;
		struct vad_arena_conf *arenas = realloc(cfg->arenas, cap * sizeof(*arenas));
		if (!arenas)
			return fail_oom(ps);
		cfg->arenas = arenas;
		int *lines = realloc(ps->arena_lines, cap * sizeof(*lines));
		if (!lines)
			return fail_oom(ps);
		ps->arena_lines = lines;
		ps->arenas_cap = cap;
	}
	struct vad_arena_conf *a = &cfg->arenas[cfg->n_arenas];
	memset(a, 0, sizeof(*a));
	strcpy(a->name, name);
	a->allow_any = true;
	a->tenant_idle_ms = VAD_TENANT_IDLE_DEFAULT_MS;
	a->max_tenants = VAD_MAX_TENANTS_DEFAULT;
	a->line = ps->lineno;
	ps->section_errors = ps->errors;
	ps->arena_lines[cfg->n_arenas] = ps->lineno;
	cfg->n_arenas++;
	memset(ps->arena_key_line, 0, sizeof(ps->arena_key_line));
	ps->hugetlb_page = 0;
	return 1;
}

/* A "[...]" line: close the previous section and open the new one (SEC_SKIP if refused). */
static void start_section(struct parse_state *ps, const char *inner, size_t len)
{
	char name[VAD_NAME_MAX + 64];
	finish_arena(ps);
	ps->section = SEC_SKIP;
	while (len && isspace((unsigned char)*inner)) {
		inner++;
		len--;
	}
	while (len && isspace((unsigned char)inner[len - 1]))
		len--;
	if (len >= sizeof(name)) {
		config_fail_at(ps, ps->lineno, "section name too long");
		return;
	}
	memcpy(name, inner, len);
	name[len] = '\0';

	if (strcasecmp(name, "vad") == 0) {
		if (ps->vad_section_line) {
			config_fail_at(ps, ps->lineno, "duplicate section [vad] (first at line %d)",
				       ps->vad_section_line);
			return;
		}
		ps->vad_section_line = ps->lineno;
		ps->section = SEC_VAD;
		return;
	}
	if (strncasecmp(name, "arena", 5) == 0 &&
	    (name[5] == '\0' || isspace((unsigned char)name[5]))) {
		const char *arena = name + 5;
		while (isspace((unsigned char)*arena))
			arena++;
		if (!*arena) {
			config_fail_at(ps, ps->lineno, "arena section needs a name: [arena NAME]");
			return;
		}
		if (add_arena(ps, arena))
			ps->section = SEC_ARENA;
		return;
	}
	config_fail_at(ps, ps->lineno, "unknown section [%s] (expected [vad] or [arena NAME])",
		       name);
}

/* The length of line[0, len) before a '#' comment that follows whitespace outside double
 * quotes ("workers = auto   # one per CPU"); inih itself ends a line only at such a ';'. */
static size_t without_trailing_comment(const char *line, size_t len)
{
	bool quoted = false;
	for (size_t i = 0; i < len; i++) {
		if (line[i] == '"')
			quoted = !quoted;
		else if (line[i] == '#' && !quoted && i > 0 &&
			 (line[i - 1] == ' ' || line[i - 1] == '\t'))
			return i;
	}
	return len;
}

/* Whether inih would refuse line[0, len) (comments stripped, not blank, not a comment) as it
 * refuses one: a "[" without "]", or no "=" or ":" before a "; comment". */
static bool is_syntax_error(const char *line, size_t len)
{
	if (line[0] == '[')
		return !memchr(line, ']', len);
	for (size_t i = 0; i < len; i++) {
		if (line[i] == '=' || line[i] == ':')
			return false;
		if (line[i] == ';' && i > 0 && (line[i - 1] == ' ' || line[i - 1] == '\t'))
			return true;
	}
	return true;
}

/* ini_reader: hand inih one left-trimmed physical line at a time, counting lines; a line
 * with an error of its own (too long, a syntax error, a refused header) goes as a blank. */
static char *line_reader(char *str, int num, void *stream)
{
	struct parse_state *ps = stream;
	if (ps->aborted)
		return NULL;
	ssize_t n = getline(&ps->line, &ps->line_cap, ps->file);
	if (n < 0)
		return NULL;
	ps->lineno++;

	const char *p = ps->line;
	if (ps->lineno == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3; /* a UTF-8 byte order mark, as some editors write */
	while (*p == ' ' || *p == '\t')
		p++;
	size_t len = strlen(p);
	size_t body = len;
	while (body && (p[body - 1] == '\n' || p[body - 1] == '\r'))
		body--;
	if (num < 3)
		return NULL;
	/* inih needs room for the line, its newline and the terminator */
	if (body + 2 > (size_t)num) {
		config_fail_at(ps, ps->lineno, "line too long (at most %d characters)", num - 3);
		body = 0;
	}
	if (body && p[0] != '#' && p[0] != ';') {
		body = without_trailing_comment(p, body);
		while (body && (p[body - 1] == ' ' || p[body - 1] == '\t'))
			body--;
	}
	if (body && p[0] != '#' && p[0] != ';' && is_syntax_error(p, body)) {
		config_fail_at(ps, ps->lineno,
			       p[0] == '[' ? "syntax error: a section header needs its ']' "
					     "([vad] or [arena NAME])"
					   : "syntax error (expected [section], key = value or a "
					     "comment starting with # or ;)");
		body = 0;
	} else if (body && p[0] == '[') {
		int before = ps->errors;
		start_section(ps, p + 1, (size_t)((const char *)memchr(p, ']', body) - p - 1));
		if (ps->errors > before)
			body = 0;
	}
	memcpy(str, p, body);
	str[body] = '\n';
	str[body + 1] = '\0';
	return str;
}

static int add_default_arena(struct vad_config *cfg)
{
	cfg->arenas = calloc(1, sizeof(*cfg->arenas));
	if (!cfg->arenas)
		return -1;
	struct vad_arena_conf *a = &cfg->arenas[0];
	strcpy(a->name, "default");
	a->size = DEFAULT_ARENA_SIZE;
	a->quantum = (uint64_t)config_page_size();
	a->allow_any = true;
	a->tenant_idle_ms = VAD_TENANT_IDLE_DEFAULT_MS;
	a->max_tenants = VAD_MAX_TENANTS_DEFAULT;
	cfg->n_arenas = 1;
	return 0;
}

/* Open path for reading, refusing a directory; NULL with errno set. */
static FILE *open_config_file(const char *path)
{
	FILE *f = fopen(path, "re");
	struct stat st;
	if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		f = NULL;
		errno = EISDIR;
	}
	return f;
}

/* Report inih's own failures and a read error; the lines inih refuses are found (and
 * reported, all of them) by line_reader, so inih's error line is ours already. */
static void note_parse_result(struct parse_state *ps, int rc, int read_errno)
{
	if (rc > 0 && !ps->failed)
		config_fail_at(ps, rc,
			       "syntax error (expected [section], key = value or a comment)");
	else if (rc < 0)
		config_fail_at(ps, ps->lineno, "inih failed (%d)", rc);
	if (read_errno)
		config_fail_at(ps, ps->lineno + 1, "read error: %s", strerror(read_errno));
}

/* The checks that need the whole file, and the default arena if it named none. */
static void finish_file(struct parse_state *ps)
{
	struct vad_config *cfg = ps->cfg;
	if (!ps->aborted)
		finish_arena(ps);
	if (!ps->failed && ps->vad_key_line[K_STATS_RETENTION] &&
	    cfg->stats_retention_ms < cfg->stats_interval_ms)
		config_fail_at(ps, ps->vad_key_line[K_STATS_RETENTION],
			       "stats_retention is shorter than stats_interval");
	if (!ps->failed && cfg->n_arenas == 0 && add_default_arena(cfg) != 0)
		fail_oom(ps);
}

/* The line number of an error line "PATH:LINE: reason". */
static long error_line_number(const struct parse_state *ps, const char *line)
{
	size_t skip = strlen(ps->path) + 1;
	return strlen(line) > skip ? strtol(line + skip, NULL, 10) : 0; /* 0: a cut first line */
}

/* Put the shown error lines in file order (the checks of a whole section find theirs at its
 * end) with insertion sort: there are at most a few dozen. */
static void sort_error_lines(struct parse_state *ps)
{
	char *lines[256];
	if ((size_t)ps->errors_shown > sizeof(lines) / sizeof(lines[0]))
		return; /* discovery order then */
	char *copy = strndup(ps->err, ps->err_used);
	size_t n = 0;
	if (!copy)
		return;
	char *save = NULL;
	for (char *l = strtok_r(copy, "\n", &save); l && n < 256; l = strtok_r(NULL, "\n", &save)) {
		size_t j = n++;
		for (; j > 0 && error_line_number(ps, lines[j - 1]) > error_line_number(ps, l); j--)
			lines[j] = lines[j - 1];
		lines[j] = l;
	}
	size_t used = 0;
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(ps->err + used, ps->err_len - used, "%s%s", i ? "\n" : "",
					 lines[i]);
	ps->err_used = used;
	free(copy);
}

/* After more than one error: the lines in file order, then one that counts them (and the ones
 * err had no room for). */
static void finish_errors(struct parse_state *ps)
{
	if (ps->errors < 2 || !ps->err || !ps->err_len)
		return;
	sort_error_lines(ps);
	char line[PATH_MAX + 128];
	size_t n;
	/* the count shows, in the place of the last lines if it must, but not of the first */
	for (;;) {
		int hidden = ps->errors - ps->errors_shown;
		if (hidden)
			snprintf(line, sizeof(line), "\n%s: %d errors (%d more not shown)",
				 ps->path, ps->errors, hidden);
		else
			snprintf(line, sizeof(line), "\n%s: %d errors", ps->path, ps->errors);
		n = strlen(line);
		char *nl = memrchr(ps->err, '\n', ps->err_used);
		if (ps->err_used + n < ps->err_len || !nl)
			break; /* it fits, or only the first error is left: that one stays */
		ps->err_used = (size_t)(nl - ps->err);
		ps->errors_shown--;
	}
	if (n < ps->err_len - ps->err_used)
		memcpy(ps->err + ps->err_used, line, n + 1);
	else
		ps->err[ps->err_used] = '\0';
}

int vad_config_load(const char *path, struct vad_config *cfg, char *err, size_t err_len)
{
	if (err && err_len)
		err[0] = '\0';
	if (!cfg) {
		if (err && err_len)
			snprintf(err, err_len, "no config structure given");
		return -1;
	}
	vad_config_defaults(cfg);
	if (!path || !*path) {
		/* built-in defaults: the default arena only */
		if (add_default_arena(cfg) == 0)
			return 0;
		if (err && err_len)
			snprintf(err, err_len, "out of memory");
		return -1;
	}
	if (strlen(path) >= sizeof(cfg->path)) {
		if (err && err_len)
			snprintf(err, err_len, "%s: path too long", path);
		return -1;
	}
	strcpy(cfg->path, path);

	struct parse_state ps = {.cfg = cfg, .path = path, .err = err, .err_len = err_len};
	ps.file = open_config_file(path);
	if (!ps.file) {
		if (err && err_len)
			snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	int rc = ini_parse_stream(line_reader, &ps, ini_handler_fn, &ps);
	int read_errno = ferror(ps.file) ? errno : 0;
	fclose(ps.file);
	free(ps.line);
	note_parse_result(&ps, rc, read_errno);
	finish_file(&ps);
	free(ps.arena_lines);
	memcpy(cfg->key_line, ps.vad_key_line, sizeof(ps.vad_key_line));
	if (ps.failed) {
		finish_errors(&ps);
		vad_config_free(cfg);
		return -1;
	}
	return 0;
}
