/* cmd_session.c - a scripted session: commands from stdin, one result line each. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vactl.h"

#define SESSION_PROMPT "vad> "

/* A range this session got by alloc or attach; #N is its 1-based index. */
struct entry {
	void *ptr;
	const char *arena;
	uint64_t offset;
	size_t size;
	bool live;
};

struct session {
	struct vactl_opts *o;
	vad_client *c;
	const char *arena; /* --arena: where alloc allocates and OFFSETs are looked up */
	struct entry *v;
	size_t n, cap;
	int worst; /* the worst exit code so far */
	bool quit;
};

static void note_exit(struct session *s, int code)
{
	/* 3 (daemon gone) outranks 2 (usage), which outranks 1 (refused). */
	static const int rank[] = {0, 1, 2, 3, 0};
	if (rank[code] > rank[s->worst])
		s->worst = code;
}

static void say_ok(struct session *s, json_object *j, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say_ok(struct session *s, json_object *j, const char *fmt, ...)
{
	if (s->o->json) {
		json_object_object_add(j, "ok", json_object_new_boolean(1));
		vactl_json_line(j);
		return;
	}
	json_object_put(j);
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static json_object *result(const char *cmd)
{
	json_object *j = json_object_new_object();
	vactl_json_add_str(j, "cmd", cmd);
	return j;
}

static void say_usage(struct session *s, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say_usage(struct session *s, const char *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	note_exit(s, VACTL_EXIT_USAGE);
	if (s->o->json) {
		json_object *j = result(cmd);
		json_object_object_add(j, "ok", json_object_new_boolean(0));
		vactl_json_add_str(j, "error", "usage");
		vactl_json_add_str(j, "message", msg);
		vactl_json_line(j);
	} else {
		printf("error: %s: usage: %s\n", cmd, msg);
		fflush(stdout);
	}
}

static void say_fail(struct session *s, const char *cmd, int err)
{
	const char *msg = vad_last_error(s->c);
	int code = vactl_exit_code(err);
	note_exit(s, code);
	if (code == VACTL_EXIT_UNREACHABLE)
		s->quit = true;
	if (s->o->json) {
		json_object *j = result(cmd);
		json_object_object_add(j, "ok", json_object_new_boolean(0));
		vactl_json_add_error(j, err, msg);
		vactl_json_line(j);
	} else {
		printf("error: %s: %s: %s\n", cmd, vactl_err_label(err), msg);
		fflush(stdout);
	}
}

static int add_entry(struct session *s, void *ptr)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct entry *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	struct vad_range r;
	if (vad_range_info(s->c, ptr, &r) != VAD_OK)
		return -1;
	s->v[s->n++] = (struct entry){ptr, r.arena, r.offset, r.size, true};
	return (int)s->n;
}

static void add_range_fields(json_object *j, int idx, const struct entry *e)
{
	json_object_object_add(j, "index", json_object_new_int(idx));
	vactl_json_add_str(j, "arena", e->arena);
	vactl_json_add_u64(j, "offset", e->offset);
	vactl_json_add_u64(j, "size", e->size);
}

/* Record a range cmd just got (p) as this session's next #N and print it. */
static void say_new_range(struct session *s, const char *cmd, void *p)
{
	int idx = add_entry(s, p);
	if (idx < 0) {
		vad_free(s->c, p);
		return say_fail(s, cmd, VAD_ENOMEM);
	}
	struct entry *e = &s->v[idx - 1];
	json_object *j = result(cmd);
	add_range_fields(j, idx, e);
	say_ok(s, j, "#%d arena=%s offset=%llu size=%zu", idx, e->arena,
	       (unsigned long long)e->offset, e->size);
}

/* "#N" -> a live entry, or NULL after reporting why. */
static struct entry *entry_ref(struct session *s, const char *cmd, const char *ref, int *idx)
{
	char *end;
	errno = 0;
	unsigned long k = strtoul(ref + 1, &end, 10);
	if (ref[0] != '#' || !isdigit((unsigned char)ref[1]) || *end || errno) {
		say_usage(s, cmd, "'%s' is not #N (N = the Nth range of this session)", ref);
		return NULL;
	}
	if (k == 0 || k > s->n) {
		say_usage(s, cmd, "this session has no range #%lu (it has %zu)", k, s->n);
		return NULL;
	}
	*idx = (int)k;
	return &s->v[k - 1];
}

/* "OFFSET" or "#N" -> a pointer (and the entry if it is one of ours), or false. */
static bool resolve(struct session *s, const char *cmd, const char *ref, void **ptr,
		    struct entry **ent, int *idx, uint64_t *offset)
{
	*ent = NULL;
	*idx = 0;
	if (ref[0] == '#') {
		struct entry *e = entry_ref(s, cmd, ref, idx);
		if (!e)
			return false;
		*ent = e;
		*ptr = e->ptr;
		*offset = e->offset;
		return true;
	}
	uint64_t off;
	if (vactl_parse_size(ref, &off) < 0) {
		char *end;
		errno = 0;
		off = strtoull(ref, &end, 0); /* also 0x1000 */
		if (errno || *end || end == ref) {
			say_usage(s, cmd, "'%s' is neither an offset nor #N", ref);
			return false;
		}
	}
	*offset = off;
	const char *arena = s->arena ? s->arena : "";
	for (size_t i = s->n; i-- > 0;) {
		struct entry *e = &s->v[i];
		if (e->live && e->offset == off && (!*arena || strcmp(e->arena, arena) == 0)) {
			*ent = e;
			*idx = (int)i + 1;
			*ptr = e->ptr;
			return true;
		}
	}
	/* Not ours: let the daemon judge (it will say who may free what). */
	int err = vad_pointer(s->c, s->arena, off, ptr);
	if (err) {
		say_fail(s, cmd, err);
		return false;
	}
	return true;
}

static void cmd_alloc(struct session *s, char **args, int n)
{
	if (n < 1 || n > 2)
		return say_usage(s, "alloc", "alloc SIZE [ALIGN]");
	uint64_t size, align = 0;
	if (args[0][0] == '-' || (vactl_parse_size(args[0], &size) == 0 && size == 0))
		return say_usage(s, "alloc", "size %s: a size must be positive", args[0]);
	if (vactl_parse_size(args[0], &size) < 0 || size > SIZE_MAX)
		return say_usage(s, "alloc", "bad size '%s'", args[0]);
	if (n == 2 && (vactl_parse_size(args[1], &align) < 0 || !vactl_is_power_of_two(align)))
		return say_usage(s, "alloc",
				 "alignment %s: an alignment is a power of two (4K, 2M)", args[1]);
	void *p;
	int err = vad_alloc_in(s->c, s->arena, (size_t)size, (size_t)align, &p);
	if (err)
		return say_fail(s, "alloc", err);
	say_new_range(s, "alloc", p);
}

static void cmd_free(struct session *s, char **args, int n)
{
	if (n != 1)
		return say_usage(s, "free", "free OFFSET|#N");
	void *p;
	struct entry *e;
	int idx;
	uint64_t off;
	if (!resolve(s, "free", args[0], &p, &e, &idx, &off))
		return;
	int err = vad_free(s->c, p);
	if (err)
		return say_fail(s, "free", err);
	json_object *j = result("free");
	if (e) {
		/* Attach may have given this session a second reference to the range. */
		e->live = vad_size(s->c, p) != 0;
		add_range_fields(j, idx, e);
		say_ok(s, j, "freed #%d arena=%s offset=%llu", idx, e->arena,
		       (unsigned long long)e->offset);
	} else {
		struct vad_session si;
		vad_session_info(s->c, &si);
		const char *arena = s->arena ? s->arena : si.default_arena;
		vactl_json_add_str(j, "arena", arena);
		vactl_json_add_u64(j, "offset", off);
		say_ok(s, j, "freed arena=%s offset=%llu", arena, (unsigned long long)off);
	}
}

static void cmd_share(struct session *s, char **args, int n)
{
	static const char usage[] = "share OFFSET|#N [once] [ttl DURATION]";
	if (n < 1)
		return say_usage(s, "share", usage);
	struct vad_share_opts opts = {0};
	for (int i = 1; i < n; i++) {
		if (strcmp(args[i], "once") == 0)
			opts.single_use = 1;
		else if (strcmp(args[i], "ttl") == 0 && i + 1 < n &&
			 vactl_parse_duration(args[i + 1], &opts.ttl_ms) == 0 && opts.ttl_ms)
			i++;
		else
			return say_usage(s, "share", "%s (at '%s')", usage, args[i]);
	}
	void *p;
	struct entry *e;
	int idx;
	uint64_t off;
	if (!resolve(s, "share", args[0], &p, &e, &idx, &off))
		return;
	char token[VAD_TOKEN_LEN + 1];
	int err = n == 1 ? vad_share(s->c, p, token) : vad_share_opts(s->c, p, &opts, token);
	if (err)
		return say_fail(s, "share", err);
	json_object *j = result("share");
	if (e)
		json_object_object_add(j, "index", json_object_new_int(idx));
	vactl_json_add_str(j, "token", token);
	vactl_json_add_u64(j, "offset", off);
	if (e)
		say_ok(s, j, "#%d token=%s", idx, token);
	else
		say_ok(s, j, "offset=%llu token=%s", (unsigned long long)off, token);
}

static void cmd_unshare(struct session *s, char **args, int n)
{
	if (n != 1)
		return say_usage(s, "unshare", "unshare OFFSET|#N");
	void *p;
	struct entry *e;
	int idx;
	uint64_t off;
	if (!resolve(s, "unshare", args[0], &p, &e, &idx, &off))
		return;
	int err = vad_unshare(s->c, p);
	if (err)
		return say_fail(s, "unshare", err);
	json_object *j = result("unshare");
	if (e)
		json_object_object_add(j, "index", json_object_new_int(idx));
	vactl_json_add_u64(j, "offset", off);
	if (e)
		say_ok(s, j, "#%d unshared", idx);
	else
		say_ok(s, j, "offset=%llu unshared", (unsigned long long)off);
}

static void cmd_attach(struct session *s, char **args, int n)
{
	if (n != 1)
		return say_usage(s, "attach", "attach TOKEN");
	void *p;
	size_t size;
	int err = vad_attach(s->c, args[0], &p, &size);
	if (err)
		return say_fail(s, "attach", err);
	say_new_range(s, "attach", p);
}

static void cmd_write(struct session *s, const char *line)
{
	/* write #N TEXT: TEXT is the rest of the line, spaces included. */
	const char *p = line + strspn(line, " \t");
	p += strcspn(p, " \t"); /* "write" */
	p += strspn(p, " \t");
	char ref[32];
	size_t rl = strcspn(p, " \t");
	if (rl == 0 || rl >= sizeof(ref))
		return say_usage(s, "write", "write #N TEXT");
	memcpy(ref, p, rl);
	ref[rl] = '\0';
	p += rl;
	if (*p)
		p++; /* one separator; the rest is the text verbatim */
	int idx;
	struct entry *e = entry_ref(s, "write", ref, &idx);
	if (!e)
		return;
	if (!e->live)
		return say_usage(s, "write", "#%d was freed", idx);
	size_t len = strlen(p);
	if (len > e->size)
		return say_usage(s, "write", "%zu bytes do not fit in #%d (%zu bytes)", len, idx,
				 e->size); /* more than a range: never 1 */
	memcpy(e->ptr, p, len);
	if (len < e->size)
		((char *)e->ptr)[len] = '\0';
	json_object *j = result("write");
	json_object_object_add(j, "index", json_object_new_int(idx));
	vactl_json_add_u64(j, "bytes", len);
	say_ok(s, j, "wrote %zu byte%s to #%d", len, vad_plural(len), idx);
}

static void cmd_read(struct session *s, char **args, int n)
{
	if (n < 1 || n > 2)
		return say_usage(s, "read", "read #N [LEN]");
	int idx;
	struct entry *e = entry_ref(s, "read", args[0], &idx);
	if (!e)
		return;
	if (!e->live)
		return say_usage(s, "read", "#%d was freed", idx);
	uint64_t len = e->size < 256 ? e->size : 256;
	if (n == 2 && (vactl_parse_size(args[1], &len) < 0 || len > e->size))
		return say_usage(s, "read", "LEN '%s' is not a size up to %zu", args[1], e->size);
	const unsigned char *b = e->ptr;
	char *text = malloc(len + 1);
	if (!text)
		return say_fail(s, "read", VAD_ENOMEM);
	size_t t = 0;
	bool zero = true;
	bool ended = false;
	for (uint64_t i = 0; i < len; i++) {
		if (b[i])
			zero = false;
		if (!b[i])
			ended = true;
		if (!ended)
			text[t++] = (b[i] >= 0x20 && b[i] < 0x7f) ? (char)b[i] : '.';
	}
	text[t] = '\0';
	json_object *j = result("read");
	json_object_object_add(j, "index", json_object_new_int(idx));
	vactl_json_add_u64(j, "length", len);
	vactl_json_add_str(j, "text", text);
	json_object_object_add(j, "zero", json_object_new_boolean(zero));
	say_ok(s, j, "#%d text=\"%s\" zero=%s", idx, text, zero ? "yes" : "no");
	free(text);
}

static void cmd_stats(struct session *s, char **args, int n)
{
	(void)args;
	if (n != 0)
		return say_usage(s, "stats", "stats takes no arguments");
	struct vad_stats st;
	int err = vad_stats(s->c, &st);
	if (err)
		return say_fail(s, "stats", err);
	json_object *j = result("stats");
	vactl_json_add_u64(j, "arena_bytes", st.arena_bytes);
	vactl_json_add_u64(j, "busy_bytes", st.busy_bytes);
	vactl_json_add_u64(j, "free_bytes", st.free_bytes);
	vactl_json_add_u64(j, "lazy_bytes", st.lazy_bytes);
	vactl_json_add_u64(j, "pooled_bytes", st.pooled_bytes);
	vactl_json_add_u64(j, "largest_free", st.largest_free);
	vactl_json_add_u64(j, "allocs", st.allocs);
	vactl_json_add_u64(j, "frees", st.frees);
	vactl_json_add_u64(j, "fails", st.fails);
	vactl_json_add_u64(j, "clients", st.clients);
	vactl_json_add_u64(j, "held_bytes", st.held_bytes);
	vactl_json_add_u64(j, "held_ranges", st.held_ranges);
	say_ok(s, j,
	       "busy_bytes=%llu free_bytes=%llu lazy_bytes=%llu pooled_bytes=%llu clients=%u "
	       "held_bytes=%llu held_ranges=%llu",
	       (unsigned long long)st.busy_bytes, (unsigned long long)st.free_bytes,
	       (unsigned long long)st.lazy_bytes, (unsigned long long)st.pooled_bytes, st.clients,
	       (unsigned long long)st.held_bytes, (unsigned long long)st.held_ranges);
}

static void cmd_sleep(struct session *s, char **args, int n)
{
	uint64_t ms;
	if (n != 1 || vactl_parse_duration(args[0], &ms) < 0)
		return say_usage(s, "sleep", "sleep SECONDS (or 250ms, 2m)");
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	vactl_deadline(s->o, false);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	vactl_deadline(s->o, true);
	json_object *j = result("sleep");
	vactl_json_add_u64(j, "ms", ms);
	say_ok(s, j, "slept %s", args[0]);
}

#define MAX_ARGS 8

static void cmd_help(struct session *s, char **args, int n);
static void cmd_quit(struct session *s, char **args, int n)
{
	(void)args;
	(void)n;
	s->quit = true;
	say_ok(s, result("quit"), "bye");
}

/* The commands a session reads, one row each: what runs them, what `help` and the unknown
 * command's message list. write takes the raw line (its TEXT keeps its spaces). */
#define SESSION_COMMANDS(X)                                                                        \
	X("alloc", cmd_alloc, "alloc SIZE [ALIGN]",                                                \
	  "allocate (in --arena A, else the default arena)")                                       \
	X("free", cmd_free, "free OFFSET|#N", "free a range (#N: the Nth range this session got)") \
	X("share", cmd_share, "share OFFSET|#N [once] [ttl D]", "make a share token for a range")  \
	X("unshare", cmd_unshare, "unshare OFFSET|#N", "revoke the range's token")                 \
	X("attach", cmd_attach, "attach TOKEN", "take a reference to a shared range (a new #N)")   \
	X("write", NULL, "write #N TEXT", "copy TEXT to the range's start")                        \
	X("read", cmd_read, "read #N [LEN]", "show the range's first LEN bytes (default 256)")     \
	X("stats", cmd_stats, "stats", "totals over the arenas and this session's holdings")       \
	X("sleep", cmd_sleep, "sleep SECONDS", "wait (also 250ms, 2m)")                            \
	X("help", cmd_help, "help", "this list")                                                   \
	X("quit", cmd_quit, "quit", "end the session (so do exit and end of input)")

static const struct session_cmd {
	const char *name;
	void (*run)(struct session *s, char **args, int n);
	const char *synopsis;
	const char *what;
} session_cmds[] = {
#define SESSION_CMD_ROW(name, fn, synopsis, what) {name, fn, synopsis, what},
    SESSION_COMMANDS(SESSION_CMD_ROW)
#undef SESSION_CMD_ROW
};
#define N_SESSION_CMDS (sizeof(session_cmds) / sizeof(session_cmds[0]))

static void cmd_help(struct session *s, char **args, int n)
{
	(void)args;
	if (n > 0)
		return say_usage(s, "help", "help takes no arguments");
	if (s->o->json) {
		json_object *j = result("help");
		json_object *names = json_object_new_array();
		for (size_t i = 0; i < N_SESSION_CMDS; i++)
			json_object_array_add(names,
					      json_object_new_string(session_cmds[i].synopsis));
		json_object_object_add(j, "commands", names);
		return say_ok(s, j, "%s", "");
	}
	for (size_t i = 0; i < N_SESSION_CMDS; i++)
		printf("  %-32s %s\n", session_cmds[i].synopsis, session_cmds[i].what);
	printf("Blank lines and lines starting with '#' are ignored; 'vactl session --help' "
	       "says more.\n");
	fflush(stdout);
}

static void run_line(struct session *s, char *line)
{
	char *copy = strdup(line);
	if (!copy)
		return say_fail(s, "session", VAD_ENOMEM);
	char *args[MAX_ARGS + 1];
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(copy, " \t", &save); tok && n <= MAX_ARGS;
	     tok = strtok_r(NULL, " \t", &save))
		args[n++] = tok;
	if (n == 0 || args[0][0] == '#') { /* blank or a comment */
		free(copy);
		return;
	}
	const char *cmd = args[0];
	size_t i = 0;
	while (i < N_SESSION_CMDS && strcmp(cmd, session_cmds[i].name) != 0)
		i++;
	if (strcmp(cmd, "exit") == 0)
		cmd_quit(s, args + 1, n - 1);
	else if (i == N_SESSION_CMDS) {
		char names[256];
		size_t used = 0;
		for (size_t k = 0; k < N_SESSION_CMDS; k++)
			used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
						 k ? ", " : "", session_cmds[k].name);
		say_usage(s, cmd, "unknown command (%s)", names);
	} else if (!session_cmds[i].run)
		cmd_write(s, line);
	else
		session_cmds[i].run(s, args + 1, n - 1);
	free(copy);
}

enum { OPT_ARENA = 0x3000 };

static int on_session_opt(int opt, const char *arg, void *ctx)
{
	struct session *s = ctx;
	if (opt != OPT_ARENA)
		return VACTL_EXIT_USAGE;
	s->arena = arg;
	return VACTL_EXIT_OK;
}

static int run_session(struct vactl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"arena", required_argument, NULL, OPT_ARENA},
	    {0},
	};
	struct session s = {.o = o};
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_session, o, argc, argv, NULL, opts, on_session_opt, &s,
				 &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	if (first < argc)
		return vactl_usage_error(&vactl_cmd_session,
					 "unexpected argument '%s' (commands come from stdin)",
					 argv[first]);
	if ((rc = vactl_connect(o, &s.c)))
		return rc;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	/* A person at a terminal gets a greeting and a prompt, on stderr (as Python's REPL):
	 * piped input stays a script whose stdout holds only the result lines. */
	bool interactive = isatty(STDIN_FILENO);
	if (interactive)
		fprintf(stderr, "vactl session: one command per line; 'help' lists them, 'quit' or "
				"Ctrl-D ends the session\n");
	for (;;) {
		/* Waiting for the next command is no daemon delay. */
		vactl_deadline(o, false);
		if (!s.quit && interactive)
			fputs(SESSION_PROMPT, stderr);
		if (s.quit || (len = getline(&line, &cap, stdin)) < 0)
			break;
		vactl_deadline(o, true);
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		run_line(&s, line);
	}
	free(line);
	free(s.v);
	vad_close(s.c);
	return s.worst;
}

const struct vactl_cmd vactl_cmd_session = {
    .name = "session",
    .args = "[--arena A]",
    .summary = "run commands from stdin, one result line each",
    .help = "Reads one command per line from stdin and prints one result line for each,\n"
	    "so a person or a test can drive a multi-step session:\n"
	    "  alloc SIZE [ALIGN]     allocate (in --arena A, else the default arena)\n"
	    "  free OFFSET|#N         free a range (#N = the Nth range this session got by\n"
	    "                         alloc or attach; OFFSET = an offset in the arena)\n"
	    "  share OFFSET|#N [once] [ttl DURATION]\n"
	    "                         make a share token for a range; once: the first attach\n"
	    "                         uses it up; ttl: it expires after DURATION (250ms, 10s);\n"
	    "                         with either, a fresh token replaces the range's earlier one\n"
	    "  unshare OFFSET|#N      revoke the range's token (holders keep their references)\n"
	    "  attach TOKEN           take a reference to a shared range (a new #N)\n"
	    "  write #N TEXT          copy TEXT (the rest of the line) to the range's start,\n"
	    "                         then a NUL if the range has room\n"
	    "  read #N [LEN]          show the range's first LEN bytes (default 256) as text\n"
	    "                         up to the first NUL, and whether they are all zero\n"
	    "  stats                  totals over the arenas and this session's holdings\n"
	    "  sleep SECONDS          wait (also 250ms, 2m)\n"
	    "  help                   list the commands\n"
	    "  quit                   end the session (so do exit and end of input)\n"
	    "Blank lines and lines starting with '#' are ignored. Errors do not stop the\n"
	    "session; they print 'error: CMD: LABEL: SENTENCE'. Everything this session holds\n"
	    "is freed by the daemon when the session ends. When stdin is a terminal, a\n"
	    "prompt 'vad> ' and a greeting go to stderr; piped input gets neither.\n"
	    "Human output: '#1 arena=default offset=0 size=4096', 'freed #1 ...',\n"
	    "'#1 token=...', '#1 unshared', 'wrote 5 bytes to #1', '#1 text=\"hello\" zero=no', "
	    "'busy_bytes=...'.\n"
	    "JSON lines: {cmd, ok: true, ...} with index, arena, offset, size (alloc, attach,\n"
	    "free), token (share), bytes (write), length, text, zero (read), the vad_stats\n"
	    "fields (stats), ms (sleep), commands (help); or {cmd, ok: false, error: "
	    "NAME|\"usage\", code,\n"
	    "message}.\n"
	    "Exit status: the worst failure seen: 3 (daemon unreachable, stops the session) >\n"
	    "2 (a malformed command) > 1 (a refused command) > 0.\n",
    .run = run_session,
};
