/* main.c - the vad daemon: command line, startup, and the exit codes scripts rely on.
 *
 * vad never daemonizes itself: systemd (Type=notify) and `make run` both run it in the
 * foreground, and logs go to stderr (journald adds them to the journal).
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "listen.h"
#include "log.h"
#include "persist.h"
#include "server.h"
#include "socket_path.h"
#include "version.h"
#include "units.h"

#define DEFAULT_CONFIG "/etc/vad/vad.conf"

enum exit_code { EXIT_OK = 0, EXIT_CONFIG = 1, EXIT_USAGE = 2, EXIT_RUNTIME = 3 };

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: vad [OPTIONS]\n"
	    "The vad shared-memory range daemon.\n"
	    "\n"
	    "  -c, --config FILE    configuration file (default " DEFAULT_CONFIG " if it exists,\n"
	    "                       else built-in defaults: one 4 GiB memfd arena\n"
	    "                       \"default\")\n"
	    "  -s, --socket PATH    listen on PATH (overrides the config's socket)\n"
	    "  -f, --foreground     run in the foreground; vad always does (it never\n"
	    "                       daemonizes: systemd and `make run` supervise it),\n"
	    "                       the flag is accepted for clarity\n"
	    "      --check-config   parse the configuration, print a summary and exit\n"
	    "      --print-socket   print the socket path vad would listen on and exit\n"
	    "      --discard-state  drop the arenas and state the service manager kept\n"
	    "                       from the previous daemon and start empty (every live\n"
	    "                       range is lost); without it a state that fails its\n"
	    "                       checks stops the start\n"
	    "  -V, --version        print the version and exit\n"
	    "  -h, --help           print this help and exit\n"
	    "\n"
	    "Socket: --socket, else the config's socket, else $VAD_SOCKET, else\n" VAD_SYSTEM_SOCKET
	    " as root, else $XDG_RUNTIME_DIR/vad.sock, else\n" VAD_SYSTEM_SOCKET
	    ". Under systemd socket activation the passed socket is used.\n"
	    "Exit status: 0 ok, 1 configuration error, 2 usage error, 3 start-up or runtime "
	    "failure.\n");
}

struct options {
	const char *config;
	const char *socket;
	bool check_config;
	bool print_socket;
	bool discard_state;
};

/* Returns -1 to continue, or an exit code. */
static int parse_args(int argc, char **argv, struct options *o)
{
	enum { OPT_CHECK = 256, OPT_PRINT_SOCKET, OPT_DISCARD_STATE };
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"socket", required_argument, NULL, 's'},
	    {"foreground", no_argument, NULL, 'f'},
	    {"check-config", no_argument, NULL, OPT_CHECK},
	    {"print-socket", no_argument, NULL, OPT_PRINT_SOCKET},
	    {"discard-state", no_argument, NULL, OPT_DISCARD_STATE},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:s:fVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 's':
			o->socket = optarg;
			break;
		case 'f':
			break;
		case OPT_CHECK:
			o->check_config = true;
			break;
		case OPT_PRINT_SOCKET:
			o->print_socket = true;
			break;
		case OPT_DISCARD_STATE:
			o->discard_state = true;
			break;
		case 'V':
			printf("vad %s\n", VAD_VERSION);
			return EXIT_OK;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case ':':
			fprintf(stderr, "vad: option %s needs an argument\n", argv[optind - 1]);
			fprintf(stderr, "Try 'vad --help'.\n");
			return EXIT_USAGE;
		default:
			fprintf(stderr, "vad: unknown option %s\n", argv[optind - 1]);
			fprintf(stderr, "Try 'vad --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vad: unexpected argument '%s'\nTry 'vad --help'.\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (o->config && !*o->config) {
		fprintf(stderr, "vad: --config needs a file name\n");
		return EXIT_USAGE;
	}
	return -1;
}

static const char *count_or_auto(unsigned n, char *buf, size_t len)
{
	if (n == 0)
		snprintf(buf, len, "one per CPU");
	else
		snprintf(buf, len, "%u", n);
	return buf;
}

/* 10000 -> "10s", 2592000000 -> "30d", 250 -> "250ms": the largest unit that divides. */
static const char *format_duration(uint64_t ms, char *buf, size_t len)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = {{"w", 604800000ull}, {"d", 86400000ull}, {"h", 3600000ull},
		     {"m", 60000ull},	  {"s", 1000ull},     {"ms", 1ull}};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms % units[i].ms == 0 || units[i].ms == 1) {
			snprintf(buf, len, "%llu%s", (unsigned long long)(ms / units[i].ms),
				 units[i].unit);
			break;
		}
	}
	return buf;
}

/* n as text, 0 meaning unlimited. */
static const char *count_or_unlimited(uint64_t n, char *buf, size_t len)
{
	if (!n)
		return "unlimited";
	snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

/* "label 0,1000" of an id list, "label -" when it is empty. */
static void print_ids(const char *label, const uint32_t *ids, size_t n)
{
	printf("%s", label);
	for (size_t j = 0; j < n; j++)
		printf("%s%u", j ? "," : " ", (unsigned)ids[j]);
	if (!n)
		printf(" -");
}

static void print_summary(const struct vad_config *cfg, const struct vad_socket_choice *dflt)
{
	char a[32], b[32];
	if (cfg->socket_path[0])
		printf("  socket        %s (mode %04o)\n", cfg->socket_path,
		       (unsigned)cfg->socket_mode);
	else if (dflt->path[0])
		printf("  socket        %s (mode %04o; the default path: %s)\n", dflt->path,
		       (unsigned)cfg->socket_mode, vad_socket_source_text(dflt->source));
	else
		printf("  socket        (no default path fits; give --socket) (mode %04o)\n",
		       (unsigned)cfg->socket_mode);
	printf("  workers       %s, worker_balance %s, worker_spread_idle %g\n",
	       count_or_auto(cfg->workers, a, sizeof(a)),
	       cfg->worker_balance == VAD_BALANCE_EVEN ? "even" : "adaptive",
	       cfg->worker_spread_idle);
	printf("  nodes         %s\n", count_or_auto(cfg->nodes, a, sizeof(a)));
	printf("  lazy_max      %s\n",
	       cfg->lazy_max ? vad_format_size(cfg->lazy_max, a, sizeof(a)) : "allocator default");
	printf("  max_frame     %s, max_clients %u, max_batch %u\n",
	       vad_format_size(cfg->max_frame, a, sizeof(a)), cfg->max_clients, cfg->max_batch);
	printf("  quotas        client %s, uid %s\n",
	       cfg->quota_client ? vad_format_size(cfg->quota_client, a, sizeof(a)) : "unlimited",
	       cfg->quota_uid ? vad_format_size(cfg->quota_uid, b, sizeof(b)) : "unlimited");
	printf("  ranges        client %s, uid %s\n",
	       count_or_unlimited(cfg->max_ranges_client, a, sizeof(a)),
	       count_or_unlimited(cfg->max_ranges_uid, b, sizeof(b)));
	printf("  waiters       client %u, daemon %u (allocations waiting for room)\n",
	       cfg->max_waiters_client, cfg->max_waiters);
	printf("  admission     hello_timeout %s, max_clients_uid %s, admin_slots %u\n",
	       format_duration(cfg->hello_timeout_ms, a, sizeof(a)),
	       count_or_unlimited(cfg->max_clients_uid, b, sizeof(b)), cfg->admin_slots);
	if (cfg->has_admin_group)
		printf("  admin_group   %u\n", (unsigned)cfg->admin_gid);
	/* Empty: where the daemon would put it (resolve_stats_db). */
	char db[PATH_MAX];
	const char *sock = cfg->socket_path[0] ? cfg->socket_path : dflt->path;
	const char *where = cfg->stats_db;
	if (!where[0])
		where = sock[0] && vad_socket_stats_db(sock, db, sizeof(db)) == 0
			    ? db
			    : "(none: no path beside the socket; set stats_db)";
	printf("  stats_db      %s%s (every %s, kept %s)\n", where,
	       cfg->stats_db[0] ? "" : ", the default for that socket",
	       format_duration(cfg->stats_interval_ms, a, sizeof(a)),
	       format_duration(cfg->stats_retention_ms, b, sizeof(b)));
	printf("  metrics       %s\n", cfg->metrics_listen[0]
					   ? cfg->metrics_listen
					   : "off (set metrics_listen for HTTP /metrics)");
	if (cfg->log_level >= VAD_LOG_ERR && cfg->log_level <= VAD_LOG_DEBUG)
		printf("  log_level     %s\n", vad_log_level_name(cfg->log_level));
	printf("  %zu arena%s:\n", cfg->n_arenas, vad_plural(cfg->n_arenas));
	for (size_t i = 0; i < cfg->n_arenas; i++) {
		const struct vad_arena_conf *ac = &cfg->arenas[i];
		printf("    %-16s %s, quantum %s, %s, ", ac->name,
		       vad_format_size(ac->size, a, sizeof(a)),
		       vad_format_size(ac->quantum, b, sizeof(b)),
		       ac->backing[0]	  ? ac->backing
		       : ac->hugetlb_page ? "hugetlb memfd"
					  : "memfd");
		if (ac->accept_unsealed)
			printf("UNSEALED (accept_unsealed), ");
		if (ac->hugetlb_page)
			printf("hugetlb %s pages, ",
			       vad_format_size(ac->hugetlb_page, b, sizeof(b)));
		if (ac->thp)
			printf("transparent huge pages asked for, ");
		if (ac->commit == VAD_COMMIT_RESERVE)
			printf("committed before granting (commit = reserve), ");
		if (ac->numa_text[0])
			printf("NUMA %s, ", ac->numa_text);
		if (ac->tenancy != VAD_TENANCY_NONE)
			printf("one per %s (at most %u, closed after %s unused), ",
			       ac->tenancy == VAD_TENANCY_UID ? "uid" : "gid", ac->max_tenants,
			       format_duration(ac->tenant_idle_ms, a, sizeof(a)));
		if (ac->allow_any) {
			printf("any peer\n");
			continue;
		}
		print_ids("uids", ac->allow_uids, ac->n_allow_uids);
		print_ids(", gids", ac->allow_gids, ac->n_allow_gids);
		if (ac->n_reader_uids || ac->n_reader_gids) {
			print_ids("; read-only uids", ac->reader_uids, ac->n_reader_uids);
			print_ids(", gids", ac->reader_gids, ac->n_reader_gids);
		}
		printf("\n");
	}
}

/* Where the stats database goes when the config leaves it empty: the system path for the
 * system socket, else beside the socket (development and per-user daemons). */
static void resolve_stats_db(struct vad_config *cfg)
{
	if (cfg->stats_db[0])
		return;
	if (vad_socket_stats_db(cfg->socket_path, cfg->stats_db, sizeof(cfg->stats_db)) != 0) {
		log_warn("running without stats: the database beside %s would have too long a "
			 "path; set stats_db",
			 cfg->socket_path);
		cfg->stats_db[0] = '\0'; /* the server then starts no stats thread */
	}
}

/* The admin group must not be the group that may connect: every client would be an admin.
 * Look at the socket file (for an activated socket, the path systemd bound it to). */
static void warn_admin_group_is_socket_group(const struct vad_config *cfg, const char *path)
{
	struct stat st;
	if (!cfg->has_admin_group || !path[0])
		return;
	if (stat(path, &st) != 0) {
		log_debug("cannot stat the socket %s to compare its group with admin_group: %s",
			  path, strerror(errno));
		return;
	}
	if (st.st_gid != cfg->admin_gid || !(st.st_mode & S_IWGRP))
		return;
	char name[64];
	struct group gr, *res = NULL;
	char buf[4096];
	if (getgrgid_r(cfg->admin_gid, &gr, buf, sizeof(buf), &res) == 0 && res)
		snprintf(name, sizeof(name), "%s", gr.gr_name);
	else
		snprintf(name, sizeof(name), "%u", (unsigned)cfg->admin_gid);
	log_warn("admin_group %s (gid %u) is the group of the socket %s (mode %04o): every member "
		 "who may connect is also an admin (clients, purge, reload); give admin_group a "
		 "group of its own, e.g. vad-admin",
		 name, (unsigned)cfg->admin_gid, path, (unsigned)(st.st_mode & 07777));
}

static void close_arenas(struct vad_arena **arenas, size_t n)
{
	for (size_t i = 0; i < n; i++)
		vad_arena_close(arenas[i]);
	free(arenas);
}

/* Load the config and settle the socket path (--socket, the config, or the default rule);
 * answers --check-config and --print-socket. Returns -1 to go on and start, else the exit
 * code (the config is freed then). */
static int load_config(const struct options *opt, struct vad_config *cfg)
{
	const char *config_path = opt->config;
	struct stat st;
	if (!config_path && stat(DEFAULT_CONFIG, &st) == 0)
		config_path = DEFAULT_CONFIG;
	char err[8192]; /* every error of the file, one per line, then their count */
	if (vad_config_load(config_path, cfg, err, sizeof(err)) != 0) {
		for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n"))
			fprintf(stderr, "vad: %s\n", line);
		return EXIT_CONFIG;
	}
	int rc = -1;
	if (opt->socket) {
		if (!*opt->socket || strlen(opt->socket) >= sizeof(cfg->socket_path)) {
			fprintf(stderr, "vad: --socket: bad path\n");
			rc = EXIT_USAGE;
			goto done;
		}
		snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", opt->socket);
		int k = vad_config_key_index("socket");
		if (k >= 0)
			cfg->key_line[k] =
			    VAD_KEY_CMDLINE; /* vactl config says where it came from */
	}
	/* no socket given: the rule every client follows too (proto/socket_path.h) */
	struct vad_socket_choice dflt = {0};
	struct vad_socket_env env;
	vad_socket_env_current(&env);
	int dflt_rc = cfg->socket_path[0]
			  ? 0
			  : vad_socket_default(VAD_SOCKET_DAEMON, &env, &dflt, err, sizeof(err));
	if (opt->check_config) {
		char real[PATH_MAX]; /* the file itself, as a path an operator can open */
		printf("%s: ok\n", !config_path			 ? "built-in defaults"
				   : realpath(config_path, real) ? real
								 : config_path);
		print_summary(cfg, &dflt);
		rc = EXIT_OK;
	} else if (dflt_rc != 0) {
		fprintf(stderr, "vad: %s; give --socket or set socket in the config\n", err);
		rc = EXIT_RUNTIME;
	} else {
		if (!cfg->socket_path[0])
			snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", dflt.path);
		if (opt->print_socket) {
			printf("%s\n", cfg->socket_path);
			rc = EXIT_OK;
		}
	}
done:
	if (rc >= 0)
		vad_config_free(cfg);
	return rc;
}

/* Open every configured arena (a file kept from the previous daemon, or a fresh one; a
 * section with tenancy opens its tenants' arenas on first use, tenants.h); NULL (logged,
 * nothing left open) when one cannot be. */
static struct vad_arena **open_arenas(const struct vad_config *cfg, struct vad_persist *persist)
{
	char err[2048];
	struct vad_arena **arenas = calloc(cfg->n_arenas ? cfg->n_arenas : 1, sizeof(*arenas));
	if (!arenas) {
		log_err("out of memory");
		return NULL;
	}
	if (vad_persist_open_arenas(persist, cfg, arenas, err, sizeof(err)) != 0) {
		log_err("%s", err);
		free(arenas);
		return NULL;
	}
	return arenas;
}

/* Bind the socket (or take systemd's) and settle the path clients and the stats database
 * see; -1 (logged) when there is none. */
static int open_listener(struct vad_config *cfg, int *listen_fd, bool *activated)
{
	char err[1024];
	if (vad_listen_open(cfg->socket_path, cfg->socket_mode, listen_fd, activated, err,
			    sizeof(err)) != 0) {
		log_err("%s", err);
		return -1;
	}
	if (*activated) {
		char path[sizeof(cfg->socket_path)];
		vad_listen_socket_path(*listen_fd, path, sizeof(path));
		if (path[0])
			snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", path);
		/* an unnamed activated socket has no file whose group could be compared */
		warn_admin_group_is_socket_group(cfg, path);
	} else {
		warn_admin_group_is_socket_group(cfg, cfg->socket_path);
	}
	resolve_stats_db(cfg);
	return 0;
}

/* Run the server over the open arenas and socket until it stops; the exit code. The server
 * owns the arenas once created; on failure to create it they are closed here. */
/* Block or unblock (how) the signals the server handles: stop, reload, restart. */
static void set_control_signals(int how)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(how, &set, NULL);
}

static int serve(struct vad_config *cfg, struct vad_arena **arenas, int listen_fd, bool activated,
		 struct vad_persist *persist, bool *restart)
{
	char err[2048];
	size_t n_arenas = cfg->n_arenas;
	struct vad_server *server;
	if (vad_server_create(cfg, arenas, n_arenas, listen_fd, &server, err, sizeof(err)) != 0) {
		/* on failure the server took nothing: the arenas and the socket are still ours */
		log_err("cannot start: %s", err);
		close(listen_fd);
		close_arenas(arenas, n_arenas);
		return EXIT_RUNTIME;
	}
	set_control_signals(SIG_UNBLOCK); /* the server's signal events take them from now on */

	/* Everything the previous daemon kept is back and checked before READY. */
	if (vad_persist_restore(persist, vad_server_service(server), cfg, err, sizeof(err)) != 0) {
		log_err("%s", err);
		vad_persist_end(persist);
		vad_server_destroy(server);
		return EXIT_RUNTIME;
	}

	long workers = cfg->workers ? (long)cfg->workers : sysconf(_SC_NPROCESSORS_ONLN);
	log_notice("vad %s listening on %s%s (%zu arena%s, %ld worker%s)", VAD_VERSION,
		   cfg->socket_path, activated ? " (socket activation)" : "", n_arenas,
		   vad_plural(n_arenas), workers, vad_plural(workers));

	int rc = vad_server_run(server);
	vad_persist_end(persist); /* the state file keeps what it says now */
	if (rc == 0 && vad_server_restart_requested(server) &&
	    vad_persist_prepare_exec(persist) == 0)
		*restart = true;
	vad_server_destroy(server); /* frees the arenas and their array */
	if (rc != 0) {
		log_err("stopped after a runtime failure");
		return EXIT_RUNTIME;
	}
	log_info("stopped");
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct options opt = {0};
	int rc = parse_args(argc, argv, &opt);
	if (rc >= 0)
		return rc;
	/* Files vad creates (the stats database and its -wal/-shm, arena files) are for vad
	 * alone, under systemd (UMask=0077) or not; the socket gets socket_mode by chmod. */
	umask(077);

	struct vad_config cfg;
	rc = load_config(&opt, &cfg);
	if (rc >= 0)
		return rc;
	vad_log_set_level(cfg.log_level);
	/* clients vanish mid-write all the time; that must be an EPIPE, never a signal */
	signal(SIGPIPE, SIG_IGN);
	/* A stop or reload signal that comes while the arenas open or the socket is already
	 * accepting waits until the server catches it (serve), instead of killing the daemon
	 * half started; threads started meanwhile (the allocators' drains) never take one. */
	set_control_signals(SIG_BLOCK);

	/* First: the fds kept by the service manager leave LISTEN_FDS before the socket is
	 * looked for there. */
	char err[2048];
	struct vad_persist *persist = vad_persist_begin(opt.discard_state, err, sizeof(err));
	if (!persist) {
		log_err("%s", err);
		vad_config_free(&cfg);
		return EXIT_RUNTIME;
	}
	struct vad_arena **arenas = open_arenas(&cfg, persist);
	int listen_fd;
	bool activated = false, restart = false;
	if (!arenas) {
		rc = EXIT_RUNTIME;
	} else if (open_listener(&cfg, &listen_fd, &activated) != 0) {
		close_arenas(arenas, cfg.n_arenas);
		rc = EXIT_RUNTIME;
	} else {
		rc = serve(&cfg, arenas, listen_fd, activated, persist, &restart);
		/* a socket we bound ourselves goes away with us; systemd owns an activated one */
		if (!activated)
			unlink(cfg.socket_path);
	}
	vad_config_free(&cfg);
	if (restart) /* SIGUSR2, vactl restart: the same pid, the same arenas, a new image */
		vad_persist_exec(persist, argv);
	vad_persist_free(persist);
	return rc;
}
