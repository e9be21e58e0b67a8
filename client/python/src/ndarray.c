/*
 * ndarray.c - NumPy arrays over ranges, through the buffer protocol only: numpy is imported
 * on first use (it stays optional) and its C API is never linked.
 */
#include "vadpy.h"

static PyObject *numpy_module;

static PyObject *numpy(void)
{
	if (!numpy_module) {
		numpy_module = PyImport_ImportModule("numpy");
		if (!numpy_module && PyErr_ExceptionMatches(PyExc_ImportError)) {
			PyErr_Clear();
			PyErr_SetString(PyExc_ImportError,
					"vad: ndarray needs NumPy, which is not importable "
					"(Debian: apt install python3-numpy)");
		}
	}
	return numpy_module;
}

/* numpy.dtype(dtype), a new reference. */
static PyObject *as_dtype(PyObject *dtype)
{
	PyObject *np = numpy();
	return np ? PyObject_CallMethod(np, "dtype", "O", dtype) : NULL;
}

/* The element count of shape (an int or a sequence of ints); -1 with an exception. */
static Py_ssize_t element_count(PyObject *shape)
{
	if (PyLong_Check(shape)) {
		Py_ssize_t n = PyLong_AsSsize_t(shape);
		if (n < 0 && !PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError, "negative dimensions are not allowed");
		return n;
	}
	PyObject *fast = PySequence_Fast(shape, "shape must be an int or a sequence of ints");
	if (!fast)
		return -1;
	Py_ssize_t count = 1;
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
		Py_ssize_t d = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i));
		if (d < 0) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError,
						"negative dimensions are not allowed");
			count = -1;
			break;
		}
		if (d && count > PY_SSIZE_T_MAX / d) {
			PyErr_SetString(PyExc_OverflowError, "the array is too large");
			count = -1;
			break;
		}
		count *= d;
	}
	Py_DECREF(fast);
	return count;
}

/* Bytes of an array of count elements of dt; -1 with an exception. */
static Py_ssize_t bytes_of(Py_ssize_t count, PyObject *dt)
{
	PyObject *isz = PyObject_GetAttrString(dt, "itemsize");
	Py_ssize_t itemsize = isz ? PyLong_AsSsize_t(isz) : -1;
	Py_XDECREF(isz);
	if (itemsize < 0)
		return -1;
	if (itemsize && count > PY_SSIZE_T_MAX / itemsize) {
		PyErr_SetString(PyExc_OverflowError, "the array is too large");
		return -1;
	}
	return count * itemsize;
}

Py_ssize_t vadpy_ndarray_nbytes(PyObject *shape, PyObject *dtype)
{
	Py_ssize_t count = element_count(shape);
	if (count < 0)
		return -1;
	PyObject *dt = as_dtype(dtype);
	if (!dt)
		return -1;
	Py_ssize_t n = bytes_of(count, dt);
	Py_DECREF(dt);
	return n;
}

PyObject *vadpy_ndarray_view(PyObject *range, PyObject *shape, PyObject *dtype)
{
	PyObject *dt = as_dtype(dtype);
	if (!dt)
		return NULL;
	Py_ssize_t count = shape && shape != Py_None ? element_count(shape) : -1;
	PyObject *arr = NULL;
	if (count >= 0 || !shape || shape == Py_None) {
		Py_ssize_t nbytes = count >= 0 ? bytes_of(count, dt) : 0;
		if (nbytes >= 0 && nbytes > PyObject_Length(range) && !PyErr_Occurred())
			PyErr_Format(PyExc_ValueError,
				     "an array of %zd bytes does not fit the range's %zd bytes",
				     nbytes, PyObject_Length(range));
		else if (nbytes >= 0 && !PyErr_Occurred())
			arr = PyObject_CallMethod(numpy(), "frombuffer", "OOn", range, dt, count);
	}
	Py_DECREF(dt);
	if (arr && shape && shape != Py_None) {
		PyObject *shaped = PyObject_CallMethod(arr, "reshape", "(O)", shape);
		Py_DECREF(arr);
		arr = shaped;
	}
	return arr;
}

PyObject *vadpy_range_of(PyObject *obj)
{
	for (int depth = 0; obj && depth < 64; depth++) {
		if (PyObject_TypeCheck(obj, &vadpy_range_type))
			return obj;
		if (PyMemoryView_Check(obj)) {
			obj = PyMemoryView_GET_BUFFER(obj)->obj;
			continue;
		}
		PyObject *base = PyObject_GetAttrString(obj, "base");
		if (!base) {
			PyErr_Clear();
			break;
		}
		Py_DECREF(base); /* obj keeps its base alive */
		obj = base == Py_None ? NULL : base;
	}
	PyErr_SetString(PyExc_TypeError, "the object is not backed by a vad.Range");
	return NULL;
}

/* ---- methods --------------------------------------------------------------------------- */

const char vadpy_doc_range_ndarray[] =
    "ndarray($self, /, shape=None, dtype='uint8')\n--\n\n"
    "A NumPy array over the range's memory (no copy): shape elements of dtype from its\n"
    "start (None: as many as fit the whole range). Needs NumPy. The array exports the\n"
    "range's buffer, so free() raises BufferError until the array is gone.";

PyObject *vadpy_range_ndarray(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"shape", "dtype", NULL};
	PyObject *shape = Py_None, *dtype = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:ndarray", kwlist, &shape, &dtype))
		return NULL;
	PyObject *u8 = NULL;
	if (!dtype && !(dtype = u8 = PyUnicode_FromString("uint8")))
		return NULL;
	PyObject *arr = vadpy_ndarray_view(self, shape, dtype);
	Py_XDECREF(u8);
	return arr;
}

const char vadpy_doc_ndarray[] =
    "ndarray($self, /, shape, dtype='float64', arena=None)\n--\n\n"
    "Allocate a range for an array of shape and dtype and return a zero-filled NumPy\n"
    "array over it (no copy). Its range is vad.range_of(array): share it with\n"
    "vad.range_of(array).share(); it is freed when the array is garbage-collected.\n"
    "Needs NumPy.";

/* Parse (first, shape, dtype='float64'[, arena]) and call alloc or attach. */
static PyObject *range_for_array(PyObject *self, PyObject *args, PyObject *kw, int attach,
				 PyObject **shape, PyObject **dtype)
{
	static char *alloc_kw[] = {"shape", "dtype", "arena", NULL};
	static char *attach_kw[] = {"token", "shape", "dtype", NULL};
	PyObject *token = NULL, *arena = Py_None;
	*dtype = NULL;
	int ok = attach ? PyArg_ParseTupleAndKeywords(args, kw, "UO|O:attach_ndarray", attach_kw,
						      &token, shape, dtype)
			: PyArg_ParseTupleAndKeywords(args, kw, "O|OO:ndarray", alloc_kw, shape,
						      dtype, &arena);
	if (!ok)
		return NULL;
	if (!*dtype && !(*dtype = PyUnicode_InternFromString("float64")))
		return NULL;
	Py_INCREF(*dtype);
	Py_ssize_t nbytes = vadpy_ndarray_nbytes(*shape, *dtype);
	if (nbytes < 0) {
		Py_DECREF(*dtype);
		return NULL;
	}
	PyObject *r = attach
			  ? PyObject_CallMethod(self, "attach", "O", token)
			  : PyObject_CallMethod(self, "alloc", "nnO", nbytes, (Py_ssize_t)0, arena);
	if (!r)
		Py_DECREF(*dtype);
	return r;
}

static PyObject *array_over(PyObject *self, PyObject *args, PyObject *kw, int attach)
{
	PyObject *shape, *dtype;
	PyObject *r = range_for_array(self, args, kw, attach, &shape, &dtype);
	if (!r)
		return NULL;
	/* On failure the Range goes with its last reference and is freed. */
	PyObject *arr = vadpy_ndarray_view(r, shape, dtype);
	Py_DECREF(dtype);
	Py_DECREF(r);
	return arr;
}

PyObject *vadpy_client_ndarray(PyObject *self, PyObject *args, PyObject *kw)
{
	return array_over(self, args, kw, 0);
}

const char vadpy_doc_attach_ndarray[] =
    "attach_ndarray($self, /, token, shape, dtype='float64')\n--\n\n"
    "Attach the range behind token (see attach) and return a NumPy array of shape and\n"
    "dtype over its memory (no copy): the writer's array and this one are the same\n"
    "bytes. Raises ValueError if the array does not fit the range. Needs NumPy.";

PyObject *vadpy_client_attach_ndarray(PyObject *self, PyObject *args, PyObject *kw)
{
	return array_over(self, args, kw, 1);
}
