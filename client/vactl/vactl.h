/*
 * vactl.h - shared pieces of the vactl admin CLI: options, exit codes, connecting,
 * error reporting and units; output helpers come from output.h (included here for the
 * commands; output.c itself needs nothing else of vactl).
 */
#ifndef VACTL_H
#define VACTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "output.h"
#include "units.h"
#include "vad.h"

/* Exit codes scripts can rely on. */
enum vactl_exit {
	VACTL_EXIT_OK = 0,	    /* success */
	VACTL_EXIT_REFUSED = 1,	    /* the daemon refused (or a local libvad failure) */
	VACTL_EXIT_USAGE = 2,	    /* bad command line */
	VACTL_EXIT_UNREACHABLE = 3, /* cannot reach the daemon, or it went away */
	VACTL_EXIT_CORRUPT = 4,	    /* check found broken allocator invariants */
};

/* Options every command understands. */
struct vactl_opts {
	const char *socket;  /* --socket, NULL: libvad's default resolution */
	bool json;	     /* --json */
	uint64_t timeout_ms; /* --timeout: longest wait for the daemon, 0 = forever */
};

#define VACTL_TIMEOUT_DEFAULT_MS 30000

/* One subcommand. */
struct vactl_cmd {
	const char *name;
	const char *args;    /* argument synopsis for the usage line */
	const char *summary; /* one line for vactl --help */
	const char *help;    /* the body of vactl NAME --help */
	int (*run)(struct vactl_opts *o, int argc, char **argv);
};

extern const struct vactl_cmd vactl_cmd_status, vactl_cmd_arenas, vactl_cmd_clients,
    vactl_cmd_stats, vactl_cmd_purge, vactl_cmd_reload, vactl_cmd_check, vactl_cmd_alloc,
    vactl_cmd_free, vactl_cmd_session, vactl_cmd_top, vactl_cmd_history, vactl_cmd_map,
    vactl_cmd_sessions, vactl_cmd_latency, vactl_cmd_metrics, vactl_cmd_ranges, vactl_cmd_tokens,
    vactl_cmd_kill, vactl_cmd_config, vactl_cmd_restart;

/* main.c */

/* Parse a command's own options (its --help, plus --json/--socket anywhere). long_opts
 * and short_opts describe extra options; each one found is passed to on_opt, which
 * returns 0 or a VACTL_EXIT_* code. On return *first_arg indexes the first operand.
 * Returns -1 when --help was printed (the caller exits 0), else an exit code. */
int vactl_parse_cmd(const struct vactl_cmd *cmd, struct vactl_opts *o, int argc, char **argv,
		    const char *short_opts, const struct option *long_opts,
		    int (*on_opt)(int opt, const char *arg, void *ctx), void *ctx, int *first_arg);

/* VACTL_EXIT_OK if at most max_args operands start at argv[first], else a usage error
 * naming the first extra one. */
int vactl_check_operands(const struct vactl_cmd *cmd, int argc, char **argv, int first,
			 int max_args);

/* Print "vactl: MSG" and the command's usage hint to stderr; returns VACTL_EXIT_USAGE. */
int vactl_usage_error(const struct vactl_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* client.c */

/* Arm (on) or disarm the --timeout deadline: when it passes, vactl reports that the
 * daemon did not answer and exits 3. vactl_connect arms it; commands that wait on purpose
 * (hold, sleep, reading stdin, top's interval) disarm it around the wait. */
void vactl_deadline(const struct vactl_opts *o, bool on);

/* Connect as "vactl"; on failure report it (with a hint) and return the exit code. */
int vactl_connect(const struct vactl_opts *o, vad_client **out);

/* The start of a command with no options of its own: parse at most max_args operands,
 * then connect. Returns true with *c connected and *first indexing the first operand;
 * false with *exit_code set to what the command returns (VACTL_EXIT_OK after --help). */
bool vactl_begin(const struct vactl_cmd *cmd, struct vactl_opts *o, int argc, char **argv,
		 int max_args, int *first, vad_client **c, int *exit_code);

/* Report a failed libvad call: "vactl: LABEL: SENTENCE" on stderr and, with --json, an
 * {"error": ...} document on stdout. Returns the matching exit code. */
int vactl_report(const struct vactl_opts *o, vad_client *c, int err);

/* vactl_report, then vad_close(c); returns the exit code. */
int vactl_report_close(const struct vactl_opts *o, vad_client *c, int err);

/* Exit code for a VAD_E* code. */
int vactl_exit_code(int err);

/* units.c (sizes and durations follow proto/units.h, the rules of vad.conf) */

/* vad_parse_size: "4096", "4K", "1.5M", "64G", "4 KiB", "4kb" -> bytes; -1 on junk. */
int vactl_parse_size(const char *s, uint64_t *out);

/* vad_parse_duration_ms: "250ms", "10s", "5m", "2h", "1d", "1w", bare number = seconds. */
int vactl_parse_duration(const char *s, uint64_t *ms);

/* vad_format_size: "1.0 GiB", "64 GiB", "512 KiB", "17 B" into buf. */
const char *vactl_fmt_size(uint64_t bytes, char *buf, size_t len);

/* "3d 04h", "2h 03m", "4m 12s", "812ms" into buf. */
const char *vactl_fmt_duration(uint64_t ms, char *buf, size_t len);

/* A latency: "-" for 0, "812ns", "4.2us", "1.3ms" into buf. */
const char *vactl_fmt_ns(uint64_t ns, char *buf, size_t len);

/* Is v a power of two (0 is not)? */
static inline bool vactl_is_power_of_two(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* *total += v, held at UINT64_MAX rather than wrapping (totals over arenas). */
static inline void vactl_sum_into(uint64_t *total, uint64_t v)
{
	if (__builtin_add_overflow(*total, v, total))
		*total = UINT64_MAX;
}

#endif
