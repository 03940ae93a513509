/* The vocabulary walk of the DFA route (`walk.py`'s `walk_live_tokens`) in C.
 *
 * For every token of the trie, which origins (start states) keep the DFA alive. The numpy
 * walk went level by level, sorting and OR-reducing the frontier of (node, state) pairs at
 * every depth; for a 4,060-state JSON Schema over Llama 3's 128k tokens that was ~0.7 s of
 * a 2 s compile budget. Here the trie is walked depth first with an explicit stack (tokens
 * are hundreds of bytes deep). Each node holds a small set of entries (state -> bitset of
 * origins): the parent's entries moved by the node's byte, each next state replaced by its
 * liveness class at the node's height (`LivenessLevels`), equal states merged by OR-ing
 * their bitsets, plus the node's injected pairs. That set is exactly the frontier the
 * level walk holds at the node, so the answers are the same:
 * - a token's row is the OR of its node's entries' bitsets, written only when the node
 *   holds an entry (other rows are left as they are);
 * - a move into a sink state is an event (node, raw sink state, bits), merged per
 *   (node, state), never expanded nor marked reached; events come out sorted by node then
 *   state (nodes are visited in ascending id, the trie's depth-first numbering);
 * - injected pairs join at their node (not sink-checked, mapped to their class there);
 *   injections at the root are ignored, as the level walk starts at depth 1;
 * - a subtree is skipped when its root holds no entry and no injection lies below it.
 *
 * Only the Python C API is used (no numpy headers): arrays come in through the buffer
 * protocol; the output rows through their strides (a column slice of a wider matrix).
 */
#include "module.h"
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Clock reads are ~20 ns; once every this many visited nodes keeps them out of the cost. */
#define DEADLINE_EVERY 4096

enum {
    TRANS,         /* int32[S * C] */
    CLASS_OF_BYTE, /* int32[256] */
    SINKS,         /* bool[S] */
    CANON,         /* int32[K * S] */
    ROW_OF_HEIGHT, /* int64[H + 1] */
    NODE_BYTE,     /* uint8[N] */
    NODE_HEIGHT,   /* int32[N] */
    LEVEL_NODES,   /* int32[N] */
    CHILD_LO,      /* int64[N] */
    CHILD_HI,      /* int64[N] */
    TOKEN_START,   /* int64[N + 1] */
    TOKEN_ROWS,    /* int64[T] */
    START_STATES,  /* int64[R0] */
    START_ORIGINS, /* int64[R0] */
    INJ_NODES,     /* int64[I], ascending */
    INJ_STATES,    /* int64[I] */
    INJ_ORIGINS,   /* int64[I] */
    NUM_ARRAYS
};

static const int item_sizes[NUM_ARRAYS] = {4, 4, 1, 4, 8, 1, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8};

/* One trie node on the walk's stack: its entries and the children still to visit. */
typedef struct {
    int64_t node;
    size_t entries_lo, entries_hi; /* its entries in the arena */
    int64_t child_pos, child_hi;   /* next child position in level_nodes, end of the run */
    int64_t end;                   /* one past the last node id of its subtree */
} Frame;

typedef struct {
    /* The entries of every node on the stack, parent's below child's. */
    int32_t *state;
    uint64_t *bits;
    size_t cap;
    /* Sink events, in visiting order. */
    int64_t *ev_node, *ev_state;
    uint64_t *ev_bits;
    size_t ev_len, ev_cap;
    Frame *frames;
    size_t num_frames, frames_cap;
    int32_t *slot;    /* [S]: arena index of the state's entry at the node being built, or -1 */
    int32_t *ev_slot; /* [S]: event index of the sink state at that node, or -1 */
    uint64_t *row;    /* [words]: a token row being assembled */
} Walk;

static void walk_free(Walk *w) {
    PyMem_Free(w->state);
    PyMem_Free(w->bits);
    PyMem_Free(w->ev_node);
    PyMem_Free(w->ev_state);
    PyMem_Free(w->ev_bits);
    PyMem_Free(w->frames);
    PyMem_Free(w->slot);
    PyMem_Free(w->ev_slot);
    PyMem_Free(w->row);
}

/* Room for `need` entries in the arena (state and bits grow together). */
static int arena_reserve(Walk *w, size_t need, size_t words) {
    if (need <= w->cap) return 0;
    if (need > INT32_MAX) { /* `slot` holds arena indices as int32 */
        PyErr_SetString(PyExc_MemoryError, "walk: more than 2^31 live pairs on one path");
        return -1;
    }
    size_t cap = w->cap, cap_bits = w->cap;
    void *state = w->state, *bits = w->bits;
    if (kernel_grow(&state, &cap, need, sizeof(int32_t)) < 0) return -1;
    w->state = state;
    if (kernel_grow(&bits, &cap_bits, need, words * sizeof(uint64_t)) < 0) return -1;
    w->bits = bits;
    w->cap = cap;
    return 0;
}

static int events_reserve(Walk *w, size_t need, size_t words) {
    if (need <= w->ev_cap) return 0;
    size_t c1 = w->ev_cap, c2 = w->ev_cap, c3 = w->ev_cap;
    void *a = w->ev_node, *b = w->ev_state, *c = w->ev_bits;
    int failed = kernel_grow(&a, &c1, need, sizeof(int64_t)) < 0;
    w->ev_node = a;
    failed = failed || kernel_grow(&b, &c2, need, sizeof(int64_t)) < 0;
    w->ev_state = b;
    failed = failed || kernel_grow(&c, &c3, need, words * sizeof(uint64_t)) < 0;
    w->ev_bits = c;
    if (failed) return -1;
    w->ev_cap = c1;
    return 0;
}

static inline void or_words64(uint64_t *into, const uint64_t *from, size_t words) {
    for (size_t k = 0; k < words; k++) into[k] |= from[k];
}

/* Merge (state, bits) into the entries of the node being built, which end at *hi (`slot`
 * finds a state's entry among them). */
static inline void add_entry(Walk *w, size_t words, int32_t state, const uint64_t *bits,
                             size_t *hi) {
    int32_t at = w->slot[state];
    if (at >= 0) {
        or_words64(w->bits + (size_t)at * words, bits, words);
        return;
    }
    w->slot[state] = (int32_t)*hi;
    w->state[*hi] = state;
    memcpy(w->bits + *hi * words, bits, words * sizeof(uint64_t));
    (*hi)++;
}

/* Sort the events from `lo` on (one node's) by state: few, so insertion sort. */
static void sort_events(Walk *w, size_t lo, size_t words) {
    for (size_t i = lo + 1; i < w->ev_len; i++) {
        for (size_t j = i; j > lo && w->ev_state[j - 1] > w->ev_state[j]; j--) {
            int64_t s = w->ev_state[j];
            w->ev_state[j] = w->ev_state[j - 1];
            w->ev_state[j - 1] = s;
            uint64_t *a = w->ev_bits + (j - 1) * words, *b = w->ev_bits + j * words;
            for (size_t k = 0; k < words; k++) {
                uint64_t t = a[k];
                a[k] = b[k];
                b[k] = t;
            }
        }
    }
}

/* Row `t` of the strided uint64[T, words] `out` := `row`. */
static inline void write_row(const Py_buffer *out, int64_t t, const uint64_t *row,
                             size_t words) {
    char *dst = (char *)out->buf + t * out->strides[0];
    if (out->strides[1] == 8) {
        memcpy(dst, row, words * sizeof(uint64_t));
        return;
    }
    for (size_t j = 0; j < words; j++) memcpy(dst + (Py_ssize_t)j * out->strides[1], &row[j], 8);
}

static PyObject *bytes_of(const void *data, size_t len) {
    return PyByteArray_FromStringAndSize(data ? (const char *)data : "", (Py_ssize_t)len);
}

/* The walk's inputs: the arrays (see the enum above) and their sizes. */
typedef struct {
    const int32_t *trans, *class_of, *canon, *node_height, *level_nodes;
    const uint8_t *sinks, *node_byte;
    const int64_t *row_of_height, *child_lo, *child_hi, *token_start, *token_rows;
    const int64_t *start_states, *start_origins, *inj_nodes, *inj_states, *inj_origins;
    int64_t C, S, K, H, N, T, R0, I;
    size_t words;
    const Py_buffer *out;
} Tables;

/* 0 when every index the walk reads up front is in range; -1 with ValueError. Values
 * read per node (moves, classes, child runs, token rows) are checked where read. */
static int check_tables(const Tables *t, const Py_buffer *views) {
    const int64_t num_bits = (int64_t)t->words * 64;
    if (t->C <= 0 || t->S > INT32_MAX || views[TRANS].len / 4 != t->S * t->C ||
        views[CLASS_OF_BYTE].len != 256 * 4 || views[CANON].len / 4 != t->K * t->S ||
        (t->S && t->K < 1) || t->H < 1 || t->N < 1 || t->N > INT32_MAX ||
        views[NODE_HEIGHT].len / 4 != t->N || views[LEVEL_NODES].len / 4 != t->N ||
        views[CHILD_LO].len / 8 != t->N || views[CHILD_HI].len / 8 != t->N ||
        views[TOKEN_START].len / 8 != t->N + 1 || views[TOKEN_ROWS].len / 8 != t->T ||
        views[START_ORIGINS].len / 8 != t->R0 || views[INJ_STATES].len / 8 != t->I ||
        views[INJ_ORIGINS].len / 8 != t->I) {
        PyErr_SetString(PyExc_ValueError, "walk: inconsistent array sizes");
        return -1;
    }
    for (int b = 0; b < 256; b++) {
        if (t->class_of[b] < 0 || t->class_of[b] >= t->C) {
            PyErr_SetString(PyExc_ValueError, "walk: a byte class out of the table");
            return -1;
        }
    }
    for (int64_t i = 0; i < t->R0; i++) {
        if (t->start_states[i] < 0 || t->start_states[i] >= t->S || t->start_origins[i] < 0 ||
            t->start_origins[i] >= num_bits) {
            PyErr_SetString(PyExc_ValueError, "walk: a start state or origin out of range");
            return -1;
        }
    }
    for (int64_t i = 0; i < t->I; i++) {
        if (t->inj_nodes[i] < 0 || t->inj_nodes[i] >= t->N ||
            (i && t->inj_nodes[i] < t->inj_nodes[i - 1]) || t->inj_states[i] < 0 ||
            t->inj_states[i] >= t->S || t->inj_origins[i] < 0 || t->inj_origins[i] >= num_bits) {
            PyErr_SetString(PyExc_ValueError,
                            "walk: injections out of range or not sorted by node");
            return -1;
        }
    }
    for (int64_t i = 0; i <= t->N; i++) {
        if (t->token_start[i] < (i ? t->token_start[i - 1] : 0) || t->token_start[i] > t->T) {
            PyErr_SetString(PyExc_ValueError, "walk: token starts not ascending within T");
            return -1;
        }
    }
    return 0;
}

/* Build node c's entries on top of the arena from its parent's [parent_lo, parent_hi) and
 * its injections [inj_lo, inj_hi); record its sink events and write its tokens' rows.
 * The entries end up at [parent_hi, *hi). -1 with an exception set on bad tables. */
static int visit(Walk *w, const Tables *t, int64_t c, size_t parent_lo, size_t parent_hi,
                 int64_t inj_lo, int64_t inj_hi, size_t *hi) {
    const size_t words = t->words;
    size_t lo = parent_hi;
    *hi = lo;
    if (arena_reserve(w, lo + (parent_hi - parent_lo) + (size_t)(inj_hi - inj_lo), words) < 0)
        return -1;
    int64_t height = t->node_height[c] < t->H - 1 ? t->node_height[c] : t->H - 1;
    int64_t canon_row = height >= 0 ? t->row_of_height[height] : -1;
    if (canon_row < 0 || canon_row >= t->K) {
        PyErr_SetString(PyExc_ValueError, "walk: a height's level out of the table");
        return -1;
    }
    const int32_t *canon_of = t->canon + canon_row * t->S;
    const int32_t cls = t->class_of[t->node_byte[c]];
    size_t ev_lo = w->ev_len;
    for (size_t e = parent_lo; e < parent_hi; e++) {
        int32_t next = t->trans[(int64_t)w->state[e] * t->C + cls];
        if (next < 0) continue;
        if (next >= t->S) {
            PyErr_SetString(PyExc_ValueError, "walk: a move out of the table");
            return -1;
        }
        const uint64_t *bits = w->bits + e * words;
        if (t->sinks[next]) {
            int32_t at = w->ev_slot[next];
            if (at >= 0) {
                or_words64(w->ev_bits + (size_t)at * words, bits, words);
                continue;
            }
            if (events_reserve(w, w->ev_len + 1, words) < 0) return -1;
            w->ev_slot[next] = (int32_t)w->ev_len;
            w->ev_node[w->ev_len] = c;
            w->ev_state[w->ev_len] = next;
            memcpy(w->ev_bits + w->ev_len * words, bits, words * sizeof(uint64_t));
            w->ev_len++;
            continue;
        }
        int32_t q = canon_of[next];
        if (q < 0 || q >= t->S) {
            PyErr_SetString(PyExc_ValueError, "walk: a class out of the table");
            return -1;
        }
        add_entry(w, words, q, bits, hi);
    }
    for (int64_t j = inj_lo; j < inj_hi; j++) {
        int32_t q = canon_of[t->inj_states[j]];
        if (q < 0 || q >= t->S) {
            PyErr_SetString(PyExc_ValueError, "walk: a class out of the table");
            return -1;
        }
        memset(w->row, 0, words * sizeof(uint64_t));
        w->row[t->inj_origins[j] / 64] = (uint64_t)1 << (t->inj_origins[j] % 64);
        add_entry(w, words, q, w->row, hi);
    }
    for (size_t e = lo; e < *hi; e++) w->slot[w->state[e]] = -1;
    for (size_t i = ev_lo; i < w->ev_len; i++) w->ev_slot[w->ev_state[i]] = -1;
    sort_events(w, ev_lo, words);
    if (*hi == lo) return 0;
    memset(w->row, 0, words * sizeof(uint64_t));
    for (size_t e = lo; e < *hi; e++) or_words64(w->row, w->bits + e * words, words);
    for (int64_t k = t->token_start[c]; k < t->token_start[c + 1]; k++) {
        if (t->token_rows[k] < 0 || t->token_rows[k] >= t->T) {
            PyErr_SetString(PyExc_ValueError, "walk: a token row out of range");
            return -1;
        }
        write_row(t->out, t->token_rows[k], w->row, words);
    }
    return 0;
}

static int push_frame(Walk *w, Frame frame) {
    void *frames = w->frames;
    if (kernel_grow(&frames, &w->frames_cap, w->num_frames + 1, sizeof(Frame)) < 0) return -1;
    w->frames = frames;
    w->frames[w->num_frames++] = frame;
    return 0;
}

/* The depth-first walk from the root: 1 when done, 0 when the deadline passed, -1 with an
 * exception set. */
static int run(Walk *w, const Tables *t, double deadline) {
    const size_t words = t->words;
    const size_t S = (size_t)t->S;
    w->slot = PyMem_Malloc((S ? S : 1) * sizeof(int32_t));
    w->ev_slot = PyMem_Malloc((S ? S : 1) * sizeof(int32_t));
    w->row = PyMem_Malloc((words ? words : 1) * sizeof(uint64_t));
    if (!w->slot || !w->ev_slot || !w->row) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t s = 0; s < S; s++) w->slot[s] = w->ev_slot[s] = -1;

    /* The root's entries: the origins that start there, by raw state (merging them
     * before the first move or after it gives the same pairs). */
    if (arena_reserve(w, (size_t)t->R0 + 1, words) < 0) return -1;
    size_t top = 0;
    for (int64_t i = 0; i < t->R0; i++) {
        memset(w->row, 0, words * sizeof(uint64_t));
        w->row[t->start_origins[i] / 64] = (uint64_t)1 << (t->start_origins[i] % 64);
        add_entry(w, words, (int32_t)t->start_states[i], w->row, &top);
    }
    for (size_t e = 0; e < top; e++) w->slot[w->state[e]] = -1;
    if (push_frame(w, (Frame){0, 0, top, t->child_lo[0], t->child_hi[0], t->N}) < 0) return -1;

    int64_t cursor = 0; /* the first injection at or after the node being visited */
    int64_t last_visited = 0;
    size_t visited = 0;
    while (w->num_frames) {
        Frame *f = &w->frames[w->num_frames - 1];
        if (f->child_pos >= f->child_hi) {
            w->num_frames--;
            continue;
        }
        if (f->child_pos < 0 || f->child_hi > t->N) {
            PyErr_SetString(PyExc_ValueError, "walk: a child run out of the trie");
            return -1;
        }
        int64_t c = t->level_nodes[f->child_pos++];
        int64_t c_end = f->child_pos < f->child_hi ? t->level_nodes[f->child_pos] : f->end;
        if (c <= last_visited || c >= t->N || c_end > f->end || c_end <= c) {
            PyErr_SetString(PyExc_ValueError, "walk: trie nodes not numbered depth first");
            return -1;
        }
        last_visited = c;
        if (visited++ % DEADLINE_EVERY == 0 && kernel_monotonic_s() > deadline) return 0;
        while (cursor < t->I && t->inj_nodes[cursor] < c) cursor++;
        int64_t inj_hi = cursor;
        while (inj_hi < t->I && t->inj_nodes[inj_hi] == c) inj_hi++;
        size_t lo = f->entries_hi, hi;
        if (visit(w, t, c, f->entries_lo, f->entries_hi, cursor, inj_hi, &hi) < 0) return -1;
        cursor = inj_hi;
        int has_children = t->child_lo[c] < t->child_hi[c];
        int injected_below = cursor < t->I && t->inj_nodes[cursor] < c_end;
        if (has_children && (hi > lo || injected_below)) {
            Frame child = {c, lo, hi, t->child_lo[c], t->child_hi[c], c_end};
            if (push_frame(w, child) < 0) return -1;
        }
    }
    return 1;
}

static PyObject *walk_live_tokens(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != NUM_ARRAYS) {
        PyErr_Format(PyExc_TypeError,
                     "walk(arrays: tuple of %d, num_classes, out, deadline) expected",
                     NUM_ARRAYS);
        return NULL;
    }
    long long num_classes = PyLong_AsLongLong(args[1]);
    double deadline = PyFloat_AsDouble(args[3]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer views[NUM_ARRAYS], out;
    int held = 0, out_held = 0;
    PyObject *result = NULL;
    Walk w;
    memset(&w, 0, sizeof w);
    for (; held < NUM_ARRAYS; held++) {
        PyObject *item = PyTuple_GET_ITEM(args[0], held);
        if (PyObject_GetBuffer(item, &views[held], PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (views[held].itemsize != item_sizes[held]) {
            PyErr_Format(PyExc_TypeError, "walk: array %d has items of %zd bytes, expected %d",
                         held, views[held].itemsize, item_sizes[held]);
            held++;
            goto done;
        }
    }
    if (PyObject_GetBuffer(args[2], &out, PyBUF_WRITABLE | PyBUF_STRIDES) < 0) goto done;
    out_held = 1;
    if (out.ndim != 2 || out.itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "walk: out is not a 2-D array of 8-byte words");
        goto done;
    }
    int64_t S = views[SINKS].len;
    Tables t = {
        .trans = views[TRANS].buf,
        .class_of = views[CLASS_OF_BYTE].buf,
        .canon = views[CANON].buf,
        .node_height = views[NODE_HEIGHT].buf,
        .level_nodes = views[LEVEL_NODES].buf,
        .sinks = views[SINKS].buf,
        .node_byte = views[NODE_BYTE].buf,
        .row_of_height = views[ROW_OF_HEIGHT].buf,
        .child_lo = views[CHILD_LO].buf,
        .child_hi = views[CHILD_HI].buf,
        .token_start = views[TOKEN_START].buf,
        .token_rows = views[TOKEN_ROWS].buf,
        .start_states = views[START_STATES].buf,
        .start_origins = views[START_ORIGINS].buf,
        .inj_nodes = views[INJ_NODES].buf,
        .inj_states = views[INJ_STATES].buf,
        .inj_origins = views[INJ_ORIGINS].buf,
        .C = num_classes,
        .S = S,
        .K = S ? views[CANON].len / 4 / S : 0,
        .H = views[ROW_OF_HEIGHT].len / 8,
        .N = views[NODE_BYTE].len,
        .T = out.shape[0],
        .R0 = views[START_STATES].len / 8,
        .I = views[INJ_NODES].len / 8,
        .words = (size_t)out.shape[1],
        .out = &out,
    };
    if (check_tables(&t, views) < 0) goto done;
    int done_walking = run(&w, &t, deadline);
    if (done_walking < 0) goto done;
    if (!done_walking) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *ev_node = bytes_of(w.ev_node, w.ev_len * sizeof(int64_t));
    PyObject *ev_state = bytes_of(w.ev_state, w.ev_len * sizeof(int64_t));
    PyObject *ev_bits = bytes_of(w.ev_bits, w.ev_len * t.words * sizeof(uint64_t));
    if (ev_node && ev_state && ev_bits) result = PyTuple_Pack(3, ev_node, ev_state, ev_bits);
    Py_XDECREF(ev_node);
    Py_XDECREF(ev_state);
    Py_XDECREF(ev_bits);
done:
    walk_free(&w);
    if (out_held) PyBuffer_Release(&out);
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"walk_live_tokens", (PyCFunction)(void (*)(void))walk_live_tokens, METH_FASTCALL,
     "walk_live_tokens(arrays, num_classes, out, deadline) -> (event nodes, states, bits) as bytearrays, "
     "or None when time.monotonic() passed deadline; writes the reached rows into out"},
    {NULL, NULL, 0, NULL},
};

int add_live_walk(PyObject *module) { return PyModule_AddFunctions(module, methods); }
