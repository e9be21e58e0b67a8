/* config.h - vad.conf: parsing (inih), human units, validation with file:line reasons. */
#ifndef VAD_CONFIG_H
#define VAD_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "units.h" /* vad_parse_size, vad_parse_duration_ms, vad_format_size */

#define VAD_NAME_MAX 63

/* One [arena NAME] section. */
struct vad_arena_conf {
	char name[VAD_NAME_MAX + 1];
	uint64_t size;		 /* bytes, sparse */
	uint64_t quantum;	 /* bytes, power of two; default page size (2 MiB if hugetlbfs) */
	char backing[PATH_MAX];	 /* "" = memfd, else a directory (e.g. a hugetlbfs mount) */
	bool allow_any;		 /* no allow-list given: any peer that can reach the socket */
	uid_t *allow_uids;	 /* allow_uids = root, 1000, www-data */
	size_t n_allow_uids;
	gid_t *allow_gids;	 /* allow_gids = video, 1000 */
	size_t n_allow_gids;
	int line;		 /* line of its [arena NAME] header in the file, 0 if built in */
	bool accept_unsealed;	 /* accept_unsealed = yes: start even if its file cannot be
				    sealed (any client could then resize it; see vad.conf(5)) */
};

/* How connections are spread over the workers (worker_balance). */
enum vad_worker_balance {
	VAD_BALANCE_ADAPTIVE = 0, /* as few workers as keep up; more when they saturate */
	VAD_BALANCE_EVEN,	  /* round-robin over every worker */
};

/* The whole file. Limits marked (reload) are re-read on SIGHUP. */
struct vad_config {
	char path[PATH_MAX];	   /* the file it came from, "" for defaults */
	char socket_path[PATH_MAX]; /* "" = the standard path */
	mode_t socket_mode;	   /* default 0660 */
	unsigned workers;	   /* 0 = one per CPU */
	enum vad_worker_balance worker_balance; /* default adaptive */
	double worker_spread_idle; /* adaptive: CPUs idle before another worker is tried; 0.4 */
	unsigned nodes;		   /* allocator nodes per arena; 0 = one per CPU */
	uint64_t lazy_max;	   /* 0 = the allocator default */
	uint32_t max_frame;	   /* (reload) default 64 KiB */
	unsigned max_clients;	   /* (reload) default 1024 */
	unsigned max_batch;	   /* (reload) most ranges in one alloc/free request; default 1024 */
	uint64_t quota_client;	   /* (reload) bytes one session may hold; 0 = unlimited */
	uint64_t quota_uid;	   /* (reload) bytes all sessions of one uid may hold; 0 = unlimited */
	bool has_admin_group;
	gid_t admin_gid;	   /* members may use admin operations (root and the daemon's uid always may) */
	char stats_db[PATH_MAX];   /* "" = beside the socket (dev) or /var/lib/vad/stats.db */
	uint64_t stats_interval_ms; /* default 10 s */
	uint64_t stats_retention_ms; /* default 30 d */
	int log_level;		   /* (reload) VAD_LOG_* */
	uint64_t hello_timeout_ms; /* (reload) a connection without hello is closed; 10 s */
	unsigned max_clients_uid;  /* (reload) connections of one non-admin uid; 0 = unlimited */
	unsigned admin_slots;	   /* (reload) of max_clients kept for admins (half at most) */
	struct vad_arena_conf *arenas;
	size_t n_arenas;
	uint64_t max_ranges_client; /* (reload) references one session may hold; 0 = unlimited */
	uint64_t max_ranges_uid;    /* (reload) references all sessions of a uid may hold; 0 = unl. */
};

/* Range-count limits: the daemon keeps at most 200 bytes per live range (163 measured), so a
 * client at its default limit costs the daemon at most 200 MB, a uid 800 MB (docs/SERVICE.md). */
#define VAD_MAX_RANGES_CLIENT_DEFAULT (1ull << 20)
#define VAD_MAX_RANGES_UID_DEFAULT (4ull << 20)
#define VAD_MAX_RANGES_MAX (1ull << 40)

/* Fill cfg with defaults and no arenas. */
void vad_config_defaults(struct vad_config *cfg);

/* Parse path into cfg (defaults first). On error returns -1 and writes "FILE:LINE: reason"
 * into err. A file without any [arena] section gets one 4 GiB memfd arena "default". */
int vad_config_load(const char *path, struct vad_config *cfg, char *err, size_t err_len);

/* Free what vad_config_load allocated inside cfg (not cfg itself). */
void vad_config_free(struct vad_config *cfg);

#endif
