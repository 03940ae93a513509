/* What every C file of `fsmcompile._native` shares: the check of a buffer's item type and
 * shape (buffer views), one growable int32 array, one flat int64 -> int64 hash map, the
 * compile's deadline, and argument helpers. Only the Python C API and the C library are
 * used. Each helper that can fail returns -1 (or NULL) with a Python exception set. */
#ifndef FSMCOMPILE_SUPPORT_H
#define FSMCOMPILE_SUPPORT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

/* ---- buffer views ----------------------------------------------------------------------- */

/* Whether a buffer holds native signed integers of `size` bytes ('i', 'l' or 'q', maybe
 * after a byte-order mark); for size 1, bools or bytes. */
static inline int kernel_is_int(const Py_buffer *view, Py_ssize_t size) {
    const char *f = view->format;
    if (!f || view->itemsize != size) return 0;
    if (*f == '@' || *f == '=' || *f == '<') f++;
    if (f[0] == '\0' || f[1] != '\0') return 0;
    if (size == 1) return f[0] == '?' || f[0] == 'b' || f[0] == 'B';
    return f[0] == 'i' || f[0] == 'l' || f[0] == 'q';
}

/* A C-contiguous table handed in, its rows and row width (1 for a vector). */
typedef struct {
    Py_buffer view;
    int held;
    Py_ssize_t n, width;
} Table;

/* Take `obj` as a C-contiguous int32 table of `ndim` dimensions whose entries lie in
 * [lo, hi) (hi < 0: the table's own row count); rows and width past int32 ids refused. */
int take_int32(PyObject *obj, Table *t, int ndim, int64_t lo, int64_t hi, const char *what);

/* Take `obj` as `n` one-byte flags. */
int take_flags(PyObject *obj, Table *t, Py_ssize_t n, const char *what);

/* Release the tables of `tables[0..count)` that were taken. */
void release_tables(Table *tables, int count);

/* Take `obj` as a C-contiguous 1-D buffer of native integers of `itemsize` bytes (for 1,
 * bytes or bools), writable if asked; the error names `what`. */
int take_vector(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable,
                const char *what);

/* A table an entry point reads by name: the attribute of a tables object, or the keyword
 * argument, `name`, a C-contiguous 1-D buffer of native integers of `itemsize` bytes. */
typedef struct {
    const char *name;
    Py_ssize_t itemsize;
} TableSpec;

/* The attribute `name` of `source` (for a dict, its item): a new reference, or NULL with
 * a TypeError saying that `owner` lacks it. */
PyObject *named_item(PyObject *source, const char *name, const char *owner);

/* Hold the buffer of every table of `specs[0..count)` from `source` into `views`, each
 * checked for its item type and dimensions; *held counts those to release. Errors name
 * `owner` and the table. */
int take_named_vectors(PyObject *source, const TableSpec *specs, int count, Py_buffer *views,
                       int *held, const char *owner);

/* The integer `name` of `source`, which must fit an int32. */
int take_named_int(PyObject *source, const char *name, int32_t *out, const char *owner);

/* A bytearray holding `size` bytes of `data` (which may be NULL when size is 0). */
PyObject *bytearray_of(const void *data, size_t size);

/* ---- one growable int32 array ------------------------------------------------------------- */

typedef struct {
    int32_t *items;
    Py_ssize_t len, cap;
} Vec;

/* Room for `extra` more items, doubling. */
int vec_reserve(Vec *v, Py_ssize_t extra);

static inline int vec_push(Vec *v, int32_t value) {
    if (v->len == v->cap && vec_reserve(v, 1) < 0) return -1;
    v->items[v->len++] = value;
    return 0;
}

void vec_free(Vec *v);

/* Grow `*p` (items of `size` bytes, `*cap` of them) to hold at least `need`, doubling: for
 * arrays of other item types (rows of several words, structs). */
static inline int kernel_grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *q = PyMem_Realloc(*p, cap2 * size);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = cap2;
    return 0;
}

/* ---- one flat hash map: int64 keys >= 0 -> int64 values ----------------------------------- */

/* Open addressing with linear probing, at most half full. Content-keyed tables (sets of
 * states, runs of ids) use it as hash -> id, probing key + 1 on a hash collision. */
typedef struct {
    int64_t *keys; /* key + 1; 0 marks an empty slot */
    int64_t *vals;
    size_t mask;
    size_t len;
} Map;

/* An empty map of at least `slots` slots (rounded up to a power of two). */
int map_init(Map *m, size_t slots);
void map_free(Map *m);
/* Forget every key, keeping the slots. */
void map_clear(Map *m);
/* Insert or overwrite. */
int map_put(Map *m, int64_t key, int64_t val);

static inline size_t map_slot(const Map *m, int64_t key) {
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & m->mask;
}

/* 1 and the value of `key` into *val, or 0 when absent. */
static inline int map_get(const Map *m, int64_t key, int64_t *val) {
    size_t i = map_slot(m, key);
    for (;;) {
        int64_t k = m->keys[i];
        if (k == 0) return 0;
        if (k == key + 1) {
            *val = m->vals[i];
            return 1;
        }
        i = (i + 1) & m->mask;
    }
}

/* ---- the deadline ------------------------------------------------------------------------- */

/* The clock `time.monotonic()` reads on Linux, in seconds, so a deadline the Python
 * computed from it means the same instant here. */
static inline double kernel_monotonic_s(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Whether `deadline` (a `time.monotonic()` value, +inf for none) has passed. */
static inline int kernel_past(double deadline) {
    return !isinf(deadline) && kernel_monotonic_s() > deadline;
}

/* ---- breadth-first numbering ------------------------------------------------------------- */

/* Number the states of `trans` (n rows, w columns, -1 dead) reached from `start`, breadth
 * first, each row's moves in column order: new_id[s] (-1 when unreached), queue[i] the
 * state numbered i (both of n entries). Returns how many were reached. */
Py_ssize_t bfs_number(const int32_t *trans, Py_ssize_t n, Py_ssize_t w, Py_ssize_t start,
                      int32_t *new_id, int32_t *queue);

/* ---- arguments ---------------------------------------------------------------------------- */

/* Whether a fast call got `expected` arguments; a TypeError naming `usage` when not. */
int check_nargs(Py_ssize_t nargs, Py_ssize_t expected, const char *usage);

/* Integer arguments args[0..count) into values: -1 with the error set when one is not. */
int take_longs(PyObject *const *args, Py_ssize_t count, long long *values);

/* dst |= src over n words: most of a mask union's time is these ORs of 16 KB rows (128k
 * tokens), so x86-64 gets an AVX2 clone picked at load time where the CPU has it. */
void or_words(uint32_t *restrict dst, const uint32_t *restrict src, size_t n);

#endif
