/* Concatenation by gluing (`_native.glue_concat`): fragments whose boundaries never
 * overlap, joined by copying each part's start row into the accepting states before it.
 *
 * The member terminals of a schema's grammar (`"name":` then a value) are built this
 * way, a few dozen a schema; in numpy each glue was a dozen array steps (shifting,
 * merging, dropping the orphaned starts, renumbering), about 0.1 ms, where the arrays
 * hold a few dozen states. `automaton/glue.py` documents the construction and checks
 * nothing here: the caller has checked the no-overlap conditions.
 *
 * Merges run right to left, so a nullable part passes its successor's start row on to
 * its predecessor. A part's start that no transition reaches afterwards is dropped and
 * the states renumbered in order, so state 0 stays the start.
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

#define MAX_PARTS 4096

static PyObject *glue_concat(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (check_nargs(nargs, 1, "glue_concat(parts)") < 0) return NULL;
    PyObject *seq = PySequence_Fast(args[0], "glue_concat: parts must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    Table *tables = NULL;
    int64_t *offset = NULL;
    int32_t *trans = NULL, *merged = NULL, *new_id = NULL;
    uint8_t *accepting = NULL, *incoming = NULL;
    PyObject *result = NULL;
    if (count < 2 || count > MAX_PARTS) {
        PyErr_SetString(PyExc_ValueError, "glue_concat: 2 to 4096 parts");
        goto done;
    }
    tables = PyMem_Calloc((size_t)count * 2, sizeof(Table));
    offset = PyMem_Malloc(((size_t)count + 1) * sizeof(int64_t));
    if (!tables || !offset) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t width = -1;
    offset[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "glue_concat: each part is (trans, accepting)");
            goto done;
        }
        Table *t = &tables[2 * i];
        if (take_int32(PyTuple_GET_ITEM(pair, 0), t, 2, -1, -1, "a part's trans") < 0 ||
            take_flags(PyTuple_GET_ITEM(pair, 1), t + 1, t->n, "a part's accepting") < 0)
            goto done;
        if (t->n == 0 || (width >= 0 && t->width != width)) {
            PyErr_SetString(PyExc_ValueError,
                            "glue_concat: every part has states, over the same classes");
            goto done;
        }
        width = t->width;
        offset[i + 1] = offset[i] + t->n;
        if (offset[i + 1] >= INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "glue_concat: too many states");
            goto done;
        }
    }
    Py_ssize_t total = (Py_ssize_t)offset[count], w = width;
    trans = PyMem_Malloc(((size_t)total * (size_t)w + 1) * sizeof(int32_t));
    merged = PyMem_Malloc(((size_t)w + 1) * sizeof(int32_t));
    new_id = PyMem_Malloc(((size_t)total + 1) * sizeof(int32_t));
    accepting = PyMem_Malloc((size_t)total + 1);
    incoming = PyMem_Calloc((size_t)total + 1, 1);
    if (!trans || !merged || !new_id || !accepting || !incoming) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        const int32_t *src = tables[2 * i].view.buf;
        const uint8_t *acc = tables[2 * i + 1].view.buf;
        int32_t base = (int32_t)offset[i];
        Py_ssize_t n = tables[2 * i].n;
        int32_t *dst = trans + offset[i] * w;
        for (Py_ssize_t k = 0; k < n * w; k++) dst[k] = src[k] >= 0 ? src[k] + base : -1;
        for (Py_ssize_t s = 0; s < n; s++) accepting[offset[i] + s] = acc[s] != 0;
    }
    /* Right to left: the accepting states of part i take part i+1's start row (as merged
     * itself) and its acceptance. A part's accepting states are only written at its step. */
    memcpy(merged, trans + offset[count - 1] * w, (size_t)w * sizeof(int32_t));
    uint8_t merged_accepts = accepting[offset[count - 1]];
    for (Py_ssize_t i = count - 2; i >= 0; i--) {
        const uint8_t *acc = tables[2 * i + 1].view.buf;
        for (Py_ssize_t s = 0; s < tables[2 * i].n; s++) {
            if (!acc[s]) continue;
            int32_t *row = trans + (offset[i] + s) * w;
            for (Py_ssize_t c = 0; c < w; c++)
                if (merged[c] >= 0) row[c] = merged[c];
            accepting[offset[i] + s] = merged_accepts;
        }
        memcpy(merged, trans + offset[i] * w, (size_t)w * sizeof(int32_t));
        merged_accepts = accepting[offset[i]];
    }
    /* Drop the later parts' starts that nothing enters any more. */
    for (Py_ssize_t k = 0; k < total * w; k++)
        if (trans[k] >= 0) incoming[trans[k]] = 1;
    int32_t kept = 0;
    for (Py_ssize_t s = 0; s < total; s++) new_id[s] = kept++;
    for (Py_ssize_t i = 1; i < count; i++)
        if (!incoming[offset[i]]) new_id[offset[i]] = -1;
    kept = 0;
    for (Py_ssize_t s = 0; s < total; s++) {
        if (new_id[s] < 0) continue;
        new_id[s] = kept;
        if (kept != s) {
            memmove(trans + (Py_ssize_t)kept * w, trans + s * w, (size_t)w * sizeof(int32_t));
            accepting[kept] = accepting[s];
        }
        kept++;
    }
    for (Py_ssize_t k = 0; k < (Py_ssize_t)kept * w; k++)
        if (trans[k] >= 0) trans[k] = new_id[trans[k]];
    PyObject *rows = bytearray_of(trans, (size_t)kept * (size_t)w * sizeof(int32_t));
    PyObject *flags = rows ? bytearray_of(accepting, (size_t)kept) : NULL;
    if (flags) result = Py_BuildValue("(NNi)", rows, flags, kept);
    else Py_XDECREF(rows);
done:
    if (tables) release_tables(tables, (int)(2 * count));
    PyMem_Free(tables);
    PyMem_Free(offset);
    PyMem_Free(trans);
    PyMem_Free(merged);
    PyMem_Free(new_id);
    PyMem_Free(accepting);
    PyMem_Free(incoming);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"glue_concat", (PyCFunction)(void (*)(void))glue_concat, METH_FASTCALL,
     "glue_concat(parts) -> (trans, accepting, num_states)\n\nThe parts ((int32[S, C] "
     "transitions, one-byte accepting flags[S]) each, start state 0, at least two) glued "
     "end to start: each part's accepting states take the next part's start row, merged "
     "right to left; starts nothing enters are dropped. Bytearrays of int32[N, C] and "
     "N flags."},
    {NULL, NULL, 0, NULL},
};

int add_glue(PyObject *module) { return PyModule_AddFunctions(module, methods); }
