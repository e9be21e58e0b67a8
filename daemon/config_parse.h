/* config_parse.h - what config.c (sections, arenas, the file) and config_keys.c (the [vad]
 * keys and the value parsers) share while one file is parsed; not for other modules. */
#ifndef VAD_CONFIG_PARSE_H
#define VAD_CONFIG_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"

/*
 * The [vad] keys, one row each: enum id, the name a file spells it with, its kind of value
 * (VALUE_KINDS below: how it is parsed, stored and shown), the vad_config field it goes to,
 * its default as a file would write it (NULL: unset), the bounds its kind checks, whether a
 * reload applies it (RELOAD) or it needs a restart (RESTART), and the end of the sentence that
 * refuses a value out of bounds.
 *
 * max_waiters*: a waiting alloc costs the daemon about 200 bytes plus 8 per range of its
 * batch (its sizes are kept), so the default total of 4096 costs at most 1 MB with batches of
 * 32 and 33 MB at max_batch 1024 (docs/SERVICE.md, Waiting for memory).
 *
 * max_ranges_*: the daemon keeps at most 200 bytes per live range (188 measured) and a
 * 32-byte record in the state file, so a client at its default limit costs the daemon at
 * most 232 MB, a uid 928 MB (docs/SERVICE.md).
 */
/* clang-format off */
#define VAD_KEYS(X)                                                                                \
	X(K_SOCKET, "socket", SOCKET_PATH, socket_path, "", 0, 0, RESTART, "")                     \
	X(K_SOCKET_MODE, "socket_mode", MODE, socket_mode, "0660", 0, 0777, RESTART, "")           \
	X(K_WORKERS, "workers", COUNT, workers, "auto", 0, MAX_THREADS, RESTART, "")               \
	X(K_WORKER_BALANCE, "worker_balance", BALANCE, worker_balance, "adaptive",                 \
	  0, 0, RESTART, "")                                                                       \
	X(K_WORKER_SPREAD_IDLE, "worker_spread_idle", CPUS, worker_spread_idle, "0.4",             \
	  0, MAX_THREADS, RESTART, "")                                                             \
	X(K_NODES, "nodes", COUNT, nodes, "auto", 0, MAX_THREADS, RESTART, "")                     \
	X(K_LAZY_MAX, "lazy_max", SIZE_OR_AUTO, lazy_max, "auto", 0, 0, RESTART, "")               \
	X(K_MAX_FRAME, "max_frame", SIZE_IN_BOUNDS, max_frame, "64K",                              \
	  MAX_FRAME_MIN, MAX_FRAME_MAX, RELOAD, "4 KiB and 16 MiB")                                \
	X(K_MAX_CLIENTS, "max_clients", UINT, max_clients, "1024", 1, MAX_CLIENTS_MAX, RELOAD, "") \
	X(K_MAX_BATCH, "max_batch", UINT, max_batch, "1024", 1, MAX_BATCH_MAX, RELOAD, "")         \
	X(K_QUOTA_CLIENT, "quota_client", QUOTA, quota_client, "unlimited", 0, 0, RELOAD, "")      \
	X(K_QUOTA_UID, "quota_uid", QUOTA, quota_uid, "unlimited", 0, 0, RELOAD, "")               \
	X(K_ADMIN_GROUP, "admin_group", GROUP, admin_gid, NULL, 0, 0, RESTART, "")                 \
	X(K_STATS_DB, "stats_db", PATH, stats_db, "", 0, 0, RESTART, "")                           \
	X(K_STATS_INTERVAL, "stats_interval", DURATION, stats_interval_ms, "10s",                  \
	  STATS_INTERVAL_MIN_MS, STATS_INTERVAL_MAX_MS, RESTART, "")                               \
	X(K_STATS_RETENTION, "stats_retention", DURATION, stats_retention_ms, "30d",               \
	  STATS_RETENTION_MIN_MS, STATS_RETENTION_MAX_MS, RESTART, "")                             \
	X(K_LOG_LEVEL, "log_level", LOG_LEVEL, log_level, "info", 0, 0, RELOAD, "")                \
	X(K_HELLO_TIMEOUT, "hello_timeout", DURATION, hello_timeout_ms, "10s",                     \
	  HELLO_TIMEOUT_MIN_MS, HELLO_TIMEOUT_MAX_MS, RELOAD, "")                                  \
	X(K_MAX_CLIENTS_UID, "max_clients_uid", UINT_OR_UNLIMITED, max_clients_uid, "128",         \
	  1, MAX_CLIENTS_MAX, RELOAD, " or \"unlimited\"")                                         \
	X(K_ADMIN_SLOTS, "admin_slots", UINT, admin_slots, "4", 0, MAX_CLIENTS_MAX, RELOAD,        \
	  " (0: no slots kept for admins)")                                                        \
	X(K_MAX_RANGES_CLIENT, "max_ranges_client", RANGE_LIMIT, max_ranges_client, "1048576",     \
	  1, MAX_RANGES_MAX, RELOAD, "")                                                           \
	X(K_MAX_RANGES_UID, "max_ranges_uid", RANGE_LIMIT, max_ranges_uid, "4194304",              \
	  1, MAX_RANGES_MAX, RELOAD, "")                                                           \
	X(K_METRICS_LISTEN, "metrics_listen", LISTEN_ADDR, metrics_listen, "", 0, 0, RESTART, "")  \
	X(K_MAX_WAITERS_CLIENT, "max_waiters_client", UINT, max_waiters_client, "64",              \
	  0, MAX_WAITERS_MAX, RELOAD, " (0: no waiting)")                                          \
	X(K_MAX_WAITERS, "max_waiters", UINT, max_waiters, "4096", 0, MAX_WAITERS_MAX, RELOAD,     \
	  " (0: no waiting)")                                                                      \
	X(K_RESUME_GRACE, "resume_grace", DURATION, resume_grace_ms, "30s",                        \
	  RESUME_GRACE_MIN_MS, RESUME_GRACE_MAX_MS, RESTART, "")
/* clang-format on */

#define KEY_ENUM(id, ...) id,
enum vad_key { VAD_KEYS(KEY_ENUM) N_VAD_KEYS };

/* The keys of an [arena NAME] section: id, name, the function that parses its value. */
#define ARENA_KEYS(X)                                                                              \
	X(A_SIZE, "size", arena_size)                                                              \
	X(A_QUANTUM, "quantum", arena_quantum)                                                     \
	X(A_BACKING, "backing", arena_backing)                                                     \
	X(A_ALLOW_UIDS, "allow_uids", arena_allow_uids)                                            \
	X(A_ALLOW_GIDS, "allow_gids", arena_allow_gids)                                            \
	X(A_READER_UIDS, "reader_uids", arena_reader_uids)                                         \
	X(A_READER_GIDS, "reader_gids", arena_reader_gids)                                         \
	X(A_ACCEPT_UNSEALED, "accept_unsealed", arena_accept_unsealed)                             \
	X(A_TENANCY, "tenancy", arena_tenancy)                                                     \
	X(A_TENANT_IDLE, "tenant_idle", arena_tenant_idle)                                         \
	X(A_MAX_TENANTS, "max_tenants", arena_max_tenants)                                         \
	X(A_HUGE, "huge", arena_huge)                                                              \
	X(A_COMMIT, "commit", arena_commit)                                                        \
	X(A_NUMA_NODE, "numa_node", arena_numa_node)

enum arena_key { ARENA_KEYS(KEY_ENUM) N_ARENA_KEYS };
#undef KEY_ENUM

/* SEC_SKIP: the lines after a header that was refused, ignored up to the next header (so one
 * bad header does not turn each of its keys into another error). */
enum section_kind { SEC_NONE, SEC_VAD, SEC_ARENA, SEC_SKIP };

/* One parse of one file. */
struct parse_state {
	struct vad_config *cfg;
	const char *path;
	FILE *file;
	char *line;
	size_t line_cap;
	int lineno;
	bool failed;	     /* at least one error */
	bool aborted;	     /* out of memory: stop reading */
	int errors;	     /* errors found so far; every one is counted */
	int errors_shown;    /* of them, the ones that fit into err */
	int error_line;	     /* line of the first error */
	int last_error_line; /* a line gets one error, not its consequences too */
	int section_errors;  /* errors before the current [arena] section began */
	char *err;
	size_t err_len;
	size_t err_used;

	enum section_kind section;
	int vad_section_line;		  /* first [vad] header, 0 if none yet */
	int vad_key_line[N_VAD_KEYS];	  /* where each [vad] key was set, 0 if not */
	int arena_key_line[N_ARENA_KEYS]; /* same for the arena being read */
	int *arena_lines;		  /* header line of every arena, parallel to cfg->arenas */
	size_t arenas_cap;
	uint64_t hugetlb_page; /* page size of the current arena's hugetlbfs backing, 0 if none */
};

/* Record an error as a "FILE:LINE: reason" line of err (one per line: a second one for the
 * same line is a consequence of the first and dropped); returns 0 so parsers can return it. */
int config_fail_at(struct parse_state *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The system page size (4096 if sysconf does not say). */
long config_page_size(void);

/* A user or group name or number (numbers need no passwd/group entry); 0, or -1. */
int config_lookup_uid(const char *s, uid_t *out);
int config_lookup_gid(const char *s, gid_t *out);

/* A size with binary units into *out; 1, or 0 after config_fail_at naming key. */
int config_key_size(struct parse_state *ps, const char *key, const char *v, uint64_t *out);

/* An absolute path shorter than cap into out; 1, or 0 after config_fail_at naming key. */
int config_key_path(struct parse_state *ps, const char *key, const char *v, char *out, size_t cap);

/* The memory keys of an [arena] section (config_memory.c): huge = none | thp, commit = touch |
 * reserve, numa_node = none | N | interleave, and backing = hugetlb[:2M|:1G]; 1, or 0 after
 * config_fail_at. */
int arena_huge(struct parse_state *ps, const char *key, const char *v);
int arena_commit(struct parse_state *ps, const char *key, const char *v);
int arena_numa_node(struct parse_state *ps, const char *key, const char *v);
int arena_backing_hugetlb(struct parse_state *ps, const char *key, const char *v);

/* Checks of the memory keys that need the whole section (after the quantum is known). */
int config_finish_memory(struct parse_state *ps, struct vad_arena_conf *a);

/* Parse v as the value of [vad] key k into ps->cfg; 1, or 0 after config_fail_at. */
int config_apply_vad_key(struct parse_state *ps, enum vad_key k, const char *v);

/* Which [vad] key name is (any case), or -1. */
int config_find_vad_key(const char *name);

#endif
