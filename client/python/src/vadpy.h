/*
 * vadpy.h - the vad extension module's private structures and the calls its files share.
 *
 * A Client owns one vad_client; a Range holds a strong reference to its Client, so the
 * connection and the mappings outlive every Range (and every buffer a Range exports).
 * Every field is read and written with the GIL held; libvad calls run without it.
 */
#ifndef VADPY_H
#define VADPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <sys/types.h>

#include <vad.h>

typedef struct vadpy_client {
	PyObject ob_base;
	vad_client *c;			  /* NULL once closed */
	pid_t pid;			  /* the process that connected */
	int sock_fd;			  /* libvad's socket as found at connect, or -1 */
	Py_ssize_t busy;		  /* threads inside a libvad call on c (GIL released) */
	Py_ssize_t exports;		  /* buffers exported by this client's ranges */
	int closing;			  /* close() is waiting for the calls in flight */
	struct vadpy_client *prev, *next; /* live clients, for the child after fork */
} vadpy_client;

typedef struct {
	PyObject ob_base;
	vadpy_client *client; /* strong reference */
	void *ptr;
	size_t size;	   /* the daemon's size: at least what was asked for */
	uint64_t offset;   /* in the arena, the same in every process */
	const char *arena; /* libvad's copy of the name, valid until vad_close */
	Py_ssize_t exports;
	Py_ssize_t busy; /* threads inside share() or refs on this range */
	int freed;	 /* freed here, or dropped with its client */
} vadpy_range;

extern PyTypeObject vadpy_client_type;
extern PyTypeObject vadpy_range_type;

/* Run a libvad call with the GIL released; the client counts it so close() waits for it. */
#define VADPY_CALL(cl, rc, expr)                                                                   \
	do {                                                                                       \
		(cl)->busy++;                                                                      \
		PyThreadState *vadpy_ts_ = PyEval_SaveThread();                                    \
		(rc) = (expr);                                                                     \
		PyEval_RestoreThread(vadpy_ts_);                                                   \
		(cl)->busy--;                                                                      \
	} while (0)

/* module.c */

/* Set the exception for a VAD_E* code: the class for it, .code, and libvad's sentence for
 * the calling thread's last failure on c (c NULL: the last failed connect). NULL. */
PyObject *vadpy_raise(vad_client *c, int err);

/* Set the exception class for err with a sentence of our own. NULL. */
PyObject *vadpy_raise_msg(int err, const char *msg);

/* client.c */

/* 0 if cl may call libvad now; else -1 with ValueError (closed) or DaemonGone (created in
 * another process: after fork) set. */
int vadpy_client_check(vadpy_client *cl);

/* Whether cl's connection is open and belongs to this process (no exception). */
int vadpy_client_live(const vadpy_client *cl);

/* Register the at-fork handler that closes, in the child, its copies of the sockets of
 * the clients live at fork. 0, or -1 with an exception. */
int vadpy_client_setup_fork(void);

/* PyType_Ready for vad.Client, its method table joined with admin.c's first. */
int vadpy_client_type_ready(void);

/* Client methods defined in other files. */
PyObject *vadpy_client_ndarray(PyObject *self, PyObject *args, PyObject *kw);
PyObject *vadpy_client_attach_ndarray(PyObject *self, PyObject *args, PyObject *kw);
PyObject *vadpy_client_free_batch(PyObject *self, PyObject *ranges);
extern const char vadpy_doc_ndarray[], vadpy_doc_attach_ndarray[], vadpy_doc_free_batch[];

/* range.c */

/* A new Range for ptr, which cl now holds one more reference to (alloc or attach); on
 * failure the reference is given back and NULL returned with the exception set. */
PyObject *vadpy_range_new(vadpy_client *cl, void *ptr);

/* ndarray.c */

/* NumPy's array view of the first prod(shape) x itemsize bytes of range (no copy); numpy
 * is imported on first use. A new reference, or NULL. */
PyObject *vadpy_ndarray_view(PyObject *range, PyObject *shape, PyObject *dtype);

/* The bytes an array of shape and dtype takes (numpy's itemsize); -1 with an exception. */
Py_ssize_t vadpy_ndarray_nbytes(PyObject *shape, PyObject *dtype);

/* The Range whose buffer obj (a Range, a memoryview or an array over one) shows; borrowed,
 * or NULL with TypeError. */
PyObject *vadpy_range_of(PyObject *obj);

/* admin.c: the Client methods that describe and administer the daemon, ending in a
 * NULL entry. */
extern PyMethodDef vadpy_admin_methods[];

/* Range methods defined in ndarray.c. */
PyObject *vadpy_range_ndarray(PyObject *self, PyObject *args, PyObject *kw);
extern const char vadpy_doc_range_ndarray[];

#endif
