/* What the subset and product walks share (subset.c, subset_overlap.c): the budget they
 * check as the Python `Budget` would, the rows they append, the set-of-states index and
 * the argument and result shapes. See subset.c for the model. */
#ifndef FSMCOMPILE_SUBSET_H
#define FSMCOMPILE_SUBSET_H

#include "module.h"

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

static inline int past_deadline(Limits *l) {
    if (!kernel_past(l->deadline)) return 0;
    l->stop = STOP_DEADLINE;
    return 1;
}

/* `Budget.reserve(reserve_base + id)` for every RESERVE_EVERY-th new state: 1 to stop. */
static inline int reserve_state(Limits *l, int64_t id) {
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
static inline int reserve_members(Limits *l, Py_ssize_t count) {
    l->members += count;
    if (l->members <= l->members_left) return 0;
    l->stop = STOP_MEMBERS;
    l->value = l->members;
    return 1;
}

/* Whether state `id` is past what int32 codes hold (only with an absurd max_states). */
static inline int too_many(int64_t id) {
    if (id < MAX_STATES_HARD) return 0;
    PyErr_SetString(PyExc_MemoryError, "too many automaton states for int32 state ids");
    return 1;
}

/* `Budget.tick()` before walking state `i`: 1 to stop. */
static inline int tick(Limits *l, Py_ssize_t i) {
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
static inline int32_t *out_row(Out *o) {
    if (kernel_grow((void **)&o->rows, &o->rows_cap, (o->count + 1) * (size_t)o->width + 1,
             sizeof(int32_t)) < 0 ||
        kernel_grow((void **)&o->acc, &o->acc_cap, o->count + 1, 1) < 0)
        return NULL;
    return o->rows + o->count * (size_t)o->width;
}

void out_free(Out *o);

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* ---- interning sets: sorted int64 sequence -> state id --------------------------------- */

typedef struct {
    int64_t *elems; /* the keys end to end, in id order */
    size_t *start;  /* key `id` is elems[start[id] .. start[id + 1]) */
    uint64_t *hash; /* per id */
    int32_t *slots; /* per slot: id, -1 empty */
    size_t elems_cap, start_cap, hash_cap, mask, count;
} SetIndex;

int sets_init(SetIndex *s);
/* The id of `key` (`len` members), added as the next state if new (*added set): -1 on
 * error. `key` must not point into the index (adding may move it). */
int64_t sets_intern(SetIndex *s, const int64_t *key, Py_ssize_t len, int *added);
/* Copy key `id` into `*into` (grown as needed): its length, or -1 on error. */
Py_ssize_t sets_copy(const SetIndex *s, size_t id, int64_t **into, size_t *cap);
void sets_free(SetIndex *s);
/* Sort `v` and drop repeats (a Python set made a sorted tuple): the new length. */
Py_ssize_t sort_unique(int64_t *v, Py_ssize_t n);

/* limits = (max_states, deadline, set members left, reserve base). */
int take_limits(PyObject *obj, Limits *l);
/* (rows: bytearray of int32[count, width], accepting: bytearray of bool[count], stop,
 * value, members), plus `extra` when given (stolen). */
PyObject *result_of(const Out *o, const Limits *l, PyObject *extra);

#endif
