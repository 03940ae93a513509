/* What the two steps of the LALR(1) analysis share (lalr_lr0.c, lalr_lookaheads.c): the
 * compile's deadline read every CLOCK_EVERY steps, the integer grammar, int32 columns in
 * and out. See lalr_lr0.c for the model. */
#ifndef FSMCOMPILE_LALR_H
#define FSMCOMPILE_LALR_H

#include "module.h"

/* ---- the deadline ---------------------------------------------------------------------- */

#define CLOCK_EVERY 1024 /* steps of work between clock reads (a step: 5 ns to 1 us) */

typedef struct {
    double deadline; /* a time.monotonic() value, +inf for none */
    Py_ssize_t work; /* steps since the clock was last read */
} Clock;

/* Count `steps` more steps of work: 1 once the deadline has passed. */
static inline int late(Clock *c, Py_ssize_t steps) {
    c->work += steps;
    if (c->work < CLOCK_EVERY) return 0;
    c->work = 0;
    return kernel_past(c->deadline);
}

/* The deadline argument: -1 with TypeError set when it is no number. */
int clock_of(PyObject *deadline, Clock *c);

/* ---- growable int32 columns ---------------------------------------------------------- */

/* ---- buffers in, bytearrays out ------------------------------------------------------ */

/* Open `count` int32 vectors args[0..count); their lengths in lens. */
int open_int32(PyObject *const *args, Py_buffer *views, Py_ssize_t *lens, int count,
               const char *const *names, int *opened);
/* A CSR start column (int32[n + 1]) of per-row counts, counts[i] for row i. */
int32_t *starts_of(const int32_t *row, Py_ssize_t len, Py_ssize_t n);
int cmp_int32(const void *a, const void *b);

/* An int32 column out, as a bytearray of native int32s. */
static inline PyObject *column_out(const int32_t *items, Py_ssize_t len) {
    return bytearray_of(items, (size_t)len * sizeof(int32_t));
}

/* The value of `key`, or -1 (values are ids). */
static inline int32_t lookup(const Map *m, int64_t key) {
    int64_t value;
    return map_get(m, key, &value) ? (int32_t)value : -1;
}

/* A map with room for `want` keys before it grows. */
static inline int map_for(Map *m, size_t want) {
    return map_init(m, want * 2 > 64 ? want * 2 : 64);
}

/* ---- the grammar ----------------------------------------------------------------------- */

/* The integer grammar of `lalr.py`'s `_Grammar`: nonterminals 0..N-1, terminals N..S-1
 * ($END first), LR(0) item item_base[r] + dot of rule r (item_base[R] = I). */
typedef struct {
    const int32_t *item_next;   /* [I]: the symbol after the dot, or -1 */
    const int32_t *item_rule;   /* [I] */
    const int32_t *item_base;   /* [R + 1] */
    const int32_t *rule_origin; /* [R] */
    const int32_t *nullable;    /* [N]: 0 or 1 */
    Py_ssize_t num_items, num_rules;
    int32_t num_nt, num_symbols;
} Grammar;

enum { G_ITEM_NEXT, G_ITEM_RULE, G_ITEM_BASE, G_RULE_ORIGIN, G_NULLABLE, G_COUNT };

/* Open the grammar's columns (args[0..G_COUNT)) and check that every id in them is in
 * range, so the walks below index without checks. */
int grammar_open(Grammar *g, PyObject *const *args, long num_nt, long num_symbols,
                 Py_buffer *views, int *opened);

#endif
