/* Token ids into packed bitmask rows (`set_token_*`): bit t % 32 of int32 word
 * t / 32, the layout of `bits.py`; and one 64-bit hash per row, to group equal rows.
 *
 * A grammar index packs its dense token groups (most of a string interior, ~120k tokens
 * each with Llama 3) into rows. Through numpy that was a gather of the ids, a scatter
 * into a bool matrix a byte per token and `packbits`: a few passes over 128k-byte rows
 * per group, about a tenth of a typical schema's compile. Here each id is one OR.
 * Only the Python C API is used: arrays come in through the buffer protocol.
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer out;
    uint32_t *words;
    Py_ssize_t num_rows, num_words;
} Rows;

/* Take `obj` as the writable int32[R, W] C-contiguous rows to OR bits into. */
static int rows_open(Rows *rows, PyObject *obj) {
    if (PyObject_GetBuffer(obj, &rows->out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        return -1;
    if (rows->out.ndim != 2 || !kernel_is_int(&rows->out, 4)) {
        PyErr_SetString(PyExc_ValueError, "out must be a C-contiguous int32[R, W] array");
        PyBuffer_Release(&rows->out);
        return -1;
    }
    rows->words = rows->out.buf;
    rows->num_rows = rows->out.shape[0];
    rows->num_words = rows->out.shape[1];
    return 0;
}

/* Take `obj` as a C-contiguous int64 vector; its length in *count. */
static int ids_open(Py_buffer *view, PyObject *obj, const char *name, Py_ssize_t *count) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->ndim != 1 || !kernel_is_int(view, 8)) {
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous int64 vector", name);
        PyBuffer_Release(view);
        return -1;
    }
    *count = view->shape[0];
    return 0;
}

/* Whether bit `token` of row `row` lies inside the rows (an error set when not). */
static inline int fits(const Rows *rows, int64_t row, int64_t token) {
    if (row < 0 || row >= rows->num_rows || token < 0 || (token >> 5) >= rows->num_words) {
        PyErr_Format(PyExc_ValueError, "bit (row %lld, token %lld) lies outside the %zd x %zd rows",
                     (long long)row, (long long)token, rows->num_rows, rows->num_words * 32);
        return 0;
    }
    return 1;
}

static inline void set_bit(Rows *rows, int64_t row, int64_t token) {
    rows->words[row * rows->num_words + (token >> 5)] |= (uint32_t)1 << (token & 31);
}

PyDoc_STRVAR(set_token_bits_doc,
             "set_token_bits(out, rows, tokens, /)\n--\n\n"
             "Set bit tokens[i] of row rows[i] of `out` (int32[R, W]) for every i.");

static PyObject *set_token_bits(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "set_token_bits(out, rows, tokens) takes 3 arguments");
        return NULL;
    }
    Rows rows;
    Py_buffer rv, tv;
    Py_ssize_t n_rows, n_tokens;
    if (rows_open(&rows, args[0]) < 0) return NULL;
    if (ids_open(&rv, args[1], "rows", &n_rows) < 0) {
        PyBuffer_Release(&rows.out);
        return NULL;
    }
    if (ids_open(&tv, args[2], "tokens", &n_tokens) < 0) {
        PyBuffer_Release(&rv);
        PyBuffer_Release(&rows.out);
        return NULL;
    }
    PyObject *result = NULL;
    if (n_rows != n_tokens) {
        PyErr_SetString(PyExc_ValueError, "rows and tokens must have one length");
        goto done;
    }
    const int64_t *row = rv.buf, *token = tv.buf;
    for (Py_ssize_t i = 0; i < n_tokens; i++) /* all checked first: nothing half written */
        if (!fits(&rows, row[i], token[i])) goto done;
    for (Py_ssize_t i = 0; i < n_tokens; i++) set_bit(&rows, row[i], token[i]);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&tv);
    PyBuffer_Release(&rv);
    PyBuffer_Release(&rows.out);
    return result;
}

PyDoc_STRVAR(set_token_runs_doc,
             "set_token_runs(out, tokens, starts, stops, rows, /)\n--\n\n"
             "Set the bits of tokens[starts[r]:stops[r]] in row rows[r] of `out` (int32[R, W]) "
             "for every run r.");

static PyObject *set_token_runs(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "set_token_runs(out, tokens, starts, stops, rows) takes 5 arguments");
        return NULL;
    }
    Rows rows;
    Py_buffer views[4];
    Py_ssize_t counts[4];
    static const char *names[4] = {"tokens", "starts", "stops", "rows"};
    if (rows_open(&rows, args[0]) < 0) return NULL;
    int opened = 0;
    PyObject *result = NULL;
    for (; opened < 4; opened++)
        if (ids_open(&views[opened], args[opened + 1], names[opened], &counts[opened]) < 0)
            goto done;
    if (counts[1] != counts[2] || counts[1] != counts[3]) {
        PyErr_SetString(PyExc_ValueError, "starts, stops and rows must have one length");
        goto done;
    }
    const int64_t *token = views[0].buf, *start = views[1].buf, *stop = views[2].buf,
                  *row = views[3].buf;
    for (Py_ssize_t r = 0; r < counts[1]; r++) {
        if (start[r] < 0 || stop[r] < start[r] || stop[r] > counts[0]) {
            PyErr_Format(PyExc_ValueError, "run %zd [%lld, %lld) lies outside the %zd tokens", r,
                         (long long)start[r], (long long)stop[r], counts[0]);
            goto done;
        }
        for (int64_t i = start[r]; i < stop[r]; i++) /* all checked first: nothing half written */
            if (!fits(&rows, row[r], token[i])) goto done;
    }
    for (Py_ssize_t r = 0; r < counts[1]; r++)
        for (int64_t i = start[r]; i < stop[r]; i++) set_bit(&rows, row[r], token[i]);
    result = Py_NewRef(Py_None);
done:
    while (opened > 0) PyBuffer_Release(&views[--opened]);
    PyBuffer_Release(&rows.out);
    return result;
}

PyDoc_STRVAR(row_hashes_doc,
             "row_hashes(rows, out, /)\n--\n\n"
             "Write a 64-bit hash of each row of `rows` (a C-contiguous 2-D array of 4- or "
             "8-byte items) into `out` (uint64[R], writable). Equal rows hash equal; callers "
             "check the rows a hash groups.");

/* A row's words mixed one at a time (multiply-xorshift), then avalanched: grouping the
 * few hundred distinct masks of an index by hash was a numpy weighted sum over every
 * word, a temporary the size of the rows (~1 ms for 280 rows of Llama 3's 4,009 words). */
static PyObject *row_hashes(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "row_hashes(rows, out) takes 2 arguments");
        return NULL;
    }
    Py_buffer rv, ov;
    if (PyObject_GetBuffer(args[0], &rv, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &ov, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&rv);
        return NULL;
    }
    PyObject *result = NULL;
    if (rv.ndim != 2 || (rv.itemsize != 4 && rv.itemsize != 8) || ov.len != rv.shape[0] * 8) {
        PyErr_SetString(PyExc_ValueError,
                        "row_hashes: rows must be a 2-D array of 4- or 8-byte items, out "
                        "uint64 with one value per row");
        goto done;
    }
    Py_ssize_t num_rows = rv.shape[0], row_bytes = rv.shape[1] * rv.itemsize;
    const unsigned char *data = rv.buf;
    uint64_t *out = ov.buf;
    for (Py_ssize_t r = 0; r < num_rows; r++) {
        const unsigned char *row = data + r * row_bytes;
        uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)row_bytes;
        Py_ssize_t i = 0;
        for (; i + 8 <= row_bytes; i += 8) {
            uint64_t w;
            memcpy(&w, row + i, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
        }
        if (i < row_bytes) { /* a last 4-byte item */
            uint32_t w;
            memcpy(&w, row + i, 4);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
        }
        h ^= h >> 33;
        h *= 0xC4CEB9FE1A85EC53ull;
        h ^= h >> 33;
        out[r] = h;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&ov);
    PyBuffer_Release(&rv);
    return result;
}

static PyMethodDef methods[] = {
    {"row_hashes", (PyCFunction)(void (*)(void))row_hashes, METH_FASTCALL, row_hashes_doc},
    {"set_token_bits", (PyCFunction)(void (*)(void))set_token_bits, METH_FASTCALL,
     set_token_bits_doc},
    {"set_token_runs", (PyCFunction)(void (*)(void))set_token_runs, METH_FASTCALL,
     set_token_runs_doc},
    {NULL, NULL, 0, NULL},
};

int add_bits(PyObject *module) { return PyModule_AddFunctions(module, methods); }
