/* Reachability in a transition table (`_native.mark_reached`, `bfs_order`): the trims every
 * automaton construction ends with, and the breadth-first numbering of a finished DFA.
 *
 * Forward from the start (reachable) and backward from the accepting states
 * (coreachable), O(states x classes). As Python breadth-first searches these were most of
 * what was left of an intersection's cost once its product loop was C (23 of 32 ms over
 * three schemas' terminals), and numpy rounds would need one round per link of a chain.
 * Only the Python C API is used: arrays come in through the buffer protocol.
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

PyDoc_STRVAR(mark_reached_doc,
             "mark_reached(trans, marks, backward, /)\n--\n\n"
             "Extend `marks` (uint8[S] or bool[S], writable; the states marked at the start are "
             "the roots) to every state reached from them along `trans` (int32[S, C], "
             "C-contiguous, -1: none), forward or, with `backward`, against the transitions.");

static PyObject *mark_reached(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "mark_reached(trans, marks, backward) takes 3 arguments");
        return NULL;
    }
    int backward = PyObject_IsTrue(args[2]);
    if (backward < 0) return NULL;
    Py_buffer tv, mv;
    if (PyObject_GetBuffer(args[0], &tv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &mv, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&tv);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *queue = NULL, *ptr = NULL, *preds = NULL;
    if (tv.ndim != 2 || !kernel_is_int(&tv, 4) || mv.itemsize != 1 || mv.len != tv.shape[0]) {
        PyErr_SetString(PyExc_ValueError,
                        "mark_reached: trans must be int32[S, C], marks one byte per state");
        goto done;
    }
    const int32_t *trans = tv.buf;
    uint8_t *mark = mv.buf;
    Py_ssize_t n = tv.shape[0], w = tv.shape[1];
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "mark_reached: too many states");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n * w; i++) {
        if (trans[i] < -1 || trans[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "mark_reached: a transition names no state");
            goto done;
        }
    }
    queue = PyMem_Malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!queue) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t head = 0, tail = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        mark[s] = mark[s] != 0;
        if (mark[s]) queue[tail++] = (int32_t)s;
    }
    if (!backward) {
        while (head < tail) {
            const int32_t *row = trans + (Py_ssize_t)queue[head++] * w;
            for (Py_ssize_t c = 0; c < w; c++) {
                int32_t t = row[c];
                if (t >= 0 && !mark[t]) {
                    mark[t] = 1;
                    queue[tail++] = t;
                }
            }
        }
    } else {
        /* Predecessors by target (counting sort), then the same search on them. */
        ptr = PyMem_Calloc((size_t)n + 2, sizeof(int32_t));
        Py_ssize_t edges = 0;
        for (Py_ssize_t i = 0; i < n * w; i++) edges += trans[i] >= 0;
        preds = PyMem_Malloc(((size_t)edges + 1) * sizeof(int32_t));
        if (!ptr || !preds) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n * w; i++)
            if (trans[i] >= 0) ptr[trans[i] + 2]++;
        for (Py_ssize_t s = 0; s < n; s++) ptr[s + 2] += ptr[s + 1];
        for (Py_ssize_t s = 0; s < n; s++)
            for (Py_ssize_t c = 0; c < w; c++) {
                int32_t t = trans[s * w + c];
                if (t >= 0) preds[ptr[t + 1]++] = (int32_t)s;
            }
        /* ptr[t]..ptr[t + 1] now spans the predecessors of t. */
        while (head < tail) {
            int32_t t = queue[head++];
            for (int32_t i = ptr[t]; i < ptr[t + 1]; i++) {
                int32_t s = preds[i];
                if (!mark[s]) {
                    mark[s] = 1;
                    queue[tail++] = s;
                }
            }
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(queue);
    PyMem_Free(ptr);
    PyMem_Free(preds);
    PyBuffer_Release(&mv);
    PyBuffer_Release(&tv);
    return result;
}

PyDoc_STRVAR(bfs_order_doc,
             "bfs_order(trans, start, new_id, /) -> int\n--\n\n"
             "Number the states reachable from `start` breadth first, each state's transitions "
             "visited in class order: write each state's number into `new_id` (int32[S], "
             "writable; -1 for states not reached) and return how many were reached.");

/* The canonical numbering every finished DFA gets: equal languages must give identical
 * arrays. As a Python loop over the live edges it was a tenth of a terminal's build. */
static PyObject *bfs_order(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "bfs_order(trans, start, new_id) takes 3 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_buffer tv, nv;
    if (PyObject_GetBuffer(args[0], &tv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(args[2], &nv, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&tv);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *queue = NULL;
    if (tv.ndim != 2 || !kernel_is_int(&tv, 4) || !kernel_is_int(&nv, 4) || nv.len != tv.shape[0] * 4) {
        PyErr_SetString(PyExc_ValueError,
                        "bfs_order: trans must be int32[S, C], new_id int32[S]");
        goto done;
    }
    const int32_t *trans = tv.buf;
    int32_t *new_id = nv.buf;
    Py_ssize_t n = tv.shape[0], w = tv.shape[1];
    if (n >= INT32_MAX || start < 0 || start >= n) {
        PyErr_SetString(PyExc_ValueError, "bfs_order: the start names no state");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n * w; i++) {
        if (trans[i] < -1 || trans[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "bfs_order: a transition names no state");
            goto done;
        }
    }
    queue = PyMem_Malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!queue) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t s = 0; s < n; s++) new_id[s] = -1;
    Py_ssize_t head = 0, tail = 0;
    new_id[start] = 0;
    queue[tail++] = (int32_t)start;
    while (head < tail) {
        const int32_t *row = trans + (Py_ssize_t)queue[head++] * w;
        for (Py_ssize_t c = 0; c < w; c++) {
            int32_t t = row[c];
            if (t >= 0 && new_id[t] < 0) {
                new_id[t] = (int32_t)tail;
                queue[tail++] = t;
            }
        }
    }
    result = PyLong_FromSsize_t(tail);
done:
    PyMem_Free(queue);
    PyBuffer_Release(&nv);
    PyBuffer_Release(&tv);
    return result;
}

static PyMethodDef methods[] = {
    {"bfs_order", (PyCFunction)(void (*)(void))bfs_order, METH_FASTCALL, bfs_order_doc},
    {"mark_reached", (PyCFunction)(void (*)(void))mark_reached, METH_FASTCALL, mark_reached_doc},
    {NULL, NULL, 0, NULL},
};

int add_reach(PyObject *module) { return PyModule_AddFunctions(module, methods); }
