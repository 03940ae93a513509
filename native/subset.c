/* The state loops of `subset.py`'s constructions (`fsmcompile.automaton._subset`).
 *
 * Intersections and differences (keep x complement(drop)), unions whose branches start
 * alike, and concatenations and repetitions whose boundary overlaps all walk
 * (state x byte class) one cell at a time and intern each new state. In Python, with a
 * dict of tuples, that walk was most of building a JSON Schema's terminal automata, which
 * is 15-20% of a typical compile. Each function here is the walk of one construction and
 * numbers new states exactly as the Python did: breadth first, in order of discovery,
 * each row's classes left to right. The caller prepares the compressed tables and
 * finishes the new rows with the same numpy steps as before.
 *
 * A state of a product is a pair (int64 key a * |right| + b); a state of a union,
 * concatenation or repetition is a sorted sequence of int64 members, interned in one
 * open-addressing table whose keys lie end to end in an arena, in state order (the arena
 * is the BFS queue).
 *
 * Budget: the caller passes its limits (max_states, a time.monotonic() deadline or inf,
 * the subset-state members it has left, the base its state reserves count from). The walk
 * checks them where the Python loop called `Budget.reserve`, `reserve_set` and `tick`,
 * stops at the first one broken and says which and the count; the caller then makes that
 * same Budget call, which raises the same error.
 *
 * Only the Python C API is used: arrays come in through the buffer protocol.
 */
#include "kernel.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RESERVE_EVERY 256 /* new states between state-budget checks, as in Python */
#define TICK_EVERY 64     /* states walked between clock reads (`Budget.tick`) */
#define MAX_STATES_HARD (INT32_MAX / 4) /* state ids and -2 - id codes stay int32 */

enum { STOP_NONE = 0, STOP_STATES = 1, STOP_MEMBERS = 2, STOP_DEADLINE = 3 };

/* ---- budget ---------------------------------------------------------------------------- */

typedef struct {
    long long max_states, members_left, reserve_base;
    double deadline; /* +inf: none */
    long long members;
    int stop;
    long long value;
} Limits;

static int past_deadline(Limits *l) {
    if (!kernel_past(l->deadline)) return 0;
    l->stop = STOP_DEADLINE;
    return 1;
}

/* `Budget.reserve(reserve_base + id)` for every RESERVE_EVERY-th new state: 1 to stop. */
static int reserve_state(Limits *l, int64_t id) {
    if (id % RESERVE_EVERY) return 0;
    long long num = l->reserve_base + id;
    if (num > l->max_states) {
        l->stop = STOP_STATES;
        l->value = num;
        return 1;
    }
    return past_deadline(l);
}

/* `Budget.reserve_set(count)` for a new subset state: 1 to stop. */
static int reserve_members(Limits *l, Py_ssize_t count) {
    l->members += count;
    if (l->members <= l->members_left) return 0;
    l->stop = STOP_MEMBERS;
    l->value = l->members;
    return 1;
}

/* Whether state `id` is past what int32 codes hold (only with an absurd max_states). */
static int too_many(int64_t id) {
    if (id < MAX_STATES_HARD) return 0;
    PyErr_SetString(PyExc_MemoryError, "too many automaton states for int32 state ids");
    return 1;
}

/* `Budget.tick()` before walking state `i`: 1 to stop. */
static int tick(Limits *l, Py_ssize_t i) {
    return (i + 1) % TICK_EVERY == 0 && past_deadline(l);
}

/* ---- growable buffers ------------------------------------------------------------------ */

/* The new states' rows and accepting flags, appended in state order. */
typedef struct {
    int32_t *rows;
    uint8_t *acc;
    size_t rows_cap, acc_cap, count;
    Py_ssize_t width;
} Out;

/* Room for state `count`'s row: its cells, or NULL (exception set). */
static int32_t *out_row(Out *o) {
    if (kernel_grow((void **)&o->rows, &o->rows_cap, (o->count + 1) * (size_t)o->width + 1,
             sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&o->acc, &o->acc_cap, o->count + 1, 1) < 0)
        return NULL;
    return o->rows + o->count * (size_t)o->width;
}

static void out_free(Out *o) {
    PyMem_Free(o->rows);
    PyMem_Free(o->acc);
}

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* ---- interning pairs: int64 key -> state id -------------------------------------------- */

typedef struct {
    int64_t *keys;  /* per slot, -1 empty */
    int32_t *ids;   /* per slot */
    int64_t *queue; /* key of each state, in id order */
    size_t mask, count, queue_cap;
} PairIndex;

static int pairs_rehash(PairIndex *m, size_t slots) {
    int64_t *keys = PyMem_Malloc(slots * sizeof(int64_t));
    int32_t *ids = PyMem_Malloc(slots * sizeof(int32_t));
    if (!keys || !ids) {
        PyMem_Free(keys);
        PyMem_Free(ids);
        PyErr_NoMemory();
        return -1;
    }
    memset(keys, 0xff, slots * sizeof(int64_t));
    size_t mask = slots - 1;
    for (size_t id = 0; id < m->count; id++) {
        size_t at = mix64((uint64_t)m->queue[id]) & mask;
        while (keys[at] >= 0) at = (at + 1) & mask;
        keys[at] = m->queue[id];
        ids[at] = (int32_t)id;
    }
    PyMem_Free(m->keys);
    PyMem_Free(m->ids);
    m->keys = keys;
    m->ids = ids;
    m->mask = mask;
    return 0;
}

/* The id of `key`, added as the next state if new (*added set): -1 on error. */
static int64_t pairs_intern(PairIndex *m, int64_t key, int *added) {
    size_t at = mix64((uint64_t)key) & m->mask;
    while (m->keys[at] >= 0) {
        if (m->keys[at] == key) {
            *added = 0;
            return m->ids[at];
        }
        at = (at + 1) & m->mask;
    }
    if (kernel_grow((void **)&m->queue, &m->queue_cap, m->count + 1, sizeof(int64_t)) < 0) return -1;
    int64_t id = (int64_t)m->count++;
    m->queue[id] = key;
    m->keys[at] = key;
    m->ids[at] = (int32_t)id;
    *added = 1;
    if (2 * m->count > m->mask && pairs_rehash(m, 2 * (m->mask + 1)) < 0) return -1;
    return id;
}

static void pairs_free(PairIndex *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->ids);
    PyMem_Free(m->queue);
}

/* ---- interning sets: sorted int64 sequence -> state id --------------------------------- */

typedef struct {
    int64_t *elems; /* the keys end to end, in id order */
    size_t *start;  /* key `id` is elems[start[id] .. start[id + 1]) */
    uint64_t *hash; /* per id */
    int32_t *slots; /* per slot: id, -1 empty */
    size_t elems_cap, start_cap, hash_cap, mask, count;
} SetIndex;

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

static int sets_init(SetIndex *s) {
    if (kernel_grow((void **)&s->start, &s->start_cap, 1, sizeof(size_t)) < 0) return -1;
    s->start[0] = 0;
    return sets_rehash(s, 1024);
}

/* The id of `key` (`len` members), added as the next state if new (*added set): -1 on
 * error. `key` must not point into the index (adding may move it). */
static int64_t sets_intern(SetIndex *s, const int64_t *key, Py_ssize_t len, int *added) {
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
static Py_ssize_t sets_copy(const SetIndex *s, size_t id, int64_t **into, size_t *cap) {
    size_t lo = s->start[id], len = s->start[id + 1] - lo;
    if (kernel_grow((void **)into, cap, len + 1, sizeof(int64_t)) < 0) return -1;
    memcpy(*into, s->elems + lo, len * sizeof(int64_t));
    return (Py_ssize_t)len;
}

static void sets_free(SetIndex *s) {
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
static Py_ssize_t sort_unique(int64_t *v, Py_ssize_t n) {
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

/* A transition table int32[S, C] (targets in [-1, S) unless `any_target`), or flags. */
typedef struct {
    Py_buffer view;
    int held;
    Py_ssize_t n, width;
} Arg;

/* Take a C-contiguous int32 table of `ndim` dimensions whose entries lie in [lo, hi)
 * (hi < 0: the table's own row count). */
static int take_int32(PyObject *obj, Arg *a, int ndim, int64_t lo, int64_t hi, const char *what) {
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0)
        return -1;
    a->held = 1;
    if (a->view.ndim != ndim || !kernel_is_int(&a->view, 4)) {
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous int32 array of %d dimensions",
                     what, ndim);
        return -1;
    }
    a->n = a->view.shape[0];
    a->width = ndim == 2 ? a->view.shape[1] : 1;
    if (a->n >= MAX_STATES_HARD) {
        PyErr_Format(PyExc_ValueError, "%s is too large", what);
        return -1;
    }
    if (hi < 0) hi = a->n;
    const int32_t *v = a->view.buf;
    for (Py_ssize_t i = 0; i < a->n * a->width; i++) {
        if (v[i] < lo || v[i] >= hi) {
            PyErr_Format(PyExc_ValueError, "%s holds %d, outside [%lld, %lld)", what, (int)v[i],
                         (long long)lo, (long long)hi);
            return -1;
        }
    }
    return 0;
}

/* Take one-byte flags, `n` of them. */
static int take_flags(PyObject *obj, Arg *a, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    a->held = 1;
    a->n = a->view.len;
    if (a->view.itemsize != 1 || a->n != n) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd one-byte flags", what, n);
        return -1;
    }
    return 0;
}

static void release(Arg *args, int count) {
    for (int i = 0; i < count; i++)
        if (args[i].held) PyBuffer_Release(&args[i].view);
}

/* limits = (max_states, deadline, set members left, reserve base). */
static int take_limits(PyObject *obj, Limits *l) {
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
static PyObject *result_of(const Out *o, const Limits *l, PyObject *extra) {
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

/* ---- product of two DFAs --------------------------------------------------------------- */

static int walk_pair(const Arg *a, const Arg *b, const uint8_t *a_acc, const uint8_t *b_acc,
                     Limits *l, Out *o) {
    Py_ssize_t w = o->width;
    int64_t n_b = b->n;
    const int32_t *ta = a->view.buf, *tb = b->view.buf;
    PairIndex m;
    memset(&m, 0, sizeof m);
    int added, status = -1;
    if (pairs_rehash(&m, 1024) < 0 || pairs_intern(&m, 0, &added) < 0) goto done;
    for (size_t i = 0; i < m.count; i++) {
        if (tick(l, (Py_ssize_t)i)) break;
        int64_t key = m.queue[i], sa = key / n_b, sb = key % n_b;
        const int32_t *ra = ta + sa * w, *rb = tb + sb * w;
        int32_t *row = out_row(o);
        if (!row) goto done;
        o->acc[o->count++] = a_acc[sa] && b_acc[sb];
        for (Py_ssize_t c = 0; c < w; c++) {
            int32_t x = ra[c], y = rb[c];
            if (x < 0 || y < 0) {
                row[c] = -1;
                continue;
            }
            int64_t id = pairs_intern(&m, (int64_t)x * n_b + y, &added);
            if (id < 0 || (added && too_many(id))) goto done;
            if (added && reserve_state(l, id)) break;
            row[c] = (int32_t)id;
        }
        if (l->stop) break;
    }
    status = 0;
done:
    pairs_free(&m);
    return status;
}

PyDoc_STRVAR(product_pair_doc,
             "product_pair(a, b, a_accepting, b_accepting, limits, /)\n--\n\n"
             "The product of two DFAs over the same classes (int32[S, C] tables, -1 dead; "
             "bool[S] flags), from the pair of starts, numbered breadth first. Returns (rows, "
             "accepting, stop, value, members): rows int32[N, C] and accepting bool[N] as "
             "bytearrays; stop 0, or 1 max_states (value: the count), 3 deadline.");

static PyObject *product_pair(PyObject *Py_UNUSED(module), PyObject *const *args,
                              Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "product_pair takes 5 arguments");
        return NULL;
    }
    Arg in[4];
    memset(in, 0, sizeof in);
    Out o;
    memset(&o, 0, sizeof o);
    Limits l;
    PyObject *result = NULL;
    if (take_limits(args[4], &l) < 0 || take_int32(args[0], &in[0], 2, -1, -1, "a") < 0 ||
        take_int32(args[1], &in[1], 2, -1, -1, "b") < 0 ||
        take_flags(args[2], &in[2], in[0].n, "a_accepting") < 0 ||
        take_flags(args[3], &in[3], in[1].n, "b_accepting") < 0)
        goto done;
    if (in[0].width != in[1].width || in[0].n == 0 || in[1].n == 0) {
        PyErr_SetString(PyExc_ValueError, "product_pair: tables must be non-empty, equally wide");
        goto done;
    }
    o.width = in[0].width;
    if (walk_pair(&in[0], &in[1], in[2].view.buf, in[3].view.buf, &l, &o) == 0)
        result = result_of(&o, &l, NULL);
done:
    out_free(&o);
    release(in, 4);
    return result;
}

/* ---- union of several DFAs ------------------------------------------------------------- */

static int walk_union(const Arg *t, const uint8_t *acc, const Arg *starts, Limits *l, Out *o) {
    Py_ssize_t w = o->width;
    const int32_t *tab = t->view.buf, *first = starts->view.buf;
    SetIndex s;
    memset(&s, 0, sizeof s);
    int64_t *cur = NULL, *next = NULL;
    size_t cur_cap = 0, next_cap = 0;
    int added, status = -1;
    if (sets_init(&s) < 0 || kernel_grow((void **)&cur, &cur_cap, (size_t)starts->n + 1, 8) < 0 ||
        kernel_grow((void **)&next, &next_cap, (size_t)starts->n + 1, 8) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < starts->n; i++) cur[i] = first[i];
    if (sets_intern(&s, cur, starts->n, &added) < 0) goto done;
    for (size_t i = 0; i < s.count; i++) {
        if (tick(l, (Py_ssize_t)i)) break;
        Py_ssize_t len = sets_copy(&s, i, &cur, &cur_cap);
        int32_t *row = out_row(o);
        if (len < 0 || !row || kernel_grow((void **)&next, &next_cap, (size_t)len + 1, 8) < 0)
            goto done;
        uint8_t accepting = 0;
        for (Py_ssize_t k = 0; k < len; k++) accepting |= acc[cur[k]];
        o->acc[o->count++] = accepting;
        for (Py_ssize_t c = 0; c < w; c++) {
            Py_ssize_t n = 0;
            for (Py_ssize_t k = 0; k < len; k++) {
                int32_t x = tab[cur[k] * w + c];
                if (x >= 0) next[n++] = x;
            }
            if (n == 0) {
                row[c] = -1;
            } else if (n == 1) {
                row[c] = -2 - (int32_t)next[0]; /* into the copy of the one branch left */
            } else {
                int64_t id = sets_intern(&s, next, n, &added);
                if (id < 0 || (added && too_many(id))) goto done;
                if (added && (reserve_members(l, n) || reserve_state(l, id))) break;
                row[c] = (int32_t)id;
            }
        }
        if (l->stop) break;
    }
    status = 0;
done:
    PyMem_Free(cur);
    PyMem_Free(next);
    sets_free(&s);
    return status;
}

PyDoc_STRVAR(product_union_doc,
             "product_union(table, accepting, starts, limits, /)\n--\n\n"
             "The union of the branches stacked in `table` (int32[S, C], each branch's "
             "targets already shifted to its rows) starting at `starts` (int32[K], "
             "ascending): states are the sets of branch states still alive, numbered "
             "breadth first; a cell where one branch is left holds -2 - its state. Returns "
             "(rows, accepting, stop, value, members) as product_pair, stop 2 meaning the "
             "set-member budget (value: the members counted).");

static PyObject *product_union(PyObject *Py_UNUSED(module), PyObject *const *args,
                               Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "product_union takes 4 arguments");
        return NULL;
    }
    Arg in[3];
    memset(in, 0, sizeof in);
    Out o;
    memset(&o, 0, sizeof o);
    Limits l;
    PyObject *result = NULL;
    if (take_limits(args[3], &l) < 0 || take_int32(args[0], &in[0], 2, -1, -1, "table") < 0 ||
        take_flags(args[1], &in[1], in[0].n, "accepting") < 0 ||
        take_int32(args[2], &in[2], 1, 0, in[0].n, "starts") < 0)
        goto done;
    const int32_t *starts = in[2].view.buf;
    for (Py_ssize_t i = 1; i < in[2].n; i++) {
        if (starts[i] <= starts[i - 1]) {
            PyErr_SetString(PyExc_ValueError, "product_union: starts must ascend");
            goto done;
        }
    }
    o.width = in[0].width;
    if (walk_union(&in[0], in[1].view.buf, &in[2], &l, &o) == 0) result = result_of(&o, &l, NULL);
done:
    out_free(&o);
    release(in, 3);
    return result;
}

/* ---- concatenation with an overlapping boundary ---------------------------------------- */

typedef struct {
    const int32_t *ta, *tb;
    const uint8_t *a_acc, *b_acc;
    int64_t n_a, n_b;
    SetIndex s;
    int64_t *key;
    size_t key_cap;
} Concat;

/* The state (na, {bs}) (`bs` sorted, distinct, `len` of them; copied first into key[1:]):
 * na itself where the copy of `first` stands for it, n_a + b where the copy of `second`
 * does, -1 for nothing, else n_a + n_b + its subset id. -2 to stop, -3 on error. */
static int64_t concat_state(Concat *k, int64_t na, Py_ssize_t len, Limits *l) {
    const int64_t *bs = k->key + 1;
    if (na >= 0) {
        if (k->a_acc[na] ? len == 1 && bs[0] == 0 : len == 0) return na;
    } else if (len == 0) {
        return -1;
    } else if (len == 1) {
        return k->n_a + bs[0];
    }
    k->key[0] = na;
    int added;
    int64_t id = sets_intern(&k->s, k->key, len + 1, &added);
    if (id < 0 || (added && too_many(id))) return -3;
    if (added && (reserve_members(l, len + 1) || reserve_state(l, id))) return -2;
    return k->n_a + k->n_b + id;
}

static int walk_concat(Concat *k, const int32_t *seed_a, const int32_t *seed_b,
                       int32_t *seed_codes, Py_ssize_t num_seeds, Limits *l, Out *o) {
    Py_ssize_t w = o->width;
    int64_t *cur = NULL;
    size_t cur_cap = 0;
    int status = -1;
    if (sets_init(&k->s) < 0 || kernel_grow((void **)&k->key, &k->key_cap, 3, 8) < 0) goto done;
    for (Py_ssize_t j = 0; j < num_seeds; j++) {
        int64_t na = seed_a[j], b = seed_b[j];
        Py_ssize_t len = 1;
        k->key[1] = b;
        if (k->a_acc[na] && b != 0) { /* {0, b}, sorted (b > 0) */
            k->key[1] = 0;
            k->key[2] = b;
            len = 2;
        }
        int64_t code = concat_state(k, na, len, l);
        if (code == -3) goto done;
        if (code == -2) break;
        seed_codes[j] = (int32_t)code;
    }
    for (size_t i = 0; i < k->s.count && !l->stop; i++) {
        if (tick(l, (Py_ssize_t)i)) break;
        Py_ssize_t len = sets_copy(&k->s, i, &cur, &cur_cap);
        int32_t *row = out_row(o);
        if (len < 0 || !row ||
            kernel_grow((void **)&k->key, &k->key_cap, (size_t)len + 2, sizeof(int64_t)) < 0)
            goto done;
        int64_t a = cur[0];
        const int64_t *bs = cur + 1;
        uint8_t accepting = 0;
        for (Py_ssize_t j = 0; j < len - 1; j++) accepting |= k->b_acc[bs[j]];
        o->acc[o->count++] = accepting;
        for (Py_ssize_t c = 0; c < w; c++) {
            int64_t na = a >= 0 ? k->ta[a * w + c] : -1;
            Py_ssize_t n = 0;
            for (Py_ssize_t j = 0; j < len - 1; j++) {
                int32_t y = k->tb[bs[j] * w + c];
                if (y >= 0) k->key[1 + n++] = y;
            }
            if (na >= 0 && k->a_acc[na]) k->key[1 + n++] = 0;
            n = sort_unique(k->key + 1, n);
            int64_t code = concat_state(k, na, n, l);
            if (code == -3) goto done;
            if (code == -2) break;
            row[c] = (int32_t)code;
        }
    }
    status = 0;
done:
    PyMem_Free(cur);
    return status;
}

PyDoc_STRVAR(subset_concat_doc,
             "subset_concat(a, b, a_accepting, b_accepting, seed_a, seed_b, limits, /)\n--\n\n"
             "The subset states (a, {b, ...}) of `a` then `b` (int32[S, C] tables, -1 dead) "
             "that the collisions (seed_a[j], {seed_b[j]} plus b's start if seed_a[j] "
             "accepts) lead to, numbered breadth first. Cells and seed codes: a state of a "
             "(below |a|), |a| + a state of b, or |a| + |b| + a new state. Returns (rows, "
             "accepting, stop, value, members, seed codes int32[len(seed_a)] as a bytearray).");

static PyObject *subset_concat(PyObject *Py_UNUSED(module), PyObject *const *args,
                               Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "subset_concat takes 7 arguments");
        return NULL;
    }
    Arg in[6];
    memset(in, 0, sizeof in);
    Out o;
    memset(&o, 0, sizeof o);
    Limits l;
    Concat k;
    memset(&k, 0, sizeof k);
    int32_t *seed_codes = NULL;
    PyObject *result = NULL;
    if (take_limits(args[6], &l) < 0 || take_int32(args[0], &in[0], 2, -1, -1, "a") < 0 ||
        take_int32(args[1], &in[1], 2, -1, -1, "b") < 0 ||
        take_flags(args[2], &in[2], in[0].n, "a_accepting") < 0 ||
        take_flags(args[3], &in[3], in[1].n, "b_accepting") < 0 ||
        take_int32(args[4], &in[4], 1, 0, in[0].n, "seed_a") < 0 ||
        take_int32(args[5], &in[5], 1, 0, in[1].n, "seed_b") < 0)
        goto done;
    if (in[0].width != in[1].width || in[1].n == 0 || in[4].n != in[5].n) {
        PyErr_SetString(PyExc_ValueError,
                        "subset_concat: tables equally wide, b non-empty, seeds paired");
        goto done;
    }
    k.ta = in[0].view.buf;
    k.tb = in[1].view.buf;
    k.a_acc = in[2].view.buf;
    k.b_acc = in[3].view.buf;
    k.n_a = in[0].n;
    k.n_b = in[1].n;
    o.width = in[0].width;
    seed_codes = PyMem_Calloc((size_t)in[4].n + 1, sizeof(int32_t));
    if (!seed_codes) {
        PyErr_NoMemory();
        goto done;
    }
    if (walk_concat(&k, in[4].view.buf, in[5].view.buf, seed_codes, in[4].n, &l, &o) == 0) {
        PyObject *codes = PyByteArray_FromStringAndSize((const char *)seed_codes,
                                                        in[4].n * (Py_ssize_t)sizeof(int32_t));
        if (codes) result = result_of(&o, &l, codes);
    }
done:
    PyMem_Free(seed_codes);
    PyMem_Free(k.key);
    sets_free(&k.s);
    out_free(&o);
    release(in, 6);
    return result;
}

/* ---- repetition with an overlapping boundary ------------------------------------------- */

static int walk_repeat(const Arg *t, const uint8_t *acc, int64_t lo, int64_t hi, Limits *l,
                       Out *o) {
    Py_ssize_t w = o->width;
    int64_t size = t->n;
    const int32_t *tab = t->view.buf;
    SetIndex s;
    memset(&s, 0, sizeof s);
    int64_t *cur = NULL, *next = NULL, *done_k = NULL, *state = NULL;
    size_t cur_cap = 0, next_cap = 0, k_cap = 0, x_cap = 0;
    int added, status = -1;
    int64_t start = 0;
    if (sets_init(&s) < 0 || sets_intern(&s, &start, 1, &added) < 0) goto done;
    for (size_t i = 0; i < s.count; i++) {
        if (tick(l, (Py_ssize_t)i)) break;
        Py_ssize_t len = sets_copy(&s, i, &cur, &cur_cap);
        int32_t *row = out_row(o);
        if (len < 0 || !row || kernel_grow((void **)&next, &next_cap, 2 * (size_t)len + 1, 8) < 0 ||
            kernel_grow((void **)&done_k, &k_cap, (size_t)len + 1, 8) < 0 ||
            kernel_grow((void **)&state, &x_cap, (size_t)len + 1, 8) < 0)
            goto done;
        uint8_t accepting = 0;
        for (Py_ssize_t j = 0; j < len; j++) { /* (k repetitions done, item state x) */
            int64_t k = cur[j] / size, x = cur[j] % size;
            done_k[j] = k;
            state[j] = x;
            accepting |= (acc[x] && k + 1 >= lo) || (x == 0 && k >= lo);
        }
        o->acc[o->count++] = accepting;
        for (Py_ssize_t c = 0; c < w; c++) {
            Py_ssize_t n = 0;
            for (Py_ssize_t j = 0; j < len; j++) {
                int64_t k = done_k[j];
                int32_t x = tab[state[j] * w + c];
                if (x < 0) continue;
                next[n++] = k * size + x;
                if (acc[x]) {
                    int64_t more = k + 1;
                    if (hi < 0)
                        next[n++] = (more < lo ? more : lo) * size;
                    else if (more < hi)
                        next[n++] = more * size;
                }
            }
            if (n == 0) {
                row[c] = -1;
                continue;
            }
            n = sort_unique(next, n);
            int64_t id = sets_intern(&s, next, n, &added);
            if (id < 0 || (added && too_many(id))) goto done;
            if (added && (reserve_members(l, n) || reserve_state(l, id))) break;
            row[c] = (int32_t)id;
        }
        if (l->stop) break;
    }
    status = 0;
done:
    PyMem_Free(cur);
    PyMem_Free(next);
    PyMem_Free(done_k);
    PyMem_Free(state);
    sets_free(&s);
    return status;
}

PyDoc_STRVAR(subset_repeat_doc,
             "subset_repeat(table, accepting, lo, hi, limits, /)\n--\n\n"
             "`item{lo,hi}` (hi < 0: unbounded) over sets of (repetitions done k, item "
             "state x) coded k * |item| + x, numbered breadth first from {(0, start)}. The "
             "item (int32[S, C], bool[S]) is not nullable and its start has no incoming "
             "transition. Returns (rows, accepting, stop, value, members) as product_union.");

static PyObject *subset_repeat(PyObject *Py_UNUSED(module), PyObject *const *args,
                               Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "subset_repeat takes 5 arguments");
        return NULL;
    }
    Arg in[2];
    memset(in, 0, sizeof in);
    Out o;
    memset(&o, 0, sizeof o);
    Limits l;
    PyObject *result = NULL;
    long long lo = PyLong_AsLongLong(args[2]), hi = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred() || take_limits(args[4], &l) < 0 ||
        take_int32(args[0], &in[0], 2, -1, -1, "table") < 0 ||
        take_flags(args[1], &in[1], in[0].n, "accepting") < 0)
        goto done;
    /* Codes k * |item| + x must fit int64: k stays below max(lo, hi). */
    long long most = lo > hi ? lo : hi;
    if (in[0].n == 0 || lo < 0 || most >= (INT64_MAX / 2) / (in[0].n + 1)) {
        PyErr_SetString(PyExc_ValueError, "subset_repeat: empty item or counts out of range");
        goto done;
    }
    o.width = in[0].width;
    if (walk_repeat(&in[0], in[1].view.buf, lo, hi, &l, &o) == 0) result = result_of(&o, &l, NULL);
done:
    out_free(&o);
    release(in, 2);
    return result;
}

static PyMethodDef methods[] = {
    {"product_pair", (PyCFunction)(void (*)(void))product_pair, METH_FASTCALL, product_pair_doc},
    {"product_union", (PyCFunction)(void (*)(void))product_union, METH_FASTCALL,
     product_union_doc},
    {"subset_concat", (PyCFunction)(void (*)(void))subset_concat, METH_FASTCALL,
     subset_concat_doc},
    {"subset_repeat", (PyCFunction)(void (*)(void))subset_repeat, METH_FASTCALL,
     subset_repeat_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_subset",
    .m_doc = "The state loops of the subset and product constructions (see subset.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__subset(void) { return PyModule_Create(&module); }
