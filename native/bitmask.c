/* Writing a mask row into a caller's bitmask: every matcher's every token. */
#include "parser.h"

/* ---- writing a row into a caller's bitmask -------------------------------------------- */

/* `count` words into row `row` of an int32 [W'] or [B, W'] bitmask, zeroing the words past
 * them. numpy's copy of one row cost about a microsecond of view creation and dispatch a
 * token; this is a memcpy. -1 with an exception set when the bitmask does not fit. */
int write_words(PyObject *bitmask, long long row, const int32_t *from, Py_ssize_t count) {
    Py_buffer dst;
    if (PyObject_GetBuffer(bitmask, &dst, PyBUF_WRITABLE | PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return -1;
    int done = -1;
    Py_ssize_t rows = dst.ndim == 2 ? dst.shape[0] : 1;
    Py_ssize_t width = dst.ndim >= 1 ? dst.shape[dst.ndim - 1] : 0;
    if (!kernel_is_int(&dst, 4) || (dst.ndim != 1 && dst.ndim != 2) || count > width) {
        PyErr_SetString(PyExc_ValueError, "write_row: expected int32 rows, src no wider");
    } else if (row < 0 || row >= rows) {
        if (dst.ndim == 1)
            PyErr_Format(PyExc_ValueError, "row %lld out of range for a 1-D bitmask: expected 0",
                         row);
        else
            PyErr_Format(PyExc_ValueError, "row %lld out of range: expected 0..%zd", row,
                         rows - 1);
    } else {
        char *base = (char *)dst.buf + (dst.ndim == 2 ? row * dst.strides[0] : 0);
        Py_ssize_t step = dst.strides[dst.ndim - 1];
        if (step == 4) {
            memcpy(base, from, (size_t)count * 4);
            memset(base + count * 4, 0, (size_t)(width - count) * 4);
        } else {
            for (Py_ssize_t i = 0; i < width; i++) {
                int32_t value = i < count ? from[i] : 0;
                memcpy(base + i * step, &value, 4);
            }
        }
        done = 0;
    }
    PyBuffer_Release(&dst);
    return done;
}

/* write_row(bitmask, row, src): src into row `row` of an int32 [W'] or [B, W'] bitmask,
 * zeroing the words past src. numpy's copy of one row cost about a microsecond of view
 * creation and dispatch a token; this is a memcpy. */
static PyObject *write_row(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write_row(bitmask, row, src) takes three arguments");
        return NULL;
    }
    long long row = PyLong_AsLongLong(args[1]);
    if (row == -1 && PyErr_Occurred()) return NULL;
    Py_buffer src;
    if (PyObject_GetBuffer(args[2], &src, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    int done = src.itemsize == 4 ? write_words(args[0], row, src.buf, src.len / 4) : -1;
    if (src.itemsize != 4)
        PyErr_SetString(PyExc_ValueError, "write_row: expected int32 rows, src no wider");
    PyBuffer_Release(&src);
    return done < 0 ? NULL : Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"write_row", (PyCFunction)(void (*)(void))write_row, METH_FASTCALL,
     "write_row(bitmask, row, src): src into one row of an int32 bitmask, zeros past it"},
    {NULL, NULL, 0, NULL},
};

int add_bitmask(PyObject *module) { return PyModule_AddFunctions(module, methods); }
