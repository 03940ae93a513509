/* The grammar parser's construction (parser.h): every table read by name from the tables
 * object, its item type and size checked against the others, every id checked once, so
 * the steps index without checks; and the parser's release. */
#include "parser.h"

int acquire_sequences(Parser *self, Py_buffer views[3]) {
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

void release_sequences(Parser *self, Py_buffer views[3]) {
    for (int i = 0; i < 3; i++) PyBuffer_Release(&views[i]);
    self->seq_parent = self->seq_terminal = self->seq_context = NULL;
}

void Parser_dealloc(Parser *self) {
    for (int i = 0; i < self->held; i++) PyBuffer_Release(&self->buffers[i]);
    for (int i = 0; i < 3; i++) Py_XDECREF(self->seq_columns[i]);
    Vec *vecs[] = {&self->parent,       &self->state,       &self->depth,      &self->valid,
                   &self->dense,        &self->combo_list,  &self->combo_at,   &self->suffix_at,
                   &self->suffix_pool,  &self->length_value, &self->length_next,
                   &self->union_at,     &self->union_pool,  &self->chain};
    for (size_t i = 0; i < sizeof(vecs) / sizeof(*vecs); i++) vec_free(vecs[i]);
    Map *maps[] = {PARSER_MAPS(self)};
    for (size_t i = 0; i < sizeof(maps) / sizeof(*maps); i++) map_free(maps[i]);
    for (size_t i = 0; i < self->num_rows; i++) Py_DECREF(self->rows[i]);
    PyMem_Free(self->rows);
    PyMem_Free(self->dense_stamp);
    PyMem_Free(self->combo_rows);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int refuse(const char *what) {
    PyErr_Format(PyExc_ValueError, "Parser: %s", what);
    return -1;
}

/* The tables by name, each with its item size: the attribute names of the tables object
 * (`fsmcompile.runtime.parser_tables.ParserTables`), so no order has to match. */
static const TableSpec parser_tables[NUM_BUFFERS] = {
    [B_ACTION] = {"action", 4},
    [B_GOTO] = {"goto", 4},
    [B_RULE_LHS] = {"rule_lhs", 4},
    [B_RULE_LEN] = {"rule_len", 4},
    [B_CONTEXT_OF_STATE] = {"context_of_state", 4},
    [B_CTXSET_START] = {"ctxset_start", 8},
    [B_CTXSET_CONTEXT] = {"ctxset_context", 4},
    [B_IGNORED] = {"ignored", 1},
    [B_DEAD] = {"dead", 1},
    [B_XSET_FREE] = {"xset_free", 1},
    [B_XSET_START] = {"xset_start", 8},
    [B_PAIR_TERMINAL] = {"pair_terminal", 4},
    [B_PAIR_CTX_START] = {"pair_ctx_start", 8},
    [B_PAIR_ANY] = {"pair_any", 1},
    [B_PAIR_CONTEXT] = {"pair_context", 4},
    [B_ORIGIN_RUN] = {"origin_run", 8},
    [B_RUN_SEQ] = {"run_seq", 8},
    [B_RUN_XSET] = {"run_xset", 8},
    [B_RUN_SKIP] = {"run_skip", 8},
    [B_RUN_START] = {"run_start", 8},
    [B_RUN_GROUPS] = {"run_groups", 4},
    [B_GROUP_DENSE] = {"group_dense", 4},
    [B_GROUP_TOKEN_START] = {"group_token_start", 8},
    [B_GROUP_TOKENS] = {"group_tokens", 4},
    [B_MASKS] = {"masks", 4},
    [B_LABEL] = {"label", 4},
    [B_STATE_KILL] = {"state_kill", 4},
    [B_KILL_MASKS] = {"kill_masks", 4},
    [B_RESTART] = {"restart", 4},
    [B_CONTEXT_START] = {"context_start", 4},
    [B_NEXT_CTX_START] = {"next_ctx_start", 8},
    [B_NEXT_CTX] = {"next_ctx", 4},
    [B_EOS_ROW] = {"eos_row", 4},
    [B_TEXT_BYTES] = {"text_bytes", 1},
    [B_TEXT_START] = {"text_start", 8},
    [B_MOVES] = {"moves", 4},
    [B_MOVE_STARTS] = {"move_starts", 1},
    [B_CLASS_OF_BYTE] = {"class_of_byte", 4},
    [B_CHAR_BOUND] = {"char_bound", 4},
    [B_STATE_XSET] = {"state_xset", 4},
};

/* The growable sequence columns (array('q'), appended to by the Python side). */
static const char *const sequence_columns[3] = {"seq_parent", "seq_terminal", "seq_context"};

static Py_ssize_t items(Parser *self, int i) {
    return self->buffers[i].len / parser_tables[i].itemsize;
}

/* A table whose size is not what the others say: an error naming it. */
static int wrong_size(int table, Py_ssize_t found, Py_ssize_t expected, const char *rule) {
    PyErr_Format(PyExc_ValueError, "Parser: table '%s' holds %zd items, expected %zd (%s)",
                 parser_tables[table].name, found, expected, rule);
    return -1;
}

/* A count a table's length gives (an id space: it must fit an int32), and a table's
 * length against what the others say. */
typedef struct { int table; Py_ssize_t count; } Count;
typedef struct { int table; Py_ssize_t expected; const char *rule; } Size;

static int counts_ok(const Count *counts, size_t num) {
    for (size_t i = 0; i < num; i++) {
        if (counts[i].count < 0 || counts[i].count >= INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "Parser: table '%s' is empty or past int32 ids",
                         parser_tables[counts[i].table].name);
            return -1;
        }
    }
    return 0;
}

static int sizes_ok(Parser *self, const Size *sizes, size_t num) {
    for (size_t i = 0; i < num; i++) {
        Py_ssize_t found = items(self, sizes[i].table);
        if (found != sizes[i].expected)
            return wrong_size(sizes[i].table, found, sizes[i].expected, sizes[i].rule);
    }
    return 0;
}

/* The sizes of the tables `regroup` replaces (see `regrouped`), against the lexer states
 * (fixed at construction) and the words of a row: checked by the constructor and by every
 * regroup alike. */
static int check_run_sizes(Parser *self, Py_ssize_t num_lexer_states) {
    int32_t num_words = self->num_words;
    Py_ssize_t num_runs = items(self, B_RUN_SEQ), num_groups = items(self, B_GROUP_DENSE);
    Count counts[] = {
        {B_RUN_SEQ, num_runs},
        {B_GROUP_DENSE, num_groups},
        {B_CTXSET_START, items(self, B_CTXSET_START) - 1},
        {B_MASKS, num_words > 0 ? items(self, B_MASKS) / num_words : 0},
    };
    Size sizes[] = {
        {B_ORIGIN_RUN, 2 * num_lexer_states, "two per lexer state"},
        {B_RUN_XSET, num_runs, "one per run"},
        {B_RUN_SKIP, num_runs, "one per run"},
        {B_RUN_START, num_runs + 1, "runs + 1"},
        {B_GROUP_TOKEN_START, num_groups + 1, "groups + 1"},
    };
    if (counts_ok(counts, sizeof(counts) / sizeof(*counts)) < 0 ||
        sizes_ok(self, sizes, sizeof(sizes) / sizeof(*sizes)) < 0)
        return -1;
    if (num_words > 0 ? items(self, B_MASKS) % num_words : items(self, B_MASKS))
        return refuse("table 'masks' is not whole rows of num_words");
    return 0;
}

/* The counts of the tables `regroup` replaces, once `check_run_sizes` passed. */
static void set_run_counts(Parser *self) {
    int32_t num_words = self->num_words;
    self->num_ctxsets = items(self, B_CTXSET_START) - 1;
    self->num_runs = items(self, B_RUN_SEQ);
    self->num_groups = items(self, B_GROUP_DENSE);
    self->num_masks = num_words > 0 ? (int32_t)(items(self, B_MASKS) / num_words) : 0;
}

/* Every table's size against the counts the others give; the counts themselves are id
 * spaces, so each must fit an int32. */
static int check_sizes(Parser *self, int32_t start_state) {
    int32_t num_symbols = self->num_symbols, num_words = self->num_words;
    int32_t num_contexts = self->num_contexts;
    Py_ssize_t num_states = items(self, B_CONTEXT_OF_STATE);
    Py_ssize_t num_lexer_states = items(self, B_ORIGIN_RUN) / 2;
    Py_ssize_t num_pairs = items(self, B_PAIR_TERMINAL), num_rules = items(self, B_RULE_LHS);
    Py_ssize_t num_xsets = items(self, B_XSET_FREE), num_moves = items(self, B_MOVES);
    Py_ssize_t vocab_size = items(self, B_TEXT_START) - 1;
    if (num_symbols < 1 || self->num_nonterminals < 0 || num_contexts < 0 || num_words < 0)
        return refuse("num_symbols must be positive; num_nonterminals, num_contexts and "
                      "num_words not negative");
    Count counts[] = {
        {B_CONTEXT_OF_STATE, num_states}, {B_ORIGIN_RUN, num_lexer_states},
        {B_RULE_LHS, num_rules},          {B_TEXT_START, vocab_size},
        {B_XSET_FREE, num_xsets},
    };
    if (counts_ok(counts, sizeof(counts) / sizeof(*counts)) < 0) return -1;
    Size sizes[] = {
        {B_ACTION, num_states * num_symbols, "parser states x num_symbols"},
        {B_GOTO, num_states * self->num_nonterminals, "parser states x num_nonterminals"},
        {B_RULE_LEN, num_rules, "one per rule"},
        {B_IGNORED, num_symbols - 1, "one per terminal"},
        {B_DEAD, num_contexts, "one per context"},
        {B_XSET_START, num_xsets + 1, "exit sets + 1"},
        {B_PAIR_CTX_START, num_pairs + 1, "exit pairs + 1"},
        {B_PAIR_ANY, num_pairs, "one per exit pair"},
        {B_LABEL, num_lexer_states, "one per lexer state"},
        {B_STATE_KILL, num_lexer_states, "one per lexer state"},
        {B_RESTART, num_lexer_states, "one per lexer state"},
        {B_CHAR_BOUND, num_lexer_states, "one per lexer state"},
        {B_STATE_XSET, num_lexer_states, "one per lexer state"},
        {B_CONTEXT_START, num_contexts, "one per context"},
        {B_EOS_ROW, num_words, "num_words"},
        {B_NEXT_CTX_START, num_symbols, "terminals + 1"},
        {B_CLASS_OF_BYTE, 256, "one per byte"},
        {B_MOVE_STARTS, num_moves, "one per move"},
    };
    if (sizes_ok(self, sizes, sizeof(sizes) / sizeof(*sizes)) < 0 ||
        check_run_sizes(self, num_lexer_states) < 0)
        return -1;
    if (start_state < 0 || start_state >= num_states)
        return refuse("start_state is no parser state");
    if (num_lexer_states ? num_moves % num_lexer_states != 0 ||
                               num_moves / num_lexer_states >= INT32_MAX
                         : num_moves != 0)
        return refuse("table 'moves' is not lexer states x byte classes");
    if (num_words > 0 ? items(self, B_KILL_MASKS) % num_words : items(self, B_KILL_MASKS))
        return refuse("table 'kill_masks' is not whole rows of num_words");
    if ((Py_ssize_t)num_words * 32 < vocab_size)
        return refuse("num_words is too few for the vocabulary of 'text_start'");
    return 0;
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

/* Whether each lexer state's pair of `origin_run` is pending (-1, -1) or a slice of the
 * runs. Pairs need not rise across states: a lazy index appends the runs of each state it
 * walks, in the order it walks them. */
static int origins_ok(const int64_t *pairs, Py_ssize_t num_origins, Py_ssize_t num_runs) {
    for (Py_ssize_t q = 0; q < num_origins; q++) {
        int64_t lo = pairs[2 * q], hi = pairs[2 * q + 1];
        if (lo == -1 && hi == -1) continue;
        if (lo < 0 || lo > hi || hi > num_runs) return 0;
    }
    return 1;
}

static int ids64_ok(const int64_t *ids, Py_ssize_t count, int64_t lo, int64_t hi) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (ids[i] < lo || ids[i] >= hi) return 0;
    }
    return 1;
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
        !offsets_ok(A(self, B_RUN_START, int64_t), self->num_runs, num_entries) ||
        !offsets_ok(A(self, B_GROUP_TOKEN_START, int64_t), self->num_groups,
                    items(self, B_GROUP_TOKENS)))
        return refuse("an offset table is not monotone or leaves its table");
    if (!origins_ok(A(self, B_ORIGIN_RUN, int64_t), self->num_lexer_states, self->num_runs))
        return refuse("a lexer state's runs are neither pending (-1, -1) nor a slice of the runs");
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

/* Parser(tables): every table and count read by name from `tables` (see
 * `parser_tables`), then checked. */
PyObject *Parser_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *tables;
    if ((kwargs && PyDict_GET_SIZE(kwargs)) || !PyArg_ParseTuple(args, "O", &tables)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "Parser(tables): one object of named tables");
        return NULL;
    }
    Parser *self = (Parser *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->pending = -1;
    int32_t start_state;
    if (take_named_vectors(tables, parser_tables, NUM_BUFFERS, self->buffers, &self->held,
                           "Parser") < 0 ||
        take_named_int(tables, "num_symbols", &self->num_symbols, "Parser") < 0 ||
        take_named_int(tables, "num_nonterminals", &self->num_nonterminals, "Parser") < 0 ||
        take_named_int(tables, "start_state", &start_state, "Parser") < 0 ||
        take_named_int(tables, "end_state", &self->end_state, "Parser") < 0 ||
        take_named_int(tables, "num_contexts", &self->num_contexts, "Parser") < 0 ||
        take_named_int(tables, "num_words", &self->num_words, "Parser") < 0)
        goto fail;
    for (int i = 0; i < 3; i++) {
        self->seq_columns[i] = named_item(tables, sequence_columns[i], "Parser");
        if (!self->seq_columns[i]) goto fail;
    }
    if (check_sizes(self, start_state) < 0) goto fail;
    int32_t num_words = self->num_words;
    Py_ssize_t num_lexer_states = items(self, B_ORIGIN_RUN) / 2;
    self->end_symbol = self->num_symbols - 1;
    self->num_states = (int32_t)items(self, B_CONTEXT_OF_STATE);
    self->num_rules = (int32_t)items(self, B_RULE_LHS);
    self->num_xsets = items(self, B_XSET_FREE);
    set_run_counts(self);
    self->num_lexer_states = (int32_t)num_lexer_states;
    self->num_terminals = (int32_t)items(self, B_IGNORED);
    self->num_kill_rows = num_words > 0 ? (int32_t)(items(self, B_KILL_MASKS) / num_words) : 0;
    self->num_classes =
        num_lexer_states ? (int32_t)(items(self, B_MOVES) / num_lexer_states) : 0;
    self->vocab_size = items(self, B_TEXT_START) - 1;
    if (check_parse_tables(self) < 0 || check_reductions(self, start_state) < 0 ||
        check_sequences(self) < 0 || check_run_tables(self) < 0 || check_row_tables(self) < 0 ||
        check_lexer_tables(self) < 0)
        goto fail;
    self->dense_stamp = PyMem_Calloc((size_t)self->num_masks + 1, sizeof(uint32_t));
    if (!self->dense_stamp) {
        PyErr_NoMemory();
        goto fail;
    }
    Map *maps[] = {PARSER_MAPS(self)};
    for (size_t i = 0; i < sizeof(maps) / sizeof(*maps); i++) {
        if (map_init(maps[i], 1024) < 0) goto fail;
    }
    if (vec_push(&self->parent, -1) < 0 || vec_push(&self->state, start_state) < 0 ||
        vec_push(&self->depth, 0) < 0 || index_context_sets(self) < 0)
        goto fail;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* ---- regrouping ------------------------------------------------------------------------ */

/* The tables `regroup` replaces: a lazy index's runs, token groups, dense rows and context
 * sets grow as it walks new lexer states; the parse, lexer and exit-set tables never do. */
static const int regrouped[] = {
    B_ORIGIN_RUN,  B_RUN_SEQ,     B_RUN_XSET,          B_RUN_SKIP,
    B_RUN_START,   B_RUN_GROUPS,  B_GROUP_DENSE,       B_GROUP_TOKEN_START,
    B_GROUP_TOKENS, B_MASKS,      B_CTXSET_START,      B_CTXSET_CONTEXT,
};
#define NUM_REGROUPED ((int)(sizeof(regrouped) / sizeof(*regrouped)))

/* Trade the parser's regrouped tables for `views` (both ways: a second call undoes it). */
static void swap_regrouped(Parser *self, Py_buffer *views) {
    for (int i = 0; i < NUM_REGROUPED; i++) {
        Py_buffer held = self->buffers[regrouped[i]];
        self->buffers[regrouped[i]] = views[i];
        views[i] = held;
    }
}

/* The new tables go in first and are checked where they stand, by the constructor's own
 * checks; any failure swaps the old ones back, so the parser never answers from a mix.
 * The caches all stay: rows, unions keyed by run ids and dense-row combinations keyed by
 * dense ids are right as long as the caller only appends (ids handed in before keep their
 * meaning). A caller that breaks that gets wrong rows, never a read out of bounds: every
 * id the caches hand back is a row of their own, and every id read from the tables is
 * checked against the new ones. */
PyObject *parser_regroup(Parser *self, PyObject *tables) {
    TableSpec specs[NUM_REGROUPED];
    Py_buffer views[NUM_REGROUPED];
    int held = 0, ok = 0;
    for (int i = 0; i < NUM_REGROUPED; i++) specs[i] = parser_tables[regrouped[i]];
    if (take_named_vectors(tables, specs, NUM_REGROUPED, views, &held, "Parser.regroup") < 0) {
        for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
        return NULL;
    }
    Py_ssize_t runs = self->num_runs, groups = self->num_groups, ctxsets = self->num_ctxsets;
    Py_ssize_t seqs = self->num_seqs;
    int32_t masks = self->num_masks;
    Map ctxset_ids = self->ctxset_ids;
    uint32_t *stamp = NULL;
    swap_regrouped(self, views); /* `views` now hold the old tables */
    if (check_run_sizes(self, self->num_lexer_states) == 0) {
        set_run_counts(self);
        ok = check_sequences(self) == 0 && check_run_tables(self) == 0;
    }
    if (ok) {
        stamp = PyMem_Calloc((size_t)self->num_masks + 1, sizeof(uint32_t));
        ok = stamp != NULL;
        if (!ok) PyErr_NoMemory();
    }
    if (ok) {
        ok = map_init(&self->ctxset_ids, 1024) == 0 && index_context_sets(self) == 0;
        if (!ok) {
            map_free(&self->ctxset_ids);
            self->ctxset_ids = ctxset_ids;
            if (!PyErr_Occurred()) PyErr_NoMemory();
        }
    }
    if (!ok) {
        swap_regrouped(self, views);
        self->num_runs = runs;
        self->num_groups = groups;
        self->num_ctxsets = ctxsets;
        self->num_seqs = seqs;
        self->num_masks = masks;
        PyMem_Free(stamp);
    } else {
        map_free(&ctxset_ids);
        PyMem_Free(self->dense_stamp);
        self->dense_stamp = stamp;
    }
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}
