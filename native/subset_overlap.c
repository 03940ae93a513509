/* The subset walks of a concatenation and a repetition whose boundary overlaps (see
 * subset.c for the model, the numbering and the budget). */
#include "subset.h"

#include <string.h>

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
    Table in[6];
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
    release_tables(in, 6);
    return result;
}

/* ---- repetition with an overlapping boundary ------------------------------------------- */

static int walk_repeat(const Table *t, const uint8_t *acc, int64_t lo, int64_t hi, Limits *l,
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
    Table in[2];
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
    release_tables(in, 2);
    return result;
}

static PyMethodDef methods[] = {
    {"subset_concat", (PyCFunction)(void (*)(void))subset_concat, METH_FASTCALL,
     subset_concat_doc},
    {"subset_repeat", (PyCFunction)(void (*)(void))subset_repeat, METH_FASTCALL,
     subset_repeat_doc},
    {NULL, NULL, 0, NULL},
};

int add_subset_overlap(PyObject *module) { return PyModule_AddFunctions(module, methods); }
