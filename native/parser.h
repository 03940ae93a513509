/* The runtime's grammar parser (`Parser`), shared by the files that make it up:
 * parser_tables.c (the named tables, checked once), parser_stack.c (parser steps, emitted
 * sequences, exit sets), parser_rows.c (mask rows: unions, caches, interning),
 * parser_walk.c (a token's bytes through the lexer) and parser_type.c (the Python type).
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
 * Arrays come in through the buffer protocol, each read by name from the tables object
 * the constructor takes, and are held for the parser's life, but for the runs, groups,
 * dense rows and context sets, which a lazy index grows as it walks new lexer states and
 * hands in again (`regroup`; a state not walked yet is pending and stops a row with
 * `OriginPending`); the sequence columns, which the Python side appends to, are read
 * through fresh buffers at each call that needs them.
 */
#ifndef FSMCOMPILE_PARSER_H
#define FSMCOMPILE_PARSER_H

#include "module.h"

#include <string.h>

/* ---- the parser object ---------------------------------------------------------------- */

/* The tables held for the parser's life, each read by name (`parser_tables` in
 * parser_tables.c); the enum only indexes `buffers`. */
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
    B_ORIGIN_RUN,       /* int64[2L]: lexer state q's runs [2q, 2q + 1); -1, -1 pending */
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

typedef struct {
    PyObject_HEAD
    Py_buffer buffers[NUM_BUFFERS];
    int held;
    PyObject *seq_columns[3]; /* array('q') parent, terminal, context: appended by Python */
    int32_t num_symbols, end_symbol, num_nonterminals, end_state, num_contexts, num_words;
    int32_t num_states, num_masks, num_lexer_states;
    Py_ssize_t num_groups, num_runs, num_xsets;
    Vec parent, state, depth;
    Map stack_ids, feed_memo, apply_memo, xset_memo, end_memo;
    /* The sequence columns of the call in progress. */
    const int64_t *seq_parent, *seq_terminal, *seq_context;
    Py_ssize_t num_seqs;
    Vec valid;
    uint32_t *dense_stamp;
    uint32_t stamp;
    Vec dense;      /* the distinct dense rows of the union in progress */
    Map combo_ids;     /* hash of a sorted list of >= 2 dense rows -> combo */
    Vec combo_list; /* per combo: its length, then its dense rows */
    Vec combo_at;   /* per combo: where its list starts in combo_list */
    uint32_t *combo_rows; /* per combo: the OR of its dense rows, W words */
    size_t num_combos, combo_capacity;
    /* Mask rows (see "mask rows" below): bytes objects by row id, and their caches. */
    PyObject **rows;
    size_t num_rows, rows_capacity;
    Map row_exact;      /* stack << 32 | lexer state -> pack(row, floor) */
    Map row_suffix;     /* hash of (lexer state, top states) -> suffix entry */
    Vec suffix_at;   /* per suffix entry: where (state, length, row, states...) start */
    Vec suffix_pool;
    Map suffix_lengths; /* lexer state << 32 | top state -> first length entry */
    Vec length_value, length_next; /* linked lists of suffix lengths, oldest first */
    Map union_rows;     /* hash of a run-id list -> union entry */
    Vec union_at;    /* per union entry: where (row, count, run ids...) start */
    Vec union_pool;
    Map interned;       /* digest of a row's bytes -> row id */
    Map ctxset_ids;     /* hash of a context set's sorted contexts -> its set id */
    int32_t num_kill_rows, num_terminals, num_classes, num_rules;
    Py_ssize_t vocab_size, num_ctxsets;
    Vec chain;       /* `apply`'s sequences on their way up to a known prefix */
    int failed;         /* the call in progress ran out of memory, or met `broken` */
    const char *broken; /* what the tables got wrong, once a call found out (sticky) */
    int32_t pending;    /* the first pending lexer state the call in progress met, or -1 */
} Parser;

/* Dense-row combinations kept per parser: unions of different token lists often OR the
 * same 20-odd dense rows (a JSON string's content), 16 KB each at 128k tokens. */
#define MAX_COMBOS 2048

#define A(self, i, type) ((const type *)(self)->buffers[i].buf)

/* Every map of a parser, for its constructor and destructor. */
#define PARSER_MAPS(self)                                                                 \
    &(self)->stack_ids, &(self)->feed_memo, &(self)->apply_memo, &(self)->xset_memo,      \
        &(self)->end_memo, &(self)->combo_ids, &(self)->row_exact, &(self)->row_suffix,   \
        &(self)->suffix_lengths, &(self)->union_rows, &(self)->interned, &(self)->ctxset_ids

static inline int64_t pack(int32_t result, int32_t floor) {
    return ((int64_t)(result + 1) << 32) | (uint32_t)floor;
}
static inline int32_t unpack_result(int64_t v) { return (int32_t)(v >> 32) - 1; }
static inline int32_t unpack_floor(int64_t v) { return (int32_t)(v & 0xffffffff); }
/* One FNV-1a step: the hash of the id lists the caches key on. */
static inline uint64_t mix(uint64_t h, uint64_t value) {
    return (h ^ value) * 1099511628211ull;
}

static inline int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

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


static inline const uint32_t *row_words(const Parser *self, int32_t row) {
    return (const uint32_t *)PyBytes_AS_STRING(self->rows[row]);
}

static inline int check_range(long long value, Py_ssize_t limit, const char *what) {
    if (value < 0 || value >= limit) {
        PyErr_Format(PyExc_IndexError, "no %s %lld", what, value);
        return -1;
    }
    return 0;
}

/* ---- parser_stack.c: parser steps, each pack(result, floor) ----------------------------- */

void tables_broken(Parser *self, const char *reason);
int64_t feed(Parser *self, int32_t stack, int32_t terminal);
int64_t accepts_end(Parser *self, int32_t stack);
int64_t apply(Parser *self, int32_t stack, int64_t seq);
int64_t xset_ok(Parser *self, int32_t stack, int64_t xset);
int64_t config_accepts_end(Parser *self, int32_t stack, int32_t state);
int32_t valid_runs(Parser *self, int32_t stack, int32_t state);

/* ---- parser_rows.c: mask rows ----------------------------------------------------------- */

int union_into(Parser *self, const int32_t *run_ids, Py_ssize_t num, uint32_t *row);
int32_t intern_row(Parser *self, const uint32_t *words);
int64_t row_of(Parser *self, int32_t stack, int32_t state);

/* ---- parser_walk.c: a token's bytes through the lexer ------------------------------------ */

enum { INSIDE_DEAD = -1, INSIDE_MAY_CUT = -2 };
int32_t advance_inside(Parser *self, int32_t stack, int32_t state, int64_t count,
                       Py_ssize_t token, int64_t *grown);
PyObject *Parser_walk_bytes(Parser *self, PyObject *const *args, Py_ssize_t nargs);
/* Fill `ctxset_ids` from the index's context sets (after the tables are checked). */
int index_context_sets(Parser *self);

/* ---- parser_tables.c: construction ------------------------------------------------------- */

PyObject *Parser_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);
void Parser_dealloc(Parser *self);
/* Parser.regroup(tables): new runs, groups, dense rows and context sets, checked as at
 * construction and swapped in whole, or an exception and the old tables kept. */
PyObject *parser_regroup(Parser *self, PyObject *tables);
/* Read the sequence columns for one call (`seq_valid` checks what they hold). */
int acquire_sequences(Parser *self, Py_buffer views[3]);
void release_sequences(Parser *self, Py_buffer views[3]);

/* ---- bitmask.c -------------------------------------------------------------------------- */

/* `count` words into row `row` of an int32 [W'] or [B, W'] bitmask, zeros past them. */
int write_words(PyObject *bitmask, long long row, const int32_t *from, Py_ssize_t count);

#endif
