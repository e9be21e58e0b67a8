/*
 * client.c - vad.Client: connecting, closing, allocating, attaching and the client's own
 * statistics; the guard every call passes (closed, or created in another process).
 */
#include "vadpy.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- live clients and fork ------------------------------------------------------------ */

/* Changed with the GIL held. The child's handler runs in the thread that forked, which
 * held the GIL (os.fork does), so the list is whole there. */
static vadpy_client *live_clients;

/* Connects are serialized so that the socket a connect opened can be told apart from
 * sockets other connects open meanwhile (libvad does not say which fd is its own). */
static pthread_mutex_t connect_lock = PTHREAD_MUTEX_INITIALIZER;

static void clients_link(vadpy_client *cl)
{
	cl->prev = NULL;
	cl->next = live_clients;
	if (live_clients)
		live_clients->prev = cl;
	live_clients = cl;
}

static void clients_unlink(vadpy_client *cl)
{
	if (cl->prev)
		cl->prev->next = cl->next;
	else if (live_clients == cl)
		live_clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	cl->prev = cl->next = NULL;
}

/* In the child: close our copy of each parent connection's socket, so that the parent's
 * session ends when the parent closes it, not when the child exits too. Nothing is sent
 * on it and libvad's state is not touched: the child never calls libvad on it (the pid
 * check), and never frees the parent's ranges. */
static void after_fork_child(void)
{
	pthread_mutex_init(&connect_lock, NULL); /* another thread may have held it */
	for (vadpy_client *cl = live_clients; cl; cl = cl->next) {
		if (cl->sock_fd >= 0)
			close(cl->sock_fd);
		cl->sock_fd = -1;
	}
}

int vadpy_client_setup_fork(void)
{
	static int done;
	if (!done && pthread_atfork(NULL, NULL, after_fork_child) != 0) {
		PyErr_SetString(PyExc_ImportError, "vad: pthread_atfork failed");
		return -1;
	}
	done = 1;
	return 0;
}

/* ---- finding libvad's socket ----------------------------------------------------------- */

struct fd_list {
	int *fd;
	size_t n, cap;
};

/* The socket fds open in this process now (an empty list if /proc is not there). */
static void socket_fds(struct fd_list *l)
{
	l->n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	int self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		struct stat st;
		if (*end || end == e->d_name || fd == self || fstat((int)fd, &st) != 0 ||
		    !S_ISSOCK(st.st_mode))
			continue;
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 64;
			int *grown = realloc(l->fd, cap * sizeof(*grown));
			if (!grown)
				break;
			l->fd = grown;
			l->cap = cap;
		}
		l->fd[l->n++] = (int)fd;
	}
	closedir(d);
}

static int listed(const struct fd_list *l, int fd)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->fd[i] == fd)
			return 1;
	return 0;
}

/* The socket that appeared between before and after and is connected to path; if none
 * names path, the only new AF_UNIX socket; else -1. */
static int new_socket(const struct fd_list *before, const struct fd_list *after, const char *path)
{
	int only = -1, count = 0;
	for (size_t i = 0; i < after->n; i++) {
		int fd = after->fd[i];
		if (listed(before, fd))
			continue;
		struct sockaddr_un sa;
		socklen_t len = sizeof(sa);
		memset(&sa, 0, sizeof(sa));
		if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sun_family != AF_UNIX)
			continue;
		if (path && strncmp(sa.sun_path, path, sizeof(sa.sun_path)) == 0)
			return fd;
		only = fd;
		count++;
	}
	return count == 1 ? only : -1;
}

/* vad_connect, and the fd of the socket it opened in *sock (-1 if not found). */
static int connect_finding_socket(const char *path, const char *name, vad_client **out, int *sock)
{
	struct fd_list before = {0}, after = {0};
	pthread_mutex_lock(&connect_lock);
	socket_fds(&before);
	int err = vad_connect(path, name, out);
	*sock = -1;
	if (err == VAD_OK) {
		struct vad_session s;
		socket_fds(&after);
		if (vad_session_info(*out, &s) == VAD_OK)
			*sock = new_socket(&before, &after, s.socket_path);
	}
	pthread_mutex_unlock(&connect_lock);
	free(before.fd);
	free(after.fd);
	return err;
}

/* ---- the guard ------------------------------------------------------------------------- */

int vadpy_client_live(const vadpy_client *cl)
{
	return cl->c && cl->pid == getpid();
}

int vadpy_client_check(vadpy_client *cl)
{
	if (!cl->c) {
		PyErr_SetString(PyExc_ValueError, "the vad.Client is closed");
		return -1;
	}
	if (cl->pid != getpid()) {
		char msg[200];
		snprintf(msg, sizeof(msg),
			 "this vad.Client was created in another process (pid %d); create a new "
			 "vad.Client after fork",
			 (int)cl->pid);
		vadpy_raise_msg(VAD_EGONE, msg);
		return -1;
	}
	if (cl->closing) {
		PyErr_SetString(PyExc_ValueError, "the vad.Client is being closed");
		return -1;
	}
	return 0;
}

/* ---- life ------------------------------------------------------------------------------ */

static PyObject *client_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"socket", "name", NULL};
	PyObject *path_obj = NULL;
	const char *name = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|Oz:Client", kwlist, &path_obj, &name))
		return NULL;
	PyObject *path_bytes = NULL;
	if (path_obj && path_obj != Py_None && !PyUnicode_FSConverter(path_obj, &path_bytes))
		return NULL;
	const char *path = path_bytes ? PyBytes_AS_STRING(path_bytes) : NULL;
	vadpy_client *cl = (vadpy_client *)type->tp_alloc(type, 0);
	if (!cl) {
		Py_XDECREF(path_bytes);
		return NULL;
	}
	cl->sock_fd = -1;
	vad_client *c = NULL;
	int err, sock = -1;
	PyThreadState *ts = PyEval_SaveThread();
	err = connect_finding_socket(path, name, &c, &sock);
	PyEval_RestoreThread(ts);
	Py_XDECREF(path_bytes);
	if (err != VAD_OK) {
		Py_DECREF(cl);
		return vadpy_raise(NULL, err);
	}
	cl->c = c;
	cl->pid = getpid();
	cl->sock_fd = sock;
	clients_link(cl);
	return (PyObject *)cl;
}

/* Wait (GIL released) until no thread is inside a call on cl. */
static void wait_idle(vadpy_client *cl)
{
	while (cl->busy > 0) {
		PyThreadState *ts = PyEval_SaveThread();
		usleep(200);
		PyEval_RestoreThread(ts);
	}
}

static void client_dealloc(vadpy_client *cl)
{
	if (cl->c) {
		clients_unlink(cl);
		/* In a child after fork the connection is the parent's: leave it alone. */
		if (cl->pid == getpid()) {
			vad_client *c = cl->c;
			cl->c = NULL;
			PyThreadState *ts = PyEval_SaveThread();
			vad_close(c);
			PyEval_RestoreThread(ts);
		}
	}
	Py_TYPE(cl)->tp_free((PyObject *)cl);
}

static PyObject *client_close(vadpy_client *cl, PyObject *unused)
{
	if (!cl->c)
		Py_RETURN_NONE;
	if (cl->pid != getpid()) {
		/* The parent's connection: forget it here, without a word on its socket. */
		clients_unlink(cl);
		cl->c = NULL;
		Py_RETURN_NONE;
	}
	if (cl->exports > 0)
		return PyErr_Format(PyExc_BufferError,
				    "cannot close the vad.Client: %zd buffers of its ranges are "
				    "still exported (memoryviews, arrays); release them first",
				    cl->exports);
	if (cl->closing)
		Py_RETURN_NONE;
	cl->closing = 1;
	wait_idle(cl);
	vad_client *c = cl->c;
	cl->c = NULL;
	cl->closing = 0;
	clients_unlink(cl);
	PyThreadState *ts = PyEval_SaveThread();
	vad_close(c);
	PyEval_RestoreThread(ts);
	Py_RETURN_NONE;
}

static PyObject *client_enter(vadpy_client *cl, PyObject *unused)
{
	if (vadpy_client_check(cl) < 0)
		return NULL;
	Py_INCREF(cl);
	return (PyObject *)cl;
}

static PyObject *client_exit(vadpy_client *cl, PyObject *args)
{
	return client_close(cl, NULL);
}

/* ---- ranges ---------------------------------------------------------------------------- */

/* The sizes of a sequence of ints, malloc'd; NULL with an exception. */
static size_t *parse_sizes(PyObject *seq, Py_ssize_t *n)
{
	PyObject *fast = PySequence_Fast(seq, "sizes must be a sequence of ints");
	if (!fast)
		return NULL;
	*n = PySequence_Fast_GET_SIZE(fast);
	size_t *sizes = PyMem_Malloc((*n ? *n : 1) * sizeof(*sizes));
	if (!sizes) {
		Py_DECREF(fast);
		PyErr_NoMemory();
		return NULL;
	}
	for (Py_ssize_t i = 0; i < *n; i++) {
		sizes[i] = PyLong_AsSize_t(PySequence_Fast_GET_ITEM(fast, i));
		if (sizes[i] == (size_t)-1 && PyErr_Occurred()) {
			PyMem_Free(sizes);
			Py_DECREF(fast);
			return NULL;
		}
	}
	Py_DECREF(fast);
	return sizes;
}

/* A list of new Ranges for ptrs[0..n); on failure the ranges not yet wrapped are freed. */
static PyObject *wrap_ranges(vadpy_client *cl, void **ptrs, Py_ssize_t n)
{
	PyObject *list = PyList_New(n);
	Py_ssize_t i = 0;
	for (; list && i < n; i++) {
		PyObject *r = vadpy_range_new(cl, ptrs[i]);
		if (!r)
			break;
		PyList_SET_ITEM(list, i, r);
	}
	if (list && i == n)
		return list;
	/* The Ranges made so far free theirs when the list goes; free the rest here. */
	Py_ssize_t first = list ? i + 1 : 0;
	if (n > first) {
		int rc;
		VADPY_CALL(cl, rc, vad_free_batch(cl->c, (size_t)(n - first), ptrs + first));
		(void)rc;
	}
	Py_XDECREF(list);
	return NULL;
}

/* timeout= in seconds (None or 0: do not wait) as vad_alloc_batch_wait's milliseconds, rounded
 * up so a short wait still waits; -1 with an exception. */
static int64_t timeout_ms(PyObject *timeout)
{
	if (!timeout || timeout == Py_None)
		return 0;
	double s = PyFloat_AsDouble(timeout);
	if (s == -1.0 && PyErr_Occurred())
		return -1;
	if (!(s >= 0.0) || s * 1000.0 > (double)UINT32_MAX) {
		PyErr_Format(PyExc_ValueError,
			     "timeout must be between 0 and %u seconds (about 49 days)",
			     UINT32_MAX / 1000u);
		return -1;
	}
	double ms = s * 1000.0;
	uint32_t whole = (uint32_t)ms;
	return whole + (ms > (double)whole);
}

static PyObject *client_alloc(vadpy_client *cl, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"size", "align", "arena", "populate", "timeout", NULL};
	size_t size, align = 0;
	const char *arena = NULL;
	int populate = 0;
	PyObject *size_obj, *align_obj = NULL, *timeout = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OzpO:alloc", kwlist, &size_obj, &align_obj,
					 &arena, &populate, &timeout))
		return NULL;
	int64_t wait_ms = timeout_ms(timeout);
	if (wait_ms < 0)
		return NULL;
	size = PyLong_AsSize_t(size_obj);
	if (size == (size_t)-1 && PyErr_Occurred())
		return NULL;
	if (align_obj && (align = PyLong_AsSize_t(align_obj)) == (size_t)-1 && PyErr_Occurred())
		return NULL;
	if (vadpy_client_check(cl) < 0)
		return NULL;
	void *ptr;
	int err;
	VADPY_CALL(cl, err,
		   vad_alloc_batch_wait(cl->c, arena, 1, &size, align, populate ? VAD_POPULATE : 0,
					(uint32_t)wait_ms, &ptr));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	return vadpy_range_new(cl, ptr);
}

static PyObject *client_alloc_batch(vadpy_client *cl, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"sizes", "align", "arena", "populate", "timeout", NULL};
	PyObject *seq, *align_obj = NULL, *timeout = NULL;
	const char *arena = NULL;
	size_t align = 0;
	int populate = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OzpO:alloc_batch", kwlist, &seq, &align_obj,
					 &arena, &populate, &timeout))
		return NULL;
	int64_t wait_ms = timeout_ms(timeout);
	if (wait_ms < 0)
		return NULL;
	if (align_obj && (align = PyLong_AsSize_t(align_obj)) == (size_t)-1 && PyErr_Occurred())
		return NULL;
	Py_ssize_t n;
	size_t *sizes = parse_sizes(seq, &n);
	if (!sizes)
		return NULL;
	if (n == 0) {
		PyMem_Free(sizes);
		return PyList_New(0);
	}
	void **ptrs = PyMem_Malloc(n * sizeof(*ptrs));
	if (!ptrs || vadpy_client_check(cl) < 0) {
		PyMem_Free(sizes);
		PyMem_Free(ptrs);
		return ptrs ? NULL : PyErr_NoMemory();
	}
	int err;
	VADPY_CALL(cl, err,
		   vad_alloc_batch_wait(cl->c, arena, (size_t)n, sizes, align,
					populate ? VAD_POPULATE : 0, (uint32_t)wait_ms, ptrs));
	PyMem_Free(sizes);
	PyObject *list = err == VAD_OK ? wrap_ranges(cl, ptrs, n) : vadpy_raise(cl->c, err);
	PyMem_Free(ptrs);
	return list;
}

static PyObject *client_attach(vadpy_client *cl, PyObject *arg)
{
	const char *token = PyUnicode_AsUTF8(arg);
	if (!token)
		return NULL;
	if (vadpy_client_check(cl) < 0)
		return NULL;
	void *ptr;
	size_t size;
	int err;
	VADPY_CALL(cl, err, vad_attach(cl->c, token, &ptr, &size));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	return vadpy_range_new(cl, ptr);
}

static PyObject *client_unshare(vadpy_client *cl, PyObject *arg)
{
	if (!PyObject_TypeCheck(arg, &vadpy_range_type) || ((vadpy_range *)arg)->client != cl) {
		PyErr_SetString(PyExc_TypeError, "unshare() takes a vad.Range of this client");
		return NULL;
	}
	return PyObject_CallMethod(arg, "unshare", NULL);
}

static PyObject *client_stats(vadpy_client *cl, PyObject *unused)
{
	if (vadpy_client_check(cl) < 0)
		return NULL;
	struct vad_stats s;
	int err;
	VADPY_CALL(cl, err, vad_stats(cl->c, &s));
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	return Py_BuildValue(
	    "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:I,s:K,s:K}", "arena_bytes",
	    (unsigned long long)s.arena_bytes, "busy_bytes", (unsigned long long)s.busy_bytes,
	    "free_bytes", (unsigned long long)s.free_bytes, "lazy_bytes",
	    (unsigned long long)s.lazy_bytes, "pooled_bytes", (unsigned long long)s.pooled_bytes,
	    "largest_free", (unsigned long long)s.largest_free, "allocs",
	    (unsigned long long)s.allocs, "frees", (unsigned long long)s.frees, "fails",
	    (unsigned long long)s.fails, "clients", (unsigned)s.clients, "held_bytes",
	    (unsigned long long)s.held_bytes, "held_ranges", (unsigned long long)s.held_ranges);
}

static PyObject *client_session(vadpy_client *cl, void *unused)
{
	if (vadpy_client_check(cl) < 0)
		return NULL;
	struct vad_session s;
	int err = vad_session_info(cl->c, &s);
	if (err != VAD_OK)
		return vadpy_raise(cl->c, err);
	return Py_BuildValue(
	    "{s:K,s:I,s:O,s:s,s:s,s:s}", "session_id", (unsigned long long)s.session_id,
	    "protocol_version", (unsigned)s.protocol_version, "admin", s.admin ? Py_True : Py_False,
	    "server", s.server, "default_arena", s.default_arena, "socket_path", s.socket_path);
}

static PyObject *client_closed(vadpy_client *cl, void *unused)
{
	return PyBool_FromLong(cl->c == NULL);
}

static PyObject *client_calls_in_flight(vadpy_client *cl, void *unused)
{
	return PyLong_FromSsize_t(cl->busy);
}

static PyObject *client_repr(vadpy_client *cl)
{
	if (!cl->c)
		return PyUnicode_FromString("<vad.Client closed>");
	struct vad_session s;
	if (vad_session_info(cl->c, &s) != VAD_OK)
		return PyUnicode_FromString("<vad.Client>");
	return PyUnicode_FromFormat("<vad.Client session %llu at %s%s>",
				    (unsigned long long)s.session_id, s.socket_path,
				    cl->pid == getpid() ? "" : " (another process's)");
}

/* ---- the type -------------------------------------------------------------------------- */

static PyMethodDef client_methods[] = {
    {"close", (PyCFunction)client_close, METH_NOARGS,
     "close($self, /)\n--\n\n"
     "End the session: the daemon drops every reference this client holds and its\n"
     "arenas are unmapped. Every Range of this client is dead afterwards. Raises\n"
     "BufferError (and closes nothing) while a memoryview or array still exports a\n"
     "range's buffer. Waits for calls other threads have in flight. Closing twice is\n"
     "a no-op; in a child after fork it only forgets the parent's connection."},
    {"__enter__", (PyCFunction)client_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturn the client itself."},
    {"__exit__", (PyCFunction)client_exit, METH_VARARGS,
     "__exit__($self, *exc_info, /)\n--\n\nClose the client (see close())."},
    {"alloc", (PyCFunction)(void (*)(void))client_alloc, METH_VARARGS | METH_KEYWORDS,
     "alloc($self, /, size, align=0, arena=None, populate=False, timeout=None)\n--\n\n"
     "Allocate size bytes of shared memory, zero-filled, and return its vad.Range.\n"
     "align is a power of two (0: the arena's quantum, a page); arena names the arena\n"
     "(None: the daemon's default). The range's size is rounded up to the arena's\n"
     "quantum. populate=True prefaults every page for writing before returning\n"
     "(VAD_POPULATE: the first writes take no page faults). timeout (seconds): when\n"
     "the arena has no room, wait up to that long for other clients' frees, first\n"
     "come first served (vad_alloc_wait); Error with code ETIMEDOUT when none came.\n"
     "Raises NoSpace, QuotaExceeded, PermissionDenied or Error (ESIZE, EALIGN,\n"
     "ENOARENA, EBUSY: too many waiting, ...)."},
    {"alloc_batch", (PyCFunction)(void (*)(void))client_alloc_batch, METH_VARARGS | METH_KEYWORDS,
     "alloc_batch($self, /, sizes, align=0, arena=None, populate=False, timeout=None)\n--\n\n"
     "Allocate one range per size in one request, all or nothing; returns a list of\n"
     "vad.Range in the order of sizes. populate=True prefaults every page for writing\n"
     "before returning (as alloc's populate); timeout waits for room for the whole\n"
     "batch (as alloc's timeout)."},
    {"free_batch", (PyCFunction)vadpy_client_free_batch, METH_O, vadpy_doc_free_batch},
    {"attach", (PyCFunction)client_attach, METH_O,
     "attach($self, token, /)\n--\n\n"
     "Take a reference to the range behind a share token (from Range.share() in any\n"
     "process) and return it as a vad.Range over the same memory: writes by either\n"
     "side are seen by the other. Raises TokenInvalid for an unknown token, or one\n"
     "that was revoked, expired or used up (.code: vad.ETOKEN, EREVOKED, EEXPIRED,\n"
     "ETOKENUSED)."},
    {"unshare", (PyCFunction)client_unshare, METH_O,
     "unshare($self, range, /)\n--\n\n"
     "Revoke the share token of range (a vad.Range of this client), if it has one:\n"
     "later attaches with it raise TokenInvalid (code vad.EREVOKED); references\n"
     "already taken, here or in other processes, stay."},
    {"ndarray", (PyCFunction)(void (*)(void))vadpy_client_ndarray, METH_VARARGS | METH_KEYWORDS,
     vadpy_doc_ndarray},
    {"attach_ndarray", (PyCFunction)(void (*)(void))vadpy_client_attach_ndarray,
     METH_VARARGS | METH_KEYWORDS, vadpy_doc_attach_ndarray},
    {"stats", (PyCFunction)client_stats, METH_NOARGS,
     "stats($self, /)\n--\n\n"
     "Totals over the arenas this client may use, and its own holdings, as a dict:\n"
     "arena_bytes, busy_bytes, free_bytes, lazy_bytes, pooled_bytes, largest_free,\n"
     "allocs, frees, fails (daemon lifetime counters), clients, held_bytes,\n"
     "held_ranges."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef client_getset[] = {
    {"session", (getter)client_session, NULL,
     "The daemon's hello reply as a dict (no round trip): session_id,\n"
     "protocol_version, admin (bool: admin operations allowed), server,\n"
     "default_arena, socket_path.",
     NULL},
    {"closed", (getter)client_closed, NULL, "True once close() ran.", NULL},
    {"calls_in_flight", (getter)client_calls_in_flight, NULL,
     "How many threads are inside a call to the daemon on this client now\n"
     "(close() waits for them).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Client methods: the table above, then admin.c's; joined once at type setup. */
static PyMethodDef all_methods[sizeof(client_methods) / sizeof(client_methods[0]) + 16];

static PyObject *client_type_init_methods(void)
{
	size_t n = 0;
	for (PyMethodDef *m = client_methods; m->ml_name; m++)
		all_methods[n++] = *m;
	for (PyMethodDef *m = vadpy_admin_methods; m->ml_name; m++) {
		if (n + 1 >= sizeof(all_methods) / sizeof(all_methods[0]))
			return PyErr_Format(PyExc_SystemError, "vad: too many Client methods");
		all_methods[n++] = *m;
	}
	all_methods[n] = (PyMethodDef){NULL, NULL, 0, NULL};
	return Py_None;
}

PyDoc_STRVAR(client_doc,
	     "Client(socket=None, name=None)\n--\n\n"
	     "A connection to the vad daemon. socket is the daemon's socket path (None: the\n"
	     "default rule: $VAD_SOCKET, else /run/vad/vad.sock as root, else\n"
	     "$XDG_RUNTIME_DIR/vad.sock); name is how the daemon lists this client (None: the\n"
	     "program name). A context manager: `with vad.Client() as c:` closes it at the\n"
	     "end. One Client may be used by many threads at once (the GIL is released while\n"
	     "waiting on the daemon, and calls are pipelined on the one connection). After\n"
	     "fork the child cannot use it (DaemonGone): create a new Client there. Raises\n"
	     "DaemonGone (code ECONNECT) when no daemon listens, with a hint of what fits.");

PyTypeObject vadpy_client_type = {
    /* PyVarObject_HEAD_INIT(NULL, 0), spelt out so that clang-format keeps it apart */
    .ob_base = {.ob_base = {.ob_refcnt = 1, .ob_type = NULL}, .ob_size = 0},
    .tp_name = "vad.Client",
    .tp_basicsize = sizeof(vadpy_client),
    .tp_dealloc = (destructor)client_dealloc,
    .tp_repr = (reprfunc)client_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = client_doc,
    .tp_methods = all_methods,
    .tp_getset = client_getset,
    .tp_new = client_new,
};

int vadpy_client_type_ready(void)
{
	if (!client_type_init_methods())
		return -1;
	return PyType_Ready(&vadpy_client_type);
}
