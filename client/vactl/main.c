/* main.c - vactl: global options, command dispatch, help and version. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vactl.h"
#include "version.h"

static const struct vactl_cmd *const commands[] = {
    &vactl_cmd_status,	&vactl_cmd_top,	     &vactl_cmd_latency, &vactl_cmd_arenas,
    &vactl_cmd_clients, &vactl_cmd_stats,    &vactl_cmd_purge,	 &vactl_cmd_reload,
    &vactl_cmd_check,	&vactl_cmd_alloc,    &vactl_cmd_free,	 &vactl_cmd_session,
    &vactl_cmd_history, &vactl_cmd_sessions, &vactl_cmd_map,	 &vactl_cmd_metrics,
    &vactl_cmd_ranges,	&vactl_cmd_tokens,   &vactl_cmd_kill,	 &vactl_cmd_config,
    &vactl_cmd_restart,
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_help(FILE *f)
{
	fprintf(f, "Usage: vactl [--socket PATH] [--json] COMMAND [ARGS...]\n"
		   "       vactl COMMAND --help\n\n"
		   "Inspect and administer the vad shared-memory range daemon.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++) {
		char head[160];
		snprintf(head, sizeof(head), "%s %s", commands[i]->name, commands[i]->args);
		if (strlen(head) > 30)
			fprintf(f, "  %s\n  %-30s %s\n", head, "", commands[i]->summary);
		else
			fprintf(f, "  %-30s %s\n", head, commands[i]->summary);
	}
	fprintf(
	    f, "\nOptions (before or after the command):\n"
	       "  --socket PATH   the daemon's socket; default $VAD_SOCKET, else as root\n"
	       "                  /run/vad/vad.sock, else $XDG_RUNTIME_DIR/vad.sock if a socket\n"
	       "                  of yours is there, else /run/vad/vad.sock\n"
	       "  --json          machine output: one JSON document on stdout (session: one JSON\n"
	       "                  object per line); keys are snake_case, sizes are integer bytes\n"
	       "  --timeout D     give up when the daemon does not answer within D (default 30s;\n"
	       "                  0 = wait forever) and exit 3; waiting on purpose (alloc --hold,\n"
	       "                  session input and sleep, top's interval) does not count\n"
	       "  -h, --help      this help; vactl COMMAND --help explains one command\n"
	       "  -V, --version   print vactl's version\n"
	       "\nSizes accept binary units: 4096, 4K, 1.5M, 64G (K = 1024). Durations: 250ms,\n"
	       "10s, 5m, 2h, 1d, 1w; a bare number is seconds.\n"
	       "\nExit status:\n"
	       "  0  success\n"
	       "  1  the daemon refused the request (its reason is printed on stderr)\n"
	       "  2  usage error\n"
	       "  3  cannot reach the daemon (not running, wrong socket, went away, or no\n"
	       "     answer within --timeout)\n"
	       "  4  check found broken allocator invariants\n"
	       "With --json, a refusal or an unreachable daemon also prints {\"error\": NAME,\n"
	       "\"code\": N, \"message\": ...} on stdout; usage errors go to stderr only.\n");
}

static void print_cmd_help(const struct vactl_cmd *cmd)
{
	printf("Usage: vactl [--socket PATH] [--json] %s %s\n\n%s\n%s", cmd->name, cmd->args,
	       cmd->summary, cmd->help);
	printf("\nCommon options: --socket PATH, --json, --timeout D, --help. Exit status: 0 ok,\n"
	       "1 refused, 2 usage error, 3 cannot reach the daemon (or no answer within the\n"
	       "timeout), 4 corruption found (check).\n");
}

int vactl_usage_error(const struct vactl_cmd *cmd, const char *fmt, ...)
{
	va_list ap;
	fputs("vactl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cmd)
		fprintf(stderr, "\nUsage: vactl %s %s (see 'vactl %s --help')\n", cmd->name,
			cmd->args, cmd->name);
	else
		fputs("\nSee 'vactl --help'.\n", stderr);
	return VACTL_EXIT_USAGE;
}

enum { OPT_SOCKET = 0x1000, OPT_JSON, OPT_TIMEOUT };

int vactl_check_operands(const struct vactl_cmd *cmd, int argc, char **argv, int first,
			 int max_args)
{
	if (argc - first > max_args)
		return vactl_usage_error(cmd, "unexpected argument '%s'", argv[first + max_args]);
	return VACTL_EXIT_OK;
}

static int parse_timeout(const struct vactl_cmd *cmd, struct vactl_opts *o, const char *arg)
{
	if (vactl_parse_duration(arg, &o->timeout_ms) < 0)
		return vactl_usage_error(cmd, "bad timeout '%s' (try 10s, 2m, 0 for none)", arg);
	return VACTL_EXIT_OK;
}

int vactl_parse_cmd(const struct vactl_cmd *cmd, struct vactl_opts *o, int argc, char **argv,
		    const char *short_opts, const struct option *long_opts,
		    int (*on_opt)(int opt, const char *arg, void *ctx), void *ctx, int *first_arg)
{
	static const struct option common[] = {
	    {"socket", required_argument, NULL, OPT_SOCKET},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, 'h'},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	};
	size_t n_extra = 0;
	while (long_opts && long_opts[n_extra].name)
		n_extra++;
	const size_t n_common = sizeof(common) / sizeof(common[0]);
	struct option all[n_extra + n_common + 1];
	memcpy(all, common, sizeof(common));
	if (n_extra)
		memcpy(all + n_common, long_opts, n_extra * sizeof(*all));
	memset(&all[n_extra + n_common], 0, sizeof(all[0]));
	char shorts[64];
	snprintf(shorts, sizeof(shorts), ":h%s", short_opts ? short_opts : "");

	optind = 0; /* 0, not 1: makes glibc forget the global parse's permutation state */
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, shorts, all, NULL)) != -1) {
		switch (opt) {
		case OPT_SOCKET:
			o->socket = optarg;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_TIMEOUT:
			if (parse_timeout(cmd, o, optarg))
				return VACTL_EXIT_USAGE;
			break;
		case 'h':
			print_cmd_help(cmd);
			return -1;
		case '?':
			/* "-5" is a negative number, not a mistyped option: say what is wrong */
			if (isdigit(optopt))
				return vactl_usage_error(
				    cmd,
				    "%s: must be positive (sizes, counts and durations cannot be "
				    "negative)",
				    argv[optind - 1][0] == '-' ? argv[optind - 1]
							       : "a negative number");
			return vactl_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		case ':':
			return vactl_usage_error(cmd, "option '%s' needs a value",
						 argv[optind - 1]);
		default: {
			int rc = on_opt ? on_opt(opt, optarg, ctx) : VACTL_EXIT_USAGE;
			if (rc != VACTL_EXIT_OK)
				return rc;
		}
		}
	}
	*first_arg = optind;
	return VACTL_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option globals[] = {
	    {"socket", required_argument, NULL, OPT_SOCKET},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {0},
	};
	struct vactl_opts o = {.timeout_ms = VACTL_TIMEOUT_DEFAULT_MS};
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, "+:hV", globals, NULL)) != -1) {
		switch (opt) {
		case OPT_SOCKET:
			o.socket = optarg;
			break;
		case OPT_JSON:
			o.json = true;
			break;
		case OPT_TIMEOUT:
			if (parse_timeout(NULL, &o, optarg))
				return VACTL_EXIT_USAGE;
			break;
		case 'h':
			print_help(stdout);
			return VACTL_EXIT_OK;
		case 'V':
			printf("vactl %s (libvad %s)\n", VAD_VERSION, VAD_VERSION_STRING);
			return VACTL_EXIT_OK;
		case ':':
			return vactl_usage_error(NULL, "option '%s' needs a value",
						 argv[optind - 1]);
		default:
			return vactl_usage_error(NULL, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return vactl_usage_error(NULL, "no command given");
	const char *name = argv[optind];
	if (strcmp(name, "help") == 0) {
		if (optind + 1 < argc) {
			for (size_t i = 0; i < N_COMMANDS; i++)
				if (strcmp(commands[i]->name, argv[optind + 1]) == 0) {
					print_cmd_help(commands[i]);
					return VACTL_EXIT_OK;
				}
		}
		print_help(stdout);
		return VACTL_EXIT_OK;
	}
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (strcmp(commands[i]->name, name) == 0) {
			/* The command sees argv[0] = its name, like a program of its own. */
			return commands[i]->run(&o, argc - optind, argv + optind);
		}
	}
	return vactl_usage_error(NULL, "unknown command '%s'", name);
}
