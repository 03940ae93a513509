/* The subset construction of a generated grammar's lexer (`_native.build_lexer`).
 *
 * `grammar_lexer._build_lexer_from_dfas` builds the lexer DFA over (terminal, automaton
 * state) threads: a lexer state is a priority-ordered tuple of thread codes, cut after the
 * first accepting one, tagged with its context while an `%ignore`d terminal is among its
 * threads. In Python, with a dict of tuples and a row list per state, that loop and the
 * rows' conversion to an array took 200-290 ms of a 2 s WashingtonPost or Github_ultra
 * compile (15-21k states of 77-100 classes). Here it is one walk that numbers states
 * exactly as the Python did: contexts in order, each from its start, a LIFO stack of
 * pending states, each row's classes left to right interning targets in order of first
 * appearance.
 *
 * States are interned in one open-addressing table whose keys (tag, threads) lie end to
 * end in an arena, in state order. Counted items (`_LexerTable.count_in`) are marked per
 * state as the Python did, and the two ways a counted item can start beside another
 * terminal's lexeme (in a state that is no context start, or in a start some move enters)
 * stop the walk with the counted terminals, as do `max_states` and the deadline; the caller
 * raises the same errors.
 *
 * Only the Python C API is used: arrays come in through the buffer protocol.
 */
#include "module.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_HARD (INT32_MAX / 4) /* state ids and thread codes stay int32 */

enum { STOP_NONE = 0, STOP_STATES = 1, STOP_DEADLINE = 2, STOP_SHARED = 3 };
enum { INTERN_STOP = -2, INTERN_NOMEM = -3 };

/* ---- growable arrays ---------------------------------------------------------------------- */

/* ---- the walk ----------------------------------------------------------------------------- */

typedef struct {
    /* Inputs. */
    Py_ssize_t num_threads, width, num_terminals;
    const int32_t *moves;         /* [T, C] */
    const uint8_t *accepting;     /* [T] */
    const int32_t *term_of;       /* [T] */
    const int32_t *count_index;   /* [T], row of count_flags or -1 */
    const uint8_t *count_flags;   /* [R, C] */
    const uint8_t *ignored;       /* [M] */
    const int32_t *bound_of;      /* [M] */
    long long max_states;
    double deadline; /* +inf: none */
    int any_counted;
    /* States. */
    size_t count;
    int32_t *rows; /* [N, C] */
    int32_t *label, *restart, *bound, *tag, *len;
    int64_t *off;
    uint64_t *hash;
    uint8_t *is_start, *shared, *char_start; /* char_start: [N, C] */
    size_t cap_rows, cap_label, cap_restart, cap_bound, cap_tag, cap_len, cap_off, cap_hash;
    size_t cap_start, cap_shared, cap_char;
    int32_t *arena;
    size_t arena_len, cap_arena;
    int32_t *slots; /* open addressing: state id or -1 */
    size_t num_slots;
    int32_t *pending;
    size_t num_pending, cap_pending;
    int32_t *starts;
    size_t num_starts, cap_starts;
    /* Scratch. */
    int32_t *cur, *moved;
    uint8_t *flags, *counted_mark, *shared_union;
    int stop;
} Walk;

static void walk_free(Walk *w) {
    PyMem_Free(w->rows);
    PyMem_Free(w->label);
    PyMem_Free(w->restart);
    PyMem_Free(w->bound);
    PyMem_Free(w->tag);
    PyMem_Free(w->len);
    PyMem_Free(w->off);
    PyMem_Free(w->hash);
    PyMem_Free(w->is_start);
    PyMem_Free(w->shared);
    PyMem_Free(w->char_start);
    PyMem_Free(w->arena);
    PyMem_Free(w->slots);
    PyMem_Free(w->pending);
    PyMem_Free(w->starts);
    PyMem_Free(w->cur);
    PyMem_Free(w->moved);
    PyMem_Free(w->flags);
    PyMem_Free(w->counted_mark);
    PyMem_Free(w->shared_union);
}

static uint64_t key_hash(int32_t tag, const int32_t *threads, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)tag;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)threads[i];
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    h ^= (uint64_t)n * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

static int rehash(Walk *w, size_t num_slots) {
    int32_t *slots = PyMem_Malloc(num_slots * sizeof(int32_t));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xFF, num_slots * sizeof(int32_t));
    for (size_t s = 0; s < w->count; s++) {
        if (w->len[s] == 0) continue; /* a dead context start is never looked up */
        size_t i = (size_t)w->hash[s] & (num_slots - 1);
        while (slots[i] >= 0) i = (i + 1) & (num_slots - 1);
        slots[i] = (int32_t)s;
    }
    PyMem_Free(w->slots);
    w->slots = slots;
    w->num_slots = num_slots;
    return 0;
}

/* A new state with no moves yet (`_LexerTable.add`); its id, or INTERN_STOP past
 * max_states. */
static int32_t add_state(Walk *w, int32_t label, int32_t restart, int32_t bound) {
    if ((long long)w->count >= w->max_states) {
        w->stop = STOP_STATES;
        return INTERN_STOP;
    }
    size_t n = w->count + 1, width = (size_t)w->width;
    if (kernel_grow((void **)&w->rows, &w->cap_rows, n * width, sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&w->char_start, &w->cap_char, n * width, 1) < 0 ||
        kernel_grow((void **)&w->label, &w->cap_label, n, sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&w->restart, &w->cap_restart, n, sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&w->bound, &w->cap_bound, n, sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&w->tag, &w->cap_tag, n, sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&w->len, &w->cap_len, n, sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&w->off, &w->cap_off, n, sizeof(int64_t)) < 0 ||
        kernel_grow((void **)&w->hash, &w->cap_hash, n, sizeof(uint64_t)) < 0 ||
        kernel_grow((void **)&w->is_start, &w->cap_start, n, 1) < 0 ||
        kernel_grow((void **)&w->shared, &w->cap_shared, n, 1) < 0)
        return INTERN_NOMEM;
    size_t s = w->count;
    for (size_t c = 0; c < width; c++) w->rows[s * width + c] = -1;
    memset(w->char_start + s * width, 0, width);
    w->label[s] = label;
    w->restart[s] = restart;
    w->bound[s] = bound;
    w->tag[s] = -1;
    w->len[s] = 0;
    w->off[s] = (int64_t)w->arena_len;
    w->hash[s] = 0;
    w->is_start[s] = 0;
    w->shared[s] = 0;
    w->count = n;
    return (int32_t)s;
}

/* The state of threads `main` (already cut) in context `ctx`: found, or added and pushed
 * on the pending stack. -1 for no threads; INTERN_STOP / INTERN_NOMEM. */
static int32_t intern(Walk *w, const int32_t *main, Py_ssize_t n, int32_t ctx) {
    if (n == 0) return -1;
    int32_t tag = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (w->ignored[w->term_of[main[i]]]) {
            tag = ctx;
            break;
        }
    }
    uint64_t h = key_hash(tag, main, n);
    size_t mask = w->num_slots - 1, i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        int32_t s = w->slots[i];
        if (s < 0) break;
        if (w->hash[s] == h && w->tag[s] == tag && w->len[s] == n &&
            memcmp(w->arena + w->off[s], main, (size_t)n * sizeof(int32_t)) == 0)
            return s;
    }
    int32_t last = main[n - 1];
    int32_t label = w->accepting[last] ? w->term_of[last] : -1;
    int32_t restart = label >= 0 && w->ignored[label] ? ctx : -1;
    int32_t bound = -1;
    if (w->any_counted) {
        int32_t owner = w->term_of[main[0]];
        Py_ssize_t k = 1;
        while (k < n && w->term_of[main[k]] == owner) k++;
        if (k == n) bound = w->bound_of[owner];
    }
    int32_t sid = add_state(w, label, restart, bound);
    if (sid < 0) return sid;
    if (kernel_grow((void **)&w->arena, &w->cap_arena, w->arena_len + (size_t)n, sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&w->pending, &w->cap_pending, w->num_pending + 1, sizeof(int32_t)) < 0)
        return INTERN_NOMEM;
    memcpy(w->arena + w->arena_len, main, (size_t)n * sizeof(int32_t));
    w->off[sid] = (int64_t)w->arena_len;
    w->arena_len += (size_t)n;
    w->len[sid] = (int32_t)n;
    w->tag[sid] = tag;
    w->hash[sid] = h;
    w->slots[i] = sid;
    w->pending[w->num_pending++] = sid;
    if (2 * w->count > w->num_slots && rehash(w, 2 * w->num_slots) < 0) return INTERN_NOMEM;
    return sid;
}

/* Threads cut after the first accepting one (lower-priority threads lose to that end). */
static Py_ssize_t cut(const Walk *w, const int32_t *threads, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (w->accepting[threads[i]]) return i + 1;
    return n;
}

/* Mark the classes that start a counted item in `sid` (`_LexerTable.count_in`); -1 when
 * the walk stops for a counted item beside another lexeme (w->counted_mark holds the
 * terminals), else 0. */
static int count_in(Walk *w, int32_t sid, const int32_t *main, Py_ssize_t n) {
    Py_ssize_t width = w->width;
    int any = 0;
    memset(w->flags, 0, (size_t)width);
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t k = main[i], r = w->count_index[k];
        if (r < 0) continue;
        any = 1;
        const uint8_t *f = w->count_flags + (size_t)r * (size_t)width;
        const int32_t *m = w->moves + (size_t)k * (size_t)width;
        for (Py_ssize_t c = 0; c < width; c++)
            if (f[c] && m[c] >= 0) w->flags[c] = 1;
    }
    if (!any) return 0;
    if (w->bound[sid] < 0) {
        uint8_t *into = w->is_start[sid] ? w->shared_union : w->counted_mark;
        for (Py_ssize_t i = 0; i < n; i++)
            if (w->count_index[main[i]] >= 0) into[w->term_of[main[i]]] = 1;
        if (!w->is_start[sid]) {
            w->stop = STOP_SHARED;
            return -1;
        }
        w->shared[sid] = 1;
    }
    memcpy(w->char_start + (size_t)sid * (size_t)width, w->flags, (size_t)width);
    return 0;
}

/* Every context from its start, each state's row (`_build_lexer_from_dfas`); 0, or -1 on
 * a Python error. A stop leaves w->stop set and returns 0. */
static int run(Walk *w, const int32_t *ctx_ptr, const int32_t *ctx_entries, Py_ssize_t num_ctx) {
    Py_ssize_t width = w->width;
    int timed = !isinf(w->deadline);
    for (Py_ssize_t ctx = 0; ctx < num_ctx; ctx++) {
        const int32_t *entries = ctx_entries + ctx_ptr[ctx];
        Py_ssize_t n0 = ctx_ptr[ctx + 1] - ctx_ptr[ctx];
        int32_t start = intern(w, entries, cut(w, entries, n0), (int32_t)ctx);
        if (start == INTERN_STOP) return 0;
        if (start == INTERN_NOMEM) return -1;
        if (start < 0) { /* only $END expected: a dead start state */
            start = add_state(w, -1, -1, -1);
            if (start == INTERN_STOP) return 0;
            if (start == INTERN_NOMEM) return -1;
        }
        if (kernel_grow((void **)&w->starts, &w->cap_starts, w->num_starts + 1, sizeof(int32_t)) < 0)
            return -1;
        w->starts[w->num_starts++] = start;
        w->is_start[start] = 1;
        while (w->num_pending) {
            int32_t sid = w->pending[--w->num_pending];
            if (timed && kernel_monotonic_s() > w->deadline) {
                w->stop = STOP_DEADLINE;
                return 0;
            }
            Py_ssize_t n = w->len[sid];
            memcpy(w->cur, w->arena + w->off[sid], (size_t)n * sizeof(int32_t));
            const int32_t *main = w->cur;
            if (count_in(w, sid, main, n) < 0) return 0;
            if (n == 1) {
                const int32_t *row = w->moves + (size_t)main[0] * (size_t)width;
                int32_t prev = -1;
                for (Py_ssize_t c = 0; c < width; c++) {
                    int32_t k = row[c], target = -1;
                    if (k >= 0) {
                        if (c > 0 && k == row[c - 1]) {
                            target = prev;
                        } else {
                            target = intern(w, &k, 1, (int32_t)ctx);
                            if (target == INTERN_STOP) return 0;
                            if (target == INTERN_NOMEM) return -1;
                        }
                    }
                    w->rows[(size_t)sid * (size_t)width + (size_t)c] = target;
                    prev = target;
                }
                continue;
            }
            int32_t prev = -1;
            for (Py_ssize_t c = 0; c < width; c++) {
                int same = c > 0;
                Py_ssize_t m = 0;
                for (Py_ssize_t i = 0; i < n; i++) {
                    const int32_t *row = w->moves + (size_t)main[i] * (size_t)width;
                    if (row[c] != (c > 0 ? row[c - 1] : -1)) same = 0;
                    if (row[c] >= 0) w->moved[m++] = row[c];
                }
                int32_t target = prev;
                if (!same) {
                    target = intern(w, w->moved, cut(w, w->moved, m), (int32_t)ctx);
                    if (target == INTERN_STOP) return 0;
                    if (target == INTERN_NOMEM) return -1;
                }
                w->rows[(size_t)sid * (size_t)width + (size_t)c] = target;
                prev = target;
            }
        }
    }
    /* A counted item may start beside another lexeme only where no move leads back. */
    int any_shared = 0;
    for (size_t s = 0; s < w->count && !any_shared; s++) any_shared = w->shared[s];
    if (any_shared) {
        size_t cells = w->count * (size_t)width;
        for (size_t i = 0; i < cells; i++) {
            int32_t t = w->rows[i];
            if (t >= 0 && w->shared[t]) {
                memcpy(w->counted_mark, w->shared_union, (size_t)w->num_terminals);
                w->stop = STOP_SHARED;
                return 0;
            }
        }
    }
    return 0;
}

/* ---- arguments --------------------------------------------------------------------------- */

enum {
    A_MOVES, A_ACCEPTING, A_TERM_OF, A_COUNT_INDEX, A_COUNT_FLAGS, A_IGNORED, A_BOUND_OF,
    A_CTX_PTR, A_CTX_ENTRIES, NUM_ARGS
};

static PyObject *build_lexer(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[NUM_ARGS];
    long long max_states;
    double deadline;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOLd:build_lexer", &obj[0], &obj[1], &obj[2], &obj[3],
                          &obj[4], &obj[5], &obj[6], &obj[7], &obj[8], &max_states, &deadline))
        return NULL;
    Table a[NUM_ARGS];
    memset(a, 0, sizeof a);
    Walk w;
    memset(&w, 0, sizeof w);
    PyObject *result = NULL;
    if (PyObject_GetBuffer(obj[A_MOVES], &a[A_MOVES].view,
                           PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0)
        goto done;
    a[A_MOVES].held = 1;
    if (a[A_MOVES].view.ndim != 2 || !kernel_is_int(&a[A_MOVES].view, 4)) {
        PyErr_SetString(PyExc_ValueError, "moves must be a C-contiguous int32[T, C] array");
        goto done;
    }
    Py_ssize_t num_threads = a[A_MOVES].view.shape[0];
    PyBuffer_Release(&a[A_MOVES].view);
    a[A_MOVES].held = 0;
    if (take_int32(obj[A_MOVES], &a[A_MOVES], 2, -1, num_threads, "moves") < 0 ||
        take_flags(obj[A_ACCEPTING], &a[A_ACCEPTING], num_threads, "accepting") < 0 ||
        take_flags(obj[A_IGNORED], &a[A_IGNORED], PyObject_Length(obj[A_IGNORED]), "ignored") <
            0)
        goto done;
    Py_ssize_t width = a[A_MOVES].width, num_terminals = a[A_IGNORED].n;
    if (width < 1) {
        PyErr_SetString(PyExc_ValueError, "moves must have a class");
        goto done;
    }
    if (take_int32(obj[A_TERM_OF], &a[A_TERM_OF], 1, 0, num_terminals, "term_of") < 0 ||
        take_int32(obj[A_BOUND_OF], &a[A_BOUND_OF], 1, -1, INT32_MAX, "bound_of") < 0 ||
        take_int32(obj[A_COUNT_FLAGS], &a[A_COUNT_FLAGS], 2, 0, 2, "count_flags") < 0)
        goto done;
    /* count_flags is int32 0/1 per (counting row, class). */
    if (take_int32(obj[A_COUNT_INDEX], &a[A_COUNT_INDEX], 1, -1, a[A_COUNT_FLAGS].n,
                   "count_index") < 0 ||
        take_int32(obj[A_CTX_ENTRIES], &a[A_CTX_ENTRIES], 1, 0, num_threads, "ctx_entries") < 0 ||
        take_int32(obj[A_CTX_PTR], &a[A_CTX_PTR], 1, 0, a[A_CTX_ENTRIES].n + 1, "ctx_ptr") < 0)
        goto done;
    if (a[A_TERM_OF].n != num_threads || a[A_COUNT_INDEX].n != num_threads ||
        a[A_BOUND_OF].n != num_terminals || a[A_CTX_PTR].n < 1 ||
        (a[A_COUNT_FLAGS].n > 0 && a[A_COUNT_FLAGS].width != width)) {
        PyErr_SetString(PyExc_ValueError, "lexer arrays disagree in length");
        goto done;
    }
    const int32_t *ptr = a[A_CTX_PTR].view.buf;
    Py_ssize_t num_ctx = a[A_CTX_PTR].n - 1;
    for (Py_ssize_t i = 0; i < num_ctx; i++) {
        if (ptr[i] > ptr[i + 1]) {
            PyErr_SetString(PyExc_ValueError, "ctx_ptr must not decrease");
            goto done;
        }
    }
    if (ptr[0] != 0 || ptr[num_ctx] != a[A_CTX_ENTRIES].n) {
        PyErr_SetString(PyExc_ValueError, "ctx_ptr must span ctx_entries");
        goto done;
    }
    w.num_threads = num_threads;
    w.width = width;
    w.num_terminals = num_terminals;
    w.moves = a[A_MOVES].view.buf;
    w.accepting = a[A_ACCEPTING].view.buf;
    w.term_of = a[A_TERM_OF].view.buf;
    w.count_index = a[A_COUNT_INDEX].view.buf;
    w.ignored = a[A_IGNORED].view.buf;
    w.bound_of = a[A_BOUND_OF].view.buf;
    w.max_states = max_states < MAX_HARD ? max_states : MAX_HARD;
    w.deadline = deadline;
    for (Py_ssize_t t = 0; t < num_terminals; t++)
        if (w.bound_of[t] >= 0) w.any_counted = 1;
    /* count_flags arrive as int32; narrow them to one byte per cell once. */
    size_t flag_cells = (size_t)a[A_COUNT_FLAGS].n * (size_t)width;
    uint8_t *flags8 = PyMem_Malloc(flag_cells + 1);
    w.cur = PyMem_Malloc(((size_t)num_threads + 1) * sizeof(int32_t));
    w.moved = PyMem_Malloc(((size_t)num_threads + 1) * sizeof(int32_t));
    w.flags = PyMem_Malloc((size_t)width);
    w.counted_mark = PyMem_Calloc((size_t)num_terminals + 1, 1);
    w.shared_union = PyMem_Calloc((size_t)num_terminals + 1, 1);
    if (!flags8 || !w.cur || !w.moved || !w.flags || !w.counted_mark || !w.shared_union) {
        PyMem_Free(flags8);
        PyErr_NoMemory();
        goto done;
    }
    const int32_t *flags32 = a[A_COUNT_FLAGS].view.buf;
    for (size_t i = 0; i < flag_cells; i++) flags8[i] = (uint8_t)flags32[i];
    w.count_flags = flags8;
    int failed = rehash(&w, 1024) < 0 || run(&w, ptr, a[A_CTX_ENTRIES].view.buf, num_ctx) < 0;
    PyMem_Free(flags8);
    if (failed) goto done;
    if (w.stop != STOP_NONE) {
        PyObject *counted = PyList_New(0);
        if (!counted) goto done;
        for (Py_ssize_t t = 0; t < num_terminals && w.stop == STOP_SHARED; t++) {
            if (!w.counted_mark[t]) continue;
            PyObject *item = PyLong_FromSsize_t(t);
            if (!item || PyList_Append(counted, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(counted);
                goto done;
            }
            Py_DECREF(item);
        }
        result = Py_BuildValue("(iN)", w.stop, counted);
        goto done;
    }
    size_t n = w.count;
    PyObject *parts[6] = {
        bytearray_of(w.rows, n * (size_t)width * sizeof(int32_t)),
        bytearray_of(w.label, n * sizeof(int32_t)),
        bytearray_of(w.restart, n * sizeof(int32_t)),
        bytearray_of(w.bound, n * sizeof(int32_t)),
        bytearray_of(w.char_start, n * (size_t)width),
        bytearray_of(w.starts, w.num_starts * sizeof(int32_t)),
    };
    int ok = 1;
    for (int i = 0; i < 6; i++) ok &= parts[i] != NULL;
    if (ok) {
        result = Py_BuildValue("(i(NNNNNN))", STOP_NONE, parts[0], parts[1], parts[2],
                               parts[3], parts[4], parts[5]);
    } else {
        for (int i = 0; i < 6; i++) Py_XDECREF(parts[i]);
    }
done:
    for (int i = 0; i < NUM_ARGS; i++)
        if (a[i].held) PyBuffer_Release(&a[i].view);
    walk_free(&w);
    return result;
}

static PyMethodDef methods[] = {
    {"build_lexer", build_lexer, METH_VARARGS,
     "build_lexer(moves, accepting, term_of, count_index, count_flags, ignored, bound_of, "
     "ctx_ptr, ctx_entries, max_states, deadline) -> (stop, result)\n\n"
     "The lexer states of `_build_lexer_from_dfas`. stop 0: result is (rows int32[N, C], "
     "label, restart, bound int32[N], char_start bool[N, C], starts int32[K]) as bytearrays; "
     "1: max_states passed; 2: the deadline (a time.monotonic() value, inf for none) "
     "passed; 3: a counted item starts beside another lexeme, result lists the counted "
     "terminals."},
    {NULL, NULL, 0, NULL},
};

int add_lexer(PyObject *module) { return PyModule_AddFunctions(module, methods); }
