/* The parser's mask rows (parser.h): the OR of a configuration's valid runs of token
 * groups, its kill and end-of-sequence tokens, and the caches that let one row serve every
 * stack that agrees with it down to its floor. */
#include "parser.h"

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
        if (vec_push(&self->combo_at, (int32_t)self->combo_list.len) < 0 ||
            vec_push(&self->combo_list, (int32_t)count) < 0)
            return -1;
        for (size_t i = 0; i < count; i++) {
            if (vec_push(&self->combo_list, ids[i]) < 0) return -1;
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
int union_into(Parser *self, const int32_t *run_ids, Py_ssize_t num, uint32_t *row) {
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
                if (vec_push(&self->dense, dense) < 0) return -1;
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
int32_t intern_row(Parser *self, const uint32_t *words) {
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
    if (vec_push(&self->union_at, (int32_t)self->union_pool.len) < 0 ||
        vec_push(&self->union_pool, row) < 0 || vec_push(&self->union_pool, (int32_t)num) < 0)
        return -1;
    for (size_t i = 0; i < num; i++) {
        if (vec_push(&self->union_pool, runs[i]) < 0) return -1;
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
    if (vec_push(&self->suffix_at, (int32_t)self->suffix_pool.len) < 0 ||
        vec_push(&self->suffix_pool, state) < 0 || vec_push(&self->suffix_pool, length) < 0 ||
        vec_push(&self->suffix_pool, row) < 0)
        return -1;
    for (int32_t i = 0, sid = stack; i < length; i++, sid = self->parent.items[sid]) {
        if (vec_push(&self->suffix_pool, self->state.items[sid]) < 0) return -1;
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
    if (vec_push(&self->length_value, length) < 0 || vec_push(&self->length_next, -1) < 0)
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

int64_t row_of(Parser *self, int32_t stack, int32_t state);

/* The row of one configuration, computed; its floor into *floor_out. -1 when failed,
 * here or in a start row it reads (`self->failed`): a row made without a pending part
 * must not be interned as the pair's. */
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
 * stack's top down to the floor, else computed. A failed one (out of memory, or a pending
 * lexer state met here or at a next lexeme's start, `compute_row`) has row -1, sets
 * self->failed and is cached nowhere: after a regroup the pair is computed afresh. */
int64_t row_of(Parser *self, int32_t stack, int32_t state) {
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


