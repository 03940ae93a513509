/* The shared parts of the subset and product walks (subset.h): the set-of-states index,
 * the new rows' buffers, the limits argument and the result tuple. */
#include "subset.h"

#include <stdlib.h>
#include <string.h>

void out_free(Out *o) {
    PyMem_Free(o->rows);
    PyMem_Free(o->acc);
}


/* ---- interning sets: sorted int64 sequence -> state id --------------------------------- */

static uint64_t hash_of(const int64_t *key, Py_ssize_t len) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)len;
    for (Py_ssize_t i = 0; i < len; i++) h = (h ^ mix64((uint64_t)key[i] + h)) * 0x100000001b3ULL;
    return mix64(h);
}

static int sets_rehash(SetIndex *s, size_t slots) {
    int32_t *fresh = PyMem_Malloc(slots * sizeof(int32_t));
    if (!fresh) {
        PyErr_NoMemory();
        return -1;
    }
    memset(fresh, 0xff, slots * sizeof(int32_t));
    size_t mask = slots - 1;
    for (size_t id = 0; id < s->count; id++) {
        size_t at = s->hash[id] & mask;
        while (fresh[at] >= 0) at = (at + 1) & mask;
        fresh[at] = (int32_t)id;
    }
    PyMem_Free(s->slots);
    s->slots = fresh;
    s->mask = mask;
    return 0;
}

int sets_init(SetIndex *s) {
    if (kernel_grow((void **)&s->start, &s->start_cap, 1, sizeof(size_t)) < 0) return -1;
    s->start[0] = 0;
    return sets_rehash(s, 1024);
}

/* The id of `key` (`len` members), added as the next state if new (*added set): -1 on
 * error. `key` must not point into the index (adding may move it). */
int64_t sets_intern(SetIndex *s, const int64_t *key, Py_ssize_t len, int *added) {
    uint64_t h = hash_of(key, len);
    size_t at = h & s->mask;
    for (int32_t id; (id = s->slots[at]) >= 0; at = (at + 1) & s->mask) {
        size_t lo = s->start[id], hi = s->start[id + 1];
        if (s->hash[id] == h && hi - lo == (size_t)len &&
            memcmp(s->elems + lo, key, (size_t)len * sizeof(int64_t)) == 0) {
            *added = 0;
            return id;
        }
    }
    size_t end = s->start[s->count];
    if (kernel_grow((void **)&s->elems, &s->elems_cap, end + (size_t)len + 1, sizeof(int64_t)) < 0 ||
        kernel_grow((void **)&s->start, &s->start_cap, s->count + 2, sizeof(size_t)) < 0 ||
        kernel_grow((void **)&s->hash, &s->hash_cap, s->count + 1, sizeof(uint64_t)) < 0)
        return -1;
    int64_t id = (int64_t)s->count++;
    memcpy(s->elems + end, key, (size_t)len * sizeof(int64_t));
    s->start[id + 1] = end + (size_t)len;
    s->hash[id] = h;
    s->slots[at] = (int32_t)id;
    *added = 1;
    if (2 * s->count > s->mask && sets_rehash(s, 2 * (s->mask + 1)) < 0) return -1;
    return id;
}

/* Copy key `id` into `*into` (grown as needed): its length, or -1 on error. */
Py_ssize_t sets_copy(const SetIndex *s, size_t id, int64_t **into, size_t *cap) {
    size_t lo = s->start[id], len = s->start[id + 1] - lo;
    if (kernel_grow((void **)into, cap, len + 1, sizeof(int64_t)) < 0) return -1;
    memcpy(*into, s->elems + lo, len * sizeof(int64_t));
    return (Py_ssize_t)len;
}

void sets_free(SetIndex *s) {
    PyMem_Free(s->elems);
    PyMem_Free(s->start);
    PyMem_Free(s->hash);
    PyMem_Free(s->slots);
}

static int cmp_int64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Sort `v` and drop repeats (a Python set made a sorted tuple): the new length. */
Py_ssize_t sort_unique(int64_t *v, Py_ssize_t n) {
    if (n < 2) return n;
    if (n <= 16) {
        for (Py_ssize_t i = 1; i < n; i++) {
            int64_t x = v[i];
            Py_ssize_t j = i;
            for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
            v[j] = x;
        }
    } else {
        qsort(v, (size_t)n, sizeof(int64_t), cmp_int64);
    }
    Py_ssize_t m = 1;
    for (Py_ssize_t i = 1; i < n; i++)
        if (v[i] != v[m - 1]) v[m++] = v[i];
    return m;
}

/* ---- arguments --------------------------------------------------------------------------- */

/* limits = (max_states, deadline, set members left, reserve base). */
int take_limits(PyObject *obj, Limits *l) {
    memset(l, 0, sizeof *l);
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "limits must be (max_states, deadline, members_left, reserve_base)");
        return -1;
    }
    l->max_states = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, 0));
    l->deadline = PyFloat_AsDouble(PyTuple_GET_ITEM(obj, 1));
    l->members_left = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, 2));
    l->reserve_base = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, 3));
    return PyErr_Occurred() ? -1 : 0;
}

/* (rows: bytearray of int32[count, width], accepting: bytearray of bool[count], stop,
 * value, members), plus `extra` when given (stolen). */
PyObject *result_of(const Out *o, const Limits *l, PyObject *extra) {
    size_t n = o->count;
    PyObject *rows = PyByteArray_FromStringAndSize(
        o->rows ? (const char *)o->rows : "", (Py_ssize_t)(n * (size_t)o->width * 4));
    PyObject *acc = PyByteArray_FromStringAndSize(o->acc ? (const char *)o->acc : "",
                                                  (Py_ssize_t)n);
    PyObject *result = NULL;
    if (rows && acc)
        result = extra ? Py_BuildValue("(NNiLLN)", rows, acc, l->stop, l->value, l->members,
                                       extra)
                       : Py_BuildValue("(NNiLL)", rows, acc, l->stop, l->value, l->members);
    else {
        Py_XDECREF(rows);
        Py_XDECREF(acc);
        Py_XDECREF(extra);
    }
    return result;
}
