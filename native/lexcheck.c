/* The lexing check's product searches (`_native.lexing_conflict`): whether lexing
 * terminal a then a follower is ambiguous with lexing terminal b (`_check_contexts` in
 * `from_rules.py`), with a witness text.
 *
 * In Python these breadth-first walks over pairs of byte automata, one Python generator
 * step and a few dict and tuple operations per pair, took 270-400 ms of a 2 s compile of
 * a large schema (a WashingtonPost grammar checks 11k terminal pairs). Here each walk runs
 * over flat int32 arrays with an open-addressing table of the pairs reached.
 *
 * The witness is the reference's (`tests/lexcheck_reference.py`), since it appears in
 * error messages: pairs are discovered breadth first from the start pair (never itself
 * reported), a pair's moves in the order of their byte-class pair's smallest byte, each
 * spelled by that class pair's largest byte, and each discovered pair is checked as it is
 * found. Which bytes a state pair shares does not change that order, so the reference's
 * shortcut for pairs sharing few bytes needs no counterpart here.
 *
 * Only the Python C API is used: automata come in through the buffer protocol as
 * (transitions int32[S, C], class_of_byte int32[256], accepting bool[S]).
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

#define DROPPED (-2) /* `from_rules.DROPPED` */

/* ---- automata in ---------------------------------------------------------------------- */

typedef struct {
    const int32_t *trans; /* [S * C] */
    const int32_t *cls;   /* [256] */
    const uint8_t *acc;   /* [S] */
    Py_ssize_t S, C;
    Py_buffer views[3];
    int opened;
} Dfa;

static void dfa_release(Dfa *d) {
    while (d->opened > 0) PyBuffer_Release(&d->views[--d->opened]);
}

/* Open one automaton, a (transitions, class_of_byte, accepting) tuple. */
static int dfa_open(PyObject *obj, Dfa *d) {
    memset(d, 0, sizeof(*d));
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "an automaton is a (transitions, class_of_byte, accepting) tuple");
        return -1;
    }
    for (; d->opened < 3; d->opened++) {
        PyObject *item = PyTuple_GET_ITEM(obj, d->opened);
        if (PyObject_GetBuffer(item, &d->views[d->opened], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto fail;
    }
    Py_buffer *t = &d->views[0], *c = &d->views[1], *a = &d->views[2];
    if (!kernel_is_int(t, 4) || t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1) {
        PyErr_SetString(PyExc_ValueError, "transitions must be a C-contiguous int32[S, C]");
        goto fail;
    }
    d->S = t->shape[0];
    d->C = t->shape[1];
    if (!kernel_is_int(c, 4) || c->ndim != 1 || c->shape[0] != 256) {
        PyErr_SetString(PyExc_ValueError, "class_of_byte must be a C-contiguous int32[256]");
        goto fail;
    }
    if (!kernel_is_int(a, 1) || a->ndim != 1 || a->shape[0] != d->S) {
        PyErr_SetString(PyExc_ValueError, "accepting must be a C-contiguous bool[S]");
        goto fail;
    }
    d->trans = t->buf;
    d->cls = c->buf;
    d->acc = a->buf;
    for (int byte = 0; byte < 256; byte++) {
        if (d->cls[byte] < 0 || d->cls[byte] >= d->C) {
            PyErr_SetString(PyExc_ValueError, "class_of_byte names a class out of range");
            goto fail;
        }
    }
    return 0;
fail:
    dfa_release(d);
    return -1;
}

/* ---- class pairs ------------------------------------------------------------------------ */

/* The moves of a pair of automata: one per pair of classes some byte falls in, in the
 * order of the pair's smallest byte, spelled by its largest. */
typedef struct {
    int32_t ca[256], cb[256];
    uint8_t byte[256];
    int count;
} Steps;

static void steps_of(const Dfa *x, const Dfa *y, Steps *out) {
    int64_t keys[512];
    int16_t at[512];
    memset(keys, 0xff, sizeof(keys));
    out->count = 0;
    for (int byte = 0; byte < 256; byte++) {
        int64_t key = (int64_t)x->cls[byte] * (int64_t)y->C + y->cls[byte];
        uint32_t slot = (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 55);
        while (keys[slot] >= 0 && keys[slot] != key) slot = (slot + 1) & 511;
        if (keys[slot] < 0) {
            keys[slot] = key;
            at[slot] = (int16_t)out->count;
            out->ca[out->count] = x->cls[byte];
            out->cb[out->count] = y->cls[byte];
            out->count++;
        }
        out->byte[at[slot]] = (uint8_t)byte;
    }
}

/* ---- breadth-first pair search ---------------------------------------------------------- */

typedef struct {
    int32_t p, q, parent, slot;
    uint8_t byte;
} Node;

/* The pairs reached, in discovery order (which is the breadth-first queue), with the
 * table that finds a pair's node. Reused across searches: `search_start` clears only the
 * slots the last search filled. */
typedef struct {
    Node *nodes;
    Py_ssize_t len, cap;
    int32_t *slots; /* node index, -1: empty */
    Py_ssize_t mask;
    Py_ssize_t head; /* the node being expanded */
    int step;        /* its next move */
} Search;

static void search_free(Search *s) {
    PyMem_Free(s->nodes);
    PyMem_Free(s->slots);
    memset(s, 0, sizeof(*s));
}

/* The two searches of a call, kept from call to call: a call's own allocations (two
 * tables, cleared) cost about as much as its searches on most terminal pairs. Tables
 * grown past `KEEP_SLOTS` go back. `searches_busy` guards against a nested call. */
static Search kept[2];
static int searches_busy;
#define KEEP_SLOTS (1 << 16)

static inline Py_ssize_t slot_of(int32_t p, int32_t q, Py_ssize_t mask) {
    uint64_t h = ((uint64_t)(uint32_t)p << 32 | (uint32_t)q) * 0x9E3779B97F4A7C15ull;
    return (Py_ssize_t)(h >> 32) & mask;
}

static int search_grow(Search *s) {
    Py_ssize_t cap = s->mask ? 2 * (s->mask + 1) : 1024;
    int32_t *slots = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xff, (size_t)cap * sizeof(int32_t));
    PyMem_Free(s->slots);
    s->slots = slots;
    s->mask = cap - 1;
    for (Py_ssize_t i = 0; i < s->len; i++) {
        Py_ssize_t slot = slot_of(s->nodes[i].p, s->nodes[i].q, s->mask);
        while (slots[slot] >= 0) slot = (slot + 1) & s->mask;
        slots[slot] = (int32_t)i;
        s->nodes[i].slot = (int32_t)slot;
    }
    return 0;
}

/* Add (p, q) unless reached: its node index, -1 if reached before, -2 on error. */
static Py_ssize_t search_add(Search *s, int32_t p, int32_t q, int32_t parent, uint8_t byte) {
    Py_ssize_t slot = slot_of(p, q, s->mask);
    for (int32_t i; (i = s->slots[slot]) >= 0; slot = (slot + 1) & s->mask)
        if (s->nodes[i].p == p && s->nodes[i].q == q) return -1;
    if (s->len == INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many state pairs");
        return -2;
    }
    if (s->len == s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 1024;
        Node *nodes = PyMem_Realloc(s->nodes, (size_t)cap * sizeof(Node));
        if (!nodes) {
            PyErr_NoMemory();
            return -2;
        }
        s->nodes = nodes;
        s->cap = cap;
    }
    Py_ssize_t i = s->len++;
    s->nodes[i] = (Node){p, q, parent, (int32_t)slot, byte};
    s->slots[slot] = (int32_t)i;
    if (2 * s->len > s->mask + 1 && search_grow(s) < 0) return -2;
    return i;
}

static int search_start(Search *s, int32_t p, int32_t q) {
    for (Py_ssize_t i = 0; i < s->len; i++) s->slots[s->nodes[i].slot] = -1;
    s->len = 0;
    s->head = 0;
    s->step = 0;
    if (!s->slots && search_grow(s) < 0) return -1;
    return search_add(s, p, q, -1, 0) == -2 ? -1 : 0;
}

/* The next pair the two automata reach together: its node index, -1 when none is left,
 * -2 on error (a dead state, -1, is not followed). */
static Py_ssize_t search_next(Search *s, const Dfa *x, const Dfa *y, const Steps *steps) {
    while (s->head < s->len) {
        const int32_t *row_x = x->trans + (Py_ssize_t)s->nodes[s->head].p * x->C;
        const int32_t *row_y = y->trans + (Py_ssize_t)s->nodes[s->head].q * y->C;
        while (s->step < steps->count) {
            int k = s->step++;
            int32_t u = row_x[steps->ca[k]], v = row_y[steps->cb[k]];
            if (u < 0 || v < 0) continue;
            if (u >= x->S || v >= y->S) {
                PyErr_SetString(PyExc_ValueError, "a transition names a state out of range");
                return -2;
            }
            Py_ssize_t found = search_add(s, u, v, (int32_t)s->head, steps->byte[k]);
            if (found != -1) return found;
        }
        s->head++;
        s->step = 0;
    }
    return -1;
}

/* The bytes that lead to node `at`: their count, and written to `out` (if given). */
static Py_ssize_t spell(const Search *s, Py_ssize_t at, char *out) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = at; s->nodes[i].parent >= 0; i = s->nodes[i].parent) n++;
    if (out) {
        Py_ssize_t k = n;
        for (Py_ssize_t i = at; s->nodes[i].parent >= 0; i = s->nodes[i].parent)
            out[--k] = (char)s->nodes[i].byte;
    }
    return n;
}

/* ---- the check -------------------------------------------------------------------------- */

/* A non-empty text read by b from `start` and by f from its start where one ends a lexeme
 * while the other is still alive: its node in `s`, -1 if none, -2 on error. */
static Py_ssize_t runs_on(Search *s, const Dfa *b, int32_t start, const Dfa *f,
                          const Steps *steps) {
    if (search_start(s, start, 0) < 0) return -2;
    Py_ssize_t k;
    while ((k = search_next(s, b, f, steps)) >= 0)
        if (b->acc[s->nodes[k].p] || f->acc[s->nodes[k].q]) return k;
    return k;
}

PyDoc_STRVAR(lexing_conflict_doc,
             "lexing_conflict(a, b, same, first, follows, /)\n--\n\n"
             "A text showing that lexing a then a follower is ambiguous with lexing b,\n"
             "and that follower's index in `follows` (-1: a and b share a whole lexeme;\n"
             "-2: a comes first and ends a lexeme where b goes on), or None. Each\n"
             "automaton is a (transitions int32[S, C], class_of_byte int32[256],\n"
             "accepting bool[S]) tuple of C-contiguous buffers.");

static PyObject *lexing_conflict(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "lexing_conflict takes 5 arguments");
        return NULL;
    }
    int same = PyObject_IsTrue(args[2]), first = PyObject_IsTrue(args[3]);
    if (same < 0 || first < 0) return NULL;
    PyObject *follows = PySequence_Fast(args[4], "follows must be a sequence");
    if (!follows) return NULL;
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(follows);
    PyObject *result = NULL;
    Dfa a, b, *fs = NULL;
    int opened_ab = 0;
    Steps *steps = NULL;     /* [nf + 1]: a with b, then b with each follower */
    uint8_t *ready = NULL;   /* [nf]: whether steps[i + 1] is filled */
    uint8_t *no_tail = NULL; /* [nf * S_b]: b's states known to run on with follower i */
    Search local[2] = {{0}, {0}};
    int borrowed = !searches_busy;
    Search *searches = borrowed ? kept : local;
    Search *outer = &searches[0], *inner = &searches[1];
    searches_busy = 1;

    if (dfa_open(args[0], &a) < 0) goto done;
    opened_ab = 1;
    if (dfa_open(args[1], &b) < 0) goto done;
    opened_ab = 2;
    /* Followers are opened when first needed: most calls end before reading them. */
    fs = PyMem_Calloc((size_t)nf + 1, sizeof(Dfa));
    steps = PyMem_Malloc(((size_t)nf + 1) * sizeof(Steps));
    ready = PyMem_Calloc((size_t)nf + 1, 1);
    if (!fs || !steps || !ready) {
        PyErr_NoMemory();
        goto done;
    }
    steps_of(&a, &b, &steps[0]);
    if (search_start(outer, 0, 0) < 0) goto done;
    Py_ssize_t k;
    while ((k = search_next(outer, &a, &b, &steps[0])) >= 0) {
        int32_t u = outer->nodes[k].p, v = outer->nodes[k].q;
        if (!a.acc[u]) continue;
        if (!same && (b.acc[v] || first)) {
            Py_ssize_t n = spell(outer, k, NULL);
            PyObject *text = PyBytes_FromStringAndSize(NULL, n);
            if (!text) goto done;
            spell(outer, k, PyBytes_AS_STRING(text));
            result = Py_BuildValue("(Ni)", text, b.acc[v] ? -1 : DROPPED);
            goto done;
        }
        for (Py_ssize_t i = 0; i < nf; i++) {
            if (no_tail && no_tail[i * b.S + v]) continue;
            if (!ready[i]) {
                if (dfa_open(PySequence_Fast_GET_ITEM(follows, i), &fs[i]) < 0) goto done;
                steps_of(&b, &fs[i], &steps[i + 1]);
                ready[i] = 1;
            }
            Py_ssize_t tail = runs_on(inner, &b, v, &fs[i], &steps[i + 1]);
            if (tail == -2) goto done;
            if (tail >= 0) {
                Py_ssize_t n = spell(outer, k, NULL), m = spell(inner, tail, NULL);
                PyObject *text = PyBytes_FromStringAndSize(NULL, n + m);
                if (!text) goto done;
                spell(outer, k, PyBytes_AS_STRING(text));
                spell(inner, tail, PyBytes_AS_STRING(text) + n);
                result = Py_BuildValue("(Nn)", text, i);
                goto done;
            }
            if (!no_tail) {
                no_tail = PyMem_Calloc((size_t)nf * (size_t)b.S, 1);
                if (!no_tail) {
                    PyErr_NoMemory();
                    goto done;
                }
            }
            no_tail[i * b.S + v] = 1;
        }
    }
    if (k == -1) result = Py_NewRef(Py_None);
done:
    if (opened_ab > 0) dfa_release(&a);
    if (opened_ab > 1) dfa_release(&b);
    for (Py_ssize_t i = 0; fs && i < nf; i++) dfa_release(&fs[i]); /* calloc: none open */
    PyMem_Free(fs);
    PyMem_Free(steps);
    PyMem_Free(ready);
    PyMem_Free(no_tail);
    for (int i = 0; i < 2; i++)
        if (!borrowed || searches[i].mask + 1 > KEEP_SLOTS) search_free(&searches[i]);
    if (borrowed) searches_busy = 0;
    Py_DECREF(follows);
    return result;
}

static PyMethodDef methods[] = {
    {"lexing_conflict", (PyCFunction)(void (*)(void))lexing_conflict, METH_FASTCALL,
     lexing_conflict_doc},
    {NULL, NULL, 0, NULL},
};

int add_lexcheck(PyObject *module) { return PyModule_AddFunctions(module, methods); }
