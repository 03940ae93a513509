/* A token's bytes through the grammar's lexer (parser.h): the quick step of a token that
 * stays inside the pending lexeme (`advance_inside`), and every reading of a text with the
 * lexemes it may cut and start (`walk_bytes`). */
#include "parser.h"

#include <stdlib.h>

/* ---- advancing inside a lexeme -------------------------------------------------------- */


/* The configuration (stack, lexer state, no constraint, count) after a text token that
 * stays inside the pending lexeme: the new lexer state, with the items it added in
 * *grown; INSIDE_DEAD where no reading survives, INSIDE_MAY_CUT where some byte could end
 * the lexeme (only the full walk, `walk_bytes`, follows that). Most tokens of a first
 * walk are of this kind. */
int32_t advance_inside(Parser *self, int32_t stack, int32_t state, int64_t count,
                              Py_ssize_t token, int64_t *grown) {
    *grown = 0;
    if (token < 0 || token >= self->vocab_size) return INSIDE_DEAD;
    const int64_t *text_start = A(self, B_TEXT_START, int64_t);
    const uint8_t *bytes = A(self, B_TEXT_BYTES, uint8_t);
    int64_t lo = text_start[token], hi = text_start[token + 1];
    if (lo == hi) return INSIDE_DEAD; /* never text */
    const int32_t *moves = A(self, B_MOVES, int32_t), *label = A(self, B_LABEL, int32_t);
    const uint8_t *starts = A(self, B_MOVE_STARTS, uint8_t);
    const int32_t *class_of_byte = A(self, B_CLASS_OF_BYTE, int32_t);
    int32_t q = state;
    for (int64_t i = lo; i < hi; i++) {
        int64_t move = (int64_t)q * self->num_classes + class_of_byte[bytes[i]];
        int32_t next = moves[move];
        if (label[q] >= 0 && (next < 0 || label[next] < 0)) return INSIDE_MAY_CUT;
        if (next < 0) return INSIDE_DEAD;
        *grown += starts[move];
        q = next;
    }
    int32_t bound = A(self, B_CHAR_BOUND, int32_t)[state];
    if (bound >= 0 && bound < count + *grown) return INSIDE_DEAD; /* past the bound */
    int64_t checked = xset_ok(self, stack, A(self, B_STATE_XSET, int32_t)[q]);
    return unpack_result(checked) == 1 ? q : INSIDE_DEAD;
}

/* ---- walking a token's bytes through the lexer ---------------------------------------- */

/* One reading of the bytes so far: the terminals emitted (a node of the walk's own tree of
 * emitted sequences, 0 the empty one), the lexer state, the open constraint states (a set
 * of the walk's own), and the items grown in the first lexeme / the last one (-1 while it
 * is the first). */
typedef struct {
    int32_t emitted, state, cons, grown, fresh;
} Reading;

/* Most readings one byte of a walk may hold. Most grammars' walks hold a few, but a cut
 * tries every context a shift of its terminal may lead to, each as its own reading: after
 * a `}` that closes one of many optional objects a Kubernetes schema's grammar has a few
 * hundred, and `}}` needed more than 16,384 readings at its second byte (2^14 failed, 2^16
 * walks it). Tables whose shifts lead to several contexts let every repeated terminal
 * double them (2^(n-1) for n dashes: 2^15 readings take 0.3 s), so past this bound the
 * walk ends in a ValueError, never an exponential wait. */
#define MAX_WALK_READINGS 65536

typedef struct {
    Vec em_parent, em_terminal, em_context; /* emitted sequences: node -> parent + step */
    Vec set_start, set_items;               /* constraint sets, each sorted */
    Map em_ids, set_ids, next_ids;             /* hash -> node, set, reading of `next` */
    Reading *cur, *next;
    size_t num_cur, num_next, capacity;
    int32_t *scratch;
    size_t scratch_len, scratch_cap;
    void *restarts; /* Restart[restarts_cap]: one cut's next lexemes */
    size_t restarts_cap;
    size_t too_many_at; /* 1 + the offset of the byte past MAX_WALK_READINGS; 0 if none */
    int failed;
} Walk;

static int walk_init(Walk *w) {
    w->capacity = 16;
    w->cur = PyMem_Malloc(w->capacity * sizeof(Reading));
    w->next = PyMem_Malloc(w->capacity * sizeof(Reading));
    int maps = map_init(&w->em_ids, 8) | map_init(&w->set_ids, 8) | map_init(&w->next_ids, 8);
    if (!w->cur || !w->next || maps < 0 || vec_push(&w->em_parent, -1) < 0 ||
        vec_push(&w->em_terminal, -1) < 0 || vec_push(&w->em_context, -1) < 0 ||
        vec_push(&w->set_start, 0) < 0)
        return -1;
    return 0;
}

static void walk_free(Walk *w) {
    Vec *columns[] = {&w->em_parent, &w->em_terminal, &w->em_context, &w->set_start,
                         &w->set_items};
    for (size_t i = 0; i < sizeof(columns) / sizeof(*columns); i++) PyMem_Free(columns[i]->items);
    map_free(&w->em_ids);
    map_free(&w->set_ids);
    map_free(&w->next_ids);
    PyMem_Free(w->cur);
    PyMem_Free(w->next);
    PyMem_Free(w->scratch);
    PyMem_Free(w->restarts);
}

/* The key under which an id of hash `h` is first looked for; on a collision the next
 * key is tried. Keys stay below 2^62, so the map's key + 1 cannot overflow. */
#define WALK_KEY_MASK (INT64_MAX >> 1)

static inline int64_t hash_key(uint64_t h) {
    return (int64_t)(h ^ (h >> 31)) & WALK_KEY_MASK;
}

static inline int64_t next_key(int64_t key) {
    return (key + 1) & WALK_KEY_MASK;
}

static uint64_t hash_ints(const int32_t *items, size_t count) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)count;
    for (size_t i = 0; i < count; i++) h = mix(h, (uint32_t)items[i]);
    return h;
}

static int32_t emitted_node(Walk *w, int32_t parent, int32_t terminal, int32_t context) {
    int32_t step[3] = {parent, terminal, context};
    int64_t key = hash_key(hash_ints(step, 3)), node;
    for (; map_get(&w->em_ids, key, &node); key = next_key(key)) {
        if (w->em_parent.items[node] == parent && w->em_terminal.items[node] == terminal &&
            w->em_context.items[node] == context)
            return (int32_t)node;
    }
    if (vec_push(&w->em_parent, parent) < 0 || vec_push(&w->em_terminal, terminal) < 0 ||
        vec_push(&w->em_context, context) < 0 ||
        map_put(&w->em_ids, key, (int64_t)w->em_parent.len - 1) < 0) {
        w->failed = 1;
        return 0;
    }
    return (int32_t)w->em_parent.len - 1;
}

static int compare_int32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* ---- context sets ----------------------------------------------------------------------- */

/* The index's context sets by content, so a walk's cut can name the set the index built for
 * the same contexts (`ctxset_ids`): set k holds ctxset_context[start[k]:start[k + 1]],
 * sorted. */
int index_context_sets(Parser *self) {
    const int64_t *start = A(self, B_CTXSET_START, int64_t);
    const int32_t *members = A(self, B_CTXSET_CONTEXT, int32_t);
    for (Py_ssize_t k = 0; k < self->num_ctxsets; k++) {
        int64_t key = hash_key(hash_ints(members + start[k], (size_t)(start[k + 1] - start[k]))), at;
        while (map_get(&self->ctxset_ids, key, &at)) key = next_key(key);
        if (map_put(&self->ctxset_ids, key, (int64_t)k) < 0) return -1;
    }
    return 0;
}

/* The context id standing for the sorted `contexts` (n >= 2): the index's set of exactly
 * those, or -1 when it has none (the walk then keeps them apart, as exact, only larger). */
static int32_t context_set_id(const Parser *self, const int32_t *contexts, size_t n) {
    const int64_t *start = A(self, B_CTXSET_START, int64_t);
    const int32_t *members = A(self, B_CTXSET_CONTEXT, int32_t);
    int64_t key = hash_key(hash_ints(contexts, n)), k;
    for (; map_get(&self->ctxset_ids, key, &k); key = next_key(key)) {
        if ((size_t)(start[k + 1] - start[k]) == n &&
            !memcmp(members + start[k], contexts, n * sizeof(int32_t)))
            return self->num_contexts + (int32_t)k;
    }
    return -1;
}

/* A cut's next lexemes: per context a shift of the terminal may lead to, the move of the
 * byte from that context's start state. Sorted by (target, item start, context), contexts
 * with one target and item start are a run: their readings differ only in the context the
 * emitted step names, so a run the index has a set for becomes one reading naming the set
 * (the parser's check is then membership), as the index's own walk made it. */
typedef struct {
    int32_t target, item, context;
} Restart;

static int compare_restart(const void *a, const void *b) {
    const Restart *x = a, *y = b;
    if (x->target != y->target) return (x->target > y->target) - (x->target < y->target);
    if (x->item != y->item) return (x->item > y->item) - (x->item < y->item);
    return (x->context > y->context) - (x->context < y->context);
}

/* The id of the set of the `count` states in `items` (sorted and deduplicated here). */
static int32_t constraint_set(Walk *w, int32_t *items, size_t count) {
    qsort(items, count, sizeof(int32_t), compare_int32);
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        if (n == 0 || items[n - 1] != items[i]) items[n++] = items[i];
    }
    int64_t key = hash_key(hash_ints(items, n)), s;
    for (; map_get(&w->set_ids, key, &s); key = next_key(key)) {
        int32_t lo = w->set_start.items[s], hi = w->set_start.items[s + 1];
        if ((size_t)(hi - lo) == n &&
            (!n || !memcmp(w->set_items.items + lo, items, n * sizeof(int32_t))))
            return (int32_t)s;
    }
    int32_t num_sets = (int32_t)w->set_start.len - 1;
    for (size_t i = 0; i < n; i++) {
        if (vec_push(&w->set_items, items[i]) < 0) w->failed = 1;
    }
    if (vec_push(&w->set_start, (int32_t)w->set_items.len) < 0 ||
        map_put(&w->set_ids, key, num_sets) < 0)
        w->failed = 1;
    return num_sets;
}

static int32_t *walk_scratch(Walk *w, size_t size) {
    if (size > w->scratch_cap) {
        size_t cap = size < 64 ? 64 : size * 2;
        int32_t *items = PyMem_Realloc(w->scratch, cap * sizeof(int32_t));
        if (!items) {
            w->failed = 1;
            return NULL;
        }
        w->scratch = items;
        w->scratch_cap = cap;
    }
    return w->scratch;
}

/* Room for `size` restarts of one cut (`w->restarts`, kept from call to call). */
static Restart *walk_restarts(Walk *w, size_t size) {
    if (size > w->restarts_cap) {
        size_t cap = size < 64 ? 64 : size * 2;
        Restart *items = PyMem_Realloc(w->restarts, cap * sizeof(Restart));
        if (!items) {
            w->failed = 1;
            return NULL;
        }
        w->restarts = items;
        w->restarts_cap = cap;
    }
    return w->restarts;
}

/* Add `r` to the readings after this byte, unless it is there already (a hash lookup: a
 * byte costs its readings, not their square). */
static void add_reading(Walk *w, Reading r, size_t at) {
    int32_t fields[5] = {r.emitted, r.state, r.cons, r.grown, r.fresh};
    int64_t key = hash_key(hash_ints(fields, 5)), i;
    for (; map_get(&w->next_ids, key, &i); key = next_key(key)) {
        if (!memcmp(&w->next[i], &r, sizeof(Reading))) return;
    }
    if (w->num_next == MAX_WALK_READINGS) {
        w->too_many_at = at + 1;
        return;
    }
    if (w->num_next == w->capacity) {
        size_t cap = w->capacity * 2;
        Reading *cur = PyMem_Realloc(w->cur, cap * sizeof(Reading));
        if (cur) w->cur = cur;
        Reading *next = cur ? PyMem_Realloc(w->next, cap * sizeof(Reading)) : NULL;
        if (!next) {
            w->failed = 1;
            return;
        }
        w->next = next;
        w->capacity = cap;
    }
    if (map_put(&w->next_ids, key, (int64_t)w->num_next) < 0) {
        w->failed = 1;
        return;
    }
    w->next[w->num_next++] = r;
}

/* Every reading of `data` from lexer `state` with the open constraint states `cons`, as
 * `walk_bytes` (grammar_walk.py) defines them: in the lexeme, or cut where a labelled
 * state meets a byte that does not lead to another label, the byte then starting the next
 * lexeme in each context a shift of the terminal may lead to (the restart context after
 * an ignored one), the abandoned state becoming a constraint that must die unlabelled. */
static void walk_readings(Parser *self, Walk *w, int32_t state, const int32_t *cons,
                          size_t num_cons, const uint8_t *data, size_t len) {
    const int32_t *moves = A(self, B_MOVES, int32_t), *label = A(self, B_LABEL, int32_t);
    const uint8_t *starts = A(self, B_MOVE_STARTS, uint8_t);
    const int32_t *class_of_byte = A(self, B_CLASS_OF_BYTE, int32_t);
    const uint8_t *ignored = A(self, B_IGNORED, uint8_t);
    const int32_t *restart = A(self, B_RESTART, int32_t);
    const int32_t *context_start = A(self, B_CONTEXT_START, int32_t);
    const int64_t *ctx_start = A(self, B_NEXT_CTX_START, int64_t);
    const int32_t *next_ctx = A(self, B_NEXT_CTX, int32_t);
    int64_t width = self->num_classes;
    int32_t *first = walk_scratch(w, num_cons + 1);
    if (!first) return;
    memcpy(first, cons, num_cons * sizeof(int32_t));
    w->cur[0] = (Reading){0, state, constraint_set(w, first, num_cons), 0, -1};
    w->num_cur = 1;
    for (size_t at = 0; at < len && w->num_cur && !w->failed && !w->too_many_at; at++) {
        int32_t cls = class_of_byte[data[at]];
        w->num_next = 0;
        map_clear(&w->next_ids);
        for (size_t i = 0; i < w->num_cur && !w->failed && !w->too_many_at; i++) {
            Reading r = w->cur[i];
            int32_t lo = w->set_start.items[r.cons], hi = w->set_start.items[r.cons + 1];
            int32_t stepped = r.cons;
            if (hi > lo) { /* step the constraints; one reaching a label ends the reading */
                int32_t *out = walk_scratch(w, (size_t)(hi - lo) + 1);
                if (!out) return;
                size_t n = 0;
                int reached = 0;
                for (int32_t k = lo; k < hi && !reached; k++) {
                    int32_t c = moves[w->set_items.items[k] * width + cls];
                    if (c >= 0) {
                        reached = label[c] >= 0;
                        out[n++] = c;
                    }
                }
                if (reached) continue;
                stepped = constraint_set(w, out, n);
            }
            int64_t move = (int64_t)r.state * width + cls;
            int32_t nq = moves[move];
            if (nq >= 0) {
                int32_t item = starts[move];
                add_reading(w,
                            r.fresh < 0
                                ? (Reading){r.emitted, nq, stepped, r.grown + item, -1}
                                : (Reading){r.emitted, nq, stepped, r.grown, r.fresh + item},
                            at);
            }
            int32_t lab = label[r.state];
            if (lab < 0 || (nq >= 0 && label[nq] >= 0)) continue;
            int32_t cut = stepped;
            if (nq >= 0) {
                int32_t slo = w->set_start.items[stepped], shi = w->set_start.items[stepped + 1];
                int32_t *out = walk_scratch(w, (size_t)(shi - slo) + 1);
                if (!out) return;
                if (shi > slo) /* no empty copy: the set items may not exist yet (NULL) */
                    memcpy(out, w->set_items.items + slo, (size_t)(shi - slo) * sizeof(int32_t));
                out[shi - slo] = nq;
                cut = constraint_set(w, out, (size_t)(shi - slo) + 1);
            }
            if (ignored[lab]) { /* the restart context: the same one, no step emitted */
                int64_t begin = (int64_t)context_start[restart[r.state]] * width + cls;
                if (moves[begin] >= 0)
                    add_reading(w, (Reading){r.emitted, moves[begin], cut, r.grown, starts[begin]},
                                at);
                continue;
            }
            size_t n = 0;
            Restart *next = walk_restarts(w, (size_t)(ctx_start[lab + 1] - ctx_start[lab]));
            if (!next) return;
            for (int64_t c = ctx_start[lab]; c < ctx_start[lab + 1]; c++) {
                int64_t begin = (int64_t)context_start[next_ctx[c]] * width + cls;
                if (moves[begin] >= 0)
                    next[n++] = (Restart){moves[begin], starts[begin], next_ctx[c]};
            }
            if (self->num_ctxsets && n > 1) qsort(next, n, sizeof(Restart), compare_restart);
            for (size_t i = 0, j; i < n; i = j) {
                for (j = i + 1; j < n && next[j].target == next[i].target &&
                                next[j].item == next[i].item;
                     j++) {
                }
                int32_t set = -1;
                if (j - i > 1 && self->num_ctxsets) {
                    int32_t *members = walk_scratch(w, j - i);
                    if (!members) return;
                    for (size_t k = i; k < j; k++) members[k - i] = next[k].context;
                    set = context_set_id(self, members, j - i);
                }
                for (size_t k = i; k < j; k++) {
                    int32_t context = set >= 0 ? set : next[k].context;
                    int32_t after = emitted_node(w, r.emitted, lab, context);
                    add_reading(w, (Reading){after, next[i].target, cut, r.grown, next[i].item},
                                at);
                    if (set >= 0) break;
                }
            }
        }
        Reading *swap = w->cur;
        w->cur = w->next;
        w->next = swap;
        w->num_cur = w->num_next;
    }
}

/* A reading as Python sees it: (((terminal, context), ...), state, (constraint states, ...),
 * grown, fresh). */
static PyObject *reading_tuple(Walk *w, Reading r) {
    size_t depth = 0;
    for (int32_t n = r.emitted; n > 0; n = w->em_parent.items[n]) depth++;
    PyObject *emitted = PyTuple_New((Py_ssize_t)depth);
    if (!emitted) return NULL;
    for (int32_t n = r.emitted; n > 0; n = w->em_parent.items[n]) {
        PyObject *step = Py_BuildValue("(ii)", w->em_terminal.items[n], w->em_context.items[n]);
        if (!step) {
            Py_DECREF(emitted);
            return NULL;
        }
        PyTuple_SET_ITEM(emitted, (Py_ssize_t)--depth, step);
    }
    int32_t lo = w->set_start.items[r.cons], hi = w->set_start.items[r.cons + 1];
    PyObject *cons = PyTuple_New(hi - lo);
    if (!cons) {
        Py_DECREF(emitted);
        return NULL;
    }
    for (int32_t k = lo; k < hi; k++) {
        PyObject *item = PyLong_FromLong(w->set_items.items[k]);
        if (!item) {
            Py_DECREF(emitted);
            Py_DECREF(cons);
            return NULL;
        }
        PyTuple_SET_ITEM(cons, k - lo, item);
    }
    return Py_BuildValue("(NiNii)", emitted, r.state, cons, r.grown, r.fresh);
}


PyObject *Parser_walk_bytes(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "walk_bytes(lexer_state, constraint_states, data)");
        return NULL;
    }
    long long state = PyLong_AsLongLong(args[0]);
    if ((state == -1 && PyErr_Occurred()) ||
        check_range(state, self->num_lexer_states, "lexer state") < 0)
        return NULL;
    PyObject *cons = PySequence_Tuple(args[1]);
    if (!cons) return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[2], &data, PyBUF_SIMPLE) < 0) {
        Py_DECREF(cons);
        return NULL;
    }
    PyObject *result = NULL;
    Walk w = {0};
    Py_ssize_t num_cons = PyTuple_GET_SIZE(cons);
    int32_t *states = PyMem_Malloc(((size_t)num_cons + 1) * sizeof(int32_t));
    if (!states || walk_init(&w) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < num_cons; i++) {
        long long c = PyLong_AsLongLong(PyTuple_GET_ITEM(cons, i));
        if ((c == -1 && PyErr_Occurred()) ||
            check_range(c, self->num_lexer_states, "constraint state") < 0)
            goto done;
        states[i] = (int32_t)c;
    }
    walk_readings(self, &w, (int32_t)state, states, (size_t)num_cons, data.buf, (size_t)data.len);
    if (w.failed) {
        PyErr_NoMemory();
        goto done;
    }
    if (w.too_many_at) {
        PyErr_Format(PyExc_ValueError,
                     "walk_bytes: more than %d readings of a %zd-byte text at byte %zu: the "
                     "lexer contexts the parse table's shifts lead to branch without bound",
                     MAX_WALK_READINGS, data.len, w.too_many_at - 1);
        goto done;
    }
    result = PyList_New((Py_ssize_t)w.num_cur);
    for (size_t i = 0; result && i < w.num_cur; i++) {
        PyObject *item = reading_tuple(&w, w.cur[i]);
        if (!item) Py_CLEAR(result);
        else PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
done:
    PyMem_Free(states);
    walk_free(&w);
    PyBuffer_Release(&data);
    Py_DECREF(cons);
    return result;
}

