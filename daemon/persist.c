/* persist.c - arenas and state kept across a restart, and rebuilt at start; see persist.h. */
#include "persist.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "persist_rebuild.h"
#include "registry.h"
#include "service.h"
#include "state.h"

/* Holds of one session of the previous daemon, kept for resume_grace. */
struct orphan {
	uint32_t id;
	bool has_secret, gone; /* gone: resumed, or dropped at the end of the grace (lock) */
	uint8_t secret[VAD_STATE_SECRET_BYTES];
	uint32_t secret_rec; /* its session record in the new state file, plus one */
	struct vad_holder h;
};

struct vad_persist {
	struct vad_stored stored;
	bool discard;
	struct vad_state *old; /* the newest stored state file, NULL if none */
	int old_fd;
	uint64_t old_gen;
	struct vad_arena **arenas; /* the configured arenas (not owned): main's array, then the
				      service's slots */
	size_t n_arenas;
	bool *fresh;		 /* [n_arenas]: made now, not taken from the store */
	struct vad_service *svc; /* from vad_persist_restore on */
	size_t n_slots;		 /* the service's arena slots: configured, then tenant slots */
	uint32_t *tenant_map;	 /* old state file's arena entry -> the slot its tenant
				    arena was taken back into; UINT32_MAX: none */
	bool *state_keep;	 /* [n_slots], the registry's: which slots are recorded */
	const char **names;	 /* [n_slots]: the arena names for the restore's messages */
	unsigned fdstore_max;	 /* $FDSTORE (systemd 254+): how many fds the store takes; 0:
				    not said */
	size_t n_stored;	 /* fds in the store by our count (the tenants' lock once
				    serving) */
	struct vad_state *cur;	 /* the state file this daemon writes */
	struct vad_registry *reg;
	struct orphan *orphans; /* sorted by id */
	size_t n_orphans;
	uint64_t grace_ms;
	pthread_t grace;
	bool grace_started;
	bool stop; /* lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct vad_stored handover; /* vad_persist_prepare_exec: fds for the next image */
	uint64_t begin_ns;	    /* vad_persist_begin: the start of the start-up */
	uint64_t begin_cpu_ns;	    /* the process's CPU time then */
};

/* The phases of a start-up with a state, in ns, logged on one line at its end. */
#define RESTORE_PHASES(X)                                                                          \
	X(OPEN, "open")		    /* vad_persist_begin to the restore: fds, arenas, server */    \
	X(LOAD, "load")		    /* the state file's records read and checked */                \
	X(SORT, "sort")		    /* in address order, checked as a whole */                     \
	X(HOLDERS, "holders")	    /* one holder per session of the file, the new state file */   \
	X(REBUILD, "rebuild")	    /* persist_rebuild.h, wall time; its parts below overlap */    \
	X(RANGES, "ranges")	    /* one range object per place */                               \
	X(ALLOCATORS, "allocators") /* thread 1: every range busy in its allocator */              \
	X(VA_CHECK, "va_check")	    /* thread 1: every allocator's invariants */                   \
	X(RELEASE, "release")	    /* thread 1: free space released (what a crash left there) */  \
	X(HOLDS, "holds")	    /* thread 2: every hold given to its holder */                 \
	X(REGISTRY_CHECK, "registry_check") /* thread 2, once the ranges are placed */             \
	X(STORE, "store")		    /* the new state and fresh arenas to the fd store */

enum restore_phase {
#define X(id, name) PHASE_##id,
	RESTORE_PHASES(X)
#undef X
	    N_PHASES
};

struct phases {
	struct vad_span t[N_PHASES];
	struct vad_span mark; /* the end of the last phase (this thread's CPU) */
	uint64_t cpu0;	      /* the process's CPU time at vad_persist_begin */
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static uint64_t process_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Phase ph ended now (on this thread). */
static void phase_end(struct phases *t, enum restore_phase ph)
{
	struct vad_span d = vad_span_since(t->mark);
	t->t[ph].wall += d.wall;
	t->t[ph].cpu += d.cpu;
	t->mark = vad_span_now();
}

/* The lines operators (and make bench-restart) read: each phase in ms, wall clock and CPU
 * (the parts of the rebuild overlap on two threads: CPU says what each costs on a loaded
 * machine), the totals, the holds. */
static void phases_log(const struct phases *t, uint64_t begin_ns, size_t holds)
{
	static const char *const names[N_PHASES] = {
#define X(id, name) name,
	    RESTORE_PHASES(X)
#undef X
	};
	for (int cpu = 0; cpu < 2; cpu++) {
		char line[512];
		size_t len = 0;
		for (int i = 0; i < N_PHASES && len < sizeof(line); i++)
			len +=
			    (size_t)snprintf(line + len, sizeof(line) - len, "%s %.1f, ", names[i],
					     (double)(cpu ? t->t[i].cpu : t->t[i].wall) / 1e6);
		if (cpu)
			log_info("restore: cpu (ms): %stotal %.1f (every thread)", line,
				 (double)(process_cpu_ns() - t->cpu0) / 1e6);
		else
			log_info("restore: phases (ms): %stotal %.1f; %zu holds", line,
				 (double)(t->mark.wall - begin_ns) / 1e6, holds);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- begin: the stored fds ----------------------------------------------------------- */

/* Generation of a "state.N" name; 0 if it is none. */
static uint64_t state_gen(const char *name)
{
	if (strncmp(name, "state.", 6) != 0)
		return 0;
	char *end;
	unsigned long long g = strtoull(name + 6, &end, 10);
	return *end ? 0 : (uint64_t)g;
}

struct vad_persist *vad_persist_begin(bool discard, char *err, size_t err_len)
{
	struct vad_persist *p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	p->old_fd = -1;
	p->discard = discard;
	p->begin_ns = now_ns();
	p->begin_cpu_ns = process_cpu_ns();
	pthread_mutex_init(&p->lock, NULL);
	/* grace_main's deadline is on CLOCK_MONOTONIC (a cond on the default CLOCK_REALTIME
	 * took it for long past and spun a core for the whole grace). */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (vad_fdstore_take(&p->stored, err, err_len) != 0) {
		vad_persist_free(p);
		return NULL;
	}
	p->n_stored = p->stored.n;
	const char *max = getenv("FDSTORE");
	if (max && *max) {
		char *end;
		unsigned long v = strtoul(max, &end, 10);
		if (!*end && v <= UINT32_MAX)
			p->fdstore_max = (unsigned)v;
	}
	if (discard) {
		for (size_t i = 0; i < p->stored.n; i++) {
			log_warn("--discard-state: dropping the stored %s from the fd store; its "
				 "ranges are lost",
				 p->stored.fds[i].name);
			vad_fdstore_remove(p->stored.fds[i].name);
		}
		vad_fdstore_free(&p->stored);
		p->n_stored = 0;
		return p;
	}
	const char *newest = NULL;
	for (size_t i = 0; i < p->stored.n; i++) {
		uint64_t g = state_gen(p->stored.fds[i].name);
		if (g > p->old_gen) {
			p->old_gen = g;
			newest = p->stored.fds[i].name;
		}
	}
	if (!newest)
		return p;
	char name[VAD_FDNAME_MAX + 1];
	snprintf(name, sizeof(name), "%s", newest);
	p->old_fd = vad_fdstore_claim(&p->stored, name);
	char why[512];
	if (vad_state_open(p->old_fd, &p->old, why, sizeof(why)) != 0) {
		snprintf(
		    err, err_len,
		    "refusing to start: the stored %s cannot be loaded: %s. The stored fds stay "
		    "in the fd store for inspection; start with --discard-state to drop them "
		    "and start empty",
		    name, why);
		vad_persist_free(p);
		return NULL;
	}
	return p;
}

/* Hand fd to the fd store under name, unless the store is full by $FDSTORE (systemd 254+ says
 * how many it takes; past that it drops what it is sent, and only its own log says so). An
 * arena leaves room for the next state file, which is stored before the old one is removed.
 * False, logged, when it is not stored: what lives in it is lost at the next restart. */
static bool store_fd(struct vad_persist *p, int fd, const char *name)
{
	char err[512];
	size_t room = state_gen(name) ? 1 : 2;
	if (p->fdstore_max && p->n_stored + room > p->fdstore_max) {
		log_warn(
		    "the service manager's fd store is full (FileDescriptorStoreMax=%u): %s is "
		    "not stored and what it holds is lost at the next restart; raise "
		    "FileDescriptorStoreMax= (docs/PACKAGING.md)",
		    p->fdstore_max, name);
		return false;
	}
	if (vad_fdstore_put(fd, name, err, sizeof(err)) != 0) {
		log_warn("%s: what it holds is lost at the next restart", err);
		return false;
	}
	p->n_stored++;
	return true;
}

/* Ask the fd store to forget name (stored once by our count). */
static void remove_fd(struct vad_persist *p, const char *name)
{
	vad_fdstore_remove(name);
	if (p->n_stored)
		p->n_stored--;
}

/* ---- arenas ---------------------------------------------------------------------------- */

/* The state file's entry for the arena called name, or NULL. */
static const struct vad_state_arena *old_arena(const struct vad_persist *p, const char *name,
					       uint32_t *index)
{
	size_t n = 0;
	const struct vad_state_arena *a = p->old ? vad_state_arenas(p->old, &n) : NULL;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(a[i].name, name) == 0) {
			if (index)
				*index = (uint32_t)i;
			return &a[i];
		}
	}
	return NULL;
}

static int adopt_arena(struct vad_persist *p, const struct vad_config *cfg, size_t i, int fd,
		       char *err, size_t err_len)
{
	const struct vad_arena_conf *c = &cfg->arenas[i];
	char why[1024];
	if (vad_arena_adopt(c, cfg, (unsigned)i, fd, &p->arenas[i], why, sizeof(why)) != 0) {
		snprintf(err, err_len,
			 "refusing to start: %s. The stored fds stay in the fd store; start with "
			 "--discard-state to drop them and start empty",
			 why);
		return -1;
	}
	struct vad_arena *a = p->arenas[i];
	struct stat st;
	const struct vad_state_arena *sa = old_arena(p, c->name, NULL);
	if (sa &&
	    (fstat(a->fd, &st) != 0 || (uint64_t)st.st_dev != sa->dev ||
	     (uint64_t)st.st_ino != sa->ino || sa->size != c->size || sa->quantum != c->quantum)) {
		snprintf(
		    err, err_len,
		    "refusing to start: the stored file of arena %s is not the one the state "
		    "file describes (identity, size or quantum differ). The stored fds stay in "
		    "the fd store; start with --discard-state to drop them and start empty",
		    c->name);
		vad_arena_close(a); /* our copy of the fd only: the store keeps its own */
		p->arenas[i] = NULL;
		return -1;
	}
	if (!sa)
		vad_arena_release_all(a); /* no state names a range in it: all of it is free */
	log_info("arena %s: taken back from the fd store", c->name);
	return 0;
}

int vad_persist_open_arenas(struct vad_persist *p, const struct vad_config *cfg,
			    struct vad_arena **arenas, char *err, size_t err_len)
{
	p->arenas = arenas;
	p->n_arenas = cfg->n_arenas;
	p->fresh = calloc(cfg->n_arenas ? cfg->n_arenas : 1, sizeof(*p->fresh));
	if (!p->fresh) {
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	size_t i;
	for (i = 0; i < cfg->n_arenas; i++) {
		const struct vad_arena_conf *c = &cfg->arenas[i];
		if (c->tenancy != VAD_TENANCY_NONE)
			continue; /* tenant arenas: taken back by vad_persist_restore */
		char name[VAD_FDNAME_MAX + 1];
		snprintf(name, sizeof(name), "arena.%s", c->name);
		int fd = vad_fdstore_claim(&p->stored, name);
		if (fd >= 0) {
			if (adopt_arena(p, cfg, i, fd, err, err_len) != 0)
				goto fail;
			continue;
		}
		if (vad_arena_open(c, cfg, (unsigned)i, &arenas[i], err, err_len) != 0)
			goto fail;
		p->fresh[i] = true;
	}
	return 0;
fail:
	for (size_t j = 0; j < i; j++) {
		vad_arena_close(arenas[j]);
		arenas[j] = NULL;
	}
	return -1;
}

/* ---- tenant arenas ---------------------------------------------------------------------- */

/* An arena's entry in the state file: its name, sizes and the identity of its file. */
static void arena_entry(const struct vad_arena *a, struct vad_state_arena *e)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", a->conf.name);
	e->size = a->conf.size;
	e->quantum = a->conf.quantum;
	struct stat st;
	if (fstat(a->fd, &st) == 0) {
		e->dev = (uint64_t)st.st_dev;
		e->ino = (uint64_t)st.st_ino;
	}
}

/* The stored fd called name, not claimed yet; -1 if none. */
static int stored_fd(const struct vad_persist *p, const char *name)
{
	for (size_t i = 0; i < p->stored.n; i++)
		if (p->stored.fds[i].fd >= 0 && strcmp(p->stored.fds[i].name, name) == 0)
			return p->stored.fds[i].fd;
	return -1;
}

/* Take back the tenant arena of the old state file's entry e (index i), if its file is stored
 * and is the one e describes (an entry whose arena closed stays in the file until another
 * opens in its slot: its file is no longer stored, or another file of that name is).
 * 0 (taken back into p->tenant_map[i], or not there), -1 with a sentence in err. */
static int adopt_tenant(struct vad_persist *p, size_t i, const struct vad_state_arena *e, char *err,
			size_t err_len)
{
	char name[VAD_FDNAME_MAX + 1], section[VAD_STATE_NAME_MAX + 1];
	snprintf(name, sizeof(name), "arena.%s", e->name);
	int fd = stored_fd(p, name);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_dev != e->dev ||
	    (uint64_t)st.st_ino != e->ino)
		return 0;
	const char *at = strrchr(e->name, '@');
	char *end;
	unsigned long id = strtoul(at + 1, &end, 10);
	snprintf(section, sizeof(section), "%.*s", (int)(at - e->name), e->name);
	unsigned sec;
	struct vad_tenants *t = p->svc->tenants;
	if (at[1] < '0' || at[1] > '9' || *end || id > UINT32_MAX ||
	    vad_section_find(t, section, &sec) != 0 ||
	    vad_section_tenancy(t, sec) == VAD_TENANCY_NONE) {
		log_warn("the stored tenant arena %s is not taken back: no [arena %s] section with "
			 "tenancy any more",
			 e->name, section);
		return 0; /* dropped from the store; a state with ranges in it is refused */
	}
	const struct vad_arena_conf *c = vad_section_conf(t, sec);
	if (c->size != e->size || c->quantum != e->quantum) {
		snprintf(err, err_len,
			 "arena %s: the stored file is %" PRIu64 " bytes in quanta of %" PRIu64
			 " but [arena %s] says %" PRIu64 " in quanta of %" PRIu64
			 " (an arena's size cannot change across a restart)",
			 e->name, e->size, e->quantum, section, c->size, c->quantum);
		return -1;
	}
	unsigned slot;
	char why[512];
	fd = vad_fdstore_claim(&p->stored, name);
	if (vad_tenant_adopt(t, sec, (uint32_t)id, fd, &slot, why, sizeof(why)) != VAD_TENANT_OK) {
		snprintf(err, err_len, "cannot take back tenant arena %s: %s", e->name, why);
		return -1;
	}
	p->tenant_map[i] = slot;
	log_info("arena %s: taken back from the fd store", e->name);
	return 0;
}

/* Take back every tenant arena ("NAME@ID": section names have no '@') of the old state file
 * whose file is stored. 0, or -1 with a sentence in err. */
static int adopt_tenants(struct vad_persist *p, char *err, size_t err_len)
{
	size_t n = 0;
	const struct vad_state_arena *oa = vad_state_arenas(p->old, &n);
	p->tenant_map = malloc((n ? n : 1) * sizeof(*p->tenant_map));
	if (!p->tenant_map) {
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		p->tenant_map[i] = UINT32_MAX;
	for (size_t i = 0; i < n; i++)
		if (oa[i].quantum && strchr(oa[i].name, '@') &&
		    adopt_tenant(p, i, &oa[i], err, err_len) != 0)
			return -1;
	return 0;
}

/* A tenant arena opened (the tenants' lock held, nothing allocated in it yet): its file to the
 * fd store, then its entry in the state file, then its holds and tokens are recorded. */
static void tenant_opened(void *ctx, struct vad_arena *a)
{
	struct vad_persist *p = ctx;
	if (a->index >= p->reg->state_arenas)
		return; /* past what the state file can name: said at start */
	char name[VAD_FDNAME_MAX + 1];
	snprintf(name, sizeof(name), "arena.%s", a->conf.name);
	/* Without a service manager the fds go to the next image by exec (vactl restart). */
	if (vad_fdstore_available() && !store_fd(p, a->fd, name))
		return;
	struct vad_state_arena e;
	arena_entry(a, &e);
	vad_state_set_arena(p->cur, a->index, &e);
	__atomic_store_n(&p->state_keep[a->index], true, __ATOMIC_RELAXED);
}

/* A tenant arena closes, holding nothing: out of the fd store. Its entry stays until another
 * arena opens in its slot (no record names it). */
static void tenant_closing(void *ctx, struct vad_arena *a)
{
	struct vad_persist *p = ctx;
	if (a->index >= p->reg->state_arenas ||
	    !__atomic_load_n(&p->state_keep[a->index], __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&p->state_keep[a->index], false, __ATOMIC_RELAXED);
	if (vad_fdstore_available()) {
		char name[VAD_FDNAME_MAX + 1];
		snprintf(name, sizeof(name), "arena.%s", a->conf.name);
		remove_fd(p, name);
	}
}

static const struct vad_tenant_keeper tenant_keeper = {tenant_opened, tenant_closing};

/* ---- restore --------------------------------------------------------------------------- */

struct loaded {
	struct vad_state_hold *h;
	size_t n, cap;
	uint32_t *map; /* state arena -> config arena, UINT32_MAX: none */
	size_t n_map;
	uint32_t max_holder;
	char *err;
	size_t err_len;
};

static int load_one(void *ctx, const struct vad_state_hold *h)
{
	struct loaded *l = ctx;
	if (h->arena >= l->n_map || l->map[h->arena] == UINT32_MAX) {
		snprintf(l->err, l->err_len,
			 "the state file holds ranges of an arena this daemon has no stored file "
			 "for (record %" PRIu64 ")",
			 h->slot);
		return -1;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		struct vad_state_hold *n = realloc(l->h, cap * sizeof(*n));
		if (!n) {
			snprintf(l->err, l->err_len, "out of memory loading the state file");
			return -1;
		}
		l->h = n;
		l->cap = cap;
	}
	l->h[l->n] = *h;
	l->h[l->n].arena = l->map[h->arena]; /* config index from here on */
	if (h->holder > l->max_holder)
		l->max_holder = h->holder;
	l->n++;
	return 0;
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int by_orphan(const void *key, const void *elem)
{
	uint32_t k = *(const uint32_t *)key, e = ((const struct orphan *)elem)->id;
	return k < e ? -1 : k > e;
}

/* Read the old state into l (arena indices mapped to the config's) and check it makes sense
 * as a whole: ranges of one place agree on their size, none overlap, one record per holder
 * and range. 0, or -1 with the reason in l->err. */
/* The name of each arena slot open now ("?" for an empty one, which no hold names), for the
 * restore's messages; NULL out of memory (the messages then say "?"). */
static const char *const *slot_names(struct vad_persist *p)
{
	if (!p->names && p->n_slots) {
		p->names = calloc(p->n_slots, sizeof(*p->names));
		for (size_t i = 0; p->names && i < p->n_slots; i++)
			p->names[i] = p->arenas[i] ? p->arenas[i]->conf.name : "?";
	}
	return p->names;
}

static int load_state(struct vad_persist *p, const struct vad_config *cfg, struct loaded *l,
		      struct phases *t)
{
	size_t n_old = 0;
	const struct vad_state_arena *oa = vad_state_arenas(p->old, &n_old);
	l->map = malloc((n_old ? n_old : 1) * sizeof(*l->map));
	if (!l->map) {
		snprintf(l->err, l->err_len, "out of memory");
		return -1;
	}
	l->n_map = n_old;
	for (size_t i = 0; i < n_old; i++) {
		l->map[i] = UINT32_MAX;
		for (size_t j = 0; j < cfg->n_arenas; j++)
			if (p->arenas[j] && !p->fresh[j] &&
			    strcmp(oa[i].name, cfg->arenas[j].name) == 0)
				l->map[i] = (uint32_t)j;
		if (p->tenant_map && p->tenant_map[i] != UINT32_MAX)
			l->map[i] = p->tenant_map[i];
	}
	/* Room for every slot ever used at once: no copies as it grows. */
	uint64_t slots = vad_state_slots(p->old);
	l->cap = slots ? (size_t)slots : 1;
	l->h = malloc(l->cap * sizeof(*l->h));
	if (!l->h) {
		l->cap = 0; /* load_one grows it as it can */
	}
	char why[256];
	if (vad_state_scan(p->old, load_one, l, why, sizeof(why)) != 0) {
		if (why[0] && !l->err[0])
			snprintf(l->err, l->err_len, "%s", why);
		return -1;
	}
	phase_end(t, PHASE_LOAD);
	struct vad_state_hold *spare = NULL;
	int rc =
	    vad_rebuild_sort(&l->h, l->n, &spare, slot_names(p), p->n_slots, l->err, l->err_len);
	free(spare);
	return rc;
}

/* One holder without a session for each distinct holder of the records. */
static int make_orphans(struct vad_persist *p, const struct loaded *l)
{
	/* The ids, each run of one holder once (records in address order come in long runs
	 * of one holder), then sorted and made unique: a few entries, not one per record. */
	uint32_t *ids = malloc((l->n ? l->n : 1) * sizeof(*ids));
	if (!ids)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++)
		if (!n || ids[n - 1] != l->h[i].holder)
			ids[n++] = l->h[i].holder;
	qsort(ids, n, sizeof(*ids), by_u32);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!k || ids[k - 1] != ids[i])
			ids[k++] = ids[i];
	n = k;
	p->orphans = calloc(n ? n : 1, sizeof(*p->orphans));
	if (!p->orphans) {
		free(ids);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		p->orphans[i].id = ids[i];
	p->n_orphans = n; /* each made a holder below (its uid set) */
	free(ids);
	/* The uid of a holder: the one its first record names. Its holds counted, so that its
	 * table is made once at its final size. */
	size_t *holds = calloc(n ? n : 1, sizeof(*holds));
	if (!holds)
		return -1;
	struct orphan *o = NULL;
	for (size_t i = 0; i < l->n; i++) {
		if (!o || o->id != l->h[i].holder)
			o = bsearch(&l->h[i].holder, p->orphans, n, sizeof(*o), by_orphan);
		holds[o - p->orphans]++;
		if (o->h.uid)
			continue;
		if (vad_holder_init(p->reg, &o->h, (uid_t)l->h[i].uid, NULL) != 0) {
			free(holds);
			return -1;
		}
		o->h.state_holder = o->id;
	}
	for (size_t i = 0; i < n; i++)
		vad_registry_restore_reserve(&p->orphans[i].h, holds[i]); /* else it grows */
	free(holds);
	return 0;
}

static int load_secret(void *ctx, const struct vad_state_session *ss)
{
	struct vad_persist *p = ctx;
	struct orphan *o = bsearch(&ss->holder, p->orphans, p->n_orphans, sizeof(*o), by_orphan);
	if (!o || o->h.uid->uid != (uid_t)ss->uid)
		return 0; /* a session that held nothing (or a uid mismatch): nothing to resume */
	o->has_secret = true;
	memcpy(o->secret, ss->secret, sizeof(o->secret));
	if (p->cur) /* a crash during the grace keeps it resumable */
		o->secret_rec = vad_state_put_session(p->cur, o->id, ss->uid, o->secret);
	return 0;
}

/* The resume secrets of the sessions that hold something (a version 2 state file). */
static int load_secrets(struct vad_persist *p, char *err, size_t err_len)
{
	return vad_state_scan_sessions(p->old, load_secret, p, err, err_len);
}

/* The holder of the previous daemon's session id (made by make_orphans). */
static struct vad_holder *orphan_holder(void *ctx, uint32_t id)
{
	struct vad_persist *p = ctx;
	struct orphan *o = bsearch(&id, p->orphans, p->n_orphans, sizeof(*o), by_orphan);
	return &o->h;
}

/* What restoring the share tokens found. */
struct tokens_loaded {
	struct vad_persist *p;
	const struct loaded *l;
	uint64_t restored, expired, gone;
	char *err;
	size_t err_len;
};

static int load_token(void *ctx, const struct vad_state_token *t)
{
	struct tokens_loaded *tl = ctx;
	struct vad_persist *p = tl->p;
	uint32_t slot = t->arena < tl->l->n_map ? tl->l->map[t->arena] : UINT32_MAX;
	struct va_area area;
	/* Its range is the live range starting at its offset; none there: the range was freed
	 * and the daemon stopped before the token's record was cleared (a crash). */
	if (slot == UINT32_MAX || !p->arenas[slot] ||
	    va_lookup(p->arenas[slot]->vs, t->offset, &area) != VA_OK || area.start != t->offset ||
	    !area.owner) {
		tl->gone++;
		return 0;
	}
	int rc = vad_registry_restore_token(p->reg, area.owner, t->token, t->single_use,
					    t->expires_ms, t->uid);
	if (rc == -2) {
		snprintf(tl->err, tl->err_len, "out of memory restoring the share tokens");
		return -1;
	}
	if (rc == -1) {
		snprintf(tl->err, tl->err_len,
			 "the state file is inconsistent: token record %" PRIu64
			 " repeats a token or gives a range a second live token (offset 0x%" PRIx64
			 ")",
			 t->slot, t->offset);
		return -1;
	}
	if (rc == 1)
		tl->expired++;
	else
		tl->restored++;
	return 0;
}

/* The share tokens of the ranges restored (a version 3 state file), with what is left of
 * their time to live; an expired one is remembered as such, one whose range is gone is not
 * restored. */
static int load_tokens(struct vad_persist *p, const struct loaded *l, char *err, size_t err_len)
{
	struct tokens_loaded tl = {.p = p, .l = l, .err = err, .err_len = err_len};
	char why[256] = "";
	err[0] = '\0';
	pthread_mutex_lock(&p->reg->token_lock); /* nobody else runs yet: for the analysers */
	int rc = vad_state_scan_tokens(p->old, load_token, &tl, why, sizeof(why));
	pthread_mutex_unlock(&p->reg->token_lock);
	if (rc != 0) {
		if (!err[0])
			snprintf(err, err_len, "%s", why);
		return -1;
	}
	if (tl.restored || tl.expired || tl.gone)
		log_info("restore: %" PRIu64 " share tokens restored, %" PRIu64
			 " expired meanwhile, %" PRIu64 " of ranges freed before the stop",
			 tl.restored, tl.expired, tl.gone);
	return 0;
}

/* The rebuild's hook before its registry check: the share tokens, once their ranges are
 * placed and held (a version 3 state file). */
struct tokens_hook {
	struct vad_persist *p;
	const struct loaded *l;
};

static int restore_tokens(void *ctx, char *err, size_t err_len)
{
	struct tokens_hook *th = ctx;
	return th->p->old ? load_tokens(th->p, th->l, err, err_len) : 0;
}

/* Quanta of an arena section, bounded so that sums of them cannot overflow. */
static uint64_t quanta(const struct vad_arena_conf *c)
{
	uint64_t q = c->size / c->quantum;
	return q > VAD_STATE_CAPACITY_MAX ? VAD_STATE_CAPACITY_MAX : q;
}

/* The new state file: an entry per arena slot. The configured arenas (a section with tenancy
 * has an entry nothing points at, so indices stay the config's), then the tenant slots: the
 * tenant arenas taken back, the rest empty until one opens there. Room for a hold record per
 * range and another per share of it, and a token record per range. */
static int create_state(struct vad_persist *p, const struct vad_config *cfg, uint64_t min_recs,
			uint64_t next_session, char *err, size_t err_len)
{
	size_t n = p->n_slots < VAD_STATE_ARENAS_MAX ? p->n_slots : VAD_STATE_ARENAS_MAX;
	if (n < p->n_slots)
		log_warn(
		    "%zu arena slots (configured and tenant arenas), more than the state file "
		    "can name (%u): the arenas of the last %zu tenant slots are not kept across "
		    "a restart",
		    p->n_slots, VAD_STATE_ARENAS_MAX, p->n_slots - n);
	struct vad_state_arena *sa = calloc(n ? n : 1, sizeof(*sa));
	if (!sa) {
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	uint64_t cap = 65536, tok_cap = 0;
	for (size_t i = 0; i < cfg->n_arenas; i++) {
		const struct vad_arena_conf *c = &cfg->arenas[i];
		uint64_t q = quanta(c);
		if (p->arenas[i]) {
			arena_entry(p->arenas[i], &sa[i]);
		} else {
			snprintf(sa[i].name, sizeof(sa[i].name), "%s", c->name);
			sa[i].size = c->size;
			sa[i].quantum = c->quantum;
			q *= c->max_tenants; /* each of its tenant arenas */
		}
		cap += 2 * q; /* each range, and a share of each */
		tok_cap += q; /* a live token per range at most */
	}
	for (size_t i = cfg->n_arenas; i < n; i++)
		if (p->arenas[i]) /* taken back; the others open later */
			arena_entry(p->arenas[i], &sa[i]);
	if (tok_cap > VAD_STATE_TOKENS_MAX)
		tok_cap = VAD_STATE_TOKENS_MAX;
	if (cap < min_recs + 65536)
		cap = min_recs + 65536;
	if (cap > VAD_STATE_CAPACITY_MAX)
		cap = VAD_STATE_CAPACITY_MAX;
	int rc = vad_state_create(sa, n, cap, tok_cap, next_session, &p->cur, err, err_len);
	free(sa);
	return rc;
}

/* Rebuild the allocators and the registry from the loaded holds, restore the share tokens and
 * verify it all (persist_rebuild.h); the parts' times go into t. */
static int rebuild(struct vad_persist *p, const struct vad_config *cfg, const struct loaded *l,
		   struct phases *t, char *err, size_t err_len)
{
	size_t n = p->n_slots ? p->n_slots : 1;
	struct va_space **vs = calloc(n, sizeof(*vs));
	bool *release = calloc(n, sizeof(*release));
	if (!vs || !release) {
		free(vs);
		free(release);
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	/* Free space may hold what a range freed just before a crash held: zeros for its next
	 * holder, as always. Every tenant arena open now was taken back. */
	for (size_t i = 0; i < p->n_slots; i++) {
		vs[i] = p->arenas[i] ? p->arenas[i]->vs : NULL;
		release[i] = p->old && p->arenas[i] && (i >= cfg->n_arenas || !p->fresh[i]);
	}
	struct tokens_hook th = {.p = p, .l = l};
	struct vad_rebuild rb = {.h = l->h,
				 .n = l->n,
				 .reg = p->reg,
				 .vs = vs,
				 .release = release,
				 .n_arenas = p->n_slots,
				 .names = slot_names(p),
				 .holder = orphan_holder,
				 .ctx = p,
				 .before_check = restore_tokens,
				 .before_check_ctx = &th};
	int rc = vad_rebuild_run(&rb, err, err_len);
	free(vs);
	free(release);
	t->t[PHASE_RANGES] = rb.ranges;
	t->t[PHASE_ALLOCATORS] = rb.alloc;
	t->t[PHASE_VA_CHECK] = rb.va_check;
	t->t[PHASE_RELEASE] = rb.released;
	t->t[PHASE_HOLDS] = rb.holds;
	t->t[PHASE_REGISTRY_CHECK] = rb.registry_check;
	phase_end(t, PHASE_REBUILD);
	return rc;
}

/* Hand the fresh arenas and the new state file to the fd store, then forget the old state
 * files and the stored arenas no section names any more. A crash in between leaves two
 * states stored: the next start takes the newest. */
static void store_all(struct vad_persist *p, const struct vad_config *cfg)
{
	if (!vad_fdstore_available()) {
		log_info("no service manager ($NOTIFY_SOCKET unset): the arenas and the state file "
			 "are not kept outside the daemon");
		return;
	}
	char name[VAD_FDNAME_MAX + 1];
	for (size_t i = 0; i < cfg->n_arenas; i++) {
		if (!p->arenas[i] || !p->fresh[i])
			continue;
		snprintf(name, sizeof(name), "arena.%s", cfg->arenas[i].name);
		/* Not stored: nothing in it is recorded, so the next start begins it empty
		 * instead of refusing a state that names an arena it cannot find. */
		if (!store_fd(p, p->arenas[i]->fd, name) && p->state_keep)
			__atomic_store_n(&p->state_keep[i], false, __ATOMIC_RELAXED);
	}
	snprintf(name, sizeof(name), "state.%" PRIu64, p->old_gen + 1);
	if (p->cur && !store_fd(p, vad_state_fd(p->cur), name))
		log_warn("the state file is not stored: a restart will lose the live ranges");
	for (size_t i = 0; i < p->stored.n; i++) {
		if (p->stored.fds[i].fd < 0)
			continue; /* claimed: in use */
		log_info("dropping the stored %s from the fd store: %s", p->stored.fds[i].name,
			 state_gen(p->stored.fds[i].name)
			     ? "an older state file"
			     : "no arena of the config or of the state file has that name");
		remove_fd(p, p->stored.fds[i].name);
	}
	if (p->old) {
		snprintf(name, sizeof(name), "state.%" PRIu64, p->old_gen);
		remove_fd(p, name);
	}
	vad_fdstore_free(&p->stored); /* closes what was not claimed */
}

static void *grace_main(void *arg)
{
	struct vad_persist *p = arg;
	uint64_t deadline = now_ms() + p->grace_ms;
	pthread_mutex_lock(&p->lock);
	while (!p->stop && now_ms() < deadline) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t left = deadline - now_ms();
		ts.tv_sec += (time_t)(left / 1000);
		ts.tv_nsec += (long)(left % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	bool stopped = p->stop;
	pthread_mutex_unlock(&p->lock);
	if (stopped)
		return NULL; /* vad_persist_end gives them up */
	uint64_t refs = 0;
	size_t n = 0;
	pthread_mutex_lock(&p->lock); /* against a resume */
	for (size_t i = 0; i < p->n_orphans; i++) {
		struct orphan *o = &p->orphans[i];
		if (o->gone)
			continue;
		refs += load64(&o->h.held_refs);
		vad_holder_fini(p->reg, &o->h);
		if (o->secret_rec && !__atomic_load_n(&p->reg->state_frozen, __ATOMIC_RELAXED))
			vad_state_drop(p->cur, o->secret_rec);
		o->gone = true;
		n++;
	}
	pthread_mutex_unlock(&p->lock);
	log_notice("resume_grace over: dropped %" PRIu64 " references of %zu sessions of the "
		   "previous daemon that did not come back",
		   refs, n);
	return NULL;
}

int vad_persist_restore(struct vad_persist *p, struct vad_service *svc,
			const struct vad_config *cfg, char *err, size_t err_len)
{
	struct phases t = {.mark = vad_span_now(), .cpu0 = p->begin_cpu_ns};
	/* The open phase: wall clock since vad_persist_begin; CPU, the process's meanwhile. */
	t.t[PHASE_OPEN] =
	    (struct vad_span){t.mark.wall - p->begin_ns, process_cpu_ns() - p->begin_cpu_ns};
	p->reg = svc->reg;
	p->svc = svc;
	p->arenas = svc->arenas; /* the service took the array main made: its first slots */
	p->n_slots = svc->n_slots;
	p->grace_ms = cfg->resume_grace_ms;
	char why[1024] = "";
	struct loaded l = {.err = why, .err_len = sizeof(why)};
	uint64_t next_session = 1;
	if (p->old) {
		if (adopt_tenants(p, why, sizeof(why)) != 0 || load_state(p, cfg, &l, &t) != 0)
			goto refuse;
		next_session = vad_state_next_session(p->old);
		if ((uint64_t)l.max_holder + 1 > next_session)
			next_session = (uint64_t)l.max_holder + 1;
	}
	phase_end(&t, PHASE_SORT);
	if (create_state(p, cfg, l.n, next_session, why, sizeof(why)) != 0) {
		if (p->old)
			goto refuse; /* it holds ranges that must not be lost */
		/* Nothing to keep yet: serve, but say a restart will lose what clients get. */
		log_warn("%s: running without a state file, a restart will lose every live range",
			 why);
	}
	p->state_keep = calloc(p->n_slots ? p->n_slots : 1, sizeof(*p->state_keep));
	if (!p->state_keep) {
		snprintf(why, sizeof(why), "out of memory");
		goto refuse;
	}
	/* Every arena open now is kept: the configured ones, the tenant arenas taken back. */
	for (size_t i = 0; i < p->n_slots; i++)
		p->state_keep[i] = p->arenas[i] != NULL;
	p->reg->state_keep = p->state_keep;
	p->reg->state = p->cur;
	p->reg->state_arenas =
	    p->n_slots < VAD_STATE_ARENAS_MAX ? p->n_slots : VAD_STATE_ARENAS_MAX;
	if (make_orphans(p, &l) != 0) {
		snprintf(why, sizeof(why), "out of memory rebuilding the holders");
		goto refuse;
	}
	if (p->old && load_secrets(p, why, sizeof(why)) != 0)
		goto refuse;
	phase_end(&t, PHASE_HOLDERS);
	if (rebuild(p, cfg, &l, &t, why, sizeof(why)) != 0)
		goto refuse;
	svc->next_session_id = next_session;
	svc->persist = p;
	uint64_t bytes = 0;
	for (size_t i = 0; i < l.n; i++)
		bytes += (uint64_t)l.h[i].count * l.h[i].size;
	size_t holds = l.n;
	free(l.h);
	free(l.map);
	store_all(p, cfg);
	phase_end(&t, PHASE_STORE);
	if (p->old) {
		log_notice("restored %zu holds (%" PRIu64
			   " bytes) of %zu sessions from state.%" PRIu64 " in %" PRIu64
			   " ms; they are kept %" PRIu64 " ms for their clients",
			   holds, bytes, p->n_orphans, p->old_gen,
			   (t.mark.wall - p->begin_ns) / 1000000, p->grace_ms);
		phases_log(&t, p->begin_ns, holds);
	}
	if (p->cur)
		vad_tenants_set_keeper(svc->tenants, &tenant_keeper, p);
	if (p->n_orphans) {
		int e = pthread_create(&p->grace, NULL, grace_main, p);
		if (e)
			log_warn(
			    "cannot start the resume_grace timer (%s): the holds of the previous "
			    "daemon's sessions stay until the next restart",
			    strerror(e));
		p->grace_started = e == 0;
	}
	return 0;
refuse:
	free(l.h);
	free(l.map);
	snprintf(err, err_len,
		 "refusing to start: the stored state cannot be restored: %s. The stored fds stay "
		 "in the fd store for inspection; start with --discard-state to drop them and "
		 "start empty",
		 why);
	return -1;
}

int vad_persist_resume(struct vad_persist *p, struct vad_holder *dst, uint64_t id, uid_t uid,
		       const uint8_t *secret, size_t secret_len, struct vad_resumed *out)
{
	if (!p || id > UINT32_MAX || secret_len != VAD_STATE_SECRET_BYTES)
		return -1;
	uint32_t key = (uint32_t)id;
	int rc = -1;
	pthread_mutex_lock(&p->lock);
	struct orphan *o = bsearch(&key, p->orphans, p->n_orphans, sizeof(*o), by_orphan);
	if (o && !o->gone && o->has_secret && o->h.uid && o->h.uid->uid == uid) {
		uint8_t diff = 0; /* constant time: all of it, whatever differs first */
		for (size_t i = 0; i < VAD_STATE_SECRET_BYTES; i++)
			diff |= (uint8_t)(o->secret[i] ^ secret[i]);
		if (!diff) {
			out->holds = o->h.used;
			out->refs = load64(&o->h.held_refs);
			out->bytes = load64(&o->h.held_bytes);
			if (vad_holder_adopt(p->reg, dst, &o->h) == 0) {
				o->gone = true;
				out->secret_rec = o->secret_rec;
				rc = 0;
			}
		}
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* ---- stop ------------------------------------------------------------------------------ */

void vad_persist_freeze(struct vad_service *svc)
{
	if (!svc->reg->state)
		return;
	/* The sessions closing now need not give their ranges back: the allocators go with
	 * the process, the next daemon rebuilds them from the file. Discard comes first: a drop
	 * that sees the file frozen (and so leaves the hold's record) must also see its range
	 * kept from the allocator, or another session could be granted it and recorded too. */
	vad_registry_discard(svc->reg);
	__atomic_store_n(&svc->reg->state_frozen, true, __ATOMIC_RELEASE);
	/* The configured arenas' slots are set before any thread runs; a tenant slot may be
	 * opening or closing on a worker meanwhile, so the tenants do theirs under their lock. */
	for (size_t i = 0; i < svc->n_arenas; i++)
		if (svc->arenas[i])
			__atomic_store_n(&svc->arenas[i]->keep_pages, true, __ATOMIC_RELAXED);
	vad_tenants_freeze(svc->tenants);
}

void vad_persist_end(struct vad_persist *p)
{
	if (!p)
		return;
	/* Whatever stops the daemon, the state file keeps what it says now. */
	if (p->reg && p->reg->state) {
		__atomic_store_n(&p->reg->state_frozen, true, __ATOMIC_RELAXED);
		vad_registry_discard(p->reg);
		for (size_t i = 0; i < p->n_arenas; i++)
			if (p->arenas[i])
				__atomic_store_n(&p->arenas[i]->keep_pages, true, __ATOMIC_RELAXED);
		if (p->svc)
			vad_tenants_freeze(p->svc->tenants);
	}
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (p->grace_started)
		pthread_join(p->grace, NULL);
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_orphans; i++)
		if (p->orphans[i].h.uid && !p->orphans[i].gone)
			vad_holder_fini(p->reg, &p->orphans[i].h);
	p->n_orphans = 0;
	pthread_mutex_unlock(&p->lock);
}

int vad_persist_prepare_exec(struct vad_persist *p)
{
	if (!p->cur) {
		log_err("restart in place: this daemon has no state file to hand over");
		return -1;
	}
	p->handover.fds = calloc(p->n_slots + 1, sizeof(*p->handover.fds));
	if (!p->handover.fds) {
		log_err("restart in place: out of memory");
		return -1;
	}
	/* Above any fd number the move to 3, 4, ... writes to. */
	int min = (int)(p->n_slots + 1) + 3;
	/* The configured arenas and the tenant arenas the state file keeps (the workers have
	 * stopped and the tenants are frozen: no slot changes). */
	for (size_t i = 0; i < p->n_slots; i++) {
		if (!p->arenas[i] ||
		    (i >= p->n_arenas && (i >= p->reg->state_arenas || !p->state_keep[i])))
			continue;
		struct vad_stored_fd *h = &p->handover.fds[p->handover.n];
		snprintf(h->name, sizeof(h->name), "arena.%s", p->arenas[i]->conf.name);
		h->fd = fcntl(p->arenas[i]->fd, F_DUPFD_CLOEXEC, min);
		if (h->fd < 0)
			goto fail;
		p->handover.n++;
	}
	struct vad_stored_fd *h = &p->handover.fds[p->handover.n];
	snprintf(h->name, sizeof(h->name), "state.%" PRIu64, p->old_gen + 1);
	h->fd = fcntl(vad_state_fd(p->cur), F_DUPFD_CLOEXEC, min);
	if (h->fd < 0)
		goto fail;
	p->handover.n++;
	return 0;
fail:
	log_err("restart in place: cannot keep the fds: %s", strerror(errno));
	vad_fdstore_free(&p->handover);
	return -1;
}

void vad_persist_exec(struct vad_persist *p, char **argv)
{
	size_t n = p->handover.n;
	char *names = calloc(n, VAD_FDNAME_MAX + 2);
	if (!names || !n) {
		log_err("restart in place: nothing to hand over");
		free(names);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(names, ":");
		strcat(names, p->handover.fds[i].name);
		/* Each above 3 + n, so no move clobbers one not moved yet. */
		if (dup2(p->handover.fds[i].fd, 3 + (int)i) < 0) {
			log_err("restart in place: dup2: %s", strerror(errno));
			free(names);
			return;
		}
	}
	char num[24], pid[24];
	snprintf(num, sizeof(num), "%zu", n);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("LISTEN_FDS", num, 1);
	setenv("LISTEN_FDNAMES", names, 1);
	setenv("LISTEN_PID", pid, 1);
	free(names);
	log_notice("restarting in place: executing /proc/self/exe with %zu fds", n);
	execv("/proc/self/exe", argv);
	log_err("restart in place: cannot execute /proc/self/exe: %s; stopping instead",
		strerror(errno));
}

void vad_persist_free(struct vad_persist *p)
{
	if (!p)
		return;
	vad_fdstore_free(&p->handover);
	vad_fdstore_free(&p->stored);
	vad_state_close(p->old);
	if (p->old_fd >= 0)
		close(p->old_fd);
	vad_state_close(p->cur);
	free(p->orphans);
	free(p->fresh);
	free(p->tenant_map);
	free(p->state_keep);
	free(p->names);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}
