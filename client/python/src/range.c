/*
 * range.c - vad.Range: one reference to a shared range, its buffer, sharing and freeing
 * (one at a time, in a batch, or by the garbage collector when it is dropped).
 */
#include "vadpy.h"

#include <unistd.h>

PyObject *vadpy_range_new(vadpy_client *cl, void *ptr)
{
	struct vad_range info;
	int err = vad_range_info(cl->c, ptr, &info);
	vadpy_range *r = err == VAD_OK ? PyObject_New(vadpy_range, &vadpy_range_type) : NULL;
	if (!r) {
		if (err != VAD_OK)
			vadpy_raise(cl->c, err);
		int rc;
		VADPY_CALL(cl, rc, vad_free(cl->c, ptr));
		(void)rc;
		return NULL;
	}
	Py_INCREF(cl);
	r->client = cl;
	r->ptr = ptr;
	r->size = info.size;
	r->offset = info.offset;
	r->arena = info.arena;
	r->exports = 0;
	r->busy = 0;
	r->freed = 0;
	return (PyObject *)r;
}

/* The references this client holds to the range at r->ptr (0: none). */
static uint32_t held_refs(vadpy_range *r)
{
	struct vad_range info;
	return vad_range_info(r->client->c, r->ptr, &info) == VAD_OK ? info.refs : 0;
}

/* 0 if r's memory may be used now; else -1 with ValueError (freed, client closed) or
 * DaemonGone (another process's). */
static int range_check(vadpy_range *r)
{
	if (r->freed || !r->client->c) {
		PyErr_SetString(PyExc_ValueError, r->freed ? "the vad.Range was freed"
							   : "the vad.Range's client is closed");
		return -1;
	}
	return vadpy_client_check(r->client);
}

static void range_dealloc(vadpy_range *r)
{
	/* Dropped without free(): give the reference back, unless the connection is closed
	 * (the daemon dropped it already) or is a parent process's (after fork). */
	if (!r->freed && vadpy_client_live(r->client) && !r->client->closing) {
		int rc;
		VADPY_CALL(r->client, rc, vad_free(r->client->c, r->ptr));
		(void)rc;
	}
	Py_DECREF(r->client);
	PyObject_Free(r);
}

/* Wait (GIL released) until no other thread is inside a call on r. */
static void wait_range_idle(vadpy_range *r)
{
	while (r->busy > 0) {
		PyThreadState *ts = PyEval_SaveThread();
		usleep(200);
		PyEval_RestoreThread(ts);
	}
}

static PyObject *range_free(vadpy_range *r, PyObject *unused)
{
	if (r->freed)
		Py_RETURN_NONE;
	if (!r->client->c) { /* the daemon dropped it with the session */
		r->freed = 1;
		Py_RETURN_NONE;
	}
	if (vadpy_client_check(r->client) < 0)
		return NULL;
	if (r->exports > 0)
		return PyErr_Format(PyExc_BufferError,
				    "cannot free the vad.Range: %zd buffers (memoryviews, arrays) "
				    "still export it; release them first (nothing was freed)",
				    r->exports);
	wait_range_idle(r);
	if (r->freed) /* another thread freed it meanwhile */
		Py_RETURN_NONE;
	uint32_t before = held_refs(r);
	r->freed = 1; /* from now on no thread starts using it */
	int err;
	VADPY_CALL(r->client, err, vad_free(r->client->c, r->ptr));
	if (err != VAD_OK) {
		if (r->client->c && held_refs(r) == before)
			r->freed = 0; /* the daemon kept it */
		return vadpy_raise(r->client->c, err);
	}
	Py_RETURN_NONE;
}

const char vadpy_doc_free_batch[] =
    "free_batch($self, ranges, /)\n--\n\n"
    "Free many ranges of this client in as few requests as fit a frame. Ranges freed\n"
    "already are skipped. Raises BufferError, freeing nothing, if any of them still\n"
    "exports a buffer. On a daemon error the ranges it did free are marked freed, the\n"
    "others stay usable.";

/* The Ranges of seq (a fast sequence) checked for a batch free: this client's, none
 * exported; -1 with an exception. */
static int check_batch(vadpy_client *cl, PyObject *fast)
{
	Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
		if (!PyObject_TypeCheck(o, &vadpy_range_type)) {
			PyErr_Format(PyExc_TypeError, "free_batch: item %zd is not a vad.Range", i);
			return -1;
		}
		vadpy_range *r = (vadpy_range *)o;
		if (r->client != cl) {
			PyErr_Format(PyExc_ValueError,
				     "free_batch: range %zd belongs to another vad.Client", i);
			return -1;
		}
		if (r->exports > 0) {
			PyErr_Format(
			    PyExc_BufferError,
			    "free_batch: range %zd still exports %zd buffers (memoryviews, "
			    "arrays); nothing was freed",
			    i, r->exports);
			return -1;
		}
	}
	for (Py_ssize_t i = 0; i < n; i++)
		wait_range_idle((vadpy_range *)PySequence_Fast_GET_ITEM(fast, i));
	return 0;
}

PyObject *vadpy_client_free_batch(PyObject *self, PyObject *ranges)
{
	vadpy_client *cl = (vadpy_client *)self;
	PyObject *fast = PySequence_Fast(ranges, "free_batch: ranges must be a sequence");
	if (!fast)
		return NULL;
	if (vadpy_client_check(cl) < 0 || check_batch(cl, fast) < 0) {
		Py_DECREF(fast);
		return NULL;
	}
	Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), k = 0;
	void **ptrs = PyMem_Malloc((n ? n : 1) * sizeof(*ptrs));
	uint32_t *before = PyMem_Malloc((n ? n : 1) * sizeof(*before));
	vadpy_range **taken = PyMem_Malloc((n ? n : 1) * sizeof(*taken));
	int err = VAD_OK;
	if (!ptrs || !before || !taken) {
		PyErr_NoMemory();
		err = VAD_ENOMEM;
		goto out;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		vadpy_range *r = (vadpy_range *)PySequence_Fast_GET_ITEM(fast, i);
		if (r->freed) /* freed already, or twice in the list */
			continue;
		before[k] = held_refs(r);
		r->freed = 1;
		ptrs[k] = r->ptr;
		taken[k++] = r;
	}
	if (k > 0)
		VADPY_CALL(cl, err, vad_free_batch(cl->c, (size_t)k, ptrs));
	if (err != VAD_OK) {
		/* libvad does not say how far it got: what is still held was not freed. */
		for (Py_ssize_t i = 0; i < k; i++)
			if (cl->c && held_refs(taken[i]) == before[i])
				taken[i]->freed = 0;
		vadpy_raise(cl->c, err);
	}
out:
	PyMem_Free(ptrs);
	PyMem_Free(before);
	PyMem_Free(taken);
	Py_DECREF(fast);
	if (err != VAD_OK)
		return NULL;
	Py_RETURN_NONE;
}

/* A ttl in seconds (None: no expiry) as whole milliseconds, at least 1; -1 with an
 * exception when it is not a positive number. */
static int ttl_ms_of(PyObject *ttl, uint64_t *ms)
{
	*ms = 0;
	if (ttl == Py_None)
		return 0;
	double s = PyFloat_AsDouble(ttl);
	if (s == -1.0 && PyErr_Occurred())
		return -1;
	if (!(s > 0) || s > 1e15) {
		PyErr_SetString(PyExc_ValueError, "ttl is a positive number of seconds (or None)");
		return -1;
	}
	double v = s * 1000.0;
	*ms = (uint64_t)v + ((double)(uint64_t)v < v); /* rounded up: never 0 */
	return 0;
}

static PyObject *range_share(vadpy_range *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"single_use", "ttl", NULL};
	int single_use = 0;
	PyObject *ttl = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$pO:share", kwlist, &single_use, &ttl))
		return NULL;
	struct vad_share_opts opts = {.single_use = single_use};
	if (ttl_ms_of(ttl, &opts.ttl_ms) < 0 || range_check(r) < 0)
		return NULL;
	int plain = !opts.single_use && !opts.ttl_ms;
	char token[VAD_TOKEN_LEN + 1];
	int err;
	r->busy++;
	VADPY_CALL(r->client, err,
		   plain ? vad_share(r->client->c, r->ptr, token)
			 : vad_share_opts(r->client->c, r->ptr, &opts, token));
	r->busy--;
	if (err != VAD_OK)
		return vadpy_raise(r->client->c, err);
	return PyUnicode_FromString(token);
}

static PyObject *range_unshare(vadpy_range *r, PyObject *unused)
{
	if (range_check(r) < 0)
		return NULL;
	int err;
	r->busy++;
	VADPY_CALL(r->client, err, vad_unshare(r->client->c, r->ptr));
	r->busy--;
	if (err != VAD_OK)
		return vadpy_raise(r->client->c, err);
	Py_RETURN_NONE;
}

static PyObject *range_enter(vadpy_range *r, PyObject *unused)
{
	if (range_check(r) < 0)
		return NULL;
	Py_INCREF(r);
	return (PyObject *)r;
}

static PyObject *range_exit(vadpy_range *r, PyObject *args)
{
	return range_free(r, NULL);
}

/* ---- buffer and length ----------------------------------------------------------------- */

static int range_getbuffer(vadpy_range *r, Py_buffer *view, int flags)
{
	if (range_check(r) < 0) {
		view->obj = NULL;
		return -1;
	}
	/* In an arena this client only reads the pages are mapped PROT_READ: a writable buffer
	 * would let Python die of SIGSEGV, so asking for one raises BufferError instead. */
	int readonly = vad_range_writable(r->client->c, r->ptr) == 0;
	if (PyBuffer_FillInfo(view, (PyObject *)r, r->ptr, (Py_ssize_t)r->size, readonly, flags) <
	    0)
		return -1;
	r->exports++;
	r->client->exports++;
	return 0;
}

static void range_releasebuffer(vadpy_range *r, Py_buffer *view)
{
	r->exports--;
	r->client->exports--;
}

static PyBufferProcs range_as_buffer = {
    .bf_getbuffer = (getbufferproc)range_getbuffer,
    .bf_releasebuffer = (releasebufferproc)range_releasebuffer,
};

static Py_ssize_t range_length(vadpy_range *r)
{
	if (range_check(r) < 0)
		return -1;
	return (Py_ssize_t)r->size;
}

static PySequenceMethods range_as_sequence = {
    .sq_length = (lenfunc)range_length,
};

/* ---- attributes ------------------------------------------------------------------------ */

static PyObject *range_get_size(vadpy_range *r, void *unused)
{
	return PyLong_FromSize_t(r->size);
}

static PyObject *range_get_offset(vadpy_range *r, void *unused)
{
	return PyLong_FromUnsignedLongLong(r->offset);
}

static PyObject *range_get_arena(vadpy_range *r, void *unused)
{
	if (!r->client->c) /* libvad's copy of the name went with the client */
		Py_RETURN_NONE;
	return PyUnicode_FromString(r->arena);
}

static PyObject *range_get_freed(vadpy_range *r, void *unused)
{
	return PyBool_FromLong(r->freed || !r->client->c);
}

static PyObject *range_get_refs(vadpy_range *r, void *unused)
{
	if (range_check(r) < 0)
		return NULL;
	return PyLong_FromUnsignedLong(held_refs(r));
}

static PyObject *range_get_client(vadpy_range *r, void *unused)
{
	Py_INCREF(r->client);
	return (PyObject *)r->client;
}

static PyObject *range_repr(vadpy_range *r)
{
	const char *state = r->freed ? " (freed)" : !r->client->c ? " (client closed)" : "";
	return PyUnicode_FromFormat("<vad.Range %zu bytes at %s+%llu%s>", r->size,
				    r->client->c ? r->arena : "?", (unsigned long long)r->offset,
				    state);
}

static PyMethodDef range_methods[] = {
    {"free", (PyCFunction)range_free, METH_NOARGS,
     "free($self, /)\n--\n\n"
     "Give this reference back to the daemon; when no process holds the range any\n"
     "more it is hole-punched (its next holder reads zeros). Raises BufferError, and\n"
     "frees nothing, while a memoryview or array still exports its buffer. Freeing\n"
     "twice, or after the client closed, does nothing."},
    {"share", (PyCFunction)(void (*)(void))range_share, METH_VARARGS | METH_KEYWORDS,
     "share($self, /, *, single_use=False, ttl=None)\n--\n\n"
     "A printable token (str) another process passes to Client.attach() to map the\n"
     "same memory. The token names the range, not this reference: it stays valid while\n"
     "any process holds the range, unless it is revoked (unshare(), or a newer share\n"
     "of the range with other options). A range has one live token: without options\n"
     "it is the same every time; single_use=True (the first attach uses it up) or ttl\n"
     "(seconds until it expires) make a fresh one, replacing the one before. Attaches\n"
     "with a dead token raise TokenInvalid, .code saying why (vad.EREVOKED, EEXPIRED,\n"
     "ETOKENUSED)."},
    {"unshare", (PyCFunction)range_unshare, METH_NOARGS,
     "unshare($self, /)\n--\n\n"
     "Revoke the range's token, if it has one: attaches with it raise TokenInvalid\n"
     "(code vad.EREVOKED); references already taken stay. See Client.unshare()."},
    {"ndarray", (PyCFunction)(void (*)(void))vadpy_range_ndarray, METH_VARARGS | METH_KEYWORDS,
     vadpy_doc_range_ndarray},
    {"__enter__", (PyCFunction)range_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturn the range itself."},
    {"__exit__", (PyCFunction)range_exit, METH_VARARGS,
     "__exit__($self, *exc_info, /)\n--\n\nFree the range (see free())."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef range_getset[] = {
    {"size", (getter)range_get_size, NULL,
     "Bytes in the range (also len() and the buffer's length): the size asked for,\n"
     "rounded up to the arena's quantum.",
     NULL},
    {"offset", (getter)range_get_offset, NULL,
     "Offset of the range in its arena, the same in every process.", NULL},
    {"arena", (getter)range_get_arena, NULL,
     "Name of the range's arena (None once the client is closed).", NULL},
    {"freed", (getter)range_get_freed, NULL,
     "True once freed here, or once its client closed (the daemon dropped it).", NULL},
    {"refs", (getter)range_get_refs, NULL,
     "References this client holds to the range (its alloc plus attaches).", NULL},
    {"client", (getter)range_get_client, NULL, "The vad.Client this range belongs to.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(range_doc,
	     "One reference to a shared range, made by Client.alloc, alloc_batch or attach\n"
	     "(not by calling the class).\n\n"
	     "A writable buffer: memoryview(r), numpy.frombuffer(r, dtype) and r.ndarray()\n"
	     "see the shared memory itself, without a copy. A Range keeps its Client alive.\n"
	     "free() (or the end of a `with` block) gives it back; a Range dropped without\n"
	     "free() is freed when it is garbage-collected, and the daemon takes back every\n"
	     "range of a client that goes away. After fork the child cannot use the parent's\n"
	     "ranges (DaemonGone) and never frees them.");

PyTypeObject vadpy_range_type = {
    /* PyVarObject_HEAD_INIT(NULL, 0), spelt out so that clang-format keeps it apart */
    .ob_base = {.ob_base = {.ob_refcnt = 1, .ob_type = NULL}, .ob_size = 0},
    .tp_name = "vad.Range",
    .tp_basicsize = sizeof(vadpy_range),
    .tp_dealloc = (destructor)range_dealloc,
    .tp_repr = (reprfunc)range_repr,
    .tp_as_sequence = &range_as_sequence,
    .tp_as_buffer = &range_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = range_doc,
    .tp_methods = range_methods,
    .tp_getset = range_getset,
};
