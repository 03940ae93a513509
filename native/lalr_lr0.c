/* The LALR(1) analysis of `lalr.py` on integers (`lalr_*`): LR(0) item
 * sets and DeRemer-Pennello lookaheads, as lark's `LALR_Analyzer` computes them.
 *
 * A WashingtonPost schema's grammar (2,300 rules, 5,000 states, ~27k nonterminal
 * transitions) spent 0.25-0.4 s per build in the Python: dict and tuple lookups per
 * relation edge and big-int ORs per digraph link, times several builds per schema when
 * rule copies are merged. Here the same steps run over flat arrays and uint64 bitsets
 * (bit t: terminal t, $END first), in ~10 ms.
 *
 * The results are the Python's, order included, since lark's tables, state numbers and
 * conflict messages follow from them:
 * - `lalr_lr0`: states numbered breadth-first from the root kernel; a state's transitions in
 *   the order their symbols first follow a dot in its sorted items (new states are
 *   numbered in that order);
 * - `lalr_lookaheads`: a relation node per nonterminal transition, the root's first, the rest
 *   in the order a scan of the states' sorted items meets them; lark's `digraph` with its
 *   set sharing: a node's set is a cell, the members of a strongly connected part end up
 *   sharing the root's cell, and the second digraph (includes) starts from the first's
 *   cells, so an OR into a shared cell reaches every node holding it, as an OR into a
 *   shared Python set does in lark;
 * - per state, lookahead terminals in first-seen order (nodes in order, each node's
 *   lookback pairs in order, terminals ascending), each with its rules in first-seen order.
 *
 * Traversals are iterative (explicit stacks), as deep grammars nest thousands of levels.
 *
 * Both steps take the compile's deadline (a `time.monotonic()` value, +inf for none) and
 * read the clock every CLOCK_EVERY steps of work (an item placed, a relation edge, a
 * lookahead bit), so a grammar whose every state reads every terminal (a rule of
 * thousands of keywords: seconds of work) stops within a millisecond of it; they then
 * return None and the caller raises the budget error.
 * Only the Python C API is used: arrays come in through the buffer protocol and go out
 * as bytearrays of native integers.
 */
#include "lalr.h"

#include <stdlib.h>
#include <string.h>

/* The deadline argument: -1 with TypeError set when it is no number. */
int clock_of(PyObject *deadline, Clock *c) {
    c->deadline = PyFloat_AsDouble(deadline);
    c->work = 0;
    return c->deadline == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* ---- buffers in ------------------------------------------------------------------------ */

/* ---- buffers in, bytearrays out ------------------------------------------------------ */

/* Open `count` int32 vectors args[0..count); their lengths in lens. */
int open_int32(PyObject *const *args, Py_buffer *views, Py_ssize_t *lens, int count,
                      const char *const *names, int *opened) {
    for (*opened = 0; *opened < count; (*opened)++) {
        Py_buffer *view = &views[*opened];
        if (PyObject_GetBuffer(args[*opened], view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            return -1;
        if (view->ndim != 1 || !kernel_is_int(view, 4)) {
            PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous int32 vector",
                         names[*opened]);
            PyBuffer_Release(view);
            return -1;
        }
        lens[*opened] = view->shape[0];
    }
    return 0;
}

/* A CSR start column (int32[n + 1]) of per-row counts, counts[i] for row i. */
int32_t *starts_of(const int32_t *row, Py_ssize_t len, Py_ssize_t n) {
    int32_t *start = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    if (!start) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) start[row[i] + 1]++;
    for (Py_ssize_t i = 0; i < n; i++) start[i + 1] += start[i];
    return start;
}

int cmp_int32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* ---- the grammar ----------------------------------------------------------------------- */

/* ---- the grammar ----------------------------------------------------------------------- */

static const char *const grammar_names[G_COUNT] = {"item_next", "item_rule", "item_base",
                                                   "rule_origin", "nullable"};

int grammar_open(Grammar *g, PyObject *const *args, long num_nt, long num_symbols,
                        Py_buffer *views, int *opened) {
    Py_ssize_t lens[G_COUNT];
    if (open_int32(args, views, lens, G_COUNT, grammar_names, opened) < 0) return -1;
    g->item_next = views[G_ITEM_NEXT].buf;
    g->item_rule = views[G_ITEM_RULE].buf;
    g->item_base = views[G_ITEM_BASE].buf;
    g->rule_origin = views[G_RULE_ORIGIN].buf;
    g->nullable = views[G_NULLABLE].buf;
    g->num_items = lens[G_ITEM_NEXT];
    g->num_rules = lens[G_RULE_ORIGIN];
    if (num_nt <= 0 || num_symbols <= num_nt || num_symbols >= INT32_MAX ||
        g->num_items >= INT32_MAX || lens[G_ITEM_RULE] != g->num_items ||
        lens[G_ITEM_BASE] != g->num_rules + 1 || lens[G_NULLABLE] != num_nt ||
        g->item_base[g->num_rules] != g->num_items) {
        PyErr_SetString(PyExc_ValueError, "inconsistent grammar sizes");
        return -1;
    }
    g->num_nt = (int32_t)num_nt;
    g->num_symbols = (int32_t)num_symbols;
    for (Py_ssize_t r = 0; r < g->num_rules; r++) {
        int32_t base = g->item_base[r], end = g->item_base[r + 1];
        if (g->rule_origin[r] < 0 || g->rule_origin[r] >= num_nt || base < 0 || end <= base ||
            g->item_next[end - 1] != -1) {
            PyErr_Format(PyExc_ValueError, "rule %zd: bad origin or items", r);
            return -1;
        }
        for (int32_t i = base; i < end; i++) {
            if (g->item_rule[i] != r || (i < end - 1 && (g->item_next[i] < 0 ||
                                                          g->item_next[i] >= num_symbols))) {
                PyErr_Format(PyExc_ValueError, "rule %zd: bad item %d", r, i);
                return -1;
            }
        }
    }
    return 0;
}

/* ---- LR(0) ---------------------------------------------------------------------------- */

static inline uint64_t hash_items(const int32_t *items, Py_ssize_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the item ids */
    for (Py_ssize_t j = 0; j < len; j++) h = (h ^ (uint64_t)(uint32_t)items[j]) * 1099511628211ull;
    return h >> 1;
}

PyDoc_STRVAR(lr0_doc,
             "lalr_lr0(item_next, item_rule, item_base, rule_origin, nullable, num_nt, num_symbols, "
             "root_item, deadline, /)\n--\n\n"
             "The LR(0) item sets from the kernel {root_item}, numbered breadth-first: "
             "(closure_start, closure_items, trans_start, trans_sym, trans_target), int32 "
             "bytearrays, CSR by state; a state's items ascending, its transitions in the "
             "order their symbols first follow a dot in them. None when time.monotonic() "
             "passed deadline (inf for none) first.");

static PyObject *lalr_lr0(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != G_COUNT + 4) {
        PyErr_SetString(PyExc_TypeError, "lalr_lr0 takes 9 arguments");
        return NULL;
    }
    long num_nt = PyLong_AsLong(args[G_COUNT]);
    long num_symbols = PyLong_AsLong(args[G_COUNT + 1]);
    long root_item = PyLong_AsLong(args[G_COUNT + 2]);
    Clock clock;
    if (PyErr_Occurred() || clock_of(args[G_COUNT + 3], &clock) < 0) return NULL;
    Py_buffer views[G_COUNT];
    int opened = 0;
    PyObject *result = NULL;
    Grammar g;
    int32_t *by_origin_start = NULL, *by_origin = NULL, *fill = NULL, *closure_of = NULL,
            *item_stamp = NULL, *nt_stamp = NULL, *sym_group = NULL, *sym_stamp = NULL;
    Vec pool = {0}, todo = {0}, items = {0}, kernel_start = {0}, kernel_items = {0},
        next_same = {0}, closure_start = {0}, closure_items = {0}, trans_start = {0},
        trans_sym = {0}, trans_target = {0}, groups = {0}, group_start = {0}, moved = {0};
    Map kernels = {0};
    if (grammar_open(&g, args, num_nt, num_symbols, views, &opened) < 0) goto done;
    if (root_item < 0 || root_item >= g.num_items) {
        PyErr_SetString(PyExc_ValueError, "lr0: root_item out of range");
        goto done;
    }
    const int32_t N = g.num_nt, *item_next = g.item_next;
    by_origin_start = starts_of(g.rule_origin, g.num_rules, N);
    by_origin = PyMem_Malloc(((size_t)g.num_rules + 1) * sizeof(int32_t));
    fill = PyMem_Malloc((size_t)N * sizeof(int32_t));
    closure_of = PyMem_Malloc((size_t)N * 2 * sizeof(int32_t)); /* [begin, end) in pool */
    item_stamp = PyMem_Calloc((size_t)g.num_items, sizeof(int32_t));
    nt_stamp = PyMem_Calloc((size_t)N, sizeof(int32_t));
    sym_group = PyMem_Malloc((size_t)g.num_symbols * sizeof(int32_t));
    sym_stamp = PyMem_Calloc((size_t)g.num_symbols, sizeof(int32_t));
    if (!by_origin_start || !by_origin || !fill || !closure_of || !item_stamp || !nt_stamp ||
        !sym_group || !sym_stamp) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    memcpy(fill, by_origin_start, (size_t)N * sizeof(int32_t));
    for (Py_ssize_t r = 0; r < g.num_rules; r++) by_origin[fill[g.rule_origin[r]]++] = (int32_t)r;
    for (int32_t nt = 0; nt < N; nt++) closure_of[2 * nt] = -1;

    /* Kernels are found by a hash of their sorted items (the map holds the newest state
     * of each hash, `next_same` the older ones), then compared item by item. */
    if (map_for(&kernels, 1024) < 0) goto done;
    int32_t root = (int32_t)root_item;
    if (vec_push(&kernel_start, 0) < 0 || vec_push(&kernel_items, root) < 0 ||
        vec_push(&kernel_start, 1) < 0 || vec_push(&next_same, -1) < 0 ||
        map_put(&kernels, (int64_t)hash_items(&root, 1), 0) < 0 ||
        vec_push(&closure_start, 0) < 0 || vec_push(&trans_start, 0) < 0)
        goto done;
    Py_ssize_t num_states = 1;
    int32_t walks = 0; /* nt_stamp marks of closure walks */
    for (Py_ssize_t state = 0; state < num_states; state++) {
        int32_t stamp = (int32_t)state + 1; /* item_stamp and sym_stamp marks of this state */
        items.len = 0;
        int32_t kbegin = kernel_start.items[state], kend = kernel_start.items[state + 1];
        for (int32_t k = kbegin; k < kend; k++) {
            int32_t item = kernel_items.items[k];
            item_stamp[item] = stamp;
            if (vec_push(&items, item) < 0) goto done;
        }
        for (int32_t k = kbegin; k < kend; k++) {
            int32_t nxt = item_next[kernel_items.items[k]];
            if (nxt < 0 || nxt >= N) continue;
            if (closure_of[2 * nxt] < 0) {
                /* lark's expand_rule: the dot-0 items of nxt's rules and, depth first, of
                 * the nonterminals first in them (each met once, so no item twice). */
                walks++;
                closure_of[2 * nxt] = (int32_t)pool.len;
                todo.len = 0;
                nt_stamp[nxt] = walks;
                if (vec_push(&todo, nxt) < 0) goto done;
                while (todo.len) {
                    int32_t at = todo.items[--todo.len];
                    for (int32_t j = by_origin_start[at]; j < by_origin_start[at + 1]; j++) {
                        int32_t base = g.item_base[by_origin[j]];
                        if (vec_push(&pool, base) < 0) goto done;
                        int32_t first = item_next[base];
                        if (first >= 0 && first < N && nt_stamp[first] != walks) {
                            nt_stamp[first] = walks;
                            if (vec_push(&todo, first) < 0) goto done;
                        }
                    }
                }
                if (pool.len >= INT32_MAX / 2) {
                    PyErr_SetString(PyExc_OverflowError, "lr0: closures too large");
                    goto done;
                }
                closure_of[2 * nxt + 1] = (int32_t)pool.len;
            }
            for (int32_t j = closure_of[2 * nxt]; j < closure_of[2 * nxt + 1]; j++) {
                int32_t item = pool.items[j];
                if (item_stamp[item] != stamp) {
                    item_stamp[item] = stamp;
                    if (vec_push(&items, item) < 0) goto done;
                }
            }
        }
        qsort(items.items, (size_t)items.len, sizeof(int32_t), cmp_int32);
        if (vec_reserve(&closure_items, items.len) < 0) goto done;
        memcpy(closure_items.items + closure_items.len, items.items,
               (size_t)items.len * sizeof(int32_t));
        closure_items.len += items.len;
        if (closure_items.len >= INT32_MAX / 2) {
            PyErr_SetString(PyExc_OverflowError, "lr0: item sets too large");
            goto done;
        }
        if (vec_push(&closure_start, (int32_t)closure_items.len) < 0) goto done;

        /* A group of advanced items per symbol after a dot, groups in first-seen order,
         * each group ascending (a counting sort by group). */
        groups.len = 0;
        for (Py_ssize_t k = 0; k < items.len; k++) {
            int32_t nxt = item_next[items.items[k]];
            if (nxt >= 0 && sym_stamp[nxt] != stamp) {
                sym_stamp[nxt] = stamp;
                sym_group[nxt] = (int32_t)groups.len;
                if (vec_push(&groups, nxt) < 0) goto done;
            }
        }
        group_start.len = 0;
        if (vec_reserve(&group_start, groups.len + 1) < 0 || vec_reserve(&moved, items.len) < 0)
            goto done;
        memset(group_start.items, 0, ((size_t)groups.len + 1) * sizeof(int32_t));
        for (Py_ssize_t k = 0; k < items.len; k++) {
            int32_t nxt = item_next[items.items[k]];
            if (nxt >= 0) group_start.items[sym_group[nxt] + 1]++;
        }
        for (Py_ssize_t k = 0; k < groups.len; k++) group_start.items[k + 1] += group_start.items[k];
        for (Py_ssize_t k = 0; k < items.len; k++) {
            int32_t nxt = item_next[items.items[k]];
            if (nxt >= 0) moved.items[group_start.items[sym_group[nxt]]++] = items.items[k] + 1;
        }
        for (Py_ssize_t k = groups.len; k > 0; k--) group_start.items[k] = group_start.items[k - 1];
        group_start.items[0] = 0;
        for (Py_ssize_t k = 0; k < groups.len; k++) {
            const int32_t *target = moved.items + group_start.items[k];
            Py_ssize_t len = group_start.items[k + 1] - group_start.items[k];
            int64_t key = (int64_t)hash_items(target, len);
            int32_t head = lookup(&kernels, key), found = head;
            while (found >= 0 &&
                   !(kernel_start.items[found + 1] - kernel_start.items[found] == len &&
                     !memcmp(kernel_items.items + kernel_start.items[found], target,
                             (size_t)len * sizeof(int32_t))))
                found = next_same.items[found];
            if (found < 0) {
                if (num_states >= INT32_MAX - 1) {
                    PyErr_SetString(PyExc_OverflowError, "lr0: too many states");
                    goto done;
                }
                found = (int32_t)num_states++;
                if (vec_push(&next_same, head) < 0 || map_put(&kernels, key, found) < 0 ||
                    vec_reserve(&kernel_items, len) < 0)
                    goto done;
                memcpy(kernel_items.items + kernel_items.len, target, (size_t)len * sizeof(int32_t));
                kernel_items.len += len;
                if (kernel_items.len >= INT32_MAX / 2) {
                    PyErr_SetString(PyExc_OverflowError, "lr0: kernels too large");
                    goto done;
                }
                if (vec_push(&kernel_start, (int32_t)kernel_items.len) < 0) goto done;
            }
            if (vec_push(&trans_sym, groups.items[k]) < 0 || vec_push(&trans_target, found) < 0)
                goto done;
        }
        if (vec_push(&trans_start, (int32_t)trans_sym.len) < 0) goto done;
        if (late(&clock, 1 + items.len + groups.len)) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    result = Py_BuildValue("(NNNNN)", column_out(closure_start.items, closure_start.len),
                           column_out(closure_items.items, closure_items.len),
                           column_out(trans_start.items, trans_start.len),
                           column_out(trans_sym.items, trans_sym.len),
                           column_out(trans_target.items, trans_target.len));
done:
    while (opened > 0) PyBuffer_Release(&views[--opened]);
    int32_t *arrays[] = {by_origin_start, by_origin, fill,      closure_of,
                         item_stamp,      nt_stamp,  sym_group, sym_stamp};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) PyMem_Free(arrays[i]);
    Vec *vecs[] = {&pool,          &todo,        &items,     &kernel_start, &kernel_items,
                   &next_same,     &closure_start, &closure_items, &trans_start, &trans_sym,
                   &trans_target,  &groups,      &group_start, &moved};
    for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) vec_free(vecs[i]);
    map_free(&kernels);
    return result;
}

static PyMethodDef methods[] = {
    {"lalr_lr0", (PyCFunction)(void (*)(void))lalr_lr0, METH_FASTCALL, lr0_doc},
    {NULL, NULL, 0, NULL},
};

int add_lalr(PyObject *module) { return PyModule_AddFunctions(module, methods); }
