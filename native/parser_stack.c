/* The parser's steps (parser.h): pushes and reductions on interned stacks, a terminal fed,
 * $END accepted, an emitted sequence applied, an exit set checked, and the runs of token
 * groups a (stack, lexer state) pair allows. Each answer is pack(result, floor), memoized
 * per (stack, question). */
#include "parser.h"


/* A call found the tables inconsistent where no check at construction could tell (a
 * reduction loop, a sequence appended wrong): this and every later call raise ValueError,
 * as the memos may hold answers read from the wrong tables. */
void tables_broken(Parser *self, const char *reason) {
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
    if (vec_push(&self->parent, stack) < 0 || vec_push(&self->state, state) < 0 ||
        vec_push(&self->depth, self->depth.items[stack] + 1) < 0 ||
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

int64_t feed(Parser *self, int32_t stack, int32_t terminal) {
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

int64_t accepts_end(Parser *self, int32_t stack) {
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

/* The stack after sequence `seq`: its prefixes are walked up to the empty sequence or one
 * already memoized, then applied back down, each memoized; a loop, so no chain of
 * sequences can make the C stack deep. */
int64_t apply(Parser *self, int32_t stack, int64_t seq) {
    int64_t before = pack(stack, self->depth.items[stack]), hit;
    Vec *chain = &self->chain;
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
        if (vec_push(chain, (int32_t)s) < 0) {
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

int64_t xset_ok(Parser *self, int32_t stack, int64_t xset) {
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
int64_t config_accepts_end(Parser *self, int32_t stack, int32_t state) {
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
 * last terminal share one parser step. A pending state (runs -1, -1: a lazy index has not
 * walked it yet) fails the call, naming the state (`pending`), so nothing read without
 * its runs is cached and the caller can regroup and ask again. */
int32_t valid_runs(Parser *self, int32_t stack, int32_t state) {
    const int64_t *origin_run = A(self, B_ORIGIN_RUN, int64_t);
    const int64_t *run_seq = A(self, B_RUN_SEQ, int64_t);
    const int64_t *run_xset = A(self, B_RUN_XSET, int64_t);
    const int64_t *run_skip = A(self, B_RUN_SKIP, int64_t);
    const int32_t *context_of_state = A(self, B_CONTEXT_OF_STATE, int32_t);
    int32_t floor = self->depth.items[stack];
    int64_t last_seq = -1, last_parent = -1, last_terminal = -1;
    int32_t after = -1, stepped = -1, landing = -1;
    self->valid.len = 0;
    int64_t run = origin_run[2 * (int64_t)state], end = origin_run[2 * (int64_t)state + 1];
    if (run < 0) {
        if (self->pending < 0) self->pending = state;
        self->failed = 1;
        return floor;
    }
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
        if (unpack_result(checked) == 1 && vec_push(&self->valid, (int32_t)run) < 0) {
            self->failed = 1;
        }
        run++;
    }
    return floor;
}
