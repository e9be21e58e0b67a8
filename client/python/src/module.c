/*
 * module.c - the vad._vad module: its exception classes and constants, error raising and
 * the module-level functions.
 */
#include "vadpy.h"

/* The exception classes with a code of their own; every other code raises Error. */
#define VADPY_ERROR_CLASSES(X)                                                                     \
	X(QuotaExceeded, VAD_EQUOTA,                                                               \
	  "A per-client or per-uid quota (bytes or ranges) would be exceeded.")                    \
	X(NoSpace, VAD_ENOSPC, "The arena has no free range that large.")                          \
	X(TokenInvalid, VAD_ETOKEN,                                                                \
	  "The share token is unknown, malformed, or its range is gone; also raised (with\n"       \
	  ".code EREVOKED, EEXPIRED or ETOKENUSED) for a token revoked, expired or used up.")      \
	X(PermissionDenied, VAD_EPERM,                                                             \
	  "Not allowed: the arena's allow-list, or an admin operation for a non-admin.")           \
	X(DaemonGone, VAD_EGONE,                                                                   \
	  "No daemon to talk to: it closed the connection (stopped or restarted), none\n"          \
	  "listens on the socket (code ECONNECT), or the client was created in another\n"          \
	  "process (after fork). Connect anew.")

/* Every VAD_E* code, exported as vad.E<NAME>. */
#define VADPY_CODES(X)                                                                             \
	X(OK)                                                                                      \
	X(EINVAL)                                                                                  \
	X(ENOMEM)                                                                                  \
	X(ECONNECT)                                                                                \
	X(EGONE)                                                                                   \
	X(EPROTO)                                                                                  \
	X(EVERSION)                                                                                \
	X(ENOSPC)                                                                                  \
	X(EQUOTA)                                                                                  \
	X(EPERM)                                                                                   \
	X(ENOARENA)                                                                                \
	X(ENOTHELD)                                                                                \
	X(ETOKEN)                                                                                  \
	X(ESIZE)                                                                                   \
	X(EALIGN)                                                                                  \
	X(ETOOBIG)                                                                                 \
	X(EBUSY)                                                                                   \
	X(EINTERNAL)                                                                               \
	X(EMAP)                                                                                    \
	X(EUNSUPPORTED)                                                                            \
	X(ENOHELLO)                                                                                \
	X(EREVOKED)                                                                                \
	X(EEXPIRED)                                                                                \
	X(ETOKENUSED)                                                                              \
	X(EREADONLY)                                                                               \
	X(ECOMMIT)                                                                                 \
	X(ETIMEDOUT)                                                                               \
	X(EKILLED)                                                                                 \
	X(ERESUME)                                                                                 \
	X(EINTERRUPTED)

static PyObject *error_base;
#define DECLARE_CLASS(name, code, doc) static PyObject *error_##name;
VADPY_ERROR_CLASSES(DECLARE_CLASS)
#undef DECLARE_CLASS

static PyObject *class_for(int err)
{
#define PICK(name, code, doc)                                                                      \
	if (err == (code))                                                                         \
		return error_##name;
	VADPY_ERROR_CLASSES(PICK)
#undef PICK
	if (err == VAD_ECONNECT)
		return error_DaemonGone;
	if (err == VAD_EREVOKED || err == VAD_EEXPIRED || err == VAD_ETOKENUSED)
		return error_TokenInvalid; /* a token that no longer attaches; .code says why */
	return error_base;
}

PyObject *vadpy_raise_msg(int err, const char *msg)
{
	PyObject *cls = class_for(err);
	PyObject *exc = PyObject_CallFunction(cls, "s", msg);
	if (!exc)
		return NULL;
	PyObject *code = PyLong_FromLong(err);
	if (!code || PyObject_SetAttrString(exc, "code", code) < 0) {
		Py_XDECREF(code);
		Py_DECREF(exc);
		return NULL;
	}
	Py_DECREF(code);
	PyErr_SetObject(cls, exc);
	Py_DECREF(exc);
	return NULL;
}

PyObject *vadpy_raise(vad_client *c, int err)
{
	/* libvad keeps the sentence per (thread, client): this thread made the call. */
	const char *msg = vad_last_error(c);
	if (!msg || !*msg)
		msg = vad_strerror(err);
	return vadpy_raise_msg(err, msg);
}

/* ---- module functions ------------------------------------------------------------------ */

static PyObject *mod_strerror(PyObject *mod, PyObject *arg)
{
	int err = PyLong_AsLong(arg);
	if (err == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(vad_strerror(err));
}

static PyObject *mod_range_of(PyObject *mod, PyObject *arg)
{
	PyObject *r = vadpy_range_of(arg);
	Py_XINCREF(r);
	return r;
}

static PyMethodDef module_methods[] = {
    {"strerror", mod_strerror, METH_O,
     "strerror(code, /)\n--\n\n"
     "libvad's static English sentence for a VAD_E* code (vad.ENOSPC, ...)."},
    {"range_of", mod_range_of, METH_O,
     "range_of(obj, /)\n--\n\n"
     "The vad.Range whose memory obj shows: a Range, a memoryview of one, or a NumPy\n"
     "array made by Client.ndarray / Range.ndarray (or any view of those). Use it to\n"
     "share or free an array's range: vad.range_of(frame).share().\n"
     "Raises TypeError if obj is not backed by a Range."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(module_doc,
	     "Python binding of libvad, the client library of the vad shared-memory daemon.\n\n"
	     "Connect with vad.Client(), allocate shared ranges (vad.Range: a writable\n"
	     "buffer, so memoryview(r) and numpy.frombuffer(r) see it without a copy), pass\n"
	     "them to other processes with r.share() and Client.attach(token).\n"
	     "Failures raise vad.Error or one of its subclasses.");

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "vad._vad",	.m_doc = module_doc,
    .m_size = -1,	   .m_methods = module_methods,
};

/* Error and its subclasses, each with a class attribute code (None for Error). */
static int add_errors(PyObject *m)
{
	PyObject *dict = Py_BuildValue("{s:O}", "code", Py_None);
	if (!dict)
		return -1;
	error_base = PyErr_NewExceptionWithDoc(
	    "vad.Error",
	    "A libvad call failed. .code is the VAD_E* code (a negative int, vad.EINVAL ...),\n"
	    "str(e) the daemon's sentence (or libvad's for local failures).",
	    NULL, dict);
	Py_DECREF(dict);
	if (!error_base || PyModule_AddObjectRef(m, "Error", error_base) < 0)
		return -1;
#define ADD_CLASS(name, code, doc)                                                                 \
	dict = Py_BuildValue("{s:i}", "code", code);                                               \
	if (!dict)                                                                                 \
		return -1;                                                                         \
	error_##name = PyErr_NewExceptionWithDoc("vad." #name, doc, error_base, dict);             \
	Py_DECREF(dict);                                                                           \
	if (!error_##name || PyModule_AddObjectRef(m, #name, error_##name) < 0)                    \
		return -1;
	VADPY_ERROR_CLASSES(ADD_CLASS)
#undef ADD_CLASS
	return 0;
}

static int add_constants(PyObject *m)
{
#define ADD_CODE(name)                                                                             \
	if (PyModule_AddIntConstant(m, #name, VAD_##name) < 0)                                     \
		return -1;
	VADPY_CODES(ADD_CODE)
#undef ADD_CODE
	if (PyModule_AddStringConstant(m, "VERSION", VAD_VERSION_STRING) < 0 ||
	    PyModule_AddIntConstant(m, "TOKEN_LEN", VAD_TOKEN_LEN) < 0 ||
	    PyModule_AddObject(m, "MAX_ALIGN", PyLong_FromSize_t(VAD_MAX_ALIGN)) < 0)
		return -1;
	return 0;
}

PyMODINIT_FUNC PyInit__vad(void)
{
	if (vadpy_client_type_ready() < 0 || PyType_Ready(&vadpy_range_type) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	if (add_errors(m) < 0 || add_constants(m) < 0 ||
	    PyModule_AddObjectRef(m, "Client", (PyObject *)&vadpy_client_type) < 0 ||
	    PyModule_AddObjectRef(m, "Range", (PyObject *)&vadpy_range_type) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	if (vadpy_client_setup_fork() < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
