/* The shared helpers of support.h that are not inline: buffer views, the growable array,
 * the hash map's slow paths, argument checks and the word OR. */
#include "support.h"

#include <stdio.h>
#include <string.h>

#define MAX_IDS (INT32_MAX / 4) /* rows and widths whose ids and -2 - id codes stay int32 */

/* ---- buffer views ----------------------------------------------------------------------- */

int take_int32(PyObject *obj, Table *t, int ndim, int64_t lo, int64_t hi, const char *what) {
    if (PyObject_GetBuffer(obj, &t->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0)
        return -1;
    t->held = 1;
    if (t->view.ndim != ndim || !kernel_is_int(&t->view, 4)) {
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous int32 array of %d dimensions",
                     what, ndim);
        return -1;
    }
    t->n = t->view.shape[0];
    t->width = ndim == 2 ? t->view.shape[1] : 1;
    if (t->n >= MAX_IDS || t->width >= MAX_IDS) {
        PyErr_Format(PyExc_ValueError, "%s is too large", what);
        return -1;
    }
    if (hi < 0) hi = t->n;
    const int32_t *v = t->view.buf;
    for (Py_ssize_t i = 0; i < t->n * t->width; i++) {
        if (v[i] < lo || v[i] >= hi) {
            PyErr_Format(PyExc_ValueError, "%s holds %d, outside [%lld, %lld)", what, (int)v[i],
                         (long long)lo, (long long)hi);
            return -1;
        }
    }
    return 0;
}

int take_flags(PyObject *obj, Table *t, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(obj, &t->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    t->held = 1;
    t->n = t->view.len;
    t->width = 1;
    if (t->view.itemsize != 1 || t->n != n) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd one-byte flags", what, n);
        return -1;
    }
    return 0;
}

void release_tables(Table *tables, int count) {
    for (int i = 0; i < count; i++) {
        if (tables[i].held) PyBuffer_Release(&tables[i].view);
        tables[i].held = 0;
    }
}

int take_vector(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable,
                const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    if (view->ndim != 1 || !kernel_is_int(view, itemsize)) {
        static const char *const kinds[] = {"", "uint8 or bool", "", "", "int32", "", "", "",
                                            "int64"};
        PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous 1-D %s array, got %d-D "
                     "items of %zd bytes ('%s')", what, itemsize <= 8 ? kinds[itemsize] : "?",
                     view->ndim, view->itemsize, view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyObject *named_item(PyObject *source, const char *name, const char *owner) {
    PyObject *item = NULL;
    if (PyDict_Check(source)) {
        item = PyDict_GetItemString(source, name); /* borrowed */
        Py_XINCREF(item);
    } else {
        item = PyObject_GetAttrString(source, name);
        if (!item && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
    }
    if (!item && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s: no table '%s' given", owner, name);
    return item;
}

int take_named_vectors(PyObject *source, const TableSpec *specs, int count, Py_buffer *views,
                       int *held, const char *owner) {
    char what[128];
    for (int i = 0; i < count; i++) {
        PyObject *item = named_item(source, specs[i].name, owner);
        if (!item) return -1;
        snprintf(what, sizeof what, "%s: table '%s'", owner, specs[i].name);
        int taken = take_vector(item, &views[i], specs[i].itemsize, 0, what);
        Py_DECREF(item);
        if (taken < 0) return -1;
        *held = i + 1;
    }
    return 0;
}

int take_named_int(PyObject *source, const char *name, int32_t *out, const char *owner) {
    PyObject *item = named_item(source, name, owner);
    if (!item) return -1;
    long long value = PyLong_AsLongLong(item);
    Py_DECREF(item);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (value < INT32_MIN || value > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %s = %lld does not fit an int32", owner, name, value);
        return -1;
    }
    *out = (int32_t)value;
    return 0;
}

PyObject *bytearray_of(const void *data, size_t size) {
    return PyByteArray_FromStringAndSize(size ? (const char *)data : "", (Py_ssize_t)size);
}

/* ---- one growable int32 array ------------------------------------------------------------- */

int vec_reserve(Vec *v, Py_ssize_t extra) {
    if (v->len + extra <= v->cap) return 0;
    Py_ssize_t cap = v->cap ? v->cap : 256;
    while (cap < v->len + extra) cap *= 2;
    int32_t *items = PyMem_Realloc(v->items, (size_t)cap * sizeof(int32_t));
    if (!items) {
        PyErr_NoMemory();
        return -1;
    }
    v->items = items;
    v->cap = cap;
    return 0;
}

void vec_free(Vec *v) {
    PyMem_Free(v->items);
    v->items = NULL;
    v->len = v->cap = 0;
}

/* ---- the hash map ------------------------------------------------------------------------- */

int map_init(Map *m, size_t slots) {
    size_t cap = 8;
    while (cap < slots) cap *= 2;
    m->keys = PyMem_Calloc(cap, sizeof(int64_t));
    m->vals = PyMem_Malloc(cap * sizeof(int64_t));
    m->mask = cap - 1;
    m->len = 0;
    if (!m->keys || !m->vals) {
        map_free(m);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

void map_free(Map *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->vals);
    m->keys = m->vals = NULL;
}

void map_clear(Map *m) {
    memset(m->keys, 0, (m->mask + 1) * sizeof(int64_t));
    m->len = 0;
}

static int map_grow(Map *m) {
    Map old = *m;
    if (map_init(m, (old.mask + 1) * 2) < 0) {
        *m = old;
        return -1;
    }
    for (size_t i = 0; i <= old.mask; i++) {
        if (old.keys[i]) map_put(m, old.keys[i] - 1, old.vals[i]);
    }
    map_free(&old);
    return 0;
}

int map_put(Map *m, int64_t key, int64_t val) {
    if ((m->len + 1) * 2 > m->mask + 1 && map_grow(m) < 0) return -1;
    size_t i = map_slot(m, key);
    for (;;) {
        int64_t k = m->keys[i];
        if (k == 0) {
            m->keys[i] = key + 1;
            m->vals[i] = val;
            m->len++;
            return 0;
        }
        if (k == key + 1) {
            m->vals[i] = val;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
}

/* ---- arguments ---------------------------------------------------------------------------- */

int check_nargs(Py_ssize_t nargs, Py_ssize_t expected, const char *usage) {
    if (nargs == expected) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", usage, expected, nargs);
    return -1;
}

int take_longs(PyObject *const *args, Py_ssize_t count, long long *values) {
    for (Py_ssize_t i = 0; i < count; i++) {
        values[i] = PyLong_AsLongLong(args[i]);
        if (values[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

Py_ssize_t bfs_number(const int32_t *trans, Py_ssize_t n, Py_ssize_t w, Py_ssize_t start,
                      int32_t *new_id, int32_t *queue) {
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
    return tail;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void or_words(uint32_t *restrict dst, const uint32_t *restrict src, size_t n) {
    for (size_t w = 0; w < n; w++) dst[w] |= src[w];
}
