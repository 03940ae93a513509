/* Canonical numbering (`_native.canonical_numbering`): the last step of every automaton
 * build, coarsest byte classes numbered by their smallest byte and states in breadth-first
 * order from the start, visiting each state's transitions in class order.
 *
 * Two builds of equal languages must give identical arrays (artifacts are cached by
 * content), so both numberings are canonical; `automaton/canonical.py` says why each rule
 * holds. A schema's grammar numbers a few dozen small terminal automata, and numpy's
 * column deduplication and renumbering were ~0.1 ms of fixed cost each.
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

/* Coarsest classes of `trans` (n rows, w columns) under `class_of_byte`: `new_cob` gets
 * each byte's merged class, numbered by smallest byte, and `rep` the column that
 * represents each merged class. Returns the number of merged classes. `same` (w) and
 * `label` (w) are scratch. */
static Py_ssize_t coarsest(const int32_t *trans, Py_ssize_t n, Py_ssize_t w,
                           const int32_t *class_of_byte, int32_t *new_cob, int32_t *rep,
                           int32_t *same, int32_t *label, uint64_t *hash) {
    for (Py_ssize_t c = 0; c < w; c++) {
        uint64_t h = 0x9E3779B97F4A7C15ull;
        for (Py_ssize_t s = 0; s < n; s++) h = (h ^ (uint32_t)trans[s * w + c]) * 0x100000001B3ull;
        hash[c] = h;
        same[c] = (int32_t)c;
        for (Py_ssize_t d = 0; d < c; d++) {
            if (same[d] != d || hash[d] != h) continue;
            Py_ssize_t s = 0;
            while (s < n && trans[s * w + c] == trans[s * w + d]) s++;
            if (s == n) {
                same[c] = (int32_t)d;
                break;
            }
        }
        label[c] = -1;
    }
    Py_ssize_t count = 0;
    for (int b = 0; b < 256; b++) {
        int32_t group = same[class_of_byte[b]];
        if (label[group] < 0) {
            label[group] = (int32_t)count;
            rep[count++] = class_of_byte[b];
        }
        new_cob[b] = label[group];
    }
    return count;
}

static PyObject *canonical_numbering(PyObject *Py_UNUSED(m), PyObject *const *args,
                                     Py_ssize_t nargs) {
    if (check_nargs(nargs, 4, "canonical_numbering(trans, accepting, start, class_of_byte)") < 0)
        return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Table tables[3];
    memset(tables, 0, sizeof tables);
    int32_t *narrow = NULL, *out = NULL, *new_id = NULL, *queue = NULL, *scratch = NULL;
    int32_t cob[256], cob2[256];
    uint64_t *hash = NULL;
    uint8_t *flags = NULL;
    PyObject *result = NULL;
    if (take_int32(args[0], &tables[0], 2, -1, -1, "trans") < 0) goto done;
    Py_ssize_t n = tables[0].n, w = tables[0].width;
    if (take_flags(args[1], &tables[1], n, "accepting") < 0 ||
        take_int32(args[3], &tables[2], 1, 0, w, "class_of_byte") < 0)
        goto done;
    if (tables[2].n != 256 || start < 0 || start >= n) {
        PyErr_SetString(PyExc_ValueError,
                        "canonical_numbering: class_of_byte has 256 entries, start names a state");
        goto done;
    }
    const int32_t *trans = tables[0].view.buf;
    const uint8_t *accepting = tables[1].view.buf;
    scratch = PyMem_Malloc(((size_t)w * 3 + 1) * sizeof(int32_t));
    hash = PyMem_Malloc(((size_t)w + 1) * sizeof(uint64_t));
    narrow = PyMem_Malloc(((size_t)n * (size_t)w + 1) * sizeof(int32_t));
    new_id = PyMem_Malloc(((size_t)n + 1) * sizeof(int32_t));
    queue = PyMem_Malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!scratch || !hash || !narrow || !new_id || !queue) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *rep = scratch, *same = scratch + w, *label = scratch + 2 * w;
    Py_ssize_t k = coarsest(trans, n, w, tables[2].view.buf, cob, rep, same, label, hash);
    for (Py_ssize_t s = 0; s < n; s++)
        for (Py_ssize_t c = 0; c < k; c++) narrow[s * k + c] = trans[s * w + rep[c]];
    /* Breadth first from the start, each state's moves in class order. */
    Py_ssize_t tail = bfs_number(narrow, n, k, start, new_id, queue);
    out = PyMem_Malloc(((size_t)tail * (size_t)k + 1) * sizeof(int32_t));
    flags = PyMem_Malloc((size_t)tail + 1);
    if (!out || !flags) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < tail; i++) {
        const int32_t *row = narrow + (Py_ssize_t)queue[i] * k;
        for (Py_ssize_t c = 0; c < k; c++) out[i * k + c] = row[c] >= 0 ? new_id[row[c]] : -1;
        flags[i] = accepting[queue[i]] != 0;
    }
    Py_ssize_t width = k;
    if (tail < n) {
        /* Unreachable states may have kept classes apart: merge again. Merging equal
         * columns never changes the order found (a merged class's targets were already
         * reached through its smaller-byte twin), so no second walk is needed. */
        width = coarsest(out, tail, k, cob, cob2, rep, same, label, hash);
        for (Py_ssize_t i = 0; i < tail; i++)
            for (Py_ssize_t c = 0; c < width; c++) narrow[i * width + c] = out[i * k + rep[c]];
        memcpy(out, narrow, (size_t)tail * (size_t)width * sizeof(int32_t));
        memcpy(cob, cob2, sizeof(cob));
    }
    PyObject *rows = bytearray_of(out, (size_t)tail * (size_t)width * sizeof(int32_t));
    PyObject *classes = rows ? bytearray_of(cob, sizeof(cob)) : NULL;
    PyObject *accepts = classes ? bytearray_of(flags, (size_t)tail) : NULL;
    if (accepts) {
        result = Py_BuildValue("(NNNnn)", rows, classes, accepts, tail, width);
    } else {
        Py_XDECREF(rows);
        Py_XDECREF(classes);
    }
done:
    release_tables(tables, 3);
    PyMem_Free(narrow);
    PyMem_Free(out);
    PyMem_Free(new_id);
    PyMem_Free(queue);
    PyMem_Free(scratch);
    PyMem_Free(hash);
    PyMem_Free(flags);
    return result;
}

static PyMethodDef methods[] = {
    {"canonical_numbering", (PyCFunction)(void (*)(void))canonical_numbering, METH_FASTCALL,
     "canonical_numbering(trans, accepting, start, class_of_byte) -> (trans, class_of_byte, "
     "accepting, num_states, num_classes)\n\nThe DFA (int32[S, C], one-byte flags[S], "
     "int32[256] into C classes) with coarsest classes numbered by smallest byte and states "
     "in breadth-first order from `start`; unreachable states dropped. Bytearrays of "
     "int32[N, K], int32[256] and N flags."},
    {NULL, NULL, 0, NULL},
};

int add_canonical(PyObject *module) { return PyModule_AddFunctions(module, methods); }
