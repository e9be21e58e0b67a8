/*
 * admin.c - the Client methods behind vactl: detailed statistics, arenas, sessions, the
 * layout walk, and the admin operations purge, reload and check. Results are dicts and
 * lists of dicts with libvad's field names.
 */
#include "vadpy.h"

#include <stdlib.h>
#include <string.h>

#define ULL(v) ((unsigned long long)(v))

/* Parse an optional arena argument; 0, or -1 with an exception. */
static int parse_arena(PyObject *args, PyObject *kw, const char *fmt, const char **arena)
{
	static char *kwlist[] = {"arena", NULL};
	*arena = NULL;
	return PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, arena) ? 0 : -1;
}

/* A list of n dicts, dict(&items[i]) each (items of item_size bytes); NULL with an exception. */
static PyObject *list_of(const void *items, size_t n, size_t item_size,
			 PyObject *(*dict)(const void *item))
{
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *d = dict((const char *)items + i * item_size);
		if (!d)
			Py_CLEAR(list);
		else
			PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	return list;
}

static PyObject *arena_stats_dict(const void *item)
{
	const struct vad_arena_stats *a = item;
	return Py_BuildValue(
	    "{s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,"
	    "s:K,s:I,s:K,s:K,s:K,s:K,s:K,s:K}",
	    "name", a->name, "size", ULL(a->size), "quantum", ULL(a->quantum), "busy_bytes",
	    ULL(a->busy_bytes), "free_bytes", ULL(a->free_bytes), "lazy_bytes", ULL(a->lazy_bytes),
	    "pooled_bytes", ULL(a->pooled_bytes), "busy_blocks", ULL(a->busy_blocks), "free_blocks",
	    ULL(a->free_blocks), "lazy_blocks", ULL(a->lazy_blocks), "pooled_blocks",
	    ULL(a->pooled_blocks), "largest_free", ULL(a->largest_free), "allocs", ULL(a->allocs),
	    "frees", ULL(a->frees), "fails", ULL(a->fails), "drains", ULL(a->drains),
	    "released_bytes", ULL(a->released_bytes), "release_calls", ULL(a->release_calls),
	    "pool_hits", ULL(a->pool_hits), "resident_bytes", ULL(a->resident_bytes),
	    "free_released_bytes", ULL(a->free_released_bytes), "waiters", (unsigned)a->waiters,
	    "oldest_wait_ms", ULL(a->oldest_wait_ms), "waits", ULL(a->waits), "wait_grants",
	    ULL(a->wait_grants), "wait_timeouts", ULL(a->wait_timeouts), "wait_cancels",
	    ULL(a->wait_cancels), "wait_refusals", ULL(a->wait_refusals));
}

static PyObject *admin_stats_detail(vadpy_client *cl, PyObject *args, PyObject *kw)
{
	const char *arena;
	if (parse_arena(args, kw, "|z:stats_detail", &arena) < 0 || vadpy_client_check(cl) < 0)
		return NULL;
	struct vad_daemon_stats *s;
	int err;
	VADPY_CALL(cl, err, vad_stats_detail(cl->c, arena, &s));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	PyObject *list = list_of(s->arenas, s->n_arenas, sizeof(*s->arenas), arena_stats_dict);
	PyObject *out =
	    list ? Py_BuildValue("{s:I,s:K,s:K,s:K,s:K,s:K,s:N}", "clients", (unsigned)s->clients,
				 "uptime_ms", ULL(s->uptime_ms), "requests", ULL(s->requests),
				 "shares", ULL(s->shares), "held_bytes", ULL(s->held_bytes),
				 "held_ranges", ULL(s->held_ranges), "arenas", list)
		 : NULL;
	free(s);
	return out;
}

static PyObject *arena_info_dict(const void *item)
{
	const struct vad_arena_info *v = item;
	return Py_BuildValue("{s:s,s:K,s:K,s:s,s:O,s:O,s:s,s:I}", "name", v->name, "size",
			     ULL(v->size), "quantum", ULL(v->quantum), "backing", v->backing,
			     "allowed", v->allowed ? Py_True : Py_False, "unsealed",
			     v->unsealed ? Py_True : Py_False, "tenancy", v->tenancy, "tenants",
			     v->tenants);
}

static PyObject *admin_arenas(vadpy_client *cl, PyObject *unused)
{
	if (vadpy_client_check(cl) < 0)
		return NULL;
	struct vad_arena_info *v;
	size_t n;
	int err;
	VADPY_CALL(cl, err, vad_arenas(cl->c, &v, &n));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	PyObject *list = list_of(v, n, sizeof(*v), arena_info_dict);
	free(v);
	return list;
}

static PyObject *client_info_dict(const void *item)
{
	const struct vad_client_info *v = item;
	return Py_BuildValue(
	    "{s:K,s:I,s:I,s:I,s:s,s:K,s:K,s:K,s:K,s:K}", "session_id", ULL(v->session_id), "pid",
	    (unsigned)v->pid, "uid", (unsigned)v->uid, "gid", (unsigned)v->gid, "name", v->name,
	    "held_bytes", ULL(v->held_bytes), "held_ranges", ULL(v->held_ranges), "allocs",
	    ULL(v->allocs), "frees", ULL(v->frees), "connected_ms", ULL(v->connected_ms));
}

static PyObject *admin_clients(vadpy_client *cl, PyObject *unused)
{
	if (vadpy_client_check(cl) < 0)
		return NULL;
	struct vad_client_info *v;
	size_t n;
	int err;
	VADPY_CALL(cl, err, vad_clients(cl->c, &v, &n));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	PyObject *list = list_of(v, n, sizeof(*v), client_info_dict);
	free(v);
	return list;
}

static PyObject *admin_purge(vadpy_client *cl, PyObject *args, PyObject *kw)
{
	const char *arena;
	if (parse_arena(args, kw, "|z:purge", &arena) < 0 || vadpy_client_check(cl) < 0)
		return NULL;
	uint64_t released = 0;
	int err;
	VADPY_CALL(cl, err, vad_purge_arena(cl->c, arena, &released));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	return PyLong_FromUnsignedLongLong(released);
}

/* A malloc'd detail string as str ("" for NULL), freed. */
static PyObject *take_detail(char *detail)
{
	PyObject *s =
	    PyUnicode_DecodeUTF8(detail ? detail : "", detail ? strlen(detail) : 0, "replace");
	free(detail);
	return s;
}

static PyObject *admin_reload(vadpy_client *cl, PyObject *unused)
{
	if (vadpy_client_check(cl) < 0)
		return NULL;
	char *detail = NULL;
	int err;
	VADPY_CALL(cl, err, vad_reload_detail(cl->c, &detail));
	if (err != VAD_OK) {
		free(detail);
		return vadpy_raise(cl->c, err);
	}
	return take_detail(detail);
}

static PyObject *admin_check(vadpy_client *cl, PyObject *unused)
{
	if (vadpy_client_check(cl) < 0)
		return NULL;
	char *detail = NULL;
	int ok = 0, err;
	VADPY_CALL(cl, err, vad_check(cl->c, &ok, &detail));
	if (err != VAD_OK) {
		free(detail);
		return vadpy_raise(cl->c, err);
	}
	return Py_BuildValue("(ON)", ok ? Py_True : Py_False, take_detail(detail));
}

static const char *const block_kinds[] = {
    [VAD_BLOCK_BUSY] = "busy",
    [VAD_BLOCK_FREE] = "free",
    [VAD_BLOCK_LAZY] = "lazy",
    [VAD_BLOCK_POOLED] = "pooled",
};

static PyObject *block_dict(const void *item)
{
	const struct vad_block *b = item;
	int known = b->kind >= 0 && (size_t)b->kind < sizeof(block_kinds) / sizeof(*block_kinds);
	return Py_BuildValue("{s:K,s:K,s:s,s:I}", "offset", ULL(b->offset), "size", ULL(b->size),
			     "kind", known ? block_kinds[b->kind] : "unknown", "node",
			     (unsigned)b->node);
}

static PyObject *admin_walk(vadpy_client *cl, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"arena", "max_blocks", NULL};
	const char *arena = NULL;
	Py_ssize_t max_blocks = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zn:walk", kwlist, &arena, &max_blocks))
		return NULL;
	if (max_blocks < 0)
		return PyErr_Format(PyExc_ValueError, "max_blocks must be >= 0");
	if (vadpy_client_check(cl) < 0)
		return NULL;
	struct vad_arena_map *m;
	int err;
	VADPY_CALL(cl, err, vad_walk(cl->c, arena, (size_t)max_blocks, &m));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	PyObject *blocks = list_of(m->blocks, m->n_blocks, sizeof(*m->blocks), block_dict);
	/* A busy block's owner session, where the daemon named one. */
	for (size_t i = 0; blocks && i < m->n_blocks; i++) {
		const struct vad_block_owner *o = &m->owners[i];
		if (!o->name)
			continue;
		PyObject *d = PyList_GET_ITEM(blocks, (Py_ssize_t)i);
		PyObject *name =
		    PyUnicode_DecodeUTF8(o->name, (Py_ssize_t)strlen(o->name), "replace");
		PyObject *sid = PyLong_FromUnsignedLongLong(ULL(o->session));
		PyObject *holders = PyLong_FromUnsignedLong(o->holders);
		if (!name || !sid || !holders || PyDict_SetItemString(d, "owner", name) < 0 ||
		    PyDict_SetItemString(d, "owner_session", sid) < 0 ||
		    PyDict_SetItemString(d, "holders", holders) < 0)
			Py_CLEAR(blocks);
		Py_XDECREF(name);
		Py_XDECREF(sid);
		Py_XDECREF(holders);
	}
	PyObject *out = blocks
			    ? Py_BuildValue("{s:s,s:K,s:K,s:O,s:N}", "arena", m->arena, "size",
					    ULL(m->size), "quantum", ULL(m->quantum), "truncated",
					    m->truncated ? Py_True : Py_False, "blocks", blocks)
			    : NULL;
	free(m);
	return out;
}

PyMethodDef vadpy_admin_methods[] = {
    {"stats_detail", (PyCFunction)(void (*)(void))admin_stats_detail, METH_VARARGS | METH_KEYWORDS,
     "stats_detail($self, /, arena=None)\n--\n\n"
     "Daemon-wide figures and every counter of each arena (None: every arena this\n"
     "client may use), as vactl stats shows them: a dict with clients, uptime_ms,\n"
     "requests, shares, held_bytes, held_ranges and arenas (a list of dicts: name,\n"
     "size, quantum, busy/free/lazy/pooled bytes and blocks, largest_free, allocs,\n"
     "frees, fails, drains, released_bytes, release_calls, pool_hits, resident_bytes,\n"
     "free_released_bytes)."},
    {"arenas", (PyCFunction)admin_arenas, METH_NOARGS,
     "arenas($self, /)\n--\n\n"
     "The daemon's arenas (vactl arenas): a list of dicts with name, size, quantum,\n"
     "backing ('memfd' or a directory), allowed (this client may allocate there),\n"
     "unsealed, tenancy ('uid' or 'gid' for a section with one arena per tenant, or one\n"
     "tenant's arena NAME@ID; '' otherwise) and tenants (a section's tenant arenas open)."},
    {"clients", (PyCFunction)admin_clients, METH_NOARGS,
     "clients($self, /)\n--\n\n"
     "Connected sessions (vactl clients; admin): a list of dicts with session_id, pid,\n"
     "uid, gid, name, held_bytes, held_ranges, allocs, frees, connected_ms (ms since\n"
     "the epoch). Raises PermissionDenied unless the daemon counts this peer as an\n"
     "admin (see Client.session['admin'])."},
    {"purge", (PyCFunction)(void (*)(void))admin_purge, METH_VARARGS | METH_KEYWORDS,
     "purge($self, /, arena=None)\n--\n\n"
     "Drain the lazy lists and pools of arena (None: every arena) now and give free\n"
     "space back to the system (vactl purge; admin). Returns the bytes released."},
    {"reload", (PyCFunction)admin_reload, METH_NOARGS,
     "reload($self, /)\n--\n\n"
     "Make the daemon re-read its configuration limits (vactl reload; admin). Returns\n"
     "the daemon's account of what changed (str)."},
    {"check", (PyCFunction)admin_check, METH_NOARGS,
     "check($self, /)\n--\n\n"
     "Run the daemon's allocator invariant checker on every arena (vactl check;\n"
     "admin). Returns (ok, report): ok is True when every arena is sound."},
    {"walk", (PyCFunction)(void (*)(void))admin_walk, METH_VARARGS | METH_KEYWORDS,
     "walk($self, /, arena=None, max_blocks=0)\n--\n\n"
     "The layout of arena (None: the default) in address order, at most max_blocks\n"
     "blocks (0: all) (vactl map; admin): a dict with arena, size, quantum, truncated\n"
     "and blocks, a list of dicts with offset, size, kind ('busy', 'free', 'lazy',\n"
     "'pooled') and node; a busy block also has owner (a session holding it, by name),\n"
     "owner_session and holders where the daemon names one. Pages are fetched one at a\n"
     "time: not one atomic picture\n"
     "while others allocate."},
    {NULL, NULL, 0, NULL},
};
