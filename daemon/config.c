/* config.c - vad.conf parsing and validation; see config.h and conf/vad.conf.
 *
 * inih splits lines into key = value and strips comments. Debian's libinih is built without
 * INI_HANDLER_LINENO, so the file is fed to ini_parse_stream through our own reader: it counts
 * lines, left-trims them (so inih never treats an indented line as a continuation of the
 * previous value), notices section headers itself (inih drops empty sections and truncates
 * long section names) and stops the parse at the first error. Every error is reported as
 * "FILE:LINE: reason".
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

#define HUGETLBFS_MAGIC_NUMBER 0x958458f6
#define DEFAULT_ARENA_SIZE     (4ull << 30)
#define MAX_ARENAS	       256
#define MAX_ARENA_SIZE	       (1ull << 60)
#define MAX_QUANTUM	       (1ull << 30)
#define MAX_THREADS	       1024
#define MAX_FRAME_MIN	       (4u * 1024u)
#define MAX_FRAME_MAX	       (16u * 1024u * 1024u)
#define MAX_CLIENTS_MAX	       1000000u
#define MAX_BATCH_MAX	       (1u << 20)
#define STATS_INTERVAL_MIN_MS  100ull
#define STATS_INTERVAL_MAX_MS  (86400ull * 1000)
#define STATS_RETENTION_MIN_MS (60ull * 1000)
#define STATS_RETENTION_MAX_MS (100ull * 365 * 86400 * 1000)
#define HELLO_TIMEOUT_MIN_MS   100ull
#define HELLO_TIMEOUT_MAX_MS   (3600ull * 1000)

enum section_kind { SEC_NONE, SEC_VAD, SEC_ARENA };

/* The [vad] keys: one row each makes the enum value and the name a file spells it with. */
#define VAD_KEYS(X)                                                                                \
	X(K_SOCKET, "socket")                                                                      \
	X(K_SOCKET_MODE, "socket_mode")                                                            \
	X(K_WORKERS, "workers")                                                                    \
	X(K_WORKER_BALANCE, "worker_balance")                                                      \
	X(K_WORKER_SPREAD_IDLE, "worker_spread_idle")                                              \
	X(K_NODES, "nodes")                                                                        \
	X(K_LAZY_MAX, "lazy_max")                                                                  \
	X(K_MAX_FRAME, "max_frame")                                                                \
	X(K_MAX_CLIENTS, "max_clients")                                                            \
	X(K_MAX_BATCH, "max_batch")                                                                \
	X(K_QUOTA_CLIENT, "quota_client")                                                          \
	X(K_QUOTA_UID, "quota_uid")                                                                \
	X(K_ADMIN_GROUP, "admin_group")                                                            \
	X(K_STATS_DB, "stats_db")                                                                  \
	X(K_STATS_INTERVAL, "stats_interval")                                                      \
	X(K_STATS_RETENTION, "stats_retention")                                                    \
	X(K_LOG_LEVEL, "log_level")                                                                \
	X(K_HELLO_TIMEOUT, "hello_timeout")                                                        \
	X(K_MAX_CLIENTS_UID, "max_clients_uid")                                                    \
	X(K_ADMIN_SLOTS, "admin_slots")                                                            \
	X(K_MAX_RANGES_CLIENT, "max_ranges_client")                                                \
	X(K_MAX_RANGES_UID, "max_ranges_uid")

/* The keys of an [arena NAME] section, likewise. */
#define ARENA_KEYS(X)                                                                              \
	X(A_SIZE, "size")                                                                          \
	X(A_QUANTUM, "quantum")                                                                    \
	X(A_BACKING, "backing")                                                                    \
	X(A_ALLOW_UIDS, "allow_uids")                                                              \
	X(A_ALLOW_GIDS, "allow_gids")                                                              \
	X(A_ACCEPT_UNSEALED, "accept_unsealed")

#define KEY_ENUM(id, name) id,
#define KEY_NAME(id, name) [id] = name,

enum vad_key { VAD_KEYS(KEY_ENUM) N_VAD_KEYS };
static const char *const vad_key_names[N_VAD_KEYS] = {VAD_KEYS(KEY_NAME)};

enum arena_key { ARENA_KEYS(KEY_ENUM) N_ARENA_KEYS };
static const char *const arena_key_names[N_ARENA_KEYS] = {ARENA_KEYS(KEY_NAME)};

#undef KEY_ENUM
#undef KEY_NAME

struct parse_state {
	struct vad_config *cfg;
	const char *path;
	FILE *file;
	char *line;
	size_t line_cap;
	int lineno;
	bool failed;
	int error_line;
	char *err;
	size_t err_len;

	enum section_kind section;
	int vad_section_line;		  /* first [vad] header, 0 if none yet */
	int vad_key_line[N_VAD_KEYS];	  /* where each [vad] key was set, 0 if not */
	int arena_key_line[N_ARENA_KEYS]; /* same for the arena being read */
	int *arena_lines;		  /* header line of every arena, parallel to cfg->arenas */
	size_t arenas_cap;
	uint64_t hugetlb_page; /* page size of the current arena's hugetlbfs backing, 0 if none */
};

static long system_page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? p : 4096;
}

static int fail_at(struct parse_state *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record the first error as "FILE:LINE: reason"; returns 0 so handlers can return it. */
static int fail_at(struct parse_state *ps, int line, const char *fmt, ...)
{
	if (ps->failed)
		return 0;
	ps->failed = true;
	ps->error_line = line;
	char reason[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (ps->err && ps->err_len)
		snprintf(ps->err, ps->err_len, "%s:%d: %s", ps->path, line, reason);
	return 0;
}

void vad_config_defaults(struct vad_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->socket_mode = 0660;
	cfg->max_frame = 64u * 1024u;
	cfg->max_clients = 1024;
	cfg->max_batch = 1024;
	cfg->stats_interval_ms = 10ull * 1000;
	cfg->stats_retention_ms = 30ull * 86400 * 1000;
	cfg->log_level = VAD_LOG_INFO;
	cfg->worker_spread_idle = 0.4;
	cfg->hello_timeout_ms = 10ull * 1000;
	cfg->max_clients_uid = 128;
	cfg->admin_slots = 4;
	cfg->max_ranges_client = VAD_MAX_RANGES_CLIENT_DEFAULT;
	cfg->max_ranges_uid = VAD_MAX_RANGES_UID_DEFAULT;
}

static void arena_conf_free(struct vad_arena_conf *a)
{
	free(a->allow_uids);
	free(a->allow_gids);
	a->allow_uids = NULL;
	a->allow_gids = NULL;
	a->n_allow_uids = 0;
	a->n_allow_gids = 0;
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

/* ---- value parsers ------------------------------------------------------------------ */

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	if (!all_digits(s) || strlen(s) > 19)
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, NULL, 10);
	if (errno || v > max)
		return -1;
	*out = v;
	return 0;
}

/* getpwnam_r/getgrnam_r behind one shape: 0 and *id on a match, ENOENT if none, else errno. */
typedef int (*id_by_name_fn)(const char *name, char *buf, size_t cap, uint64_t *id);

static int uid_by_name(const char *name, char *buf, size_t cap, uint64_t *id)
{
	struct passwd pw, *res = NULL;
	int rc = getpwnam_r(name, &pw, buf, cap, &res);
	if (rc == 0 && res)
		*id = pw.pw_uid;
	return rc ? rc : res ? 0 : ENOENT;
}

static int gid_by_name(const char *name, char *buf, size_t cap, uint64_t *id)
{
	struct group gr, *res = NULL;
	int rc = getgrnam_r(name, &gr, buf, cap, &res);
	if (rc == 0 && res)
		*id = gr.gr_gid;
	return rc ? rc : res ? 0 : ENOENT;
}

/* A name or a number; numbers need no passwd/group entry (containers often have none). */
static int lookup_id(const char *s, uint64_t max, id_by_name_fn by_name, uint64_t *out)
{
	if (all_digits(s))
		return parse_uint(s, max, out);
	size_t cap = 4096;
	for (;;) {
		char *buf = malloc(cap);
		if (!buf)
			return -1;
		int rc = by_name(s, buf, cap, out);
		free(buf);
		if (rc == ERANGE && cap < (1u << 20)) {
			cap *= 4;
			continue;
		}
		return rc ? -1 : 0;
	}
}

static int lookup_uid(const char *s, uid_t *out)
{
	uint64_t v;
	if (lookup_id(s, (uid_t)-2, uid_by_name, &v))
		return -1;
	*out = (uid_t)v;
	return 0;
}

static int lookup_gid(const char *s, gid_t *out)
{
	uint64_t v;
	if (lookup_id(s, (gid_t)-2, gid_by_name, &v))
		return -1;
	*out = (gid_t)v;
	return 0;
}

static bool is_power_of_two(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* A thread or node count: a number up to MAX_THREADS, or "auto" (0: one per CPU). */
static int key_count(struct parse_state *ps, const char *key, const char *v, unsigned *out)
{
	uint64_t n;
	if (strcasecmp(v, "auto") == 0) {
		*out = 0;
		return 1;
	}
	if (parse_uint(v, MAX_THREADS, &n))
		return fail_at(ps, ps->lineno,
			       "%s = %s: expected a number from 0 to %u or \"auto\" "
			       "(0 and auto mean one per CPU)",
			       key, v, MAX_THREADS);
	*out = (unsigned)n;
	return 1;
}

static int key_size(struct parse_state *ps, const char *key, const char *v, uint64_t *out)
{
	if (vad_parse_size(v, out))
		return fail_at(ps, ps->lineno,
			       "%s = %s: bad size (expected a whole number of bytes, optionally "
			       "with a K, M, G, T, P or E suffix, e.g. 4K, 64G, 1.5M)",
			       key, v);
	return 1;
}

static int key_quota(struct parse_state *ps, const char *key, const char *v, uint64_t *out)
{
	if (strcasecmp(v, "unlimited") == 0) {
		*out = 0;
		return 1;
	}
	if (!key_size(ps, key, v, out))
		return 0;
	if (*out == 0)
		return fail_at(ps, ps->lineno,
			       "%s = 0 would refuse every allocation; "
			       "write \"unlimited\" for no limit",
			       key);
	return 1;
}

/* A range-count limit: a number from 1 to VAD_MAX_RANGES_MAX, or "unlimited" (stored as 0). */
static int key_range_limit(struct parse_state *ps, const char *key, const char *v, uint64_t *out)
{
	uint64_t n;
	if (strcasecmp(v, "unlimited") == 0) {
		*out = 0;
		return 1;
	}
	if (parse_uint(v, VAD_MAX_RANGES_MAX, &n) || n == 0)
		return fail_at(ps, ps->lineno,
			       "%s = %s: expected a number of ranges from 1 to %llu, or "
			       "\"unlimited\"",
			       key, v, (unsigned long long)VAD_MAX_RANGES_MAX);
	*out = n;
	return 1;
}

/* A whole number from min to max; hint ends the sentence that refuses anything else. */
static int key_uint(struct parse_state *ps, const char *key, const char *v, unsigned min,
		    unsigned max, const char *hint, unsigned *out)
{
	uint64_t n;
	if (parse_uint(v, max, &n) || n < min)
		return fail_at(ps, ps->lineno, "%s = %s: expected a number from %u to %u%s", key, v,
			       min, max, hint);
	*out = (unsigned)n;
	return 1;
}

static int key_duration(struct parse_state *ps, const char *key, const char *v, uint64_t min,
			uint64_t max, uint64_t *out)
{
	if (vad_parse_duration_ms(v, out))
		return fail_at(ps, ps->lineno,
			       "%s = %s: bad duration (expected a number with ms, s, m, h, d or w, "
			       "e.g. 250ms, 10s, 30d; a bare number is seconds)",
			       key, v);
	if (*out < min || *out > max)
		return fail_at(ps, ps->lineno, "%s = %s: out of range (%llu ms to %llu ms)", key, v,
			       (unsigned long long)min, (unsigned long long)max);
	return 1;
}

/* An absolute path that fits buffers and, for the socket, a sockaddr_un. */
static int key_path(struct parse_state *ps, const char *key, const char *v, char *out, size_t cap)
{
	if (v[0] != '/')
		return fail_at(ps, ps->lineno, "%s = %s: must be an absolute path", key, v);
	if (strlen(v) >= cap)
		return fail_at(ps, ps->lineno, "%s: path too long (at most %zu characters)", key,
			       cap - 1);
	strcpy(out, v);
	return 1;
}

static int handle_vad_key(struct parse_state *ps, enum vad_key k, const char *v)
{
	struct vad_config *cfg = ps->cfg;
	const char *key = vad_key_names[k];
	uint64_t n;

	if (!*v && k != K_SOCKET && k != K_STATS_DB)
		return fail_at(ps, ps->lineno, "%s has an empty value", key);
	switch (k) {
	case K_SOCKET: {
		if (!*v) {
			cfg->socket_path[0] = '\0';
			return 1;
		}
		size_t sun_cap = sizeof(((struct sockaddr_un *)0)->sun_path);
		return key_path(ps, key, v, cfg->socket_path,
				sun_cap < sizeof(cfg->socket_path) ? sun_cap
								   : sizeof(cfg->socket_path));
	}
	case K_SOCKET_MODE: {
		const char *p = v;
		unsigned long mode = 0;
		for (; *p >= '0' && *p <= '7'; p++)
			mode = mode * 8 + (unsigned long)(*p - '0');
		if (*p || p == v || p - v > 4 || mode > 0777)
			return fail_at(ps, ps->lineno,
				       "socket_mode = %s: not an octal permission mode like 0660",
				       v);
		cfg->socket_mode = (mode_t)mode;
		return 1;
	}
	case K_WORKERS:
		return key_count(ps, key, v, &cfg->workers);
	case K_WORKER_BALANCE:
		if (strcasecmp(v, "adaptive") == 0)
			cfg->worker_balance = VAD_BALANCE_ADAPTIVE;
		else if (strcasecmp(v, "even") == 0)
			cfg->worker_balance = VAD_BALANCE_EVEN;
		else
			return fail_at(ps, ps->lineno,
				       "worker_balance = %s: not adaptive (as few workers as keep "
				       "up) or even (every worker, round-robin)",
				       v);
		return 1;
	case K_WORKER_SPREAD_IDLE: {
		char *end;
		errno = 0;
		double d = strtod(v, &end);
		if (end == v || *end || errno || !(d >= 0 && d <= MAX_THREADS))
			return fail_at(
			    ps, ps->lineno,
			    "worker_spread_idle = %s: expected a number of CPUs from 0 to "
			    "%u, e.g. 0.4 (0: spread whenever the workers are saturated)",
			    v, MAX_THREADS);
		cfg->worker_spread_idle = d;
		return 1;
	}
	case K_NODES:
		return key_count(ps, key, v, &cfg->nodes);
	case K_LAZY_MAX:
		if (strcasecmp(v, "auto") == 0) {
			cfg->lazy_max = 0;
			return 1;
		}
		return key_size(ps, key, v, &cfg->lazy_max);
	case K_MAX_FRAME:
		if (!key_size(ps, key, v, &n))
			return 0;
		if (n < MAX_FRAME_MIN || n > MAX_FRAME_MAX)
			return fail_at(ps, ps->lineno,
				       "max_frame = %s: must be between 4 KiB and 16 MiB", v);
		cfg->max_frame = (uint32_t)n;
		return 1;
	case K_MAX_CLIENTS:
		return key_uint(ps, key, v, 1, MAX_CLIENTS_MAX, "", &cfg->max_clients);
	case K_MAX_BATCH:
		return key_uint(ps, key, v, 1, MAX_BATCH_MAX, "", &cfg->max_batch);
	case K_QUOTA_CLIENT:
		return key_quota(ps, key, v, &cfg->quota_client);
	case K_QUOTA_UID:
		return key_quota(ps, key, v, &cfg->quota_uid);
	case K_MAX_RANGES_CLIENT:
		return key_range_limit(ps, key, v, &cfg->max_ranges_client);
	case K_MAX_RANGES_UID:
		return key_range_limit(ps, key, v, &cfg->max_ranges_uid);
	case K_ADMIN_GROUP:
		if (lookup_gid(v, &cfg->admin_gid))
			return fail_at(ps, ps->lineno, "admin_group = %s: unknown group", v);
		cfg->has_admin_group = true;
		return 1;
	case K_STATS_DB:
		if (!*v) {
			cfg->stats_db[0] = '\0';
			return 1;
		}
		return key_path(ps, key, v, cfg->stats_db, sizeof(cfg->stats_db));
	case K_STATS_INTERVAL:
		return key_duration(ps, key, v, STATS_INTERVAL_MIN_MS, STATS_INTERVAL_MAX_MS,
				    &cfg->stats_interval_ms);
	case K_STATS_RETENTION:
		return key_duration(ps, key, v, STATS_RETENTION_MIN_MS, STATS_RETENTION_MAX_MS,
				    &cfg->stats_retention_ms);
	case K_LOG_LEVEL: {
		int lvl = vad_log_level_from_name(v);
		if (lvl < 0)
			return fail_at(ps, ps->lineno,
				       "log_level = %s: expected err, warning, notice, info or "
				       "debug",
				       v);
		cfg->log_level = lvl;
		return 1;
	}
	case K_HELLO_TIMEOUT:
		return key_duration(ps, key, v, HELLO_TIMEOUT_MIN_MS, HELLO_TIMEOUT_MAX_MS,
				    &cfg->hello_timeout_ms);
	case K_MAX_CLIENTS_UID:
		if (strcasecmp(v, "unlimited") == 0) {
			cfg->max_clients_uid = 0;
			return 1;
		}
		return key_uint(ps, key, v, 1, MAX_CLIENTS_MAX, " or \"unlimited\"",
				&cfg->max_clients_uid);
	case K_ADMIN_SLOTS:
		return key_uint(ps, key, v, 0, MAX_CLIENTS_MAX, " (0: no slots kept for admins)",
				&cfg->admin_slots);
	case N_VAD_KEYS:
		break;
	}
	return fail_at(ps, ps->lineno, "internal error: unhandled key %s", key);
}

/* Parse "a, b, c" of user or group names/numbers into a fresh array. */
static int key_id_list(struct parse_state *ps, const char *key, const char *v, bool groups,
		       struct vad_arena_conf *a)
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
		return fail_at(ps, ps->lineno, "out of memory");
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
			fail_at(ps, ps->lineno, "%s: empty entry in the list", key);
			break;
		}
		if (groups) {
			gid_t g = 0;
			if (lookup_gid(tok, &g)) {
				ok = false;
				fail_at(ps, ps->lineno, "%s: unknown group '%s'", key, tok);
				break;
			}
			ids[n++] = g;
		} else {
			uid_t u = 0;
			if (lookup_uid(tok, &u)) {
				ok = false;
				fail_at(ps, ps->lineno, "%s: unknown user '%s'", key, tok);
				break;
			}
			ids[n++] = u;
		}
	}
	if (ok && fields != cap) {
		ok = false;
		fail_at(ps, ps->lineno, "%s: empty entry in the list", key);
	}
	free(copy);
	if (!ok) {
		free(ids);
		return 0;
	}
	if (groups) {
		a->allow_gids = ids;
		a->n_allow_gids = n;
	} else {
		a->allow_uids = ids;
		a->n_allow_uids = n;
	}
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
	return fail_at(ps, ps->lineno, "%s = %s: expected yes or no", key, v);
}

static struct vad_arena_conf *current_arena(struct parse_state *ps)
{
	return &ps->cfg->arenas[ps->cfg->n_arenas - 1];
}

static int handle_arena_key(struct parse_state *ps, enum arena_key k, const char *v)
{
	struct vad_arena_conf *a = current_arena(ps);
	const char *key = arena_key_names[k];

	if (!*v)
		return fail_at(ps, ps->lineno, "%s has an empty value", key);
	switch (k) {
	case A_SIZE:
		if (!key_size(ps, key, v, &a->size))
			return 0;
		if (a->size == 0 || a->size > MAX_ARENA_SIZE)
			return fail_at(ps, ps->lineno,
				       "size = %s: must be between 1 byte and 1 EiB", v);
		return 1;
	case A_QUANTUM:
		if (!key_size(ps, key, v, &a->quantum))
			return 0;
		if (!is_power_of_two(a->quantum))
			return fail_at(ps, ps->lineno, "quantum = %s: not a power of two", v);
		if (a->quantum < (uint64_t)system_page_size())
			return fail_at(ps, ps->lineno,
				       "quantum = %s: smaller than the page size (%ld bytes)", v,
				       system_page_size());
		if (a->quantum > MAX_QUANTUM)
			return fail_at(ps, ps->lineno, "quantum = %s: larger than 1 GiB", v);
		return 1;
	case A_BACKING: {
		if (strcmp(v, "memfd") == 0) {
			a->backing[0] = '\0';
			ps->hugetlb_page = 0;
			return 1;
		}
		if (!key_path(ps, key, v, a->backing, sizeof(a->backing)))
			return 0;
		struct stat st;
		if (stat(v, &st) != 0)
			return fail_at(ps, ps->lineno, "backing = %s: %s", v, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return fail_at(ps, ps->lineno,
				       "backing = %s: not a directory (write memfd or a directory)",
				       v);
		struct statfs sf;
		ps->hugetlb_page = 0;
		if (statfs(v, &sf) == 0 && (unsigned long)sf.f_type == HUGETLBFS_MAGIC_NUMBER)
			ps->hugetlb_page = (uint64_t)sf.f_bsize;
		return 1;
	}
	case A_ALLOW_UIDS:
		return key_id_list(ps, key, v, false, a);
	case A_ALLOW_GIDS:
		return key_id_list(ps, key, v, true, a);
	case A_ACCEPT_UNSEALED:
		return key_yes_no(ps, key, v, &a->accept_unsealed);
	case N_ARENA_KEYS:
		break;
	}
	return fail_at(ps, ps->lineno, "internal error: unhandled key %s", key);
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
	if (ps->failed)
		return 0;

	char buf[PATH_MAX];
	const char *v = unquote(value ? value : "", buf, sizeof(buf));
	if (!*name)
		return fail_at(ps, ps->lineno, "a value without a key name");

	switch (ps->section) {
	case SEC_NONE:
		return fail_at(ps, ps->lineno,
			       "%s = ... outside any section (start with [vad] or [arena NAME])",
			       name);
	case SEC_VAD:
		for (int k = 0; k < N_VAD_KEYS; k++) {
			if (strcasecmp(name, vad_key_names[k]) != 0)
				continue;
			if (ps->vad_key_line[k])
				return fail_at(ps, ps->lineno,
					       "duplicate key %s (first set at line %d)", name,
					       ps->vad_key_line[k]);
			ps->vad_key_line[k] = ps->lineno;
			return handle_vad_key(ps, (enum vad_key)k, v);
		}
		return fail_at(ps, ps->lineno, "unknown key '%s' in [vad]", name);
	case SEC_ARENA:
		for (int k = 0; k < N_ARENA_KEYS; k++) {
			if (strcasecmp(name, arena_key_names[k]) != 0)
				continue;
			if (ps->arena_key_line[k])
				return fail_at(ps, ps->lineno,
					       "duplicate key %s (first set at line %d)", name,
					       ps->arena_key_line[k]);
			ps->arena_key_line[k] = ps->lineno;
			return handle_arena_key(ps, (enum arena_key)k, v);
		}
		return fail_at(ps, ps->lineno, "unknown key '%s' in [arena %s]", name,
			       current_arena(ps)->name);
	}
	return 0;
}

/* ---- sections ----------------------------------------------------------------------- */

/* Checks that need the whole [arena] section: size given, quantum default, size multiple. */
static int finish_arena(struct parse_state *ps)
{
	if (ps->section != SEC_ARENA)
		return 1;
	struct vad_arena_conf *a = current_arena(ps);
	int header = ps->arena_lines[ps->cfg->n_arenas - 1];
	char qbuf[32], sbuf[32];

	if (!ps->arena_key_line[A_SIZE])
		return fail_at(ps, header, "[arena %s] has no size (e.g. size = 4G)", a->name);
	if (!ps->arena_key_line[A_QUANTUM])
		a->quantum = ps->hugetlb_page ? ps->hugetlb_page : (uint64_t)system_page_size();
	else if (ps->hugetlb_page && a->quantum < ps->hugetlb_page)
		return fail_at(ps, ps->arena_key_line[A_QUANTUM],
			       "quantum %s is smaller than the huge page size %s of %s",
			       vad_format_size(a->quantum, qbuf, sizeof(qbuf)),
			       vad_format_size(ps->hugetlb_page, sbuf, sizeof(sbuf)), a->backing);
	if (a->size % a->quantum)
		return fail_at(
		    ps, ps->arena_key_line[A_SIZE], "size %llu is not a multiple of the quantum %s",
		    (unsigned long long)a->size, vad_format_size(a->quantum, qbuf, sizeof(qbuf)));
	if (a->accept_unsealed && !a->backing[0])
		return fail_at(ps, ps->arena_key_line[A_ACCEPT_UNSEALED],
			       "accept_unsealed = yes in [arena %s], whose backing is a memfd: a "
			       "memfd is always sealed, only a directory backing can be unsealed "
			       "(remove the line)",
			       a->name);
	a->allow_any = a->n_allow_uids == 0 && a->n_allow_gids == 0;
	return 1;
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
		return fail_at(ps, ps->lineno,
			       "bad arena name '%s' (1 to %d letters, digits, '_', '-' or '.')",
			       name, VAD_NAME_MAX);
	for (size_t i = 0; i < cfg->n_arenas; i++)
		if (strcmp(cfg->arenas[i].name, name) == 0)
			return fail_at(ps, ps->lineno,
				       "duplicate arena '%s' (first defined at line %d)", name,
				       ps->arena_lines[i]);
	if (cfg->n_arenas >= MAX_ARENAS)
		return fail_at(ps, ps->lineno, "too many arenas (at most %d)", MAX_ARENAS);
	if (cfg->n_arenas == ps->arenas_cap) {
		size_t cap = ps->arenas_cap ? ps->arenas_cap * 2 : 4;
		struct vad_arena_conf *arenas = realloc(cfg->arenas, cap * sizeof(*arenas));
		if (!arenas)
			return fail_at(ps, ps->lineno, "out of memory");
		cfg->arenas = arenas;
		int *lines = realloc(ps->arena_lines, cap * sizeof(*lines));
		if (!lines)
			return fail_at(ps, ps->lineno, "out of memory");
		ps->arena_lines = lines;
		ps->arenas_cap = cap;
	}
	struct vad_arena_conf *a = &cfg->arenas[cfg->n_arenas];
	memset(a, 0, sizeof(*a));
	strcpy(a->name, name);
	a->allow_any = true;
	a->line = ps->lineno;
	ps->arena_lines[cfg->n_arenas] = ps->lineno;
	cfg->n_arenas++;
	memset(ps->arena_key_line, 0, sizeof(ps->arena_key_line));
	ps->hugetlb_page = 0;
	return 1;
}

/* A "[...]" line: close the previous section and open the new one. */
static void start_section(struct parse_state *ps, const char *inner, size_t len)
{
	char name[VAD_NAME_MAX + 64];
	while (len && isspace((unsigned char)*inner)) {
		inner++;
		len--;
	}
	while (len && isspace((unsigned char)inner[len - 1]))
		len--;
	if (len >= sizeof(name)) {
		fail_at(ps, ps->lineno, "section name too long");
		return;
	}
	memcpy(name, inner, len);
	name[len] = '\0';

	if (!finish_arena(ps))
		return;
	if (strcasecmp(name, "vad") == 0) {
		if (ps->vad_section_line) {
			fail_at(ps, ps->lineno, "duplicate section [vad] (first at line %d)",
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
			fail_at(ps, ps->lineno, "arena section needs a name: [arena NAME]");
			return;
		}
		if (add_arena(ps, arena))
			ps->section = SEC_ARENA;
		return;
	}
	fail_at(ps, ps->lineno, "unknown section [%s] (expected [vad] or [arena NAME])", name);
}

/* ini_reader: hand inih one left-trimmed physical line at a time, counting lines. */
static char *line_reader(char *str, int num, void *stream)
{
	struct parse_state *ps = stream;
	if (ps->failed)
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
	/* inih needs room for the line, its newline and the terminator */
	if (num < 3 || body + 2 > (size_t)num) {
		fail_at(ps, ps->lineno, "line too long (at most %d characters)", num - 3);
		return NULL;
	}
	if (p[0] == '[') {
		const char *close = memchr(p, ']', body);
		if (close)
			start_section(ps, p + 1, (size_t)(close - p - 1));
		if (ps->failed)
			return NULL;
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
	a->quantum = (uint64_t)system_page_size();
	a->allow_any = true;
	cfg->n_arenas = 1;
	return 0;
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

	struct parse_state ps = {
	    .cfg = cfg,
	    .path = path,
	    .err = err,
	    .err_len = err_len,
	};
	ps.file = fopen(path, "re");
	struct stat st;
	if (ps.file && fstat(fileno(ps.file), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(ps.file);
		ps.file = NULL;
		errno = EISDIR;
	}
	if (!ps.file) {
		if (err && err_len)
			snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	int rc = ini_parse_stream(line_reader, &ps, ini_handler_fn, &ps);
	int read_errno = ferror(ps.file) ? errno : 0;
	fclose(ps.file);
	free(ps.line);

	if (rc > 0 && (!ps.failed || rc < ps.error_line)) {
		ps.failed = false; /* inih found a syntax error before any of ours: report it */
		fail_at(&ps, rc, "syntax error (expected [section], key = value or a comment)");
	} else if (rc < 0 && !ps.failed) {
		fail_at(&ps, ps.lineno, "inih failed (%d)", rc);
	} else if (read_errno && !ps.failed) {
		fail_at(&ps, ps.lineno + 1, "read error: %s", strerror(read_errno));
	}
	if (!ps.failed)
		finish_arena(&ps);
	if (!ps.failed && ps.vad_key_line[K_STATS_RETENTION] &&
	    cfg->stats_retention_ms < cfg->stats_interval_ms)
		fail_at(&ps, ps.vad_key_line[K_STATS_RETENTION],
			"stats_retention is shorter than stats_interval");
	free(ps.arena_lines);
	if (!ps.failed && cfg->n_arenas == 0 && add_default_arena(cfg) != 0)
		fail_at(&ps, ps.lineno, "out of memory");
	if (ps.failed) {
		vad_config_free(cfg);
		return -1;
	}
	return 0;
}
