/* config_keys.c - the [vad] keys of vad.conf, one table row each (config_parse.h), and the
 * value parsers; every [vad] value is parsed, defaulted and shown from that table. */
#include "config_parse.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <unistd.h>

#include "listen_addr.h"
#include "log.h"

#define MAX_THREADS	       1024
#define MAX_FRAME_MIN	       (4u * 1024u)
#define MAX_FRAME_MAX	       (16u * 1024u * 1024u)
#define MAX_CLIENTS_MAX	       1000000u
#define MAX_BATCH_MAX	       (1u << 20)
#define MAX_WAITERS_MAX	       (1u << 20)
#define STATS_INTERVAL_MIN_MS  100ull
#define STATS_INTERVAL_MAX_MS  (86400ull * 1000)
#define STATS_RETENTION_MIN_MS (60ull * 1000)
#define STATS_RETENTION_MAX_MS (100ull * 365 * 86400 * 1000)
#define HELLO_TIMEOUT_MIN_MS   100ull
#define RESUME_GRACE_MIN_MS    100ull
#define RESUME_GRACE_MAX_MS    86400000ull /* a day */
#define HELLO_TIMEOUT_MAX_MS   (3600ull * 1000)
#define MAX_RANGES_MAX	       (1ull << 40)

long config_page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? p : 4096;
}

int config_fail_at(struct parse_state *ps, int line, const char *fmt, ...)
{
	if (ps->failed && line == ps->last_error_line)
		return 0;
	ps->failed = true;
	ps->last_error_line = line;
	if (!ps->errors++)
		ps->error_line = line;
	char reason[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (!ps->err || !ps->err_len)
		return 0;
	/* Whole lines only: the ones that do not fit are counted in the summary. */
	size_t room = ps->err_len - ps->err_used;
	int n = snprintf(ps->err + ps->err_used, room, "%s%s:%d: %s", ps->err_used ? "\n" : "",
			 ps->path, line, reason);
	if (n > 0 && (size_t)n < room) {
		ps->err_used += (size_t)n;
		ps->errors_shown++;
	} else if (!ps->err_used) {
		ps->err_used = room - 1; /* the first error is shown, cut if it must be */
		ps->errors_shown++;
	} else {
		ps->err[ps->err_used] = '\0';
	}
	return 0;
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

int config_lookup_uid(const char *s, uid_t *out)
{
	uint64_t v;
	if (lookup_id(s, (uid_t)-2, uid_by_name, &v))
		return -1;
	*out = (uid_t)v;
	return 0;
}

int config_lookup_gid(const char *s, gid_t *out)
{
	uint64_t v;
	if (lookup_id(s, (gid_t)-2, gid_by_name, &v))
		return -1;
	*out = (gid_t)v;
	return 0;
}

int config_key_size(struct parse_state *ps, const char *key, const char *v, uint64_t *out)
{
	/* "4GB" reads as decimal to most people, but vad's sizes are binary: ask, never guess. */
	size_t n = strlen(v);
	if (n >= 3 && (v[n - 1] == 'b' || v[n - 1] == 'B') && strchr("kKmMgGtTpPeE", v[n - 2]) &&
	    isdigit((unsigned char)v[0]))
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: did you mean %.*s (%ciB)? sizes are binary "
				      "(K = 1024), so write %.*s or %.*siB",
				      key, v, (int)(n - 1), v, toupper((unsigned char)v[n - 2]),
				      (int)(n - 1), v, (int)(n - 1), v);
	if (vad_parse_size(v, out))
		return config_fail_at(
		    ps, ps->lineno,
		    "%s = %s: bad size (expected a whole number of bytes, optionally "
		    "with a K, M, G, T, P or E suffix, e.g. 4K, 64G, 1.5M)",
		    key, v);
	return 1;
}

/* An absolute path that fits buffers and, for the socket, a sockaddr_un. */
int config_key_path(struct parse_state *ps, const char *key, const char *v, char *out, size_t cap)
{
	if (v[0] != '/')
		return config_fail_at(ps, ps->lineno, "%s = %s: must be an absolute path", key, v);
	if (strlen(v) >= cap)
		return config_fail_at(ps, ps->lineno, "%s: path too long (at most %zu characters)",
				      key, cap - 1);
	strcpy(out, v);
	return 1;
}

/* ---- [vad] value kinds -------------------------------------------------------------- */

struct vad_key_def;

/* Parse v for key d into out (its field in vad_config); 1, or 0 after config_fail_at. */
typedef int (*value_parse_fn)(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			      void *out);
/* The value in (its field in cfg) as text, the way a summary shows it. */
typedef void (*value_format_fn)(const struct vad_config *cfg, const void *in, char *buf,
				size_t len);

struct vad_key_def {
	const char *name;
	const char *default_text; /* NULL: no default (the field stays 0) */
	int kind;		  /* enum value_kind */
	size_t offset;		  /* of its field in struct vad_config */
	uint64_t min, max;
	bool reloadable;
	const char *hint; /* the end of the sentence refusing a value out of bounds */
};

static int parse_socket_path(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			     void *out)
{
	size_t sun_cap = sizeof(((struct sockaddr_un *)0)->sun_path);
	char *path = out;
	path[0] = '\0';
	return !*v ||
	       config_key_path(ps, d->name, v, path, sun_cap < PATH_MAX ? sun_cap : PATH_MAX);
}

static int parse_path(struct parse_state *ps, const struct vad_key_def *d, const char *v, void *out)
{
	char *path = out;
	path[0] = '\0';
	return !*v || config_key_path(ps, d->name, v, path, PATH_MAX);
}

static void format_path(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	snprintf(buf, len, "%s", (const char *)in);
}

static int parse_mode(struct parse_state *ps, const struct vad_key_def *d, const char *v, void *out)
{
	const char *p = v;
	unsigned long mode = 0;
	for (; *p >= '0' && *p <= '7'; p++)
		mode = mode * 8 + (unsigned long)(*p - '0');
	if (*p || p == v || p - v > 4 || mode > d->max)
		return config_fail_at(
		    ps, ps->lineno, "%s = %s: not an octal permission mode like 0660", d->name, v);
	*(mode_t *)out = (mode_t)mode;
	return 1;
}

static void format_mode(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	snprintf(buf, len, "%04o", (unsigned)*(const mode_t *)in);
}

/* A thread or node count: a number up to max, or "auto" (0: one per CPU). */
static int parse_count(struct parse_state *ps, const struct vad_key_def *d, const char *v,
		       void *out)
{
	uint64_t n = 0;
	if (strcasecmp(v, "auto") != 0 && parse_uint(v, d->max, &n))
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: expected a number from 0 to %u or \"auto\" "
				      "(0 and auto mean one per CPU)",
				      d->name, v, (unsigned)d->max);
	*(unsigned *)out = (unsigned)n;
	return 1;
}

static void format_count(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	unsigned n = *(const unsigned *)in;
	if (n)
		snprintf(buf, len, "%u", n);
	else
		snprintf(buf, len, "auto");
}

static int parse_balance(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			 void *out)
{
	enum vad_worker_balance *balance = out;
	if (strcasecmp(v, "adaptive") == 0)
		*balance = VAD_BALANCE_ADAPTIVE;
	else if (strcasecmp(v, "even") == 0)
		*balance = VAD_BALANCE_EVEN;
	else
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: not adaptive (as few workers as keep "
				      "up) or even (every worker, round-robin)",
				      d->name, v);
	return 1;
}

static void format_balance(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	bool even = *(const enum vad_worker_balance *)in == VAD_BALANCE_EVEN;
	snprintf(buf, len, "%s", even ? "even" : "adaptive");
}

/* A number of CPUs, fractions allowed, from min to max. */
static int parse_cpus(struct parse_state *ps, const struct vad_key_def *d, const char *v, void *out)
{
	char *end;
	errno = 0;
	double cpus = strtod(v, &end);
	if (end == v || *end || errno || !(cpus >= (double)d->min && cpus <= (double)d->max))
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: expected a number of CPUs from 0 to "
				      "%u, e.g. 0.4 (0: spread whenever the workers are saturated)",
				      d->name, v, (unsigned)d->max);
	*(double *)out = cpus;
	return 1;
}

static void format_cpus(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	snprintf(buf, len, "%g", *(const double *)in);
}

/* A size, or "auto" (0: the allocator's default). */
static int parse_size_or_auto(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			      void *out)
{
	uint64_t *size = out;
	*size = 0;
	return strcasecmp(v, "auto") == 0 || config_key_size(ps, d->name, v, size);
}

static void format_size_or_auto(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	uint64_t size = *(const uint64_t *)in;
	if (size)
		vad_format_size(size, buf, len);
	else
		snprintf(buf, len, "auto");
}

/* A size from min to max bytes, stored in 32 bits. */
static int parse_size_in_bounds(struct parse_state *ps, const struct vad_key_def *d, const char *v,
				void *out)
{
	uint64_t n;
	if (!config_key_size(ps, d->name, v, &n))
		return 0;
	if (n < d->min || n > d->max)
		return config_fail_at(ps, ps->lineno, "%s = %s: must be between %s", d->name, v,
				      d->hint);
	*(uint32_t *)out = (uint32_t)n;
	return 1;
}

static void format_size32(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	vad_format_size(*(const uint32_t *)in, buf, len);
}

/* A whole number from min to max. */
static int parse_unsigned(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			  void *out)
{
	uint64_t n;
	if (parse_uint(v, d->max, &n) || n < d->min)
		return config_fail_at(ps, ps->lineno, "%s = %s: expected a number from %u to %u%s",
				      d->name, v, (unsigned)d->min, (unsigned)d->max, d->hint);
	*(unsigned *)out = (unsigned)n;
	return 1;
}

static void format_unsigned(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	snprintf(buf, len, "%u", *(const unsigned *)in);
}

/* A whole number from min to max, or "unlimited" (stored as 0). */
static int parse_unsigned_or_unlimited(struct parse_state *ps, const struct vad_key_def *d,
				       const char *v, void *out)
{
	if (strcasecmp(v, "unlimited") != 0)
		return parse_unsigned(ps, d, v, out);
	*(unsigned *)out = 0;
	return 1;
}

static void format_unsigned_or_unlimited(const struct vad_config *cfg, const void *in, char *buf,
					 size_t len)
{
	if (*(const unsigned *)in)
		format_unsigned(cfg, in, buf, len);
	else
		snprintf(buf, len, "unlimited");
}

/* A byte quota: a size above 0, or "unlimited" (stored as 0). */
static int parse_quota(struct parse_state *ps, const struct vad_key_def *d, const char *v,
		       void *out)
{
	uint64_t *quota = out;
	if (strcasecmp(v, "unlimited") == 0) {
		*quota = 0;
		return 1;
	}
	if (!config_key_size(ps, d->name, v, quota))
		return 0;
	if (*quota == 0)
		return config_fail_at(ps, ps->lineno,
				      "%s = 0 would refuse every allocation; "
				      "write \"unlimited\" for no limit",
				      d->name);
	return 1;
}

static void format_quota(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	uint64_t quota = *(const uint64_t *)in;
	if (quota)
		vad_format_size(quota, buf, len);
	else
		snprintf(buf, len, "unlimited");
}

/* A group name or number; it also sets has_admin_group. */
static int parse_group(struct parse_state *ps, const struct vad_key_def *d, const char *v,
		       void *out)
{
	if (config_lookup_gid(v, out))
		return config_fail_at(ps, ps->lineno, "%s = %s: unknown group", d->name, v);
	ps->cfg->has_admin_group = true;
	return 1;
}

static void format_group(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	if (cfg->has_admin_group)
		snprintf(buf, len, "%u", (unsigned)*(const gid_t *)in);
	else
		snprintf(buf, len, "%s", "");
}

/* A duration from min to max milliseconds. */
static int parse_duration(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			  void *out)
{
	uint64_t *ms = out;
	if (vad_parse_duration_ms(v, ms))
		return config_fail_at(
		    ps, ps->lineno,
		    "%s = %s: bad duration (expected a number with ms, s, m, h, d or w, "
		    "e.g. 250ms, 10s, 30d; a bare number is seconds)",
		    d->name, v);
	if (*ms < d->min || *ms > d->max)
		return config_fail_at(ps, ps->lineno, "%s = %s: out of range (%llu ms to %llu ms)",
				      d->name, v, (unsigned long long)d->min,
				      (unsigned long long)d->max);
	return 1;
}

static void format_duration(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	snprintf(buf, len, "%llu ms", (unsigned long long)*(const uint64_t *)in);
}

static int parse_log_level(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			   void *out)
{
	int level = vad_log_level_from_name(v);
	if (level < 0)
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: expected err, warning, notice, info or debug",
				      d->name, v);
	*(int *)out = level;
	return 1;
}

static void format_log_level(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	snprintf(buf, len, "%s", vad_log_level_name(*(const int *)in));
}

/* A range-count limit: a number from min to max, or "unlimited" (stored as 0). */
static int parse_range_limit(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			     void *out)
{
	uint64_t n = 0;
	if (strcasecmp(v, "unlimited") != 0 && (parse_uint(v, d->max, &n) || n < d->min))
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: expected a number of ranges from %llu to %llu, or "
				      "\"unlimited\"",
				      d->name, v, (unsigned long long)d->min,
				      (unsigned long long)d->max);
	*(uint64_t *)out = n;
	return 1;
}

static void format_range_limit(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	uint64_t n = *(const uint64_t *)in;
	if (n)
		snprintf(buf, len, "%llu", (unsigned long long)n);
	else
		snprintf(buf, len, "unlimited");
}

/* A TCP address to listen on, "HOST:PORT"; empty: none. */
static int parse_listen_addr(struct parse_state *ps, const struct vad_key_def *d, const char *v,
			     void *out)
{
	char *text = out;
	text[0] = '\0';
	if (!*v)
		return 1;
	struct sockaddr_storage ss;
	socklen_t len;
	char why[160];
	if (vad_listen_addr_parse(v, &ss, &len, why, sizeof(why)) != 0)
		return config_fail_at(ps, ps->lineno, "%s = %s: %s", d->name, v, why);
	snprintf(text, VAD_LISTEN_ADDR_MAX, "%s", v);
	return 1;
}

static void format_listen_addr(const struct vad_config *cfg, const void *in, char *buf, size_t len)
{
	(void)cfg;
	snprintf(buf, len, "%s", *(const char *)in ? (const char *)in : "off");
}

/* Kinds of [vad] value: the C type of the field, parser, formatter, whether "" means unset. */
/* clang-format off */
#define VALUE_KINDS(X)                                                                             \
	X(SOCKET_PATH, char[PATH_MAX], parse_socket_path, format_path, true)                       \
	X(PATH, char[PATH_MAX], parse_path, format_path, true)                                     \
	X(MODE, mode_t, parse_mode, format_mode, false)                                            \
	X(COUNT, unsigned, parse_count, format_count, false)                                       \
	X(BALANCE, enum vad_worker_balance, parse_balance, format_balance, false)                  \
	X(CPUS, double, parse_cpus, format_cpus, false)                                            \
	X(SIZE_OR_AUTO, uint64_t, parse_size_or_auto, format_size_or_auto, false)                  \
	X(SIZE_IN_BOUNDS, uint32_t, parse_size_in_bounds, format_size32, false)                    \
	X(UINT, unsigned, parse_unsigned, format_unsigned, false)                                  \
	X(UINT_OR_UNLIMITED, unsigned, parse_unsigned_or_unlimited,                                \
	  format_unsigned_or_unlimited, false)                                                     \
	X(QUOTA, uint64_t, parse_quota, format_quota, false)                                       \
	X(GROUP, gid_t, parse_group, format_group, false)                                          \
	X(DURATION, uint64_t, parse_duration, format_duration, false)                              \
	X(LOG_LEVEL, int, parse_log_level, format_log_level, false)                                \
	X(RANGE_LIMIT, uint64_t, parse_range_limit, format_range_limit, false)                     \
	X(LISTEN_ADDR, char[VAD_LISTEN_ADDR_MAX], parse_listen_addr, format_listen_addr, true)
/* clang-format on */

#define KIND_ENUM(kind, ...) KIND_##kind,
enum value_kind { VALUE_KINDS(KIND_ENUM) N_VALUE_KINDS };
#undef KIND_ENUM

static const struct value_kind_ops {
	value_parse_fn parse;
	value_format_fn format;
	bool empty_ok;
} value_kinds[N_VALUE_KINDS] = {
#define KIND_ROW(kind, ctype, parse_fn, format_fn, accepts_empty)                                  \
	[KIND_##kind] = {.parse = parse_fn, .format = format_fn, .empty_ok = accepts_empty},
    VALUE_KINDS(KIND_ROW)
#undef KIND_ROW
};

/* The C type each kind stores, so every key's field is checked against its kind below. */
#define KIND_TYPE(kind, ctype, ...) typedef __typeof__(ctype) kind_type_##kind;
VALUE_KINDS(KIND_TYPE)
#undef KIND_TYPE

#define WHEN_RELOAD  true
#define WHEN_RESTART false

static const struct vad_key_def vad_keys[N_VAD_KEYS] = {
#define KEY_ROW(id, key, kind_, field, dflt, lo, hi, when, hint_)                                  \
	[id] = {.name = key,                                                                       \
		.default_text = dflt,                                                              \
		.kind = KIND_##kind_,                                                              \
		.offset = offsetof(struct vad_config, field),                                      \
		.min = lo,                                                                         \
		.max = hi,                                                                         \
		.reloadable = WHEN_##when,                                                         \
		.hint = hint_},
    VAD_KEYS(KEY_ROW)
#undef KEY_ROW
};

#define KEY_TYPE_CHECK(id, key, kind, field, ...)                                                  \
	_Static_assert(__builtin_types_compatible_p(__typeof__(((struct vad_config *)0)->field),   \
						    kind_type_##kind),                             \
		       key " is stored in a field of its kind's type");
VAD_KEYS(KEY_TYPE_CHECK)
#undef KEY_TYPE_CHECK

int config_apply_vad_key(struct parse_state *ps, enum vad_key k, const char *v)
{
	const struct vad_key_def *d = &vad_keys[k];
	const struct value_kind_ops *kind = &value_kinds[d->kind];
	if (!*v && !kind->empty_ok)
		return config_fail_at(ps, ps->lineno, "%s has an empty value", d->name);
	return kind->parse(ps, d, v, (char *)ps->cfg + d->offset);
}

int config_find_vad_key(const char *name)
{
	for (int k = 0; k < N_VAD_KEYS; k++)
		if (strcasecmp(name, vad_keys[k].name) == 0)
			return k;
	return -1;
}

void vad_config_defaults(struct vad_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	struct parse_state ps = {.cfg = cfg, .path = "(built-in default)"};
	for (int k = 0; k < N_VAD_KEYS; k++)
		if (vad_keys[k].default_text)
			config_apply_vad_key(&ps, (enum vad_key)k, vad_keys[k].default_text);
}

_Static_assert(N_VAD_KEYS <= VAD_CONFIG_KEYS_MAX, "VAD_CONFIG_KEYS_MAX is too small");

int vad_config_key_index(const char *name)
{
	return config_find_vad_key(name);
}

size_t vad_config_key_count(void)
{
	return N_VAD_KEYS;
}

const char *vad_config_key_name(size_t i)
{
	return i < N_VAD_KEYS ? vad_keys[i].name : NULL;
}

const char *vad_config_key_default(size_t i)
{
	return i < N_VAD_KEYS ? vad_keys[i].default_text : NULL;
}

bool vad_config_key_reloadable(size_t i)
{
	return i < N_VAD_KEYS && vad_keys[i].reloadable;
}

const char *vad_config_key_text(const struct vad_config *cfg, size_t i, char *buf, size_t len)
{
	if (!buf || !len)
		return buf;
	buf[0] = '\0';
	if (i < N_VAD_KEYS)
		value_kinds[vad_keys[i].kind].format(cfg, (const char *)cfg + vad_keys[i].offset,
						     buf, len);
	return buf;
}

const char *vad_config_reloadable_text(const struct vad_config *cfg, char *buf, size_t len)
{
	size_t used = 0;
	if (!buf || !len)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < N_VAD_KEYS; i++) {
		if (!vad_keys[i].reloadable)
			continue;
		char value[64];
		int n =
		    snprintf(buf + used, len - used, "%s%s %s", used ? ", " : "", vad_keys[i].name,
			     vad_config_key_text(cfg, i, value, sizeof(value)));
		if (n < 0 || (size_t)n >= len - used)
			break; /* cut: buf holds what fitted */
		used += (size_t)n;
	}
	return buf;
}
