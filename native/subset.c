/* The state loops of `subset.py`'s constructions (`fsmcompile._native`).
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
#include "subset.h"

#include <string.h>

/* ---- interning pairs: int64 key -> state id -------------------------------------------- */

typedef struct {
    Map ids;        /* key -> state id */
    int64_t *queue; /* key of each state, in id order */
    size_t count, queue_cap;
} PairIndex;

/* The id of `key` (>= 0), added as the next state if new (*added set): -1 on error. */
static int64_t pairs_intern(PairIndex *m, int64_t key, int *added) {
    int64_t id;
    if (map_get(&m->ids, key, &id)) {
        *added = 0;
        return id;
    }
    if (kernel_grow((void **)&m->queue, &m->queue_cap, m->count + 1, sizeof(int64_t)) < 0 ||
        map_put(&m->ids, key, (int64_t)m->count) < 0)
        return -1;
    id = (int64_t)m->count++;
    m->queue[id] = key;
    *added = 1;
    return id;
}

static void pairs_free(PairIndex *m) {
    map_free(&m->ids);
    PyMem_Free(m->queue);
}

/* ---- product of two DFAs --------------------------------------------------------------- */

static int walk_pair(const Table *a, const Table *b, const uint8_t *a_acc, const uint8_t *b_acc,
                     Limits *l, Out *o) {
    Py_ssize_t w = o->width;
    int64_t n_b = b->n;
    const int32_t *ta = a->view.buf, *tb = b->view.buf;
    PairIndex m;
    memset(&m, 0, sizeof m);
    int added, status = -1;
    if (map_init(&m.ids, 1024) < 0 || pairs_intern(&m, 0, &added) < 0) goto done;
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
    Table in[4];
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
    release_tables(in, 4);
    return result;
}

/* ---- union of several DFAs ------------------------------------------------------------- */

static int walk_union(const Table *t, const uint8_t *acc, const Table *starts, Limits *l, Out *o) {
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
    Table in[3];
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
    release_tables(in, 3);
    return result;
}

static PyMethodDef methods[] = {
    {"product_pair", (PyCFunction)(void (*)(void))product_pair, METH_FASTCALL, product_pair_doc},
    {"product_union", (PyCFunction)(void (*)(void))product_union, METH_FASTCALL,
     product_union_doc},
    {NULL, NULL, 0, NULL},
};

int add_subset(PyObject *module) { return PyModule_AddFunctions(module, methods); }
