/* config.h - vad.conf: parsing (inih), human units, validation with file:line reasons. */
#ifndef VAD_CONFIG_H
#define VAD_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "listen_addr.h"
#include "units.h" /* vad_parse_size, vad_parse_duration_ms, vad_format_size */

#define VAD_NAME_MAX 63

/* One [arena NAME] section. */
/* Whose arena a client of a section gets (tenancy = ...): the section's one arena, or one of
 * its own per uid or per primary gid (tenants.h). */
enum vad_tenancy {
	VAD_TENANCY_NONE = 0,
	VAD_TENANCY_UID,
	VAD_TENANCY_GID,
};

/* "none", "uid" or "gid": the tenancy key's value. */
const char *vad_tenancy_name(enum vad_tenancy t);

/* Defaults of the tenancy keys. */
#define VAD_TENANT_IDLE_DEFAULT_MS (5 * 60 * 1000ull)
#define VAD_MAX_TENANTS_DEFAULT	   1024u
#define VAD_MAX_TENANTS_LIMIT	   65536u /* all sections' max_tenants together */

/* When a granted range's memory is found (commit = ...): at the first touch, or by the daemon
 * before it grants the range (commit.h). */
enum vad_commit {
	VAD_COMMIT_TOUCH = 0,
	VAD_COMMIT_RESERVE,
};

/* The arena's NUMA placement (numa_node = ...): none, one node, or interleaved (numa.h). */
enum vad_numa {
	VAD_NUMA_NONE = 0,
	VAD_NUMA_NODE,	     /* every page on numa_node */
	VAD_NUMA_INTERLEAVE, /* pages spread over the nodes with memory */
};
#define VAD_NUMA_NODE_MAX 1023

/* Room for the [arena] keys' lines (checked against the key table in config_arena_text.c). */
#define VAD_ARENA_KEYS_MAX 24

/* Room a tenant arena's name ("NAME@ID") needs past its section's name. */
#define VAD_TENANT_SUFFIX_MAX 11

struct vad_arena_conf {
	char name[VAD_NAME_MAX + 1];
	uint64_t size;		/* bytes, sparse */
	uint64_t quantum;	/* bytes, power of two; default page size (2 MiB if hugetlbfs) */
	char backing[PATH_MAX]; /* "" = memfd, else a directory (e.g. a hugetlbfs mount) */
	bool allow_any;		/* no allow-list given: any peer that can reach the socket */
	uid_t *allow_uids;	/* allow_uids = root, 1000, www-data */
	size_t n_allow_uids;
	gid_t *allow_gids; /* allow_gids = video, 1000 */
	size_t n_allow_gids;
	uid_t *reader_uids; /* reader_uids = 1001, backup: may map, attach and read, not allocate
			       (a peer the allow-list admits writes instead) */
	size_t n_reader_uids;
	gid_t *reader_gids; /* reader_gids = monitoring */
	size_t n_reader_gids;
	int line;		  /* line of its [arena NAME] header in the file, 0 if built in */
	bool accept_unsealed;	  /* accept_unsealed = yes: start even if its file cannot be
				     sealed (any client could then resize it; see vad.conf(5)) */
	enum vad_tenancy tenancy; /* tenancy = uid | gid: one file and allocator per tenant */
	uint64_t tenant_idle_ms;  /* a tenant arena holding nothing, with no session, closes */
	unsigned max_tenants;	  /* tenant arenas of this section open at once */
	uint64_t hugetlb_page;	  /* backing = hugetlb[:SIZE]: a MFD_HUGETLB memfd of this page
				     size; 0 otherwise */
	bool thp;		  /* huge = thp: ask for transparent huge pages (shmem) */
	enum vad_commit commit;	  /* commit = touch | reserve */
	enum vad_numa numa;	  /* numa_node = none | N | interleave */
	unsigned numa_node;	  /* VAD_NUMA_NODE: that node */
	char numa_text[16];	  /* "node N", "interleave" or "": as listings show it */
	int key_line[VAD_ARENA_KEYS_MAX]; /* the line that set each key, 0: its default */
};

/* How connections are spread over the workers (worker_balance). */
enum vad_worker_balance {
	VAD_BALANCE_ADAPTIVE = 0, /* as few workers as keep up; more when they saturate */
	VAD_BALANCE_EVEN,	  /* round-robin over every worker */
};

/* The whole file. Each [vad] key's default, bounds and whether a reload (SIGHUP) applies it
 * are its row of VAD_KEYS (config_parse.h). */
/* Room for the [vad] keys' sources (checked against the key table in config_keys.c). */
#define VAD_CONFIG_KEYS_MAX 48
/* key_line of a value the command line set (--socket). */
#define VAD_KEY_CMDLINE (-1)

struct vad_config {
	char path[PATH_MAX];		   /* the file it came from, "" for defaults */
	int key_line[VAD_CONFIG_KEYS_MAX]; /* the line of path that set each [vad] key, 0: its
					      default, VAD_KEY_CMDLINE: the command line */
	char socket_path[PATH_MAX];	   /* "" = the standard path */
	mode_t socket_mode;
	unsigned workers; /* 0 = one per CPU */
	enum vad_worker_balance worker_balance;
	double worker_spread_idle; /* adaptive: CPUs idle before another worker is tried */
	unsigned nodes;		   /* allocator nodes per arena; 0 = one per CPU */
	uint64_t lazy_max;	   /* 0 = the allocator default */
	uint32_t max_frame;
	unsigned max_clients;
	unsigned max_batch;    /* most ranges in one alloc/free request */
	uint64_t quota_client; /* bytes one session may hold; 0 = unlimited */
	uint64_t quota_uid;    /* bytes all sessions of one uid may hold; 0 = unlimited */
	bool has_admin_group;
	gid_t admin_gid; /* members may use admin operations (so may root and the daemon's uid) */
	char stats_db[PATH_MAX]; /* "" = beside the socket (dev) or /var/lib/vad/stats.db */
	uint64_t stats_interval_ms;
	uint64_t stats_retention_ms;
	int log_level;		   /* VAD_LOG_* */
	uint64_t hello_timeout_ms; /* a connection without hello is closed */
	unsigned max_clients_uid;  /* connections of one non-admin uid; 0 = unlimited */
	unsigned admin_slots;	   /* of max_clients kept for admins (half at most) */
	struct vad_arena_conf *arenas;
	size_t n_arenas;
	uint64_t max_ranges_client; /* references one session may hold; 0 = unlimited */
	uint64_t max_ranges_uid;    /* references all sessions of a uid may hold; 0 = unlimited */
	char metrics_listen[VAD_LISTEN_ADDR_MAX]; /* HTTP /metrics on "HOST:PORT"; "" = off */
	unsigned max_waiters_client; /* alloc requests one session may have waiting; 0: none */
	unsigned max_waiters;	     /* alloc requests waiting in the whole daemon; 0: none */
	uint64_t resume_grace_ms;    /* holds of a session gone at a restart are kept this long */
};

/* Fill cfg with defaults (each [vad] key's default text, parsed) and no arenas. */
void vad_config_defaults(struct vad_config *cfg);

/* Parse path into cfg (defaults first). On error returns -1 and writes "FILE:LINE: reason"
 * into err. A file without any [arena] section gets one 4 GiB memfd arena "default". */
int vad_config_load(const char *path, struct vad_config *cfg, char *err, size_t err_len);

/* Free what vad_config_load allocated inside cfg (not cfg itself). */
void vad_config_free(struct vad_config *cfg);

/* The [vad] keys, one table row each (config_parse.h), in the order of the table. */
size_t vad_config_key_count(void);

/* Key i's name as a file spells it, NULL past the end. */
const char *vad_config_key_name(size_t i);

/* Key i's default as a file would write it; NULL if it has none (admin_group). */
const char *vad_config_key_default(size_t i);

/* The [arena] keys, one row of ARENA_KEYS each (config_parse.h), in the order of the table. */
size_t vad_config_arena_key_count(void);

/* [arena] key i's name as a file spells it, NULL past the end. */
const char *vad_config_arena_key_name(size_t i);

/* [arena] key i's value in a as vactl config shows it ("4.0 GiB", "memfd", "1000, 1001")
 * into buf (config_arena_text.c). */
const char *vad_config_arena_key_text(const struct vad_arena_conf *a, size_t i, char *buf,
				      size_t len);

/* The index of [vad] key name (as a file spells it), or -1. */
int vad_config_key_index(const char *name);

/* Whether a reload applies key i (else it needs a restart). */
bool vad_config_key_reloadable(size_t i);

/* Key i's value in cfg as a summary shows it ("64 KiB", "unlimited", "info") into buf. */
const char *vad_config_key_text(const struct vad_config *cfg, size_t i, char *buf, size_t len);

/* "max_frame 64 KiB, max_clients 1024, ...": every key a reload applies, with cfg's values. */
const char *vad_config_reloadable_text(const struct vad_config *cfg, char *buf, size_t len);

#endif
