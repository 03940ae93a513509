/* Reachability in a transition table (`_native.mark_reached`, `bfs_order`, `reach_or`): the
 * trims every automaton construction ends with, the breadth-first numbering of a finished
 * DFA, and the bits each state can reach (a grammar lexer's exit sets).
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
    result = PyLong_FromSsize_t(bfs_number(trans, n, w, start, new_id, queue));
done:
    PyMem_Free(queue);
    PyBuffer_Release(&nv);
    PyBuffer_Release(&tv);
    return result;
}

PyDoc_STRVAR(reach_or_doc,
             "reach_or(trans, seeds, out, /)\n--\n\n"
             "Write into `out` (int64[S, W], writable) the OR of the `seeds` rows (int64[S, W], "
             "bitsets) of every state each state reaches along `trans` (int32[S, C], "
             "C-contiguous, -1: none), itself included.");

/* A lexer's exit sets are the labels each state can still reach (index/cfg/exits.py):
 * one pass over the strongly connected components in reverse topological order (Tarjan's,
 * iteratively), every member of a component sharing its bits. As a Python loop over
 * integer bitsets it was a fifth of a lazy grammar index's prologue. */
static PyObject *reach_or(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "reach_or(trans, seeds, out) takes 3 arguments");
        return NULL;
    }
    Py_buffer tv, sv, ov;
    if (PyObject_GetBuffer(args[0], &tv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &sv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&tv);
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &ov, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&sv);
        PyBuffer_Release(&tv);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *index = NULL, *low = NULL, *stack = NULL, *frame_v = NULL, *frame_c = NULL;
    uint8_t *on_stack = NULL;
    uint64_t *bits = NULL;
    if (tv.ndim != 2 || !kernel_is_int(&tv, 4) || sv.ndim != 2 || !kernel_is_int(&sv, 8) ||
        ov.ndim != 2 || !kernel_is_int(&ov, 8) || sv.shape[0] != tv.shape[0] ||
        ov.shape[0] != tv.shape[0] || ov.shape[1] != sv.shape[1]) {
        PyErr_SetString(PyExc_ValueError,
                        "reach_or: trans must be int32[S, C], seeds and out int64[S, W]");
        goto done;
    }
    const int32_t *trans = tv.buf;
    const uint64_t *seeds = sv.buf;
    uint64_t *out = ov.buf;
    Py_ssize_t n = tv.shape[0], w = tv.shape[1], words = sv.shape[1];
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "reach_or: too many states");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n * w; i++) {
        if (trans[i] < -1 || trans[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "reach_or: a transition names no state");
            goto done;
        }
    }
    size_t cells = (size_t)n + 1;
    index = PyMem_Malloc(cells * sizeof(int32_t));
    low = PyMem_Malloc(cells * sizeof(int32_t));
    stack = PyMem_Malloc(cells * sizeof(int32_t));
    frame_v = PyMem_Malloc(cells * sizeof(int32_t));
    frame_c = PyMem_Malloc(cells * sizeof(int32_t));
    on_stack = PyMem_Calloc(cells, 1);
    bits = PyMem_Malloc(((size_t)words + 1) * sizeof(uint64_t));
    if (!index || !low || !stack || !frame_v || !frame_c || !on_stack || !bits) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t s = 0; s < n; s++) index[s] = -1;
    memset(out, 0, (size_t)(n * words) * sizeof(uint64_t));
    int32_t counter = 0;
    Py_ssize_t sp = 0;
    for (Py_ssize_t root = 0; root < n; root++) {
        if (index[root] >= 0) continue;
        Py_ssize_t top = 0;
        index[root] = low[root] = counter++;
        stack[sp++] = (int32_t)root;
        on_stack[root] = 1;
        frame_v[top] = (int32_t)root;
        frame_c[top++] = 0;
        while (top > 0) {
            int32_t v = frame_v[top - 1];
            Py_ssize_t c = frame_c[top - 1];
            int descended = 0;
            while (c < w) {
                int32_t t = trans[(Py_ssize_t)v * w + c++];
                if (t < 0) continue;
                if (index[t] < 0) {
                    frame_c[top - 1] = (int32_t)c;
                    index[t] = low[t] = counter++;
                    stack[sp++] = t;
                    on_stack[t] = 1;
                    frame_v[top] = t;
                    frame_c[top++] = 0;
                    descended = 1;
                    break;
                }
                if (on_stack[t] && index[t] < low[v]) low[v] = index[t];
            }
            if (descended) continue;
            if (low[v] == index[v]) {
                /* The component is stack[k:sp]; its successors outside are finished. */
                Py_ssize_t k = sp;
                do k--; while (stack[k] != v);
                memset(bits, 0, (size_t)words * sizeof(uint64_t));
                for (Py_ssize_t j = k; j < sp; j++) {
                    const uint64_t *seed = seeds + (Py_ssize_t)stack[j] * words;
                    for (Py_ssize_t b = 0; b < words; b++) bits[b] |= seed[b];
                    on_stack[stack[j]] = 0;
                }
                for (Py_ssize_t j = k; j < sp; j++) {
                    const int32_t *row = trans + (Py_ssize_t)stack[j] * w;
                    for (Py_ssize_t cc = 0; cc < w; cc++) {
                        int32_t t = row[cc];
                        if (t < 0 || on_stack[t]) continue; /* a member's row is still zero */
                        const uint64_t *done_bits = out + (Py_ssize_t)t * words;
                        for (Py_ssize_t b = 0; b < words; b++) bits[b] |= done_bits[b];
                    }
                }
                for (Py_ssize_t j = k; j < sp; j++)
                    memcpy(out + (Py_ssize_t)stack[j] * words, bits,
                           (size_t)words * sizeof(uint64_t));
                sp = k;
            }
            top--;
            if (top > 0 && low[v] < low[frame_v[top - 1]]) low[frame_v[top - 1]] = low[v];
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(index);
    PyMem_Free(low);
    PyMem_Free(stack);
    PyMem_Free(frame_v);
    PyMem_Free(frame_c);
    PyMem_Free(on_stack);
    PyMem_Free(bits);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&tv);
    return result;
}

static PyMethodDef methods[] = {
    {"bfs_order", (PyCFunction)(void (*)(void))bfs_order, METH_FASTCALL, bfs_order_doc},
    {"mark_reached", (PyCFunction)(void (*)(void))mark_reached, METH_FASTCALL, mark_reached_doc},
    {"reach_or", (PyCFunction)(void (*)(void))reach_or, METH_FASTCALL, reach_or_doc},
    {NULL, NULL, 0, NULL},
};

int add_reach(PyObject *module) { return PyModule_AddFunctions(module, methods); }
