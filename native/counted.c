/* Counted lexemes (a string's `maxLength`): the items each token adds to a lexeme and the
 * rows of tokens that fit each room left. */
#include "module.h"

#include <string.h>

/* fitting_rows(grown, rows): rows is int32 [R, W] zeros, W the words of len(grown) tokens;
 * row r becomes the tokens whose `grown` items are at most r: what a counted lexeme with
 * room for r more items lets through. One pass over the tokens and one over the rows,
 * for every room at once: packing a row per room from 128k counts cost ~40 us a room,
 * a tail of the first walks of schemas with `maxLength`. */
static PyObject *fitting_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fitting_rows(grown, rows) takes two arguments");
        return NULL;
    }
    Py_buffer grown, rows;
    if (PyObject_GetBuffer(args[0], &grown, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &rows, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&grown);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t vocab = grown.len / 4, words = (vocab + 31) / 32;
    Py_ssize_t num_rows = words ? rows.len / 4 / words : 0;
    if (grown.itemsize != 4 || rows.itemsize != 4 || !words || !num_rows ||
        rows.len != num_rows * words * 4) {
        PyErr_SetString(PyExc_ValueError, "fitting_rows: expected int32 counts and [R, W] rows");
        goto done;
    }
    /* First each token in the row of its own count (too long for every smaller room), then
     * suffix ORs make row r the tokens too long for room r, then invert. */
    const int32_t *count = grown.buf;
    uint32_t *out = rows.buf;
    for (Py_ssize_t t = 0; t < vocab; t++) {
        int32_t g = count[t];
        if (g <= 0) continue;
        Py_ssize_t r = g > num_rows ? num_rows - 1 : g - 1;
        out[r * words + (t >> 5)] |= 1u << (t & 31);
    }
    for (Py_ssize_t r = num_rows - 2; r >= 0; r--)
        or_words(out + r * words, out + (r + 1) * words, (size_t)words);
    for (Py_ssize_t i = 0; i < num_rows * words; i++) out[i] = ~out[i];
    if (vocab % 32) { /* no token past the vocabulary fits */
        for (Py_ssize_t r = 0; r < num_rows; r++)
            out[r * words + words - 1] &= (1u << (vocab % 32)) - 1;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&rows);
    PyBuffer_Release(&grown);
    return result;
}

/* items_grown(moves, starts, num_classes, class_of_byte, parent_at, level_bytes,
 *             token_positions, token_ids, state, out): per text token, the items
 * (`char_start` moves) its bytes add to the lexeme at lexer `state` until the lexeme cannot
 * go on, into int32 `out` (zeros). One pass over the trie in level order (a parent before
 * its children): the count a counted lexeme's bound is checked against, once per lexeme
 * and process; numpy took 4-5 ms a lexeme for Llama 3's 274k nodes. */
static PyObject *items_grown(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    enum { MOVES, STARTS, CLASS_OF_BYTE, PARENT_AT, LEVEL_BYTES, POSITIONS, TOKEN_IDS, OUT };
    static const int sizes[] = {4, 1, 4, 8, 1, 8, 8, 4};
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "items_grown takes ten arguments");
        return NULL;
    }
    PyObject *arrays[8] = {args[0], args[1], args[3], args[4], args[5], args[6], args[7], args[9]};
    long long num_classes = PyLong_AsLongLong(args[2]);
    long long state = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer views[8];
    int held = 0;
    PyObject *result = NULL;
    int32_t *cur = NULL, *count = NULL;
    for (; held < 8; held++) {
        int flags = held == OUT ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(arrays[held], &views[held], flags) < 0) goto done;
        if (views[held].itemsize != sizes[held]) {
            PyErr_Format(PyExc_TypeError, "items_grown: argument %d has items of %zd bytes",
                         held, views[held].itemsize);
            held++;
            goto done;
        }
    }
    Py_ssize_t num_moves = views[MOVES].len / 4, num_nodes = views[PARENT_AT].len / 8;
    Py_ssize_t num_tokens = views[TOKEN_IDS].len / 8, vocab = views[OUT].len / 4;
    const int32_t *moves = views[MOVES].buf, *class_of = views[CLASS_OF_BYTE].buf;
    const uint8_t *starts = views[STARTS].buf, *level_bytes = views[LEVEL_BYTES].buf;
    const int64_t *parent_at = views[PARENT_AT].buf, *positions = views[POSITIONS].buf;
    const int64_t *token_ids = views[TOKEN_IDS].buf;
    int32_t *out = views[OUT].buf;
    if (num_classes <= 0 || views[STARTS].len != num_moves || views[CLASS_OF_BYTE].len != 1024 ||
        views[LEVEL_BYTES].len != num_nodes || views[POSITIONS].len / 8 != num_tokens ||
        num_nodes < 1 || state < 0 || (state + 1) * num_classes > num_moves) {
        PyErr_SetString(PyExc_ValueError, "items_grown: inconsistent tables");
        goto done;
    }
    cur = PyMem_Malloc((size_t)num_nodes * sizeof(int32_t));
    count = PyMem_Malloc((size_t)num_nodes * sizeof(int32_t));
    if (!cur || !count) {
        PyErr_NoMemory();
        goto done;
    }
    cur[0] = (int32_t)state; /* -1 below: the lexeme ended at an ancestor */
    count[0] = 0;
    for (Py_ssize_t i = 1; i < num_nodes; i++) {
        int64_t parent = parent_at[i];
        if (parent < 0 || parent >= i) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a parent after its child");
            goto done;
        }
        int32_t q = cur[parent];
        if (q < 0) {
            cur[i] = -1;
            count[i] = count[parent];
            continue;
        }
        int32_t cls = class_of[level_bytes[i]];
        int64_t at = (int64_t)q * num_classes + cls;
        if (cls < 0 || cls >= num_classes || at >= num_moves) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a move out of the table");
            goto done;
        }
        int32_t next = moves[at];
        cur[i] = next;
        count[i] = count[parent] + (next >= 0 && starts[at]);
        if (next >= 0 && (int64_t)(next + 1) * num_classes > num_moves) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a move out of the table");
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < num_tokens; k++) {
        if (token_ids[k] < 0 || token_ids[k] >= vocab || positions[k] < 0 ||
            positions[k] >= num_nodes) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a token out of range");
            goto done;
        }
        out[token_ids[k]] = count[positions[k]];
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(cur);
    PyMem_Free(count);
    while (--held >= 0) PyBuffer_Release(&views[held]);
    return result;
}


static PyMethodDef methods[] = {
    {"fitting_rows", (PyCFunction)(void (*)(void))fitting_rows, METH_FASTCALL,
     "fitting_rows(grown, rows): row r of int32 [R, W] zeros becomes the tokens whose "
     "grown items are at most r"},
    {"items_grown", (PyCFunction)(void (*)(void))items_grown, METH_FASTCALL,
     "items_grown(moves, starts, num_classes, class_of_byte, parent_at, level_bytes, "
     "token_positions, token_ids, state, out): items each token adds to a lexeme"},
    {NULL, NULL, 0, NULL},
};

int add_counted(PyObject *module) { return PyModule_AddFunctions(module, methods); }
