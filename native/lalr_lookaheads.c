/* The second step of the LALR(1) analysis (see lalr_lr0.c): DeRemer-Pennello lookaheads
 * over the LR(0) automaton, with lark's `digraph` and its set sharing. */
#include "lalr.h"

#include <stdlib.h>
#include <string.h>

/* ---- lookaheads ----------------------------------------------------------------------- */

enum { L_CLOSURE_START, L_CLOSURE_ITEMS, L_TRANS_START, L_TRANS_SYM, L_TRANS_TARGET, L_COUNT };
static const char *const lr0_names[L_COUNT] = {"closure_start", "closure_items", "trans_start",
                                               "trans_sym", "trans_target"};

typedef struct {
    const int32_t *closure_start, *closure_items, *trans_start, *trans_sym, *trans_target;
    int32_t num_states;
} Lr0;

/* Whether `start` (int32[n + 1]) runs from 0 up to `total` without going down. */
static int is_starts(const int32_t *start, Py_ssize_t n, Py_ssize_t total) {
    if (start[0] != 0 || start[n] != total) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (start[i + 1] < start[i]) return 0;
    return 1;
}

static int lr0_open(Lr0 *a, const Grammar *g, PyObject *const *args, Py_buffer *views,
                    int *opened) {
    Py_ssize_t lens[L_COUNT];
    if (open_int32(args, views, lens, L_COUNT, lr0_names, opened) < 0) return -1;
    a->closure_start = views[L_CLOSURE_START].buf;
    a->closure_items = views[L_CLOSURE_ITEMS].buf;
    a->trans_start = views[L_TRANS_START].buf;
    a->trans_sym = views[L_TRANS_SYM].buf;
    a->trans_target = views[L_TRANS_TARGET].buf;
    Py_ssize_t S = lens[L_CLOSURE_START] - 1;
    if (S < 1 || S >= INT32_MAX || lens[L_TRANS_START] != S + 1 ||
        lens[L_TRANS_SYM] != lens[L_TRANS_TARGET] ||
        !is_starts(a->closure_start, S, lens[L_CLOSURE_ITEMS]) ||
        !is_starts(a->trans_start, S, lens[L_TRANS_SYM])) {
        PyErr_SetString(PyExc_ValueError, "inconsistent LR(0) columns");
        return -1;
    }
    for (Py_ssize_t i = 0; i < lens[L_CLOSURE_ITEMS]; i++)
        if (a->closure_items[i] < 0 || a->closure_items[i] >= g->num_items) {
            PyErr_SetString(PyExc_ValueError, "an LR(0) item out of range");
            return -1;
        }
    for (Py_ssize_t i = 0; i < lens[L_TRANS_SYM]; i++)
        if (a->trans_sym[i] < 0 || a->trans_sym[i] >= g->num_symbols || a->trans_target[i] < 0 ||
            a->trans_target[i] >= S) {
            PyErr_SetString(PyExc_ValueError, "an LR(0) transition out of range");
            return -1;
        }
    a->num_states = (int32_t)S;
    return 0;
}

/* lark's `digraph` over nodes 0..n-1: F(x) = G(x) | F(y) for every y in rel[x], strongly
 * connected parts at once (Tarjan). `value[x]` is the cell holding x's set, read as G(x)
 * when x is entered; the members of a part are given its root's cell when the part is
 * done, as lark gives them one set object. An OR goes into a node's current cell, so it
 * reaches every node sharing that cell. `weight`, `path` and `frames` are scratch of n.
 * 1 when the deadline passed first. */
typedef struct {
    int32_t node, at, depth;
} Frame;

static inline void link_cells(uint64_t *cells, Py_ssize_t words, int32_t *weight,
                              const int32_t *value, int32_t x, int32_t y) {
    if (0 < weight[y] && weight[y] < weight[x]) weight[x] = weight[y];
    if (value[x] == value[y]) return;
    uint64_t *into = cells + (size_t)value[x] * (size_t)words;
    const uint64_t *from = cells + (size_t)value[y] * (size_t)words;
    for (Py_ssize_t w = 0; w < words; w++) into[w] |= from[w];
}

static int digraph(int32_t n, const int32_t *rel_start, const int32_t *rel, int32_t *value,
                   uint64_t *cells, Py_ssize_t words, int32_t *weight, int32_t *path,
                   Frame *frames, Clock *clock) {
    memset(weight, 0, (size_t)n * sizeof(int32_t));
    int32_t depth = 0, top = 0;
    for (int32_t origin = 0; origin < n; origin++) {
        if (weight[origin]) continue;
        path[depth++] = origin;
        weight[origin] = depth;
        frames[top++] = (Frame){origin, rel_start[origin], depth};
        while (top) {
            Frame *f = &frames[top - 1];
            int32_t x = f->node, entered = 0;
            while (f->at < rel_start[x + 1]) {
                if (late(clock, 1 + words)) return 1;
                int32_t y = rel[f->at++];
                if (weight[y] == 0) {
                    path[depth++] = y;
                    weight[y] = depth;
                    frames[top++] = (Frame){y, rel_start[y], depth};
                    entered = 1;
                    break;
                }
                link_cells(cells, words, weight, value, x, y);
            }
            if (entered) continue;
            top--;
            if (weight[x] == f->depth) {
                int32_t shared = value[x], z;
                do {
                    z = path[--depth];
                    weight[z] = -1;
                    value[z] = shared;
                } while (z != x);
            }
            if (top) link_cells(cells, words, weight, value, frames[top - 1].node, x);
        }
    }
    return 0;
}

/* Rows of (row, value) pairs as CSR, rows in order, each row's values in pair order. */
static int csr_of_pairs(const Vec *pairs, int32_t n, int32_t **start_out, int32_t **items_out) {
    Py_ssize_t len = pairs->len / 2;
    int32_t *start = PyMem_Calloc((size_t)n + 2, sizeof(int32_t));
    int32_t *items = PyMem_Malloc(((size_t)len + 1) * sizeof(int32_t));
    if (!start || !items) {
        PyMem_Free(start);
        PyMem_Free(items);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) start[pairs->items[2 * i] + 2]++;
    for (int32_t i = 0; i < n; i++) start[i + 2] += start[i + 1];
    for (Py_ssize_t i = 0; i < len; i++)
        items[start[pairs->items[2 * i] + 1]++] = pairs->items[2 * i + 1];
    *start_out = start;
    *items_out = items;
    return 0;
}

PyDoc_STRVAR(lookaheads_doc,
             "lalr_lookaheads(item_next, item_rule, item_base, rule_origin, nullable, num_nt, "
             "num_symbols, start, closure_start, closure_items, trans_start, trans_sym, "
             "trans_target, deadline, /)\n--\n\n"
             "Per state, the terminals some rule is reduced on and those rules: (la_start, "
             "la_sym, la_rule_start, la_rules), int32 bytearrays (la_* CSR by state, "
             "la_rules CSR by lookahead), all in first-seen order. None when "
             "time.monotonic() passed deadline (inf for none) first.");

static PyObject *lalr_lookaheads(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != G_COUNT + 4 + L_COUNT) {
        PyErr_SetString(PyExc_TypeError, "lalr_lookaheads takes 14 arguments");
        return NULL;
    }
    long num_nt = PyLong_AsLong(args[G_COUNT]);
    long num_symbols = PyLong_AsLong(args[G_COUNT + 1]);
    long start_nt = PyLong_AsLong(args[G_COUNT + 2]);
    Clock clock;
    if (PyErr_Occurred() || clock_of(args[G_COUNT + 3 + L_COUNT], &clock) < 0) return NULL;
    Py_buffer views[G_COUNT + L_COUNT];
    int opened = 0, opened_lr0 = 0;
    PyObject *result = NULL;
    Grammar g;
    Lr0 a;
    Map trans = {0};
    int32_t *node_of_trans = NULL, *node_state = NULL, *seen_nt = NULL, *last_seen = NULL,
            *rest_nullable = NULL, *items_start = NULL, *node_items = NULL, *read_start = NULL,
            *read_rel = NULL, *inc_start = NULL, *inc_rel = NULL, *value = NULL, *weight = NULL,
            *path = NULL, *lb_start = NULL, *pair_node = NULL, *pair_state = NULL,
            *pair_order = NULL, *pairs_start = NULL, *at = NULL, *term_stamp = NULL,
            *term_entry = NULL, *out_start = NULL, *out_rule_start = NULL, *out_rules = NULL;
    Frame *frames = NULL;
    uint64_t *cells = NULL;
    Vec nodes = {0}, reads = {0}, item_pairs = {0}, found = {0}, includes = {0}, lookback = {0},
        entry_sym = {0}, entry_head = {0}, entry_tail = {0}, rule_pool = {0};
    if (grammar_open(&g, args, num_nt, num_symbols, views, &opened) < 0) goto done;
    if (lr0_open(&a, &g, args + G_COUNT + 3, views + G_COUNT, &opened_lr0) < 0) goto done;
    if (start_nt < 0 || start_nt >= num_nt) {
        PyErr_SetString(PyExc_ValueError, "lookaheads: start out of range");
        goto done;
    }
    const int32_t N = g.num_nt, S = a.num_states, *item_next = g.item_next;
    const int32_t *closure_start = a.closure_start, *closure_items = a.closure_items;
    const Py_ssize_t num_trans = a.trans_start[S];
    const Py_ssize_t words = (g.num_symbols - N + 63) / 64;

    /* None once the deadline has passed. */
#define STOP_IF(passed)                                                                        \
    do {                                                                                       \
        if (passed) {                                                                          \
            result = Py_None;                                                                  \
            Py_INCREF(result);                                                                 \
            goto done;                                                                         \
        }                                                                                      \
    } while (0)
#define STOP_IF_LATE(steps) STOP_IF(late(&clock, (steps)))

    /* The transitions by (state, symbol), each with its relation node (or -1). */
    if (map_for(&trans, (size_t)num_trans) < 0) goto done;
    for (int32_t s = 0; s < S; s++) {
        for (int32_t t = a.trans_start[s]; t < a.trans_start[s + 1]; t++)
            if (map_put(&trans, (int64_t)s * g.num_symbols + a.trans_sym[t], t) < 0) goto done;
        STOP_IF_LATE(1 + a.trans_start[s + 1] - a.trans_start[s]);
    }
    node_of_trans = PyMem_Malloc(((size_t)num_trans + 1) * sizeof(int32_t));
    seen_nt = PyMem_Calloc((size_t)N, sizeof(int32_t));
    if (!node_of_trans || !seen_nt) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < num_trans; t++) node_of_trans[t] = -1;

#define TRANS_OF(state, sym) lookup(&trans, (int64_t)(state) * g.num_symbols + (sym))
#define MISSING(state, sym)                                                                    \
    do {                                                                                       \
        PyErr_Format(PyExc_ValueError, "lookaheads: state %d has no transition on %d",        \
                     (int)(state), (int)(sym));                                                \
        goto done;                                                                             \
    } while (0)

    /* Nodes (nonterminal transitions) with their direct reads (cells) and reads pairs. */
    int32_t t0 = TRANS_OF(0, start_nt);
    if (t0 < 0) MISSING(0, start_nt);
    node_of_trans[t0] = 0;
    if (vec_push(&nodes, t0) < 0) goto done;
    Py_ssize_t cells_cap = 1024;
    cells = PyMem_Calloc((size_t)cells_cap * (size_t)words, sizeof(uint64_t));
    if (!cells) {
        PyErr_NoMemory();
        goto done;
    }
    cells[0] = 1; /* the root's start is followed by $END (terminal 0) */
    for (int32_t s = 0; s < S; s++) {
        for (int32_t k = closure_start[s]; k < closure_start[s + 1]; k++) {
            int32_t sym = item_next[closure_items[k]];
            if (sym < 0 || sym >= N || seen_nt[sym] == s + 1) continue;
            seen_nt[sym] = s + 1;
            int32_t t = TRANS_OF(s, sym);
            if (t < 0) MISSING(s, sym);
            int32_t x = node_of_trans[t];
            if (x < 0) {
                x = node_of_trans[t] = (int32_t)nodes.len;
                if (vec_push(&nodes, t) < 0) goto done;
            }
            if (nodes.len > cells_cap) {
                Py_ssize_t cap = cells_cap * 2;
                uint64_t *grown = PyMem_Realloc(cells, (size_t)cap * (size_t)words * 8);
                if (!grown) {
                    PyErr_NoMemory();
                    goto done;
                }
                memset(grown + (size_t)cells_cap * (size_t)words, 0,
                       (size_t)(cap - cells_cap) * (size_t)words * 8);
                cells = grown;
                cells_cap = cap;
            }
            uint64_t *bits = cells + (size_t)x * (size_t)words;
            int32_t after = a.trans_target[t];
            for (int32_t k2 = closure_start[after]; k2 < closure_start[after + 1]; k2++) {
                int32_t sym2 = item_next[closure_items[k2]];
                if (sym2 >= N) {
                    bits[(sym2 - N) >> 6] |= (uint64_t)1 << ((sym2 - N) & 63);
                } else if (sym2 >= 0 && g.nullable[sym2]) {
                    /* (after, sym2), a node id once all are numbered */
                    int32_t t2 = TRANS_OF(after, sym2);
                    if (t2 < 0) MISSING(after, sym2);
                    if (vec_push(&reads, x) < 0 || vec_push(&reads, t2) < 0) goto done;
                }
            }
            STOP_IF_LATE(1 + closure_start[after + 1] - closure_start[after]);
        }
        STOP_IF_LATE(1 + closure_start[s + 1] - closure_start[s]);
    }
    const int32_t n = (int32_t)nodes.len;
    node_state = PyMem_Malloc((size_t)n * sizeof(int32_t));
    last_seen = PyMem_Malloc((size_t)n * sizeof(int32_t));
    if (!node_state || !last_seen) {
        PyErr_NoMemory();
        goto done;
    }
    for (int32_t s = 0; s < S; s++)
        for (int32_t t = a.trans_start[s]; t < a.trans_start[s + 1]; t++)
            if (node_of_trans[t] >= 0) node_state[node_of_trans[t]] = s;
    /* reads: each node's pairs as node ids, first occurrences only */
    for (Py_ssize_t i = 0; i < reads.len; i += 2) {
        int32_t y = node_of_trans[reads.items[i + 1]];
        if (y < 0) {
            PyErr_SetString(PyExc_ValueError, "lookaheads: a read of no node");
            goto done;
        }
        reads.items[i + 1] = y;
    }
    if (csr_of_pairs(&reads, n, &read_start, &read_rel) < 0) goto done;
    {
        Py_ssize_t kept = 0;
        for (int32_t i = 0; i < n; i++) last_seen[i] = -1;
        int32_t begin = 0;
        for (int32_t x = 0; x < n; x++) {
            int32_t end = read_start[x + 1];
            read_start[x] = (int32_t)kept;
            for (int32_t j = begin; j < end; j++) {
                int32_t y = read_rel[j];
                if (last_seen[y] != x) {
                    last_seen[y] = x;
                    read_rel[kept++] = y;
                }
            }
            begin = end;
        }
        read_start[n] = (int32_t)kept;
    }

    /* Whether the symbols from each item's dot on are all nullable. */
    rest_nullable = PyMem_Malloc((size_t)g.num_items * sizeof(int32_t));
    if (!rest_nullable) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < g.num_rules; r++) {
        int32_t ok = 1;
        for (int32_t i = g.item_base[r + 1] - 1; i >= g.item_base[r]; i--) {
            int32_t sym = item_next[i];
            if (sym >= 0) ok = ok && sym < N && g.nullable[sym];
            rest_nullable[i] = ok;
        }
    }
    /* Each node's items: those of its state whose rule is the node's nonterminal's. */
    for (int32_t s = 0; s < S; s++) {
        STOP_IF_LATE(1 + closure_start[s + 1] - closure_start[s]);
        for (int32_t k = closure_start[s]; k < closure_start[s + 1]; k++) {
            int32_t item = closure_items[k];
            int32_t t = TRANS_OF(s, g.rule_origin[g.item_rule[item]]);
            if (t >= 0 && node_of_trans[t] >= 0 &&
                (vec_push(&item_pairs, node_of_trans[t]) < 0 || vec_push(&item_pairs, item) < 0))
                goto done;
        }
    }
    if (csr_of_pairs(&item_pairs, n, &items_start, &node_items) < 0) goto done;
    /* includes (y -> x, each x once per y, x ascending) and lookback (per node in order) */
    lb_start = PyMem_Malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!lb_start) {
        PyErr_NoMemory();
        goto done;
    }
    for (int32_t i = 0; i < n; i++) last_seen[i] = -1;
    for (int32_t x = 0; x < n; x++) {
        lb_start[x] = (int32_t)(lookback.len / 2);
        found.len = 0;
        for (int32_t j = items_start[x]; j < items_start[x + 1]; j++) {
            int32_t item = node_items[j];
            int32_t r = g.item_rule[item], base = g.item_base[r], end = g.item_base[r + 1] - 1;
            int32_t state2 = node_state[x];
            for (int32_t i = item; i < end; i++) {
                int32_t sym = item_next[i];
                int32_t t = TRANS_OF(state2, sym);
                if (t < 0) MISSING(state2, sym);
                int32_t y = node_of_trans[t];
                state2 = a.trans_target[t];
                if (y >= 0 && rest_nullable[i + 1] && vec_push(&found, y) < 0) goto done;
            }
            if (item == base && (vec_push(&lookback, state2) < 0 || vec_push(&lookback, r) < 0))
                goto done;
            STOP_IF_LATE(1 + end - item);
        }
        for (Py_ssize_t j = 0; j < found.len; j++) {
            int32_t y = found.items[j];
            if (last_seen[y] != x) {
                last_seen[y] = x;
                if (vec_push(&includes, y) < 0 || vec_push(&includes, x) < 0) goto done;
            }
        }
    }
    lb_start[n] = (int32_t)(lookback.len / 2);
    if (csr_of_pairs(&includes, n, &inc_start, &inc_rel) < 0) goto done;

    /* Follow sets: the reads digraph from the direct reads, the includes one from its cells. */
    value = PyMem_Malloc((size_t)n * sizeof(int32_t));
    weight = PyMem_Malloc((size_t)n * sizeof(int32_t));
    path = PyMem_Malloc((size_t)n * sizeof(int32_t));
    frames = PyMem_Malloc((size_t)n * sizeof(Frame));
    if (!value || !weight || !path || !frames) {
        PyErr_NoMemory();
        goto done;
    }
    for (int32_t x = 0; x < n; x++) value[x] = x;
    STOP_IF(digraph(n, read_start, read_rel, value, cells, words, weight, path, frames, &clock));
    STOP_IF(digraph(n, inc_start, inc_rel, value, cells, words, weight, path, frames, &clock));

    /* Per state, its lookahead terminals in first-seen order, each with its rules (a chain
     * in rule_pool: rule, next) in first-seen order, over the lookback pairs in order
     * (nodes in order, each node's pairs in order, terminals ascending): the pairs grouped
     * by state, order kept, then a pass per state that finds its terminals' entries by a
     * stamp (no table of every (state, terminal), whose growth no clock read divides). */
    const Py_ssize_t num_pairs = lookback.len / 2;
    const int32_t num_terms = g.num_symbols - N;
    pair_node = PyMem_Malloc(((size_t)num_pairs + 1) * sizeof(int32_t));
    pair_state = PyMem_Malloc(((size_t)num_pairs + 1) * sizeof(int32_t));
    pair_order = PyMem_Malloc(((size_t)num_pairs + 1) * sizeof(int32_t));
    at = PyMem_Malloc(((size_t)S + 1) * sizeof(int32_t));
    out_start = PyMem_Malloc(((size_t)S + 1) * sizeof(int32_t));
    term_stamp = PyMem_Calloc((size_t)num_terms, sizeof(int32_t));
    term_entry = PyMem_Malloc((size_t)num_terms * sizeof(int32_t));
    if (!pair_node || !pair_state || !pair_order || !at || !out_start || !term_stamp ||
        !term_entry) {
        PyErr_NoMemory();
        goto done;
    }
    for (int32_t x = 0; x < n; x++)
        for (int32_t l = lb_start[x]; l < lb_start[x + 1]; l++) {
            pair_node[l] = x;
            pair_state[l] = lookback.items[2 * l];
        }
    pairs_start = starts_of(pair_state, num_pairs, S);
    if (!pairs_start) goto done;
    memcpy(at, pairs_start, ((size_t)S + 1) * sizeof(int32_t));
    for (Py_ssize_t l = 0; l < num_pairs; l++) pair_order[at[pair_state[l]]++] = (int32_t)l;
    for (int32_t state = 0; state < S; state++) {
        out_start[state] = (int32_t)entry_sym.len;
        for (int32_t p = pairs_start[state]; p < pairs_start[state + 1]; p++) {
            int32_t l = pair_order[p], r = lookback.items[2 * l + 1];
            const uint64_t *bits = cells + (size_t)value[pair_node[l]] * (size_t)words;
            Py_ssize_t steps = 1 + words;
            for (Py_ssize_t w = 0; w < words; w++) {
                for (uint64_t word = bits[w]; word; word &= word - 1, steps++) {
                    int32_t term = (int32_t)(w * 64 + __builtin_ctzll(word));
                    if (term_stamp[term] != state + 1) {
                        term_stamp[term] = state + 1;
                        term_entry[term] = (int32_t)entry_sym.len;
                        if (vec_push(&entry_sym, N + term) < 0 || vec_push(&entry_head, -1) < 0 ||
                            vec_push(&entry_tail, -1) < 0)
                            goto done;
                    }
                    int32_t e = term_entry[term], c = entry_head.items[e];
                    while (c >= 0 && rule_pool.items[c] != r) c = rule_pool.items[c + 1];
                    if (c >= 0) continue;
                    c = (int32_t)rule_pool.len;
                    if (vec_push(&rule_pool, r) < 0 || vec_push(&rule_pool, -1) < 0) goto done;
                    if (entry_tail.items[e] >= 0)
                        rule_pool.items[entry_tail.items[e] + 1] = c;
                    else
                        entry_head.items[e] = c;
                    entry_tail.items[e] = c;
                }
            }
            STOP_IF_LATE(steps);
        }
    }
#undef TRANS_OF
#undef MISSING
#undef STOP_IF_LATE
#undef STOP_IF
    Py_ssize_t E = entry_sym.len, filled = 0;
    out_start[S] = (int32_t)E;
    out_rule_start = PyMem_Malloc(((size_t)E + 1) * sizeof(int32_t));
    out_rules = PyMem_Malloc(((size_t)rule_pool.len / 2 + 1) * sizeof(int32_t));
    if (!out_rule_start || !out_rules) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t e = 0; e < E; e++) {
        out_rule_start[e] = (int32_t)filled;
        for (int32_t c = entry_head.items[e]; c >= 0; c = rule_pool.items[c + 1])
            out_rules[filled++] = rule_pool.items[c];
    }
    out_rule_start[E] = (int32_t)filled;
    result = Py_BuildValue("(NNNN)", column_out(out_start, S + 1),
                           column_out(entry_sym.items, E),
                           column_out(out_rule_start, E + 1), column_out(out_rules, filled));
done:
    while (opened_lr0 > 0) PyBuffer_Release(&views[G_COUNT + --opened_lr0]);
    while (opened > 0) PyBuffer_Release(&views[--opened]);
    int32_t *arrays[] = {node_of_trans, node_state,  seen_nt,        last_seen,  rest_nullable,
                         items_start,   node_items,  read_start,     read_rel,   inc_start,
                         inc_rel,       value,       weight,         path,       lb_start,
                         pair_node,     pair_state,  pair_order,     pairs_start, at,
                         term_stamp,    term_entry,  out_start,      out_rule_start, out_rules};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) PyMem_Free(arrays[i]);
    PyMem_Free(frames);
    PyMem_Free(cells);
    Vec *vecs[] = {&nodes,     &reads,      &item_pairs, &found,     &includes,
                   &lookback,  &entry_sym,  &entry_head, &entry_tail, &rule_pool};
    for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) vec_free(vecs[i]);
    map_free(&trans);
    return result;
}

static PyMethodDef methods[] = {
    {"lalr_lookaheads", (PyCFunction)(void (*)(void))lalr_lookaheads, METH_FASTCALL,
     lookaheads_doc},
    {NULL, NULL, 0, NULL},
};

int add_lalr_lookaheads(PyObject *module) { return PyModule_AddFunctions(module, methods); }
