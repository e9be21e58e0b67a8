/* admission.c - admission decisions, connections per uid, rate-limited notes; see admission.h. */
#include "admission.h"

#include <stdlib.h>
#include <string.h>

#include "vhash.h"

unsigned vad_admission_reserved(unsigned max_clients, unsigned admin_slots)
{
	/* Half at most: a small max_clients (tests use 2 or 3) still lets non-admins in. */
	unsigned half = max_clients / 2;
	return admin_slots < half ? admin_slots : half;
}

enum vad_admit vad_admission_decide(unsigned clients, unsigned uid_conns, bool admin,
				    unsigned max_clients, unsigned admin_slots,
				    unsigned max_clients_uid)
{
	if (max_clients && clients >= max_clients)
		return VAD_ADMIT_FULL;
	if (admin)
		return VAD_ADMIT_OK;
	/* The uid's own limit first: it is the sentence that tells this client what to do. */
	if (max_clients_uid && uid_conns >= max_clients_uid)
		return VAD_ADMIT_UID;
	if (max_clients &&
	    clients >= max_clients - vad_admission_reserved(max_clients, admin_slots))
		return VAD_ADMIT_RESERVED;
	return VAD_ADMIT_OK;
}

/* ---- connections per uid ---------------------------------------------------------------- */

struct uid_entry {
	uid_t uid;
	unsigned conns;
	UT_hash_handle hh;
};

struct vad_uid_conns {
	pthread_mutex_t lock; /* leaf: taken by the listener at accept, by workers at close */
	struct uid_entry *map;
	unsigned uids;
};

struct vad_uid_conns *vad_uid_conns_new(void)
{
	struct vad_uid_conns *t = calloc(1, sizeof(*t));
	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

void vad_uid_conns_free(struct vad_uid_conns *t)
{
	if (!t)
		return;
	struct uid_entry *e, *tmp;
	HASH_ITER(hh, t->map, e, tmp)
	{
		HASH_DEL(t->map, e);
		free(e);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

unsigned vad_uid_conns_get(struct vad_uid_conns *t, uid_t uid)
{
	pthread_mutex_lock(&t->lock);
	struct uid_entry *e;
	HASH_FIND(hh, t->map, &uid, sizeof(uid), e);
	unsigned n = e ? e->conns : 0;
	pthread_mutex_unlock(&t->lock);
	return n;
}

int vad_uid_conns_add(struct vad_uid_conns *t, uid_t uid)
{
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	struct uid_entry *e;
	HASH_FIND(hh, t->map, &uid, sizeof(uid), e);
	if (e) {
		e->conns++;
	} else if ((e = calloc(1, sizeof(*e))) == NULL) {
		rc = -1;
	} else {
		e->uid = uid;
		e->conns = 1;
		vad_hash_oom = false;
		HASH_ADD(hh, t->map, uid, sizeof(e->uid), e);
		if (vad_hash_oom) {
			free(e);
			rc = -1;
		} else {
			t->uids++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void vad_uid_conns_drop(struct vad_uid_conns *t, uid_t uid)
{
	pthread_mutex_lock(&t->lock);
	struct uid_entry *e;
	HASH_FIND(hh, t->map, &uid, sizeof(uid), e);
	if (e && --e->conns == 0) {
		HASH_DEL(t->map, e);
		free(e);
		t->uids--;
	}
	pthread_mutex_unlock(&t->lock);
}

unsigned vad_uid_conns_uids(struct vad_uid_conns *t)
{
	pthread_mutex_lock(&t->lock);
	unsigned n = t->uids;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* ---- notes ------------------------------------------------------------------------------ */

static const char *const note_what[VAD_N_NOTES] = {
#define VAD_NOTE_WHAT(name, what) what,
    VAD_NOTE_KINDS(VAD_NOTE_WHAT)
#undef VAD_NOTE_WHAT
};

const char *vad_note_what(enum vad_note_kind kind)
{
	return kind < VAD_N_NOTES ? note_what[kind] : "?";
}

void vad_notes_init(struct vad_notes *n, uint64_t interval_ns)
{
	memset(n, 0, sizeof(*n));
	pthread_mutex_init(&n->lock, NULL);
	n->interval_ns = interval_ns;
}

void vad_notes_fini(struct vad_notes *n)
{
	pthread_mutex_destroy(&n->lock);
}

enum vad_note_verdict vad_notes_hit(struct vad_notes *n, enum vad_note_kind kind, uint64_t now_ns,
				    uid_t uid, pid_t pid)
{
	enum vad_note_verdict v;
	pthread_mutex_lock(&n->lock);
	struct vad_note *k = &n->kind[kind];
	k->total++;
	if (!k->window_ns || now_ns - k->window_ns >= n->interval_ns) {
		k->window_ns = now_ns ? now_ns : 1;
		v = VAD_NOTE_LOG;
	} else {
		k->counted++;
		k->last_uid = uid;
		k->last_pid = pid;
		v = n->summary_due ? VAD_NOTE_COUNTED : VAD_NOTE_COUNT_ARM;
		n->summary_due = true;
	}
	pthread_mutex_unlock(&n->lock);
	return v;
}

void vad_notes_take(struct vad_notes *n, uint64_t now_ns, struct vad_note_summary out[VAD_N_NOTES])
{
	pthread_mutex_lock(&n->lock);
	for (int i = 0; i < VAD_N_NOTES; i++) {
		struct vad_note *k = &n->kind[i];
		out[i].counted = k->counted;
		out[i].last_uid = k->last_uid;
		out[i].last_pid = k->last_pid;
		if (k->counted)
			k->window_ns = now_ns ? now_ns : 1;
		k->counted = 0;
	}
	n->summary_due = false;
	pthread_mutex_unlock(&n->lock);
}

uint64_t vad_notes_total(struct vad_notes *n, enum vad_note_kind kind)
{
	pthread_mutex_lock(&n->lock);
	uint64_t t = n->kind[kind].total;
	pthread_mutex_unlock(&n->lock);
	return t;
}
