/* The runtime's C part: the LALR parser of a grammar index's tables with its mask rows,
 * their checks, unions, caches and interning (`Parser`), a DFA index's token steps
 * (`DfaWalk`), and writing a row into a caller's bitmask (`write_row`, every matcher's
 * every token).
 *
 * A first walk meets a new (parser stack, lexer state) pair at about a third of its tokens;
 * each needs tens of parser steps and an OR of ~25 token groups. In Python that was
 * 20-70 us a row, most of a first walk's cost; here it is a few microseconds.
 *
 * Same model as the Python it replaces (see grammar_tables.py): stacks are interned nodes
 * (a stack is a node id whose parent is the stack below), every answer is memoized per
 * (stack, question) with the shallowest stack depth it read (the "floor"), and a row's
 * plan is the lexer state's runs of token groups in path order.
 *
 * Only the Python C API is used (no numpy headers): arrays come in through the buffer
 * protocol and are held for the parser's life; the sequence columns, which the Python
 * side appends to, are read through fresh buffers at each call that needs them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "kernel.h"

/* ---- an int64 -> int64 hash map (open addressing; keys are >= 0) ---------------------- */

typedef struct {
    int64_t *keys; /* key + 1; 0 marks an empty slot */
    int64_t *vals;
    size_t mask;
    size_t len;
} Map;

static int map_init(Map *m, size_t cap) {
    m->keys = PyMem_Calloc(cap, sizeof(int64_t));
    m->vals = PyMem_Malloc(cap * sizeof(int64_t));
    m->mask = cap - 1;
    m->len = 0;
    return (m->keys && m->vals) ? 0 : -1;
}

static void map_free(Map *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->vals);
    m->keys = m->vals = NULL;
}

static inline size_t map_slot(const Map *m, int64_t key) {
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & m->mask;
}

static inline int map_get(const Map *m, int64_t key, int64_t *val) {
    size_t i = map_slot(m, key);
    for (;;) {
        int64_t k = m->keys[i];
        if (k == 0) return 0;
        if (k == key + 1) {
            *val = m->vals[i];
            return 1;
        }
        i = (i + 1) & m->mask;
    }
}

static int map_put(Map *m, int64_t key, int64_t val);

static int map_grow(Map *m) {
    Map old = *m;
    if (map_init(m, (old.mask + 1) * 2) < 0) {
        map_free(m);
        *m = old;
        return -1;
    }
    for (size_t i = 0; i <= old.mask; i++) {
        if (old.keys[i]) map_put(m, old.keys[i] - 1, old.vals[i]);
    }
    map_free(&old);
    return 0;
}

/* Insert or overwrite; -1 when out of memory. */
static int map_put(Map *m, int64_t key, int64_t val) {
    if ((m->len + 1) * 2 > m->mask + 1 && map_grow(m) < 0) return -1;
    size_t i = map_slot(m, key);
    for (;;) {
        int64_t k = m->keys[i];
        if (k == 0) {
            m->keys[i] = key + 1;
            m->vals[i] = val;
            m->len++;
            return 0;
        }
        if (k == key + 1) {
            m->vals[i] = val;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
}

/* ---- growable int32 columns ---------------------------------------------------------- */

typedef struct {
    int32_t *items;
    size_t len;
    size_t cap;
} Column;

static int column_push(Column *c, int32_t value) {
    if (c->len == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        int32_t *items = PyMem_Realloc(c->items, cap * sizeof(int32_t));
        if (!items) return -1;
        c->items = items;
        c->cap = cap;
    }
    c->items[c->len++] = value;
    return 0;
}

/* ---- the parser object ---------------------------------------------------------------- */

/* Arrays held for the parser's life, in the order the constructor takes them. */
enum {
    B_ACTION,           /* int32[S * num_symbols]: 0 error, s + 1 shift to s, -r - 1 reduce r */
    B_GOTO,             /* int32[S * num_nonterminals]: target state or -1 */
    B_RULE_LHS,         /* int32[rules] */
    B_RULE_LEN,         /* int32[rules] */
    B_CONTEXT_OF_STATE, /* int32[S]: the lexer context after the parser reaches a state */
    B_CTXSET_START,     /* int64[sets + 1] */
    B_CTXSET_CONTEXT,   /* int32[...]: the contexts of each context-set id from K on */
    B_IGNORED,          /* uint8[T] */
    B_DEAD,             /* uint8[K]: contexts where no lexeme can start */
    B_XSET_FREE,        /* uint8[X]: exit sets that always hold */
    B_XSET_START,       /* int64[X + 1]: the (terminal, contexts) pairs of each exit set */
    B_PAIR_TERMINAL,    /* int32[P] */
    B_PAIR_CTX_START,   /* int64[P + 1]: contexts of a pair; -1 at pair_any */
    B_PAIR_ANY,         /* uint8[P]: any context may follow */
    B_PAIR_CONTEXT,     /* int32[...] */
    B_ORIGIN_RUN,       /* int64[L + 1]: the runs of lexer state q */
    B_RUN_SEQ,          /* int64[R] */
    B_RUN_XSET,         /* int64[R] */
    B_RUN_SKIP,         /* int64[R]: the first run past r's sequence and its extensions */
    B_RUN_START,        /* int64[R + 1]: the groups of run r */
    B_RUN_GROUPS,       /* int32[E] */
    B_GROUP_DENSE,      /* int32[G]: the dense row of a group, or -1 for a token list */
    B_GROUP_TOKEN_START,/* int64[G + 1] */
    B_GROUP_TOKENS,     /* int32[...] */
    B_MASKS,            /* int32[D * W]: dense rows */
    B_LABEL,            /* int32[L]: the terminal a lexer state completes, or -1 */
    B_STATE_KILL,       /* int32[L]: the row of kill masks of a labelled state, or -1 */
    B_KILL_MASKS,       /* int32[K' * W]: tokens whose first byte ends the lexeme */
    B_RESTART,          /* int32[L]: the context after an ignored lexeme ends here */
    B_CONTEXT_START,    /* int32[K]: each context's start lexer state */
    B_NEXT_CTX_START,   /* int64[T + 1]: the contexts a shift of terminal t may lead to */
    B_NEXT_CTX,         /* int32[...] */
    B_EOS_ROW,          /* int32[W]: the end-of-sequence tokens */
    B_TEXT_BYTES,       /* uint8[...]: the text tokens' bytes, end to end */
    B_TEXT_START,       /* int64[V + 1]: token v's bytes; empty for a token never text */
    B_MOVES,            /* int32[L * C]: the lexer's next state per byte class, or -1 */
    B_MOVE_STARTS,      /* uint8[L * C]: whether the move starts a counted item */
    B_CLASS_OF_BYTE,    /* int32[256] */
    B_CHAR_BOUND,       /* int32[L]: the most items a counted lexeme may hold, or -1 */
    B_STATE_XSET,       /* int32[L]: the exit set of each lexer state */
    NUM_BUFFERS
};

static const int buffer_itemsize[NUM_BUFFERS] = {
    4, 4, 4, 4, 4, 8, 4, 1, 1, 1, 8, 4, 8, 1, 4, 8, 8, 8, 8, 8, 4, 4, 8, 4, 4, 4,
    4, 4, 4, 4, 8, 4, 4, 1, 8, 4, 1, 4, 4, 4,
};

typedef struct {
    PyObject_HEAD
    Py_buffer buffers[NUM_BUFFERS];
    int held;
    PyObject *seq_columns[3]; /* array('q') parent, terminal, context: appended by Python */
    int32_t num_symbols, end_symbol, num_nonterminals, end_state, num_contexts, num_words;
    int32_t num_states, num_masks, num_lexer_states;
    Py_ssize_t num_groups, num_runs, num_xsets;
    Column parent, state, depth;
    Map stack_ids, feed_memo, apply_memo, xset_memo, end_memo;
    /* The sequence columns of the call in progress. */
    const int64_t *seq_parent, *seq_terminal, *seq_context;
    Py_ssize_t num_seqs;
    Column valid;
    uint32_t *dense_stamp;
    uint32_t stamp;
    Column dense;      /* the distinct dense rows of the union in progress */
    Map combo_ids;     /* hash of a sorted list of >= 2 dense rows -> combo */
    Column combo_list; /* per combo: its length, then its dense rows */
    Column combo_at;   /* per combo: where its list starts in combo_list */
    uint32_t *combo_rows; /* per combo: the OR of its dense rows, W words */
    size_t num_combos, combo_capacity;
    /* Mask rows (see "mask rows" below): bytes objects by row id, and their caches. */
    PyObject **rows;
    size_t num_rows, rows_capacity;
    Map row_exact;      /* stack << 32 | lexer state -> pack(row, floor) */
    Map row_suffix;     /* hash of (lexer state, top states) -> suffix entry */
    Column suffix_at;   /* per suffix entry: where (state, length, row, states...) start */
    Column suffix_pool;
    Map suffix_lengths; /* lexer state << 32 | top state -> first length entry */
    Column length_value, length_next; /* linked lists of suffix lengths, oldest first */
    Map union_rows;     /* hash of a run-id list -> union entry */
    Column union_at;    /* per union entry: where (row, count, run ids...) start */
    Column union_pool;
    Map interned;       /* digest of a row's bytes -> row id */
    int32_t num_kill_rows, num_terminals, num_classes, num_rules;
    Py_ssize_t vocab_size, num_ctxsets;
    Column chain;       /* `apply`'s sequences on their way up to a known prefix */
    int failed;         /* the call in progress ran out of memory, or met `broken` */
    const char *broken; /* what the tables got wrong, once a call found out (sticky) */
} Parser;

/* Dense-row combinations kept per parser: unions of different token lists often OR the
 * same 20-odd dense rows (a JSON string's content), 16 KB each at 128k tokens. */
#define MAX_COMBOS 2048

#define A(self, i, type) ((const type *)(self)->buffers[i].buf)

/* Every map of a parser, for its constructor and destructor. */
#define PARSER_MAPS(self)                                                                 \
    &(self)->stack_ids, &(self)->feed_memo, &(self)->apply_memo, &(self)->xset_memo,      \
        &(self)->end_memo, &(self)->combo_ids, &(self)->row_exact, &(self)->row_suffix,   \
        &(self)->suffix_lengths, &(self)->union_rows, &(self)->interned

static inline int64_t pack(int32_t result, int32_t floor) {
    return ((int64_t)(result + 1) << 32) | (uint32_t)floor;
}
static inline int32_t unpack_result(int64_t v) { return (int32_t)(v >> 32) - 1; }
static inline int32_t unpack_floor(int64_t v) { return (int32_t)(v & 0xffffffff); }
static inline int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

/* A call found the tables inconsistent where no check at construction could tell (a
 * reduction loop, a sequence appended wrong): this and every later call raise ValueError,
 * as the memos may hold answers read from the wrong tables. */
static void tables_broken(Parser *self, const char *reason) {
    if (!self->broken) self->broken = reason;
    self->failed = 1;
}

/* Reductions one terminal may trigger before the parser counts as looping: LALR tables of
 * an unambiguous grammar reduce at most through every level of the stack (plus the empty
 * rules' pushes, at most one per parser state in a row), each level through a chain of
 * distinct nonterminals. Tens in practice; a forged table that reduces forever stops here. */
static inline int64_t reduce_budget(const Parser *self, int32_t stack) {
    return ((int64_t)self->depth.items[stack] + self->num_states + 2) *
           ((int64_t)self->num_nonterminals + 2);
}

static int32_t push(Parser *self, int32_t stack, int32_t state) {
    int64_t key = (int64_t)stack * self->num_states + state;
    int64_t found;
    if (map_get(&self->stack_ids, key, &found)) return (int32_t)found;
    int32_t id = (int32_t)self->state.len;
    if (column_push(&self->parent, stack) < 0 || column_push(&self->state, state) < 0 ||
        column_push(&self->depth, self->depth.items[stack] + 1) < 0 ||
        map_put(&self->stack_ids, key, id) < 0) {
        self->failed = 1;
        return -1;
    }
    return id;
}

/* One reduction: pop the rule's symbols, then goto its left-hand side. No pop passes the
 * bottom of the stack: construction checked that a state reduces no rule longer than the
 * shortest path from the start state to it (`check_reductions`). */
static int32_t reduce(Parser *self, int32_t sid, int32_t rule, int32_t *floor) {
    const int32_t *parent = self->parent.items;
    for (int32_t n = A(self, B_RULE_LEN, int32_t)[rule]; n > 0; n--) sid = parent[sid];
    *floor = min32(*floor, self->depth.items[sid]);
    int32_t target = A(self, B_GOTO, int32_t)[(int64_t)self->state.items[sid] * self->num_nonterminals +
                                               A(self, B_RULE_LHS, int32_t)[rule]];
    if (target < 0) return -1;
    return push(self, sid, target);
}

static int64_t feed(Parser *self, int32_t stack, int32_t terminal) {
    int64_t key = (int64_t)stack * self->num_symbols + terminal;
    int64_t hit;
    if (map_get(&self->feed_memo, key, &hit)) return hit;
    const int32_t *action = A(self, B_ACTION, int32_t);
    int32_t sid = stack, floor = self->depth.items[stack], result = -1;
    for (int64_t budget = reduce_budget(self, stack);; budget--) {
        int32_t act = action[(int64_t)self->state.items[sid] * self->num_symbols + terminal];
        if (act == 0) break;
        if (act > 0) {
            result = push(self, sid, act - 1);
            break;
        }
        if (budget == 0) {
            tables_broken(self, "the parse table reduces without end");
            break;
        }
        sid = reduce(self, sid, -act - 1, &floor);
        if (sid < 0) break;
    }
    int64_t out = pack(result, floor);
    if (map_put(&self->feed_memo, key, out) < 0) self->failed = 1;
    return out;
}

static int64_t accepts_end(Parser *self, int32_t stack) {
    int64_t hit;
    if (map_get(&self->end_memo, stack, &hit)) return hit;
    const int32_t *action = A(self, B_ACTION, int32_t);
    int32_t sid = stack, floor = self->depth.items[stack], ok = 0;
    for (int64_t budget = reduce_budget(self, stack);; budget--) {
        int32_t act = action[(int64_t)self->state.items[sid] * self->num_symbols + self->end_symbol];
        if (act >= 0) break; /* error, or a shift of $END (lark never builds one) */
        if (budget == 0) {
            tables_broken(self, "the parse table reduces without end");
            break;
        }
        sid = reduce(self, sid, -act - 1, &floor);
        if (sid < 0) break;
        if (self->state.items[sid] == self->end_state) {
            ok = 1;
            break;
        }
    }
    int64_t out = pack(ok, floor);
    if (map_put(&self->end_memo, stack, out) < 0) self->failed = 1;
    return out;
}

static inline int contains(const int32_t *items, int64_t lo, int64_t hi, int32_t value) {
    for (int64_t i = lo; i < hi; i++) {
        if (items[i] == value) return 1;
    }
    return 0;
}

/* Whether the parser landing in context `landing` is what sequence context `wanted` assumed
 * (one context, or past K a set of them). */
static inline int context_matches(Parser *self, int32_t landing, int64_t wanted) {
    if (wanted == landing) return 1;
    if (wanted < self->num_contexts) return 0;
    const int64_t *start = A(self, B_CTXSET_START, int64_t);
    int64_t set = wanted - self->num_contexts;
    return contains(A(self, B_CTXSET_CONTEXT, int32_t), start[set], start[set + 1], landing);
}

/* Whether sequence `seq` (> 0) of the columns Python hands in is well formed: its parent
 * comes before it (so every chain ends at the empty sequence), its terminal and context
 * are ids of the tables. Checked where read, as Python appends to the columns. */
static inline int seq_valid(const Parser *self, int64_t seq) {
    if (seq <= 0 || seq >= self->num_seqs) return 0;
    int64_t parent = self->seq_parent[seq], terminal = self->seq_terminal[seq];
    int64_t context = self->seq_context[seq];
    return parent >= 0 && parent < seq && terminal >= 0 && terminal < self->num_terminals &&
           context >= 0 && context < self->num_contexts + self->num_ctxsets;
}

/* The stack after sequence `seq`: its prefixes are walked up to the empty sequence or one
 * already memoized, then applied back down, each memoized; a loop, so no chain of
 * sequences can make the C stack deep. */
static int64_t apply(Parser *self, int32_t stack, int64_t seq) {
    int64_t before = pack(stack, self->depth.items[stack]), hit;
    Column *chain = &self->chain;
    chain->len = 0;
    for (int64_t s = seq; s != 0; s = self->seq_parent[s]) {
        if (map_get(&self->apply_memo, ((int64_t)stack << 32) | s, &hit)) {
            before = hit;
            break;
        }
        if (!seq_valid(self, s)) {
            tables_broken(self, "an emitted sequence is malformed");
            return pack(-1, self->depth.items[stack]);
        }
        if (column_push(chain, (int32_t)s) < 0) {
            self->failed = 1;
            return pack(-1, self->depth.items[stack]);
        }
    }
    for (size_t i = chain->len; i-- > 0;) {
        int64_t s = chain->items[i];
        int32_t floor = unpack_floor(before), result = -1;
        if (unpack_result(before) >= 0) {
            int64_t after = feed(self, unpack_result(before), (int32_t)self->seq_terminal[s]);
            floor = min32(floor, unpack_floor(after));
            int32_t sid = unpack_result(after);
            if (sid >= 0) {
                int32_t landing = A(self, B_CONTEXT_OF_STATE, int32_t)[self->state.items[sid]];
                if (context_matches(self, landing, self->seq_context[s])) result = sid;
            }
        }
        before = pack(result, floor);
        if (map_put(&self->apply_memo, ((int64_t)stack << 32) | s, before) < 0) self->failed = 1;
    }
    return before;
}

static int64_t xset_ok(Parser *self, int32_t stack, int64_t xset) {
    if (A(self, B_XSET_FREE, uint8_t)[xset]) return pack(1, self->depth.items[stack]);
    int64_t key = ((int64_t)stack << 32) | xset;
    int64_t hit;
    if (map_get(&self->xset_memo, key, &hit)) return hit;
    const int64_t *xstart = A(self, B_XSET_START, int64_t);
    const int32_t *pair_terminal = A(self, B_PAIR_TERMINAL, int32_t);
    const int64_t *ctx_start = A(self, B_PAIR_CTX_START, int64_t);
    const uint8_t *pair_any = A(self, B_PAIR_ANY, uint8_t);
    const int32_t *pair_context = A(self, B_PAIR_CONTEXT, int32_t);
    const uint8_t *ignored = A(self, B_IGNORED, uint8_t);
    const uint8_t *dead = A(self, B_DEAD, uint8_t);
    const int32_t *context_of_state = A(self, B_CONTEXT_OF_STATE, int32_t);
    int32_t floor = self->depth.items[stack], ok = 0;
    for (int64_t p = xstart[xset]; p < xstart[xset + 1] && !ok; p++) {
        int32_t terminal = pair_terminal[p], after = stack;
        if (!ignored[terminal]) {
            int64_t fed = feed(self, stack, terminal);
            floor = min32(floor, unpack_floor(fed));
            after = unpack_result(fed);
            if (after < 0) continue;
        }
        int32_t landing = context_of_state[self->state.items[after]];
        if (pair_any[p] ? !dead[landing]
                        : contains(pair_context, ctx_start[p], ctx_start[p + 1], landing)) {
            ok = 1;
            break;
        }
        int64_t ended = accepts_end(self, after);
        floor = min32(floor, unpack_floor(ended));
        ok = unpack_result(ended) == 1;
    }
    int64_t out = pack(ok, floor);
    if (map_put(&self->xset_memo, key, out) < 0) self->failed = 1;
    return out;
}

/* Whether EOS may follow: the pending lexeme at lexer `state` is complete and `$END`
 * parses after its terminal. */
static int64_t config_accepts_end(Parser *self, int32_t stack, int32_t state) {
    int32_t label = A(self, B_LABEL, int32_t)[state];
    if (label < 0) return pack(0, self->depth.items[stack]);
    if (A(self, B_IGNORED, uint8_t)[label]) return accepts_end(self, stack);
    int64_t fed = feed(self, stack, label);
    if (unpack_result(fed) < 0) return pack(0, unpack_floor(fed));
    int64_t ended = accepts_end(self, unpack_result(fed));
    return pack(unpack_result(ended), min32(unpack_floor(fed), unpack_floor(ended)));
}

/* The runs of lexer `state` whose sequence and exit set `stack` accepts, into
 * self->valid; returns the floor. Runs come in path order: a rejected sequence skips its
 * extensions in one step, and siblings differing only in the context assumed after their
 * last terminal share one parser step. */
static int32_t valid_runs(Parser *self, int32_t stack, int32_t state) {
    const int64_t *origin_run = A(self, B_ORIGIN_RUN, int64_t);
    const int64_t *run_seq = A(self, B_RUN_SEQ, int64_t);
    const int64_t *run_xset = A(self, B_RUN_XSET, int64_t);
    const int64_t *run_skip = A(self, B_RUN_SKIP, int64_t);
    const int32_t *context_of_state = A(self, B_CONTEXT_OF_STATE, int32_t);
    int32_t floor = self->depth.items[stack];
    int64_t last_seq = -1, last_parent = -1, last_terminal = -1;
    int32_t after = -1, stepped = -1, landing = -1;
    self->valid.len = 0;
    int64_t run = origin_run[state], end = origin_run[state + 1];
    while (run < end) {
        int64_t seq = run_seq[run];
        if (seq != last_seq) {
            last_seq = seq;
            if (seq == 0) {
                after = stack;
            } else if (!seq_valid(self, seq)) {
                tables_broken(self, "an emitted sequence is malformed");
                break;
            } else {
                int64_t parent = self->seq_parent[seq], terminal = self->seq_terminal[seq];
                if (parent != last_parent || terminal != last_terminal) {
                    last_parent = parent;
                    last_terminal = terminal;
                    int64_t before = apply(self, stack, parent);
                    floor = min32(floor, unpack_floor(before));
                    stepped = -1;
                    if (unpack_result(before) >= 0) {
                        int64_t fed = feed(self, unpack_result(before), (int32_t)terminal);
                        floor = min32(floor, unpack_floor(fed));
                        stepped = unpack_result(fed);
                    }
                    if (stepped >= 0) landing = context_of_state[self->state.items[stepped]];
                }
                if (stepped < 0 || !context_matches(self, landing, self->seq_context[seq])) {
                    run = run_skip[run]; /* this sequence and every extension of it */
                    continue;
                }
                after = stepped;
            }
        }
        int64_t checked = xset_ok(self, after, run_xset[run]);
        floor = min32(floor, unpack_floor(checked));
        if (unpack_result(checked) == 1 && column_push(&self->valid, (int32_t)run) < 0) {
            self->failed = 1;
        }
        run++;
    }
    return floor;
}

/* dst |= src over n words: most of a union's time is these ORs of 16 KB rows (128k
 * tokens), so x86-64 gets an AVX2 clone picked at load time where the CPU has it. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void or_words(uint32_t *restrict dst, const uint32_t *restrict src, size_t n) {
    for (size_t w = 0; w < n; w++) dst[w] |= src[w];
}

/* OR the dense rows `ids` (sorted, distinct, at least two) into `row`, through the
 * combination cache. -1 when out of memory. */
static int or_dense_combo(Parser *self, const int32_t *ids, size_t count, uint32_t *row) {
    size_t words = (size_t)self->num_words;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < count; i++) h = (h ^ (uint32_t)ids[i]) * 1099511628211ull;
    int64_t key = (int64_t)(h >> 1), combo;
    for (; map_get(&self->combo_ids, key, &combo); key = (key + 1) & INT64_MAX) {
        const int32_t *list = self->combo_list.items + self->combo_at.items[combo];
        if ((size_t)list[0] == count && !memcmp(list + 1, ids, count * sizeof(int32_t))) {
            const uint32_t *src = self->combo_rows + (size_t)combo * words;
            or_words(row, src, words);
            return 0;
        }
    }
    const uint32_t *masks = A(self, B_MASKS, uint32_t);
    uint32_t *acc = row;
    if (self->num_combos < MAX_COMBOS) {
        if (self->num_combos == self->combo_capacity) {
            size_t capacity = self->combo_capacity ? self->combo_capacity * 2 : 16;
            uint32_t *rows = PyMem_Realloc(self->combo_rows, capacity * words * sizeof(uint32_t));
            if (!rows) return -1;
            self->combo_rows = rows;
            self->combo_capacity = capacity;
        }
        acc = self->combo_rows + self->num_combos * words;
        memcpy(acc, masks + (size_t)ids[0] * words, words * sizeof(uint32_t));
        for (size_t i = 1; i < count; i++) {
            const uint32_t *src = masks + (size_t)ids[i] * words;
            or_words(acc, src, words);
        }
        if (column_push(&self->combo_at, (int32_t)self->combo_list.len) < 0 ||
            column_push(&self->combo_list, (int32_t)count) < 0)
            return -1;
        for (size_t i = 0; i < count; i++) {
            if (column_push(&self->combo_list, ids[i]) < 0) return -1;
        }
        if (map_put(&self->combo_ids, key, (int64_t)self->num_combos) < 0) return -1;
        self->num_combos++;
        or_words(row, acc, words);
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        const uint32_t *src = masks + (size_t)ids[i] * words;
        or_words(row, src, words);
    }
    return 0;
}

/* OR the groups of runs `run_ids` into `row`: their dense rows (once each), then their
 * listed tokens. -1 when out of memory. */
static int union_into(Parser *self, const int32_t *run_ids, Py_ssize_t num, uint32_t *row) {
    const int64_t *run_start = A(self, B_RUN_START, int64_t);
    const int32_t *run_groups = A(self, B_RUN_GROUPS, int32_t);
    const int32_t *group_dense = A(self, B_GROUP_DENSE, int32_t);
    const int64_t *token_start = A(self, B_GROUP_TOKEN_START, int64_t);
    const int32_t *tokens = A(self, B_GROUP_TOKENS, int32_t);
    if (++self->stamp == 0) { /* wrapped: no dense row counts as seen */
        memset(self->dense_stamp, 0, sizeof(uint32_t) * (size_t)(self->num_masks + 1));
        self->stamp = 1;
    }
    self->dense.len = 0;
    for (Py_ssize_t i = 0; i < num; i++) {
        int32_t r = run_ids[i];
        for (int64_t e = run_start[r]; e < run_start[r + 1]; e++) {
            int32_t group = run_groups[e];
            int32_t dense = group_dense[group];
            if (dense >= 0) {
                if (self->dense_stamp[dense] == self->stamp) continue;
                self->dense_stamp[dense] = self->stamp;
                if (column_push(&self->dense, dense) < 0) return -1;
            } else {
                for (int64_t t = token_start[group]; t < token_start[group + 1]; t++) {
                    int32_t token = tokens[t];
                    row[token >> 5] |= 1u << (token & 31);
                }
            }
        }
    }
    int32_t *ids = self->dense.items;
    size_t count = self->dense.len;
    if (count == 1) {
        const uint32_t *src = A(self, B_MASKS, uint32_t) + (size_t)ids[0] * self->num_words;
        or_words(row, src, (size_t)self->num_words);
    } else if (count > 1) {
        for (size_t i = 1; i < count; i++) { /* insertion sort: a few tens at most */
            int32_t v = ids[i];
            size_t j = i;
            for (; j > 0 && ids[j - 1] > v; j--) ids[j] = ids[j - 1];
            ids[j] = v;
        }
        return or_dense_combo(self, ids, count, row);
    }
    return 0;
}

/* ---- mask rows ------------------------------------------------------------------------- */

/* A row of (parser stack, lexer state) is the union of the state's valid runs, plus, for a
 * labelled state, the tokens whose first byte ends its lexeme read from the next context's
 * start (masked by the state's kill row), plus EOS where the text may end. Rows are kept
 * as bytes objects by id, found by the exact (stack, state) pair or by the top of the stack
 * down to the floor the row was decided at (the suffix), so one row serves every depth of
 * a nesting. In Python this bookkeeping cost a few microseconds a row and one a token. */

#define MAX_ROW_ENTRIES 500000 /* cached pairs and suffixes before those caches restart */

static inline uint64_t mix(uint64_t h, uint64_t value) {
    return (h ^ value) * 1099511628211ull;
}

/* A 64-bit digest of bytes in four independent lanes (a 16 KB row at 128k tokens). */
static uint64_t digest_bytes(const unsigned char *bytes, size_t len) {
    size_t words = (len + 7) / 8;
    uint64_t lane[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull,
                        0x082EFA98EC4E6C89ull};
    const uint64_t prime = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = 0;
        size_t at = i * 8, left = len - at;
        memcpy(&w, bytes + at, left < 8 ? left : 8);
        uint64_t h = (lane[i & 3] ^ w) * prime;
        lane[i & 3] = h ^ (h >> 31);
    }
    uint64_t h = (uint64_t)len;
    for (int i = 0; i < 4; i++) h = (h ^ lane[i]) * prime, h ^= h >> 29;
    return h;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void or_masked(uint32_t *restrict dst, const uint32_t *restrict src,
                      const uint32_t *restrict mask, size_t n) {
    for (size_t w = 0; w < n; w++) dst[w] |= src[w] & mask[w];
}

static inline const uint32_t *row_words(const Parser *self, int32_t row) {
    return (const uint32_t *)PyBytes_AS_STRING(self->rows[row]);
}

/* Keep `bytes` (a reference taken over) as the next row id; -1 when out of memory. */
static int32_t add_row(Parser *self, PyObject *bytes) {
    if (!bytes) return -1;
    if (self->num_rows == self->rows_capacity) {
        size_t capacity = self->rows_capacity ? self->rows_capacity * 2 : 64;
        PyObject **rows = PyMem_Realloc(self->rows, capacity * sizeof(PyObject *));
        if (!rows) {
            Py_DECREF(bytes);
            return -1;
        }
        self->rows = rows;
        self->rows_capacity = capacity;
    }
    self->rows[self->num_rows] = bytes;
    return (int32_t)self->num_rows++;
}

/* The id of the row holding these W words: an earlier one with the same bytes, else a
 * new one. Two rows sharing a digest are both kept (the second outside the map). */
static int32_t intern_row(Parser *self, const uint32_t *words) {
    size_t size = (size_t)self->num_words * sizeof(uint32_t);
    int64_t key = (int64_t)(digest_bytes((const unsigned char *)words, size) >> 1), found;
    int known = map_get(&self->interned, key, &found);
    if (known && !memcmp(row_words(self, (int32_t)found), words, size)) return (int32_t)found;
    int32_t row = add_row(self, PyBytes_FromStringAndSize((const char *)words, (Py_ssize_t)size));
    if (row < 0 || (!known && map_put(&self->interned, key, row) < 0)) return -1;
    return row;
}

/* The union row of the runs `runs`, made once per distinct list of runs. */
static int32_t union_row(Parser *self, const int32_t *runs, size_t num) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < num; i++) h = mix(h, (uint32_t)runs[i]);
    int64_t key = (int64_t)(h >> 1), entry;
    for (; map_get(&self->union_rows, key, &entry); key = (key + 1) & INT64_MAX) {
        const int32_t *at = self->union_pool.items + self->union_at.items[entry];
        /* No memcmp of zero runs: `runs` may then be NULL, which memcmp must not get. */
        if ((size_t)at[1] == num && (!num || !memcmp(at + 2, runs, num * sizeof(int32_t))))
            return at[0];
    }
    Py_ssize_t size = (Py_ssize_t)self->num_words * 4;
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, size);
    if (!bytes) return -1;
    memset(PyBytes_AS_STRING(bytes), 0, (size_t)size);
    if (union_into(self, runs, (Py_ssize_t)num, (uint32_t *)PyBytes_AS_STRING(bytes)) < 0) {
        Py_DECREF(bytes);
        return -1;
    }
    int32_t row = add_row(self, bytes);
    if (row < 0) return -1;
    entry = (int64_t)self->union_at.len;
    if (column_push(&self->union_at, (int32_t)self->union_pool.len) < 0 ||
        column_push(&self->union_pool, row) < 0 || column_push(&self->union_pool, (int32_t)num) < 0)
        return -1;
    for (size_t i = 0; i < num; i++) {
        if (column_push(&self->union_pool, runs[i]) < 0) return -1;
    }
    return map_put(&self->union_rows, key, entry) < 0 ? -1 : row;
}

/* Suffix entries are (lexer state, length, row, the top `length` parser states). */
static int64_t suffix_key(const Parser *self, int32_t state, int32_t stack, int32_t length) {
    uint64_t h = mix(mix(1469598103934665603ull, (uint32_t)state), (uint32_t)length);
    for (int32_t i = 0, sid = stack; i < length; i++, sid = self->parent.items[sid])
        h = mix(h, (uint32_t)self->state.items[sid]);
    return (int64_t)(h >> 1);
}

static int suffix_matches(const Parser *self, int64_t entry, int32_t state, int32_t stack,
                          int32_t length) {
    const int32_t *at = self->suffix_pool.items + self->suffix_at.items[entry];
    if (at[0] != state || at[1] != length) return 0;
    for (int32_t i = 0, sid = stack; i < length; i++, sid = self->parent.items[sid]) {
        if (at[3 + i] != self->state.items[sid]) return 0;
    }
    return 1;
}

/* The row stored for the top `length` states of `stack` at lexer `state`, or -1. */
static int32_t suffix_get(const Parser *self, int32_t state, int32_t stack, int32_t length) {
    int64_t key = suffix_key(self, state, stack, length), entry;
    for (; map_get(&self->row_suffix, key, &entry); key = (key + 1) & INT64_MAX) {
        if (suffix_matches(self, entry, state, stack, length))
            return self->suffix_pool.items[self->suffix_at.items[entry] + 2];
    }
    return -1;
}

static int suffix_put(Parser *self, int32_t state, int32_t stack, int32_t length, int32_t row) {
    int64_t key = suffix_key(self, state, stack, length), entry;
    for (; map_get(&self->row_suffix, key, &entry); key = (key + 1) & INT64_MAX) {
        if (suffix_matches(self, entry, state, stack, length)) {
            self->suffix_pool.items[self->suffix_at.items[entry] + 2] = row;
            return 0;
        }
    }
    entry = (int64_t)self->suffix_at.len;
    if (column_push(&self->suffix_at, (int32_t)self->suffix_pool.len) < 0 ||
        column_push(&self->suffix_pool, state) < 0 || column_push(&self->suffix_pool, length) < 0 ||
        column_push(&self->suffix_pool, row) < 0)
        return -1;
    for (int32_t i = 0, sid = stack; i < length; i++, sid = self->parent.items[sid]) {
        if (column_push(&self->suffix_pool, self->state.items[sid]) < 0) return -1;
    }
    return map_put(&self->row_suffix, key, entry);
}

/* Remember that rows at (lexer state, top state) were decided by `length` top states. */
static int add_length(Parser *self, int64_t top_key, int32_t length) {
    int64_t at;
    int32_t last = -1;
    if (map_get(&self->suffix_lengths, top_key, &at)) {
        for (; at >= 0; at = self->length_next.items[at]) {
            if (self->length_value.items[at] == length) return 0;
            last = (int32_t)at;
        }
    }
    int32_t fresh = (int32_t)self->length_value.len;
    if (column_push(&self->length_value, length) < 0 || column_push(&self->length_next, -1) < 0)
        return -1;
    if (last >= 0) {
        self->length_next.items[last] = fresh;
        return 0;
    }
    return map_put(&self->suffix_lengths, top_key, fresh);
}

/* Past MAX_ROW_ENTRIES the pair and suffix caches start over (the rows stay), so a
 * long-running server does not grow without bound. */
static int clear_row_caches(Parser *self) {
    Map *maps[] = {&self->row_exact, &self->row_suffix, &self->suffix_lengths};
    for (int i = 0; i < 3; i++) {
        map_free(maps[i]);
        if (map_init(maps[i], 1024) < 0) return -1;
    }
    self->suffix_at.len = self->suffix_pool.len = 0;
    self->length_value.len = self->length_next.len = 0;
    return 0;
}

static int64_t row_of(Parser *self, int32_t stack, int32_t state);

/* The row of one configuration, computed; its floor into *floor_out. -1 when failed. */
static int32_t compute_row(Parser *self, int32_t stack, int32_t state, int32_t *floor_out) {
    int32_t floor = valid_runs(self, stack, state);
    int64_t eos = config_accepts_end(self, stack, state);
    floor = min32(floor, unpack_floor(eos));
    *floor_out = floor;
    if (self->failed) return -1;
    int32_t base = union_row(self, self->valid.items, self->valid.len);
    int32_t kill = A(self, B_STATE_KILL, int32_t)[state];
    int with_eos = unpack_result(eos) == 1;
    if (base < 0 || (kill < 0 && !with_eos)) return base;
    size_t words = (size_t)self->num_words;
    uint32_t *acc = PyMem_Malloc(words * sizeof(uint32_t) + 1);
    if (!acc) return -1;
    memcpy(acc, row_words(self, base), words * sizeof(uint32_t));
    if (kill >= 0) {
        /* Tokens whose first byte ends this lexeme: the next lexeme's start-state row, on
         * the stack after the terminal (the same stack for an ignored one). */
        const uint32_t *kill_row = A(self, B_KILL_MASKS, uint32_t) + (size_t)kill * words;
        const int32_t *context_start = A(self, B_CONTEXT_START, int32_t);
        int32_t label = A(self, B_LABEL, int32_t)[state];
        if (A(self, B_IGNORED, uint8_t)[label]) {
            int32_t restart = A(self, B_RESTART, int32_t)[state];
            int64_t sub = row_of(self, stack, context_start[restart]);
            floor = min32(floor, unpack_floor(sub));
            if (unpack_result(sub) >= 0)
                or_masked(acc, row_words(self, unpack_result(sub)), kill_row, words);
        } else {
            const int64_t *ctx_start = A(self, B_NEXT_CTX_START, int64_t);
            const int32_t *next_ctx = A(self, B_NEXT_CTX, int32_t);
            const int32_t *context_of_state = A(self, B_CONTEXT_OF_STATE, int32_t);
            for (int64_t i = ctx_start[label]; i < ctx_start[label + 1]; i++) {
                int64_t fed = feed(self, stack, label);
                floor = min32(floor, unpack_floor(fed));
                int32_t after = unpack_result(fed);
                if (after < 0 || context_of_state[self->state.items[after]] != next_ctx[i])
                    continue;
                int64_t sub = row_of(self, after, context_start[next_ctx[i]]);
                floor = min32(floor, unpack_floor(sub));
                if (unpack_result(sub) >= 0)
                    or_masked(acc, row_words(self, unpack_result(sub)), kill_row, words);
            }
        }
    }
    if (with_eos) or_words(acc, A(self, B_EOS_ROW, uint32_t), words);
    int32_t row = self->failed ? -1 : intern_row(self, acc);
    PyMem_Free(acc);
    *floor_out = floor;
    return row;
}

/* pack(row id, floor) of one unconstrained configuration: cached by the pair, then by the
 * stack's top down to the floor, else computed. A failed one (out of memory) has row -1
 * and sets self->failed. */
static int64_t row_of(Parser *self, int32_t stack, int32_t state) {
    int64_t key = ((int64_t)stack << 32) | (uint32_t)state, hit;
    if (map_get(&self->row_exact, key, &hit)) return hit;
    int32_t depth = self->depth.items[stack];
    int64_t top_key = ((int64_t)state << 32) | (uint32_t)self->state.items[stack], at;
    if (map_get(&self->suffix_lengths, top_key, &at)) {
        for (; at >= 0; at = self->length_next.items[at]) {
            int32_t length = self->length_value.items[at];
            if (length > depth + 1) continue; /* a longer stack's suffix: not this one's */
            int32_t row = suffix_get(self, state, stack, length);
            if (row >= 0) {
                int64_t out = pack(row, depth - length + 1);
                if (map_put(&self->row_exact, key, out) < 0) self->failed = 1;
                return out;
            }
        }
    }
    if (self->row_exact.len + self->suffix_at.len > MAX_ROW_ENTRIES &&
        clear_row_caches(self) < 0) {
        self->failed = 1;
        return pack(-1, depth);
    }
    int32_t floor;
    int32_t row = compute_row(self, stack, state, &floor);
    if (row < 0) {
        self->failed = 1;
        return pack(-1, floor);
    }
    int32_t length = depth - floor + 1;
    int64_t out = pack(row, floor);
    if (add_length(self, top_key, length) < 0 || suffix_put(self, state, stack, length, row) < 0 ||
        map_put(&self->row_exact, key, out) < 0)
        self->failed = 1;
    return out;
}


/* ---- advancing inside a lexeme -------------------------------------------------------- */

enum { INSIDE_DEAD = -1, INSIDE_MAY_CUT = -2 };

/* The configuration (stack, lexer state, no constraint, count) after a text token that
 * stays inside the pending lexeme: the new lexer state, with the items it added in
 * *grown; INSIDE_DEAD where no reading survives, INSIDE_MAY_CUT where some byte could end
 * the lexeme (only the full walk, `walk_bytes`, follows that). Most tokens of a first
 * walk are of this kind. */
static int32_t advance_inside(Parser *self, int32_t stack, int32_t state, int64_t count,
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

/* Most readings one byte of a walk may hold. A grammar's walks hold a few; tables whose
 * shifts lead to several contexts let every repeated terminal double them (2^(n-1) for n
 * dashes), so past this bound the walk ends in a ValueError, never an exponential wait. */
#define MAX_WALK_READINGS 4096

typedef struct {
    Column em_parent, em_terminal, em_context; /* emitted sequences: node -> parent + step */
    Column set_start, set_items;               /* constraint sets, each sorted */
    Map em_ids, set_ids, next_ids;             /* hash -> node, set, reading of `next` */
    Reading *cur, *next;
    size_t num_cur, num_next, capacity;
    int32_t *scratch;
    size_t scratch_len, scratch_cap;
    size_t too_many_at; /* 1 + the offset of the byte past MAX_WALK_READINGS; 0 if none */
    int failed;
} Walk;

static int walk_init(Walk *w) {
    w->capacity = 16;
    w->cur = PyMem_Malloc(w->capacity * sizeof(Reading));
    w->next = PyMem_Malloc(w->capacity * sizeof(Reading));
    int maps = map_init(&w->em_ids, 8) | map_init(&w->set_ids, 8) | map_init(&w->next_ids, 8);
    if (!w->cur || !w->next || maps < 0 || column_push(&w->em_parent, -1) < 0 ||
        column_push(&w->em_terminal, -1) < 0 || column_push(&w->em_context, -1) < 0 ||
        column_push(&w->set_start, 0) < 0)
        return -1;
    return 0;
}

static void walk_free(Walk *w) {
    Column *columns[] = {&w->em_parent, &w->em_terminal, &w->em_context, &w->set_start,
                         &w->set_items};
    for (size_t i = 0; i < sizeof(columns) / sizeof(*columns); i++) PyMem_Free(columns[i]->items);
    map_free(&w->em_ids);
    map_free(&w->set_ids);
    map_free(&w->next_ids);
    PyMem_Free(w->cur);
    PyMem_Free(w->next);
    PyMem_Free(w->scratch);
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
    if (column_push(&w->em_parent, parent) < 0 || column_push(&w->em_terminal, terminal) < 0 ||
        column_push(&w->em_context, context) < 0 ||
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
        if (column_push(&w->set_items, items[i]) < 0) w->failed = 1;
    }
    if (column_push(&w->set_start, (int32_t)w->set_items.len) < 0 ||
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
        memset(w->next_ids.keys, 0, (w->next_ids.mask + 1) * sizeof(int64_t));
        w->next_ids.len = 0;
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
            int64_t lo_ctx = ignored[lab] ? 0 : ctx_start[lab];
            int64_t hi_ctx = ignored[lab] ? 1 : ctx_start[lab + 1];
            for (int64_t c = lo_ctx; c < hi_ctx; c++) {
                int32_t after = r.emitted, context = ignored[lab] ? restart[r.state] : next_ctx[c];
                if (!ignored[lab]) after = emitted_node(w, r.emitted, lab, context);
                int64_t begin = (int64_t)context_start[context] * width + cls;
                if (moves[begin] >= 0)
                    add_reading(w, (Reading){after, moves[begin], cut, r.grown, starts[begin]},
                                at);
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

/* ---- writing a row into a caller's bitmask -------------------------------------------- */

/* `count` words into row `row` of an int32 [W'] or [B, W'] bitmask, zeroing the words past
 * them. numpy's copy of one row cost about a microsecond of view creation and dispatch a
 * token; this is a memcpy. -1 with an exception set when the bitmask does not fit. */
static int write_words(PyObject *bitmask, long long row, const int32_t *from, Py_ssize_t count) {
    Py_buffer dst;
    if (PyObject_GetBuffer(bitmask, &dst, PyBUF_WRITABLE | PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return -1;
    int done = -1;
    Py_ssize_t rows = dst.ndim == 2 ? dst.shape[0] : 1;
    Py_ssize_t width = dst.ndim >= 1 ? dst.shape[dst.ndim - 1] : 0;
    if (!kernel_is_int(&dst, 4) || (dst.ndim != 1 && dst.ndim != 2) || count > width) {
        PyErr_SetString(PyExc_ValueError, "write_row: expected int32 rows, src no wider");
    } else if (row < 0 || row >= rows) {
        if (dst.ndim == 1)
            PyErr_Format(PyExc_ValueError, "row %lld out of range for a 1-D bitmask: expected 0",
                         row);
        else
            PyErr_Format(PyExc_ValueError, "row %lld out of range: expected 0..%zd", row,
                         rows - 1);
    } else {
        char *base = (char *)dst.buf + (dst.ndim == 2 ? row * dst.strides[0] : 0);
        Py_ssize_t step = dst.strides[dst.ndim - 1];
        if (step == 4) {
            memcpy(base, from, (size_t)count * 4);
            memset(base + count * 4, 0, (size_t)(width - count) * 4);
        } else {
            for (Py_ssize_t i = 0; i < width; i++) {
                int32_t value = i < count ? from[i] : 0;
                memcpy(base + i * step, &value, 4);
            }
        }
        done = 0;
    }
    PyBuffer_Release(&dst);
    return done;
}

/* Hold the C-contiguous buffers of a tuple's items, each of its item size; *held counts
 * those to release. -1 with an exception set when one does not fit. */
static int hold_buffers(PyObject *items, Py_buffer *views, const int *itemsize, int count,
                        int *held, const char *owner) {
    for (int i = 0; i < count; i++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(items, i), &views[i], PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        *held = i + 1;
        if (views[i].itemsize != itemsize[i]) {
            PyErr_Format(PyExc_TypeError, "%s buffer %d: expected items of %d bytes", owner, i,
                         itemsize[i]);
            return -1;
        }
    }
    return 0;
}

/* ---- Python glue ---------------------------------------------------------------------- */

static int acquire_sequences(Parser *self, Py_buffer views[3]) {
    for (int i = 0; i < 3; i++) {
        if (PyObject_GetBuffer(self->seq_columns[i], &views[i], PyBUF_SIMPLE) < 0) {
            while (--i >= 0) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    self->seq_parent = views[0].buf;
    self->seq_terminal = views[1].buf;
    self->seq_context = views[2].buf;
    /* Only the sequences all three columns hold, with ids that fit a memo key. */
    Py_ssize_t len = views[0].len < views[1].len ? views[0].len : views[1].len;
    len = len < views[2].len ? len : views[2].len;
    self->num_seqs = len / 8 < INT32_MAX ? len / 8 : INT32_MAX;
    return 0;
}

static void release_sequences(Parser *self, Py_buffer views[3]) {
    for (int i = 0; i < 3; i++) PyBuffer_Release(&views[i]);
    self->seq_parent = self->seq_terminal = self->seq_context = NULL;
}

/* The error of a call that failed: the tables' fault (then every later call refuses too)
 * or out of memory. */
static PyObject *call_failed(Parser *self) {
    self->failed = 0;
    if (self->broken)
        return PyErr_Format(PyExc_ValueError, "Parser: inconsistent tables: %s", self->broken);
    return PyErr_NoMemory();
}

static int check_stack(Parser *self, long long stack) {
    if (self->broken) {
        call_failed(self);
        return -1;
    }
    if (stack < 0 || (size_t)stack >= self->state.len) {
        PyErr_Format(PyExc_IndexError, "no stack %lld", stack);
        return -1;
    }
    return 0;
}

static int check_range(long long value, Py_ssize_t limit, const char *what) {
    if (value < 0 || value >= limit) {
        PyErr_Format(PyExc_IndexError, "no %s %lld", what, value);
        return -1;
    }
    return 0;
}

static PyObject *finish(Parser *self, int64_t packed, int as_bool) {
    if (self->failed) return call_failed(self);
    int32_t result = unpack_result(packed);
    PyObject *first = as_bool ? PyBool_FromLong(result) : PyLong_FromLong(result);
    return Py_BuildValue("(Ni)", first, unpack_floor(packed));
}

static int two_ints(PyObject *const *args, Py_ssize_t nargs, long long *a, long long *b) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected two integers");
        return -1;
    }
    *a = PyLong_AsLongLong(args[0]);
    *b = PyLong_AsLongLong(args[1]);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *Parser_feed(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    long long stack, terminal;
    if (two_ints(args, nargs, &stack, &terminal) < 0 || check_stack(self, stack) < 0 ||
        check_range(terminal, self->num_symbols, "symbol") < 0)
        return NULL;
    return finish(self, feed(self, (int32_t)stack, (int32_t)terminal), 0);
}

static PyObject *Parser_accepts_end(Parser *self, PyObject *arg) {
    long long stack = PyLong_AsLongLong(arg);
    if ((stack == -1 && PyErr_Occurred()) || check_stack(self, stack) < 0) return NULL;
    return finish(self, accepts_end(self, (int32_t)stack), 1);
}

static PyObject *Parser_apply(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    long long stack, seq;
    Py_buffer views[3];
    if (two_ints(args, nargs, &stack, &seq) < 0 || check_stack(self, stack) < 0 ||
        acquire_sequences(self, views) < 0)
        return NULL;
    int64_t out = 0;
    int bad = check_range(seq, self->num_seqs, "sequence");
    if (!bad) out = apply(self, (int32_t)stack, seq);
    release_sequences(self, views);
    return bad ? NULL : finish(self, out, 0);
}

static PyObject *Parser_xset_ok(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    long long stack, xset;
    if (two_ints(args, nargs, &stack, &xset) < 0 || check_stack(self, stack) < 0 ||
        check_range(xset, self->num_xsets, "exit set") < 0)
        return NULL;
    return finish(self, xset_ok(self, (int32_t)stack, xset), 1);
}

static PyObject *Parser_row_plan(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    long long stack, state;
    Py_buffer views[3];
    if (two_ints(args, nargs, &stack, &state) < 0 || check_stack(self, stack) < 0 ||
        check_range(state, self->num_lexer_states, "lexer state") < 0 ||
        acquire_sequences(self, views) < 0)
        return NULL;
    int32_t floor = valid_runs(self, (int32_t)stack, (int32_t)state);
    release_sequences(self, views);
    int64_t eos = config_accepts_end(self, (int32_t)stack, (int32_t)state);
    if (self->failed) return call_failed(self);
    PyObject *key = PyBytes_FromStringAndSize((const char *)self->valid.items,
                                              (Py_ssize_t)(self->valid.len * sizeof(int32_t)));
    if (!key) return NULL;
    return Py_BuildValue("(NiN)", key, min32(floor, unpack_floor(eos)),
                         PyBool_FromLong(unpack_result(eos)));
}

static PyObject *Parser_config_accepts_end(Parser *self, PyObject *const *args,
                                           Py_ssize_t nargs) {
    long long stack, state;
    if (two_ints(args, nargs, &stack, &state) < 0 || check_stack(self, stack) < 0 ||
        check_range(state, self->num_lexer_states, "lexer state") < 0)
        return NULL;
    return finish(self, config_accepts_end(self, (int32_t)stack, (int32_t)state), 1);
}

static PyObject *Parser_union(Parser *self, PyObject *arg) {
    Py_buffer runs;
    if (PyObject_GetBuffer(arg, &runs, PyBUF_SIMPLE) < 0) return NULL;
    const int32_t *run_ids = runs.buf;
    Py_ssize_t num = runs.len / 4;
    for (Py_ssize_t i = runs.len % 4 ? -1 : 0; i < num; i++) { /* -1: a torn id */
        if (i < 0 || run_ids[i] < 0 || run_ids[i] >= self->num_runs) {
            PyBuffer_Release(&runs);
            return PyErr_Format(PyExc_ValueError, "union: expected run ids as int32 bytes");
        }
    }
    Py_ssize_t size = (Py_ssize_t)self->num_words * 4;
    PyObject *row = PyBytes_FromStringAndSize(NULL, size);
    if (row) {
        memset(PyBytes_AS_STRING(row), 0, (size_t)size);
        if (union_into(self, run_ids, num, (uint32_t *)PyBytes_AS_STRING(row)) < 0) {
            Py_CLEAR(row);
            PyErr_NoMemory();
        }
    }
    PyBuffer_Release(&runs);
    return row;
}

/* pack(row, floor) of a checked (stack, lexer state) pair into *out, the sequence columns
 * read only for a pair not met before; -1 with an exception set when it failed. */
static int looked_up_row(Parser *self, long long stack, long long state, int64_t *out) {
    if (check_stack(self, stack) < 0 ||
        check_range(state, self->num_lexer_states, "lexer state") < 0)
        return -1;
    if (map_get(&self->row_exact, ((int64_t)stack << 32) | (uint32_t)state, out)) return 0;
    Py_buffer views[3];
    if (acquire_sequences(self, views) < 0) return -1;
    *out = row_of(self, (int32_t)stack, (int32_t)state);
    release_sequences(self, views);
    if (self->failed) {
        call_failed(self);
        return -1;
    }
    return 0;
}

static PyObject *Parser_row(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    long long stack, state;
    int64_t out;
    if (two_ints(args, nargs, &stack, &state) < 0 || looked_up_row(self, stack, state, &out) < 0)
        return NULL;
    return finish(self, out, 0);
}

static PyObject *Parser_row_bytes(Parser *self, PyObject *arg) {
    long long row = PyLong_AsLongLong(arg);
    if ((row == -1 && PyErr_Occurred()) ||
        check_range(row, (Py_ssize_t)self->num_rows, "row") < 0)
        return NULL;
    return Py_NewRef(self->rows[row]);
}

static PyObject *Parser_intern(Parser *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    int32_t row = -2;
    if (view.len != (Py_ssize_t)self->num_words * 4)
        PyErr_Format(PyExc_ValueError, "intern: expected a row of %d int32 words",
                     self->num_words);
    else
        row = intern_row(self, view.buf);
    PyBuffer_Release(&view);
    if (row == -2) return NULL;
    if (row < 0) return PyErr_NoMemory();
    return PyLong_FromLong(row);
}

static PyObject *Parser_advance_inside(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "advance_inside(stack, lexer_state, count, token)");
        return NULL;
    }
    long long values[4];
    for (int i = 0; i < 4; i++) {
        values[i] = PyLong_AsLongLong(args[i]);
        if (values[i] == -1 && PyErr_Occurred()) return NULL;
    }
    if (check_stack(self, values[0]) < 0 ||
        check_range(values[1], self->num_lexer_states, "lexer state") < 0)
        return NULL;
    if (values[2] < 0) return PyErr_Format(PyExc_ValueError, "count %lld < 0", values[2]);
    int64_t grown;
    int32_t end = advance_inside(self, (int32_t)values[0], (int32_t)values[1], values[2],
                                 (Py_ssize_t)values[3], &grown);
    if (self->failed) return call_failed(self);
    if (end == INSIDE_MAY_CUT) Py_RETURN_NONE;
    if (end == INSIDE_DEAD) return PyTuple_New(0);
    return Py_BuildValue("((OiiL))", args[0], end, 0, (long long)(values[2] + grown));
}

static PyObject *Parser_walk_bytes(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
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

static PyObject *Parser_write_row(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "write_row(bitmask, row, stack, lexer_state)");
        return NULL;
    }
    long long row = PyLong_AsLongLong(args[1]);
    long long stack = PyLong_AsLongLong(args[2]);
    long long state = PyLong_AsLongLong(args[3]);
    int64_t out;
    if (PyErr_Occurred() || looked_up_row(self, stack, state, &out) < 0) return NULL;
    const int32_t *words = (const int32_t *)row_words(self, unpack_result(out));
    if (write_words(args[0], row, words, self->num_words) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Parser_top(Parser *self, PyObject *arg) {
    long long stack = PyLong_AsLongLong(arg);
    if ((stack == -1 && PyErr_Occurred()) || check_stack(self, stack) < 0) return NULL;
    return Py_BuildValue("(ii)", self->state.items[stack], self->depth.items[stack]);
}

static PyObject *Parser_suffix(Parser *self, PyObject *const *args, Py_ssize_t nargs) {
    long long stack, length;
    if (two_ints(args, nargs, &stack, &length) < 0 || check_stack(self, stack) < 0) return NULL;
    if (length < 0 || length > self->depth.items[stack] + 1) {
        return PyErr_Format(PyExc_ValueError, "stack %lld has no %lld states", stack, length);
    }
    PyObject *out = PyTuple_New((Py_ssize_t)length);
    if (!out) return NULL;
    int32_t sid = (int32_t)stack;
    for (Py_ssize_t i = 0; i < length; i++) {
        PyObject *item = PyLong_FromLong(self->state.items[sid]);
        if (!item) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, item);
        sid = self->parent.items[sid];
    }
    return out;
}

static PyObject *Parser_num_stacks(Parser *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(self->state.len);
}

static PyObject *Parser_num_rows(Parser *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(self->num_rows);
}

static void Parser_dealloc(Parser *self) {
    for (int i = 0; i < self->held; i++) PyBuffer_Release(&self->buffers[i]);
    for (int i = 0; i < 3; i++) Py_XDECREF(self->seq_columns[i]);
    Column *columns[] = {&self->parent,      &self->state,        &self->depth,
                         &self->valid,       &self->dense,        &self->combo_list,
                         &self->combo_at,    &self->suffix_at,    &self->suffix_pool,
                         &self->length_value, &self->length_next, &self->union_at,
                         &self->union_pool,  &self->chain};
    for (size_t i = 0; i < sizeof(columns) / sizeof(*columns); i++) PyMem_Free(columns[i]->items);
    Map *maps[] = {PARSER_MAPS(self)};
    for (size_t i = 0; i < sizeof(maps) / sizeof(*maps); i++) map_free(maps[i]);
    for (size_t i = 0; i < self->num_rows; i++) Py_DECREF(self->rows[i]);
    PyMem_Free(self->rows);
    PyMem_Free(self->dense_stamp);
    PyMem_Free(self->combo_rows);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t items(Parser *self, int i) {
    return self->buffers[i].len / buffer_itemsize[i];
}

/* Whether offsets[0..count] rise from 0 or more to at most `limit`: every slice they cut
 * lies inside the table they index. */
static int offsets_ok(const int64_t *offsets, Py_ssize_t count, Py_ssize_t limit) {
    if (offsets[0] < 0 || offsets[count] > limit) return 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (offsets[i] > offsets[i + 1]) return 0;
    }
    return 1;
}

/* Whether every int32 item lies in lo..hi-1. */
static int ids_ok(const int32_t *ids, Py_ssize_t count, int64_t lo, int64_t hi) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (ids[i] < lo || ids[i] >= hi) return 0;
    }
    return 1;
}

static int ids64_ok(const int64_t *ids, Py_ssize_t count, int64_t lo, int64_t hi) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (ids[i] < lo || ids[i] >= hi) return 0;
    }
    return 1;
}

static int refuse(const char *what) {
    PyErr_Format(PyExc_ValueError, "Parser: %s", what);
    return -1;
}

/* The LALR tables, checked once: every action shifts to a state or reduces a rule, every
 * goto names a state, every rule's left-hand side a nonterminal. */
static int check_parse_tables(Parser *self) {
    const int32_t *action = A(self, B_ACTION, int32_t);
    Py_ssize_t cells = items(self, B_ACTION);
    for (Py_ssize_t i = 0; i < cells; i++) {
        int64_t act = action[i];
        if (act > self->num_states || (act < 0 && -act > self->num_rules))
            return refuse("an action shifts to no state or reduces no rule");
    }
    if (!ids_ok(A(self, B_GOTO, int32_t), items(self, B_GOTO), -1, self->num_states))
        return refuse("a goto leads to no state");
    if (!ids_ok(A(self, B_RULE_LHS, int32_t), self->num_rules, 0, self->num_nonterminals))
        return refuse("a rule's left-hand side is no nonterminal");
    if (!ids_ok(A(self, B_RULE_LEN, int32_t), self->num_rules, 0, INT32_MAX))
        return refuse("a rule has a negative length");
    if (!ids_ok(A(self, B_CONTEXT_OF_STATE, int32_t), self->num_states, 0, self->num_contexts))
        return refuse("a parser state's lexer context is out of range");
    return 0;
}

/* No reduction pops past the bottom of a stack: a state's depth on any stack is at least
 * its distance from the start state along shifts and gotos (the only ways a stack grows),
 * and LR tables reduce in a state only rules no longer than every path into it. Checking
 * that once (a breadth-first walk, about a millisecond for a large grammar) keeps the
 * reduction loop free of depth checks. */
static int check_reductions(Parser *self, int32_t start_state) {
    int32_t states = self->num_states, symbols = self->num_symbols;
    int32_t nonterminals = self->num_nonterminals;
    const int32_t *action = A(self, B_ACTION, int32_t), *go = A(self, B_GOTO, int32_t);
    const int32_t *rule_len = A(self, B_RULE_LEN, int32_t);
    int32_t *distance = PyMem_Malloc(((size_t)states + 1) * sizeof(int32_t));
    int32_t *queue = PyMem_Malloc(((size_t)states + 1) * sizeof(int32_t));
    int result = 0;
    if (!distance || !queue) {
        PyErr_NoMemory();
        result = -1;
        goto done;
    }
    for (int32_t q = 0; q < states; q++) distance[q] = -1;
    distance[start_state] = 0;
    queue[0] = start_state;
    for (int32_t head = 0, tail = 1; head < tail; head++) {
        int32_t q = queue[head];
        for (int32_t a = 0; a < symbols + nonterminals; a++) {
            int32_t next = a < symbols ? action[(int64_t)q * symbols + a] - 1
                                       : go[(int64_t)q * nonterminals + (a - symbols)];
            if (next >= 0 && distance[next] < 0) {
                distance[next] = distance[q] + 1;
                queue[tail++] = next;
            }
        }
    }
    for (int32_t q = 0; q < states && !result; q++) {
        for (int32_t a = 0; a < symbols && distance[q] >= 0; a++) {
            int32_t act = action[(int64_t)q * symbols + a];
            if (act < 0 && rule_len[-(int64_t)act - 1] > distance[q]) {
                result = refuse("a reduction pops past the bottom of the stack");
                break;
            }
        }
    }
done:
    PyMem_Free(distance);
    PyMem_Free(queue);
    return result;
}

/* The exit sets, runs and token groups a row reads, checked once: offsets in bounds,
 * every id naming an item of its table, every run's skip moving forward. */
static int check_run_tables(Parser *self) {
    Py_ssize_t num_pairs = items(self, B_PAIR_TERMINAL), num_entries = items(self, B_RUN_GROUPS);
    if (!offsets_ok(A(self, B_CTXSET_START, int64_t), self->num_ctxsets,
                    items(self, B_CTXSET_CONTEXT)) ||
        !offsets_ok(A(self, B_XSET_START, int64_t), self->num_xsets, num_pairs) ||
        !offsets_ok(A(self, B_PAIR_CTX_START, int64_t), num_pairs, items(self, B_PAIR_CONTEXT)) ||
        !offsets_ok(A(self, B_ORIGIN_RUN, int64_t), self->num_lexer_states, self->num_runs) ||
        !offsets_ok(A(self, B_RUN_START, int64_t), self->num_runs, num_entries) ||
        !offsets_ok(A(self, B_GROUP_TOKEN_START, int64_t), self->num_groups,
                    items(self, B_GROUP_TOKENS)))
        return refuse("an offset table is not monotone or leaves its table");
    if (!ids_ok(A(self, B_PAIR_TERMINAL, int32_t), num_pairs, 0, self->num_terminals))
        return refuse("an exit pair's terminal is out of range");
    if (!ids64_ok(A(self, B_RUN_SEQ, int64_t), self->num_runs, 0, self->num_seqs) ||
        !ids64_ok(A(self, B_RUN_XSET, int64_t), self->num_runs, 0, self->num_xsets) ||
        !ids_ok(A(self, B_RUN_GROUPS, int32_t), num_entries, 0, self->num_groups) ||
        !ids_ok(A(self, B_GROUP_DENSE, int32_t), self->num_groups, -1, self->num_masks))
        return refuse("a run or token group names no sequence, exit set, group or row");
    const int64_t *skip = A(self, B_RUN_SKIP, int64_t);
    for (Py_ssize_t r = 0; r < self->num_runs; r++) {
        if (skip[r] <= r || skip[r] > self->num_runs)
            return refuse("a run's skip does not move forward");
    }
    /* Token ids are bits of a row: one past the vocabulary (or negative) would be written
     * outside it, or allow a token `advance` refuses. */
    if (!ids_ok(A(self, B_GROUP_TOKENS, int32_t), items(self, B_GROUP_TOKENS), 0,
                self->vocab_size))
        return refuse("a token group holds a token id outside the vocabulary");
    return 0;
}

/* The emitted sequences the index came with (Python appends more later; `seq_valid`
 * checks those where read). */
static int check_sequences(Parser *self) {
    Py_buffer views[3];
    for (int i = 0; i < 3; i++) {
        if (PyObject_GetBuffer(self->seq_columns[i], &views[i], PyBUF_FORMAT) < 0) {
            while (--i >= 0) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    int result = 0;
    for (int i = 0; i < 3 && !result; i++) {
        if (views[i].itemsize != 8 || views[i].len != views[0].len || views[i].len < 8)
            result = refuse("sequence columns: expected three int64 columns of one length");
    }
    for (int i = 0; i < 3; i++) PyBuffer_Release(&views[i]);
    if (result < 0 || acquire_sequences(self, views) < 0) return -1;
    for (Py_ssize_t seq = 1; seq < self->num_seqs && !result; seq++) {
        if (!seq_valid(self, seq)) result = refuse("an emitted sequence is malformed");
    }
    Py_ssize_t num_seqs = self->num_seqs;
    release_sequences(self, views);
    self->num_seqs = num_seqs; /* for `check_run_tables`; each call reads its own */
    return result;
}

/* The tables a row reads past the parser's own, checked once: every id in range. */
static int check_row_tables(Parser *self) {
    const int32_t *label = A(self, B_LABEL, int32_t), *kill = A(self, B_STATE_KILL, int32_t);
    const int32_t *restart = A(self, B_RESTART, int32_t);
    const int32_t *context_start = A(self, B_CONTEXT_START, int32_t);
    const int64_t *ctx_start = A(self, B_NEXT_CTX_START, int64_t);
    const int32_t *next_ctx = A(self, B_NEXT_CTX, int32_t);
    Py_ssize_t num_next = items(self, B_NEXT_CTX);
    for (int32_t q = 0; q < self->num_lexer_states; q++) {
        if (label[q] < -1 || label[q] >= self->num_terminals || kill[q] < -1 ||
            kill[q] >= self->num_kill_rows || (kill[q] >= 0 && label[q] < 0) ||
            restart[q] < -1 || restart[q] >= self->num_contexts)
            goto bad;
        if (label[q] >= 0 && A(self, B_IGNORED, uint8_t)[label[q]] && restart[q] < 0) goto bad;
    }
    for (int32_t k = 0; k < self->num_contexts; k++) {
        if (context_start[k] < 0 || context_start[k] >= self->num_lexer_states) goto bad;
        /* A lexeme's start reads nothing, so it has no kill row: a row then reads at most
         * one level of the next lexemes' rows (`compute_row`), never a cycle of them. */
        if (kill[context_start[k]] >= 0) goto bad;
    }
    for (int32_t t = 0; t < self->num_terminals; t++) {
        if (ctx_start[t] < 0 || ctx_start[t] > ctx_start[t + 1] || ctx_start[t + 1] > num_next)
            goto bad;
    }
    for (Py_ssize_t i = 0; i < num_next; i++) {
        if (next_ctx[i] < 0 || next_ctx[i] >= self->num_contexts) goto bad;
    }
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "Parser: a row table holds an id out of range");
    return -1;
}

/* The lexer and token tables `advance_inside` reads, checked once: every id in range. */
static int check_lexer_tables(Parser *self) {
    const int32_t *moves = A(self, B_MOVES, int32_t);
    const int32_t *class_of_byte = A(self, B_CLASS_OF_BYTE, int32_t);
    const int32_t *state_xset = A(self, B_STATE_XSET, int32_t);
    const int64_t *text_start = A(self, B_TEXT_START, int64_t);
    Py_ssize_t num_moves = items(self, B_MOVES);
    for (Py_ssize_t i = 0; i < num_moves; i++) {
        if (moves[i] < -1 || moves[i] >= self->num_lexer_states) goto bad;
    }
    for (int b = 0; b < 256; b++) {
        if (class_of_byte[b] < 0 || (self->num_lexer_states && class_of_byte[b] >= self->num_classes))
            goto bad;
    }
    for (int32_t q = 0; q < self->num_lexer_states; q++) {
        if (state_xset[q] < 0 || state_xset[q] >= self->num_xsets) goto bad;
    }
    if (text_start[0] != 0 || text_start[self->vocab_size] != items(self, B_TEXT_BYTES)) goto bad;
    for (Py_ssize_t v = 0; v < self->vocab_size; v++) {
        if (text_start[v] > text_start[v + 1]) goto bad;
    }
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "Parser: a lexer or token table holds an id out of range");
    return -1;
}

static PyObject *Parser_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static const char *usage =
        "Parser(buffers, seq_columns, num_symbols, num_nonterminals, start_state, end_state, "
        "num_contexts, num_words)";
    PyObject *buffers, *seq_columns;
    int num_symbols, num_nonterminals, start_state, end_state, num_contexts, num_words;
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOiiiiii", &buffers, &seq_columns, &num_symbols,
                          &num_nonterminals, &start_state, &end_state, &num_contexts,
                          &num_words))
        return NULL;
    if (!PyTuple_Check(buffers) || PyTuple_GET_SIZE(buffers) != NUM_BUFFERS ||
        !PyTuple_Check(seq_columns) || PyTuple_GET_SIZE(seq_columns) != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    Parser *self = (Parser *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    if (hold_buffers(buffers, self->buffers, buffer_itemsize, NUM_BUFFERS, &self->held,
                     "Parser") < 0)
        goto fail;
    for (int i = 0; i < 3; i++) {
        self->seq_columns[i] = Py_NewRef(PyTuple_GET_ITEM(seq_columns, i));
    }
    /* Every count below is an int32 id space; table sizes must agree with one another. */
    Py_ssize_t num_states = items(self, B_CONTEXT_OF_STATE);
    Py_ssize_t num_lexer_states = items(self, B_ORIGIN_RUN) - 1;
    Py_ssize_t num_pairs = items(self, B_PAIR_TERMINAL), num_rules = items(self, B_RULE_LHS);
    Py_ssize_t vocab_size = items(self, B_TEXT_START) - 1;
    Py_ssize_t num_masks = num_words > 0 ? items(self, B_MASKS) / num_words : 0;
    Py_ssize_t num_kill_rows = num_words > 0 ? items(self, B_KILL_MASKS) / num_words : 0;
    Py_ssize_t counts[] = {num_states, num_lexer_states, num_rules, vocab_size, num_masks,
                           items(self, B_RUN_SEQ), items(self, B_GROUP_DENSE),
                           items(self, B_XSET_FREE), items(self, B_CTXSET_START) - 1};
    int bad = num_symbols < 1 || num_nonterminals < 0 || num_contexts < 0 || num_words < 0;
    for (size_t i = 0; i < sizeof(counts) / sizeof(*counts); i++)
        bad = bad || counts[i] < 0 || counts[i] >= INT32_MAX;
    if (bad || items(self, B_ACTION) != num_states * num_symbols ||
        items(self, B_GOTO) != num_states * num_nonterminals ||
        items(self, B_RULE_LEN) != num_rules || start_state < 0 || start_state >= num_states ||
        items(self, B_IGNORED) != num_symbols - 1 || items(self, B_DEAD) != num_contexts ||
        items(self, B_XSET_START) != items(self, B_XSET_FREE) + 1 ||
        items(self, B_PAIR_CTX_START) != num_pairs + 1 || items(self, B_PAIR_ANY) != num_pairs ||
        items(self, B_RUN_XSET) != items(self, B_RUN_SEQ) ||
        items(self, B_RUN_SKIP) != items(self, B_RUN_SEQ) ||
        items(self, B_RUN_START) != items(self, B_RUN_SEQ) + 1 ||
        items(self, B_GROUP_TOKEN_START) != items(self, B_GROUP_DENSE) + 1 ||
        items(self, B_LABEL) != num_lexer_states ||
        items(self, B_STATE_KILL) != num_lexer_states ||
        items(self, B_RESTART) != num_lexer_states ||
        items(self, B_CONTEXT_START) != num_contexts || items(self, B_EOS_ROW) != num_words ||
        items(self, B_NEXT_CTX_START) != items(self, B_IGNORED) + 1 ||
        items(self, B_CLASS_OF_BYTE) != 256 ||
        items(self, B_CHAR_BOUND) != num_lexer_states ||
        items(self, B_STATE_XSET) != num_lexer_states ||
        items(self, B_MOVE_STARTS) != items(self, B_MOVES) ||
        (num_lexer_states ? items(self, B_MOVES) % num_lexer_states != 0
                          : items(self, B_MOVES) != 0) ||
        (num_words > 0 ? items(self, B_MASKS) % num_words || items(self, B_KILL_MASKS) % num_words
                       : items(self, B_MASKS) || items(self, B_KILL_MASKS)) ||
        (Py_ssize_t)num_words * 32 < vocab_size ||
        (num_lexer_states && items(self, B_MOVES) / num_lexer_states >= INT32_MAX)) {
        PyErr_SetString(PyExc_ValueError, "Parser: inconsistent table sizes");
        goto fail;
    }
    self->num_symbols = num_symbols;
    self->end_symbol = num_symbols - 1;
    self->num_nonterminals = num_nonterminals;
    self->end_state = end_state;
    self->num_contexts = num_contexts;
    self->num_words = num_words;
    self->num_states = (int32_t)num_states;
    self->num_rules = (int32_t)num_rules;
    self->num_xsets = items(self, B_XSET_FREE);
    self->num_ctxsets = items(self, B_CTXSET_START) - 1;
    self->num_runs = items(self, B_RUN_SEQ);
    self->num_groups = items(self, B_GROUP_DENSE);
    self->num_lexer_states = (int32_t)num_lexer_states;
    self->num_masks = (int32_t)num_masks;
    self->num_terminals = (int32_t)items(self, B_IGNORED);
    self->num_kill_rows = (int32_t)num_kill_rows;
    self->num_classes =
        num_lexer_states ? (int32_t)(items(self, B_MOVES) / num_lexer_states) : 0;
    self->vocab_size = vocab_size;
    if (check_parse_tables(self) < 0 || check_reductions(self, start_state) < 0 ||
        check_sequences(self) < 0 || check_run_tables(self) < 0 || check_row_tables(self) < 0 ||
        check_lexer_tables(self) < 0)
        goto fail;
    self->dense_stamp = PyMem_Calloc((size_t)self->num_masks + 1, sizeof(uint32_t));
    Map *maps[] = {PARSER_MAPS(self)};
    for (size_t i = 0; i < sizeof(maps) / sizeof(*maps); i++) {
        if (map_init(maps[i], 1024) < 0) goto oom;
    }
    if (!self->dense_stamp || column_push(&self->parent, -1) < 0 ||
        column_push(&self->state, start_state) < 0 || column_push(&self->depth, 0) < 0)
        goto oom;
    return (PyObject *)self;
oom:
    PyErr_NoMemory();
fail:
    Py_DECREF(self);
    return NULL;
}

/* ---- module functions ------------------------------------------------------------- */

/* write_row(bitmask, row, src): src into row `row` of an int32 [W'] or [B, W'] bitmask,
 * zeroing the words past src. numpy's copy of one row cost about a microsecond of view
 * creation and dispatch a token; this is a memcpy. */
static PyObject *write_row(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write_row(bitmask, row, src) takes three arguments");
        return NULL;
    }
    long long row = PyLong_AsLongLong(args[1]);
    if (row == -1 && PyErr_Occurred()) return NULL;
    Py_buffer src;
    if (PyObject_GetBuffer(args[2], &src, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    int done = src.itemsize == 4 ? write_words(args[0], row, src.buf, src.len / 4) : -1;
    if (src.itemsize != 4)
        PyErr_SetString(PyExc_ValueError, "write_row: expected int32 rows, src no wider");
    PyBuffer_Release(&src);
    return done < 0 ? NULL : Py_NewRef(Py_None);
}

/* fitting_rows(grown, rows): rows is int32 [R, W] zeros, W the words of len(grown) tokens;
 * row r becomes the tokens whose `grown` items are at most r: what a counted lexeme with
 * room for r more items lets through. One pass over the tokens and one over the rows,
 * for every room at once: packing a row per room from 128k counts cost ~40 us a room,
 * a tail of the first walks of schemas with `maxLength`. */
static PyObject *fitting_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fitting_rows(grown, rows) takes two arguments");
        return NULL;
    }
    Py_buffer grown, rows;
    if (PyObject_GetBuffer(args[0], &grown, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &rows, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&grown);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t vocab = grown.len / 4, words = (vocab + 31) / 32;
    Py_ssize_t num_rows = words ? rows.len / 4 / words : 0;
    if (grown.itemsize != 4 || rows.itemsize != 4 || !words || !num_rows ||
        rows.len != num_rows * words * 4) {
        PyErr_SetString(PyExc_ValueError, "fitting_rows: expected int32 counts and [R, W] rows");
        goto done;
    }
    /* First each token in the row of its own count (too long for every smaller room), then
     * suffix ORs make row r the tokens too long for room r, then invert. */
    const int32_t *count = grown.buf;
    uint32_t *out = rows.buf;
    for (Py_ssize_t t = 0; t < vocab; t++) {
        int32_t g = count[t];
        if (g <= 0) continue;
        Py_ssize_t r = g > num_rows ? num_rows - 1 : g - 1;
        out[r * words + (t >> 5)] |= 1u << (t & 31);
    }
    for (Py_ssize_t r = num_rows - 2; r >= 0; r--)
        or_words(out + r * words, out + (r + 1) * words, (size_t)words);
    for (Py_ssize_t i = 0; i < num_rows * words; i++) out[i] = ~out[i];
    if (vocab % 32) { /* no token past the vocabulary fits */
        for (Py_ssize_t r = 0; r < num_rows; r++)
            out[r * words + words - 1] &= (1u << (vocab % 32)) - 1;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&rows);
    PyBuffer_Release(&grown);
    return result;
}

/* items_grown(moves, starts, num_classes, class_of_byte, parent_at, level_bytes,
 *             token_positions, token_ids, state, out): per text token, the items
 * (`char_start` moves) its bytes add to the lexeme at lexer `state` until the lexeme cannot
 * go on, into int32 `out` (zeros). One pass over the trie in level order (a parent before
 * its children): the count a counted lexeme's bound is checked against, once per lexeme
 * and process; numpy took 4-5 ms a lexeme for Llama 3's 274k nodes. */
static PyObject *items_grown(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    enum { MOVES, STARTS, CLASS_OF_BYTE, PARENT_AT, LEVEL_BYTES, POSITIONS, TOKEN_IDS, OUT };
    static const int sizes[] = {4, 1, 4, 8, 1, 8, 8, 4};
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "items_grown takes ten arguments");
        return NULL;
    }
    PyObject *arrays[8] = {args[0], args[1], args[3], args[4], args[5], args[6], args[7], args[9]};
    long long num_classes = PyLong_AsLongLong(args[2]);
    long long state = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer views[8];
    int held = 0;
    PyObject *result = NULL;
    int32_t *cur = NULL, *count = NULL;
    for (; held < 8; held++) {
        int flags = held == OUT ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(arrays[held], &views[held], flags) < 0) goto done;
        if (views[held].itemsize != sizes[held]) {
            PyErr_Format(PyExc_TypeError, "items_grown: argument %d has items of %zd bytes",
                         held, views[held].itemsize);
            held++;
            goto done;
        }
    }
    Py_ssize_t num_moves = views[MOVES].len / 4, num_nodes = views[PARENT_AT].len / 8;
    Py_ssize_t num_tokens = views[TOKEN_IDS].len / 8, vocab = views[OUT].len / 4;
    const int32_t *moves = views[MOVES].buf, *class_of = views[CLASS_OF_BYTE].buf;
    const uint8_t *starts = views[STARTS].buf, *level_bytes = views[LEVEL_BYTES].buf;
    const int64_t *parent_at = views[PARENT_AT].buf, *positions = views[POSITIONS].buf;
    const int64_t *token_ids = views[TOKEN_IDS].buf;
    int32_t *out = views[OUT].buf;
    if (num_classes <= 0 || views[STARTS].len != num_moves || views[CLASS_OF_BYTE].len != 1024 ||
        views[LEVEL_BYTES].len != num_nodes || views[POSITIONS].len / 8 != num_tokens ||
        num_nodes < 1 || state < 0 || (state + 1) * num_classes > num_moves) {
        PyErr_SetString(PyExc_ValueError, "items_grown: inconsistent tables");
        goto done;
    }
    cur = PyMem_Malloc((size_t)num_nodes * sizeof(int32_t));
    count = PyMem_Malloc((size_t)num_nodes * sizeof(int32_t));
    if (!cur || !count) {
        PyErr_NoMemory();
        goto done;
    }
    cur[0] = (int32_t)state; /* -1 below: the lexeme ended at an ancestor */
    count[0] = 0;
    for (Py_ssize_t i = 1; i < num_nodes; i++) {
        int64_t parent = parent_at[i];
        if (parent < 0 || parent >= i) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a parent after its child");
            goto done;
        }
        int32_t q = cur[parent];
        if (q < 0) {
            cur[i] = -1;
            count[i] = count[parent];
            continue;
        }
        int32_t cls = class_of[level_bytes[i]];
        int64_t at = (int64_t)q * num_classes + cls;
        if (cls < 0 || cls >= num_classes || at >= num_moves) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a move out of the table");
            goto done;
        }
        int32_t next = moves[at];
        cur[i] = next;
        count[i] = count[parent] + (next >= 0 && starts[at]);
        if (next >= 0 && (int64_t)(next + 1) * num_classes > num_moves) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a move out of the table");
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < num_tokens; k++) {
        if (token_ids[k] < 0 || token_ids[k] >= vocab || positions[k] < 0 ||
            positions[k] >= num_nodes) {
            PyErr_SetString(PyExc_ValueError, "items_grown: a token out of range");
            goto done;
        }
        out[token_ids[k]] = count[positions[k]];
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(cur);
    PyMem_Free(count);
    while (--held >= 0) PyBuffer_Release(&views[held]);
    return result;
}

static PyMethodDef module_functions[] = {
    {"fitting_rows", (PyCFunction)(void (*)(void))fitting_rows, METH_FASTCALL,
     "fitting_rows(grown, rows): row r of int32 [R, W] zeros becomes the tokens whose "
     "grown items are at most r"},
    {"items_grown", (PyCFunction)(void (*)(void))items_grown, METH_FASTCALL,
     "items_grown(moves, starts, num_classes, class_of_byte, parent_at, level_bytes, "
     "token_positions, token_ids, state, out): items each token adds to a lexeme"},
    {"write_row", (PyCFunction)(void (*)(void))write_row, METH_FASTCALL,
     "write_row(bitmask, row, src): src into one row of an int32 bitmask, zeros past it"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef Parser_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))Parser_feed, METH_FASTCALL,
     "feed(stack, terminal) -> (stack after the terminal or -1, floor)"},
    {"accepts_end", (PyCFunction)Parser_accepts_end, METH_O,
     "accepts_end(stack) -> (whether $END completes the parse, floor)"},
    {"apply", (PyCFunction)(void (*)(void))Parser_apply, METH_FASTCALL,
     "apply(stack, seq) -> (stack after an emitted sequence or -1, floor)"},
    {"xset_ok", (PyCFunction)(void (*)(void))Parser_xset_ok, METH_FASTCALL,
     "xset_ok(stack, xset) -> (whether the pending lexeme can still be cut, floor)"},
    {"row_plan", (PyCFunction)(void (*)(void))Parser_row_plan, METH_FASTCALL,
     "row_plan(stack, lexer_state) -> (valid run ids as int32 bytes, floor, whether EOS "
     "may follow)"},
    {"config_accepts_end", (PyCFunction)(void (*)(void))Parser_config_accepts_end,
     METH_FASTCALL, "config_accepts_end(stack, lexer_state) -> (whether EOS may follow, floor)"},
    {"union", (PyCFunction)Parser_union, METH_O,
     "union(runs) -> int32[W] bytes: the OR of the groups of some runs (int32 ids as bytes)"},
    {"walk_bytes", (PyCFunction)(void (*)(void))Parser_walk_bytes, METH_FASTCALL,
     "walk_bytes(lexer_state, constraint_states, data) -> every reading of the bytes, as "
     "(((terminal, context), ...), lexer state, (constraint states, ...), grown, fresh); "
     "ValueError past MAX_WALK_READINGS (4096) readings at one byte"},
    {"advance_inside", (PyCFunction)(void (*)(void))Parser_advance_inside, METH_FASTCALL,
     "advance_inside(stack, lexer_state, count, token) -> the configurations after a token "
     "that stays inside the pending lexeme (one, or none), or None where it may cut it"},
    {"row", (PyCFunction)(void (*)(void))Parser_row, METH_FASTCALL,
     "row(stack, lexer_state) -> (row id, floor): the allowed tokens of one unconstrained "
     "configuration (`row_bytes`)"},
    {"write_row", (PyCFunction)(void (*)(void))Parser_write_row, METH_FASTCALL,
     "write_row(bitmask, row, stack, lexer_state): the row of one unconstrained "
     "configuration into one row of an int32 bitmask (as the module's write_row)"},
    {"row_bytes", (PyCFunction)Parser_row_bytes, METH_O,
     "row_bytes(row) -> int32[W] bytes of a row id"},
    {"intern", (PyCFunction)Parser_intern, METH_O,
     "intern(row) -> the id of the row with these int32[W] words (one per distinct row)"},
    {"top", (PyCFunction)Parser_top, METH_O,
     "top(stack) -> (its top parser state, its depth: 0 at the start)"},
    {"suffix", (PyCFunction)(void (*)(void))Parser_suffix, METH_FASTCALL,
     "suffix(stack, length) -> its top `length` parser states, top first"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Parser_getset[] = {
    {"num_stacks", (getter)Parser_num_stacks, NULL, "interned stacks so far", NULL},
    {"num_rows", (getter)Parser_num_rows, NULL, "rows made so far (ids below this)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ParserType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fsmcompile.runtime._native.Parser",
    .tp_basicsize = sizeof(Parser),
    .tp_dealloc = (destructor)Parser_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The LALR parser, mask rows and lexer steps of one grammar index (not "
              "thread-safe).",
    .tp_methods = Parser_methods,
    .tp_getset = Parser_getset,
    .tp_new = Parser_new,
};

/* ---- the regex matcher's token steps ------------------------------------------------- */

/* A DFA index's tables for `advance`: a token the state's mask allows is walked byte by
 * byte through the transitions. In Python each new (state, token) pair cost a mask-bit
 * read, a row of the table copied to a list and a lookup per byte: most of a first walk's
 * `advance`. */
enum { D_TRANSITIONS, D_CLASS_OF_BYTE, D_TEXT_BYTES, D_TEXT_START, D_STATE_MASK, D_MASKS,
       NUM_DFA_BUFFERS };

static const int dfa_itemsize[NUM_DFA_BUFFERS] = {4, 4, 1, 8, 4, 4};

typedef struct {
    PyObject_HEAD
    Py_buffer buffers[NUM_DFA_BUFFERS];
    int held;
    int32_t num_states, num_classes, num_masks, num_words;
    Py_ssize_t vocab_size;
} DfaWalk;

#define D(self, i, type) ((const type *)(self)->buffers[i].buf)

static void DfaWalk_dealloc(DfaWalk *self) {
    for (int i = 0; i < self->held; i++) PyBuffer_Release(&self->buffers[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *DfaWalk_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static const char *usage =
        "DfaWalk((transitions, class_of_byte, text_bytes, text_start, state_mask, masks), "
        "num_classes, num_words)";
    PyObject *buffers;
    int num_classes, num_words;
    if ((kwargs && PyDict_GET_SIZE(kwargs)) ||
        !PyArg_ParseTuple(args, "Oii", &buffers, &num_classes, &num_words) ||
        !PyTuple_Check(buffers) || PyTuple_GET_SIZE(buffers) != NUM_DFA_BUFFERS ||
        num_classes < 1 || num_words < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    DfaWalk *self = (DfaWalk *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    if (hold_buffers(buffers, self->buffers, dfa_itemsize, NUM_DFA_BUFFERS, &self->held,
                     "DfaWalk") < 0)
        goto fail;
    Py_ssize_t cells = self->buffers[D_TRANSITIONS].len / 4;
    self->num_classes = num_classes;
    self->num_words = num_words;
    self->num_states = (int32_t)(cells / num_classes);
    self->num_masks = num_words ? (int32_t)(self->buffers[D_MASKS].len / 4 / num_words) : 0;
    self->vocab_size = self->buffers[D_TEXT_START].len / 8 - 1;
    const int32_t *trans = D(self, D_TRANSITIONS, int32_t);
    const int32_t *class_of_byte = D(self, D_CLASS_OF_BYTE, int32_t);
    const int32_t *state_mask = D(self, D_STATE_MASK, int32_t);
    const int64_t *text_start = D(self, D_TEXT_START, int64_t);
    int bad = cells % num_classes || self->buffers[D_CLASS_OF_BYTE].len != 1024 ||
              self->buffers[D_STATE_MASK].len / 4 != self->num_states || self->vocab_size < 0 ||
              (Py_ssize_t)num_words * 32 < self->vocab_size ||
              text_start[0] != 0 || text_start[self->vocab_size] != self->buffers[D_TEXT_BYTES].len;
    for (Py_ssize_t i = 0; !bad && i < cells; i++) bad = trans[i] < -1 || trans[i] >= self->num_states;
    for (int b = 0; !bad && b < 256; b++) bad = class_of_byte[b] < 0 || class_of_byte[b] >= num_classes;
    for (int32_t q = 0; !bad && q < self->num_states; q++)
        bad = state_mask[q] < 0 || state_mask[q] >= self->num_masks;
    for (Py_ssize_t v = 0; !bad && v < self->vocab_size; v++) bad = text_start[v] > text_start[v + 1];
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "DfaWalk: inconsistent tables");
        goto fail;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyObject *DfaWalk_next_state(DfaWalk *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "next_state(state, token)");
        return NULL;
    }
    long long state = PyLong_AsLongLong(args[0]), token = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (state < 0 || state >= self->num_states)
        return PyErr_Format(PyExc_IndexError, "no state %lld", state);
    if (token < 0 || token >= self->vocab_size) return PyLong_FromLong(-1);
    const int32_t *words = D(self, D_MASKS, int32_t) +
                           (size_t)D(self, D_STATE_MASK, int32_t)[state] * self->num_words;
    if (!(((uint32_t)words[token >> 5] >> (token & 31)) & 1)) return PyLong_FromLong(-1);
    const int64_t *text_start = D(self, D_TEXT_START, int64_t);
    const uint8_t *bytes = D(self, D_TEXT_BYTES, uint8_t);
    const int32_t *trans = D(self, D_TRANSITIONS, int32_t);
    const int32_t *class_of_byte = D(self, D_CLASS_OF_BYTE, int32_t);
    int32_t q = (int32_t)state;
    for (int64_t i = text_start[token]; i < text_start[token + 1] && q >= 0; i++)
        q = trans[(int64_t)q * self->num_classes + class_of_byte[bytes[i]]];
    return PyLong_FromLong(q);
}

static PyMethodDef DfaWalk_methods[] = {
    {"next_state", (PyCFunction)(void (*)(void))DfaWalk_next_state, METH_FASTCALL,
     "next_state(state, token) -> the state after a token the state's mask allows, else -1"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DfaWalkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fsmcompile.runtime._native.DfaWalk",
    .tp_basicsize = sizeof(DfaWalk),
    .tp_dealloc = (destructor)DfaWalk_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A DFA index's token steps for the regex matcher (read-only tables).",
    .tp_methods = DfaWalk_methods,
    .tp_new = DfaWalk_new,
};

static struct PyModuleDef parser_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_native",
    .m_doc = "The runtime's C part: the grammar parser and mask rows, DFA token steps.",
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&ParserType) < 0 || PyType_Ready(&DfaWalkType) < 0) return NULL;
    PyObject *module = PyModule_Create(&parser_module);
    if (!module) return NULL;
    if (PyModule_AddObjectRef(module, "Parser", (PyObject *)&ParserType) < 0 ||
        PyModule_AddObjectRef(module, "DfaWalk", (PyObject *)&DfaWalkType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
