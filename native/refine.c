/* Hopcroft's partition refinement for DFA minimization (`_native.refine_partition`).
 *
 * Minimizing a terminal's or a schema's automaton is a large part of a compile: in Python
 * it took passes matched to each automaton's shape (hash-consing chains, numpy Moore
 * rounds, Hopcroft for long chains between loops), about a second for a 40k-state
 * schema automaton. Here one Hopcroft run does every shape in O(E log S).
 *
 * The DFA is partial (-1: no transition). The caller's starting partition puts only
 * states with the same live classes (and acceptance) together, so the partition is
 * already stable against the missing dead state, which never has to exist, and the
 * largest block can be left out of the first worklist as usual.
 *
 * Blocks are contiguous runs of `elems`; marking a state swaps it into the marked prefix
 * of its run, and a split makes the smaller half the new block, the only one that must
 * become a splitter. Only the Python C API is used: arrays come in through the buffer
 * protocol.
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

typedef struct {
    int32_t *data;
    Py_ssize_t len, cap;
} Stack;

static int stack_push2(Stack *s, int32_t a, int32_t b) {
    if (s->len + 2 > s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 1024;
        int32_t *grown = PyMem_Realloc(s->data, (size_t)cap * sizeof(int32_t));
        if (!grown) return -1;
        s->data = grown;
        s->cap = cap;
    }
    s->data[s->len++] = a;
    s->data[s->len++] = b;
    return 0;
}

typedef struct {
    Py_ssize_t num_states, width;
    const int32_t *trans;
    /* Predecessor edges by target, each target's run sorted by class. */
    int32_t *pred_ptr; /* [S + 1] */
    int32_t *pred_src; /* [E] */
    int32_t *pred_cls; /* [E] */
    /* The distinct classes each state is entered on (a block splits only on those). */
    int32_t *enter_ptr; /* [S + 1] */
    int32_t *enter_cls; /* [<= E] */
    /* The partition. */
    int32_t *elems, *loc, *blk;
    int32_t *first, *end, *mid; /* per block, at most S blocks */
    Py_ssize_t num_blocks;
    int32_t *touched, *snapshot;
    Stack work;
} Refiner;

static void refiner_free(Refiner *r) {
    PyMem_Free(r->pred_ptr);
    PyMem_Free(r->pred_src);
    PyMem_Free(r->pred_cls);
    PyMem_Free(r->enter_ptr);
    PyMem_Free(r->enter_cls);
    PyMem_Free(r->elems);
    PyMem_Free(r->loc);
    PyMem_Free(r->blk);
    PyMem_Free(r->first);
    PyMem_Free(r->end);
    PyMem_Free(r->mid);
    PyMem_Free(r->touched);
    PyMem_Free(r->snapshot);
    PyMem_Free(r->work.data);
}

#define ALLOC(ptr, count) ((ptr) = PyMem_Malloc(((size_t)(count) + 1) * sizeof(*(ptr))))

/* Reverse edges, counting-sorted by target with classes ascending inside each target. */
static int build_preds(Refiner *r) {
    Py_ssize_t n = r->num_states, w = r->width, edges = 0;
    r->pred_ptr = PyMem_Calloc((size_t)n + 2, sizeof(int32_t));
    if (!r->pred_ptr) return -1;
    for (Py_ssize_t i = 0; i < n * w; i++) {
        int32_t t = r->trans[i];
        if (t >= 0) {
            r->pred_ptr[t + 1]++;
            edges++;
        }
    }
    for (Py_ssize_t s = 0; s < n; s++) r->pred_ptr[s + 1] += r->pred_ptr[s];
    int32_t *fill = NULL;
    if (!ALLOC(r->pred_src, edges) || !ALLOC(r->pred_cls, edges) || !ALLOC(fill, n)) {
        PyMem_Free(fill);
        return -1;
    }
    memcpy(fill, r->pred_ptr, (size_t)n * sizeof(int32_t));
    for (Py_ssize_t c = 0; c < w; c++) {
        for (Py_ssize_t s = 0; s < n; s++) {
            int32_t t = r->trans[s * w + c];
            if (t >= 0) {
                int32_t at = fill[t]++;
                r->pred_src[at] = (int32_t)s;
                r->pred_cls[at] = (int32_t)c;
            }
        }
    }
    PyMem_Free(fill);
    if (!ALLOC(r->enter_ptr, n + 1) || !ALLOC(r->enter_cls, edges)) return -1;
    int32_t count = 0;
    for (Py_ssize_t t = 0; t < n; t++) {
        r->enter_ptr[t] = count;
        for (int32_t i = r->pred_ptr[t]; i < r->pred_ptr[t + 1]; i++) {
            if (i == r->pred_ptr[t] || r->pred_cls[i] != r->pred_cls[i - 1])
                r->enter_cls[count++] = r->pred_cls[i];
        }
    }
    r->enter_ptr[n] = count;
    return 0;
}

/* Queue (block, c) for every class c some state of the block is entered on, ascending. */
static int queue_block(Refiner *r, int32_t b, const int32_t *members, int32_t count,
                       uint8_t *seen) {
    Py_ssize_t w = r->width;
    memset(seen, 0, (size_t)w);
    for (int32_t i = 0; i < count; i++) {
        int32_t s = members[i];
        for (int32_t k = r->enter_ptr[s]; k < r->enter_ptr[s + 1]; k++) seen[r->enter_cls[k]] = 1;
    }
    for (Py_ssize_t c = 0; c < w; c++)
        if (seen[c] && stack_push2(&r->work, b, (int32_t)c) < 0) return -1;
    return 0;
}

/* First edge into `t` on class `c` (the run is sorted by class), or the run's end. */
static inline int32_t lower_class(const Refiner *r, int32_t lo, int32_t hi, int32_t c) {
    while (lo < hi) {
        int32_t m = lo + (hi - lo) / 2;
        if (r->pred_cls[m] < c)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

static int refine_all(Refiner *r, int32_t num_blocks) {
    Py_ssize_t n = r->num_states;
    uint8_t *seen = PyMem_Malloc((size_t)r->width + 1);
    if (!seen) return -1;
    /* Initial runs: states by block, stable. */
    int32_t *count = PyMem_Calloc((size_t)num_blocks + 1, sizeof(int32_t));
    if (!count) {
        PyMem_Free(seen);
        return -1;
    }
    for (Py_ssize_t s = 0; s < n; s++) count[r->blk[s]]++;
    int32_t pos = 0, largest = 0;
    for (int32_t b = 0; b < num_blocks; b++) {
        r->first[b] = r->mid[b] = pos;
        pos += count[b];
        r->end[b] = pos;
        if (count[b] > count[largest]) largest = b;
    }
    for (Py_ssize_t s = 0; s < n; s++) {
        int32_t b = r->blk[s];
        int32_t at = r->mid[b]++;
        r->elems[at] = (int32_t)s;
        r->loc[s] = at;
    }
    for (int32_t b = 0; b < num_blocks; b++) r->mid[b] = r->first[b];
    PyMem_Free(count);
    r->num_blocks = num_blocks;
    for (int32_t b = 0; b < num_blocks; b++) {
        if (b != largest &&
            queue_block(r, b, r->elems + r->first[b], r->end[b] - r->first[b], seen) < 0)
            goto fail;
    }
    while (r->work.len) {
        int32_t c = r->work.data[--r->work.len];
        int32_t b = r->work.data[--r->work.len];
        /* The splitter's members, copied: marking may reorder its own run. */
        int32_t size = r->end[b] - r->first[b];
        memcpy(r->snapshot, r->elems + r->first[b], (size_t)size * sizeof(int32_t));
        int32_t num_touched = 0;
        for (int32_t j = 0; j < size; j++) {
            int32_t t = r->snapshot[j];
            int32_t lo = r->pred_ptr[t], hi = r->pred_ptr[t + 1];
            if (lo == hi) continue;
            lo = lower_class(r, lo, hi, c);
            for (int32_t i = lo; i < hi && r->pred_cls[i] == c; i++) {
                int32_t p = r->pred_src[i], bp = r->blk[p], lp = r->loc[p], m = r->mid[bp];
                if (lp >= m) { /* not marked yet: swap into the marked prefix */
                    int32_t q = r->elems[m];
                    r->elems[m] = p;
                    r->elems[lp] = q;
                    r->loc[p] = m;
                    r->loc[q] = lp;
                    r->mid[bp] = m + 1;
                    if (m == r->first[bp]) r->touched[num_touched++] = bp;
                }
            }
        }
        for (int32_t k = 0; k < num_touched; k++) {
            int32_t bp = r->touched[k];
            int32_t f = r->first[bp], m = r->mid[bp], e = r->end[bp];
            r->mid[bp] = f;
            if (m == e) continue; /* every member marked: no split */
            int32_t nb = (int32_t)r->num_blocks++;
            int32_t lo, hi;
            if (m - f <= e - m) { /* the marked part is the new, smaller block */
                r->first[nb] = f;
                r->end[nb] = m;
                r->mid[nb] = f;
                r->first[bp] = m;
                r->mid[bp] = m;
                lo = f;
                hi = m;
            } else {
                r->first[nb] = m;
                r->end[nb] = e;
                r->mid[nb] = m;
                r->end[bp] = m;
                lo = m;
                hi = e;
            }
            for (int32_t i = lo; i < hi; i++) r->blk[r->elems[i]] = nb;
            if (queue_block(r, nb, r->elems + lo, hi - lo, seen) < 0) goto fail;
        }
    }
    PyMem_Free(seen);
    return 0;
fail:
    PyMem_Free(seen);
    return -1;
}

PyDoc_STRVAR(refine_partition_doc,
             "refine_partition(trans, blocks, num_blocks, /)\n--\n\n"
             "Refine `blocks` (int32[S], writable, dense ids below `num_blocks`, states of a "
             "block sharing their live classes) in place to the coarsest partition stable "
             "under `trans` (int32[S, C], C-contiguous, -1: no transition).");

static PyObject *refine_partition(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "refine_partition(trans, blocks, num_blocks) takes 3 arguments");
        return NULL;
    }
    long num_blocks = PyLong_AsLong(args[2]);
    if (num_blocks == -1 && PyErr_Occurred()) return NULL;
    Py_buffer tv, bv;
    if (PyObject_GetBuffer(args[0], &tv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &bv, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) <
        0) {
        PyBuffer_Release(&tv);
        return NULL;
    }
    PyObject *result = NULL;
    Refiner r;
    memset(&r, 0, sizeof(r));
    if (tv.ndim != 2 || !kernel_is_int(&tv, 4) || !kernel_is_int(&bv, 4)) {
        PyErr_SetString(PyExc_ValueError, "refine_partition: trans must be int32[S, C], blocks int32[S]");
        goto done;
    }
    r.num_states = tv.shape[0];
    r.width = tv.shape[1];
    if (bv.len / 4 != r.num_states || r.num_states >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "refine_partition: blocks must hold one id per state");
        goto done;
    }
    r.trans = tv.buf;
    r.blk = bv.buf;
    Py_ssize_t n = r.num_states;
    for (Py_ssize_t i = 0; i < n * r.width; i++) {
        if (r.trans[i] < -1 || r.trans[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "refine_partition: a transition names no state");
            goto done;
        }
    }
    for (Py_ssize_t s = 0; s < n; s++) {
        if (r.blk[s] < 0 || r.blk[s] >= num_blocks) {
            PyErr_SetString(PyExc_ValueError, "refine_partition: block ids must lie in [0, num_blocks)");
            goto done;
        }
    }
    if (n == 0) {
        result = PyLong_FromLong(0);
        goto done;
    }
    if (build_preds(&r) < 0 || !ALLOC(r.elems, n) || !ALLOC(r.loc, n) || !ALLOC(r.first, n) ||
        !ALLOC(r.end, n) || !ALLOC(r.mid, n) || !ALLOC(r.touched, n) || !ALLOC(r.snapshot, n)) {
        PyErr_NoMemory();
        goto done;
    }
    if (refine_all(&r, (int32_t)num_blocks) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyLong_FromSsize_t(r.num_blocks);
done:
    r.blk = NULL; /* the caller's buffer */
    refiner_free(&r);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&tv);
    return result;
}

static PyMethodDef methods[] = {
    {"refine_partition", (PyCFunction)(void (*)(void))refine_partition, METH_FASTCALL,
     refine_partition_doc},
    {NULL, NULL, 0, NULL},
};

int add_refine(PyObject *module) { return PyModule_AddFunctions(module, methods); }
