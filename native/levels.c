/* Liveness levels (`_native.liveness_rounds`): the partition of a DFA's states by which
 * byte strings of at most j bytes keep them alive, for j = 1, 2, ... until it is stable.
 *
 * Every vocabulary walk of a grammar's lexer and every DFA index starts from these levels,
 * and in numpy a round cost a dozen array passes (hashing the live moves, checking the
 * hashes for collisions, renumbering): 6% of a median schema's first mask. Here a round
 * is one pass over the live moves with a hash table of class representatives.
 *
 * A class is named by its first member (the smallest state in it), so a row of the result
 * is exactly the canonical map the walks read: rows[k][s] is the first state k-equivalent
 * to s. A state's signature at level j is its class at level j - 1 and, move by move in
 * class order, the column and the class of the target; two states are j-equivalent when
 * their signatures are equal, which the table checks in full on every hash match.
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t num_states;
    const int32_t *edge_start; /* [S + 1]: the live moves of s are edges[start[s]..start[s+1]) */
    const int32_t *edge_column;
    const int32_t *edge_target;
    uint64_t hash_mask; /* all ones; 0 makes every signature collide (tests) */
} Moves;

static uint64_t signature_hash(const Moves *mv, const int32_t *prev, Py_ssize_t s) {
    uint64_t h = 0x9E3779B97F4A7C15ull * ((uint64_t)prev[s] + 1);
    for (int32_t e = mv->edge_start[s]; e < mv->edge_start[s + 1]; e++) {
        uint64_t move = ((uint64_t)mv->edge_column[e] << 32) | (uint32_t)prev[mv->edge_target[e]];
        h = (h ^ move) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h & mv->hash_mask;
}

static int same_signature(const Moves *mv, const int32_t *prev, Py_ssize_t a, Py_ssize_t b) {
    if (prev[a] != prev[b]) return 0;
    int32_t ea = mv->edge_start[a], eb = mv->edge_start[b];
    int32_t degree = mv->edge_start[a + 1] - ea;
    if (degree != mv->edge_start[b + 1] - eb) return 0;
    for (int32_t i = 0; i < degree; i++) {
        if (mv->edge_column[ea + i] != mv->edge_column[eb + i]) return 0;
        if (prev[mv->edge_target[ea + i]] != prev[mv->edge_target[eb + i]]) return 0;
    }
    return 1;
}

/* One round: next[s] = the first state whose signature over `prev` equals s's. Returns the
 * number of classes. `slots` holds 2^k >= 2S state ids (-1 empty), `slot_hash` their hashes. */
static Py_ssize_t refine_round(const Moves *mv, const int32_t *prev, int32_t *next,
                               int32_t *slots, uint64_t *slot_hash, size_t mask) {
    memset(slots, 0xff, (mask + 1) * sizeof(int32_t));
    Py_ssize_t classes = 0;
    for (Py_ssize_t s = 0; s < mv->num_states; s++) {
        uint64_t h = signature_hash(mv, prev, s);
        size_t i = (size_t)(h ^ (h >> 29)) & mask;
        for (;;) {
            int32_t r = slots[i];
            if (r < 0) {
                slots[i] = (int32_t)s;
                slot_hash[i] = h;
                next[s] = (int32_t)s;
                classes++;
                break;
            }
            if (slot_hash[i] == h && same_signature(mv, prev, s, r)) {
                next[s] = r;
                break;
            }
            i = (i + 1) & mask;
        }
    }
    return classes;
}

/* The live moves of `trans` as edge lists by state, columns ascending. */
static int gather_moves(const int32_t *trans, Py_ssize_t n, Py_ssize_t w, Vec *start, Vec *column,
                        Vec *target) {
    if (vec_reserve(start, n + 1) < 0) return -1;
    start->items[start->len++] = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        for (Py_ssize_t c = 0; c < w; c++) {
            int32_t t = trans[s * w + c];
            if (t < 0) continue;
            if (column->len >= INT32_MAX - 1) {
                PyErr_SetString(PyExc_ValueError, "liveness_rounds: too many moves");
                return -1;
            }
            if (vec_push(column, (int32_t)c) < 0 || vec_push(target, t) < 0) return -1;
        }
        start->items[start->len++] = (int32_t)column->len;
    }
    return 0;
}

static PyObject *liveness_rounds(PyObject *Py_UNUSED(m), PyObject *const *args,
                                 Py_ssize_t nargs) {
    if (check_nargs(nargs, 6,
                    "liveness_rounds(trans, first, max_height, max_rows, deadline, "
                    "hash_mask)") < 0)
        return NULL;
    long long ints[2];
    if (take_longs(args + 2, 2, ints) < 0) return NULL;
    long long max_height = ints[0], max_rows = ints[1];
    double deadline = PyFloat_AsDouble(args[4]);
    if (deadline == -1.0 && PyErr_Occurred()) return NULL;
    unsigned long long hash_mask = PyLong_AsUnsignedLongLongMask(args[5]);
    if (hash_mask == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (max_height < 0 || max_rows < 2) {
        PyErr_SetString(PyExc_ValueError, "liveness_rounds: max_height >= 0, max_rows >= 2");
        return NULL;
    }
    Table tables[2];
    memset(tables, 0, sizeof tables);
    Vec start = {0}, column = {0}, target = {0};
    int32_t *rows = NULL, *prev = NULL, *next = NULL, *slots = NULL;
    uint64_t *slot_hash = NULL;
    PyObject *levels = NULL, *result = NULL;
    if (take_int32(args[0], &tables[0], 2, -1, -1, "trans") < 0) goto done;
    Py_ssize_t n = tables[0].n, w = tables[0].width;
    if (take_int32(args[1], &tables[1], 1, 0, n > 0 ? n : 1, "first") < 0) goto done;
    if (tables[1].n != n) {
        PyErr_SetString(PyExc_ValueError, "liveness_rounds: first must have one entry a state");
        goto done;
    }
    const int32_t *first = tables[1].view.buf;
    Py_ssize_t classes = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        if (first[s] > s || first[first[s]] != first[s]) {
            PyErr_SetString(PyExc_ValueError,
                            "liveness_rounds: first must name each class by its first member");
            goto done;
        }
        classes += first[s] == s;
    }
    if (gather_moves(tables[0].view.buf, n, w, &start, &column, &target) < 0) goto done;
    Moves mv = {n, start.items, column.items, target.items, (uint64_t)hash_mask};
    size_t mask = 1;
    while (mask + 1 < 2 * (size_t)n) mask = 2 * mask + 1;
    size_t row_bytes = (size_t)n * sizeof(int32_t);
    size_t cap = 0;
    if (kernel_grow((void **)&rows, &cap, (size_t)n * 2 + 1, sizeof(int32_t)) < 0) goto done;
    prev = PyMem_Malloc(row_bytes + 4);
    next = PyMem_Malloc(row_bytes + 4);
    slots = PyMem_Malloc((mask + 1) * sizeof(int32_t));
    slot_hash = PyMem_Malloc((mask + 1) * sizeof(uint64_t));
    levels = PyList_New(0);
    if (!prev || !next || !slots || !slot_hash || !levels) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    memcpy(prev, first, row_bytes);
    memcpy(rows, first, row_bytes);
    Py_ssize_t stored = 1;
    PyObject *zero = PyLong_FromLong(0);
    if (!zero || PyList_Append(levels, zero) < 0) {
        Py_XDECREF(zero);
        goto done;
    }
    Py_DECREF(zero);
    for (long long level = 1; level <= max_height; level++) {
        if (kernel_past(deadline)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        Py_ssize_t refined = refine_round(&mv, prev, next, slots, slot_hash, mask);
        if (refined == classes) break;
        classes = refined;
        int32_t *swap = prev;
        prev = next;
        next = swap;
        PyObject *number = PyLong_FromLongLong(level);
        if (!number) goto done;
        if (stored < max_rows - 1) {
            if (kernel_grow((void **)&rows, &cap, (size_t)n * (size_t)(stored + 1) + 1,
                            sizeof(int32_t)) < 0 ||
                PyList_Append(levels, number) < 0) {
                Py_DECREF(number);
                goto done;
            }
            Py_DECREF(number);
            stored++;
        } else {
            PyList_SetItem(levels, stored - 1, number); /* steals the reference */
        }
        memcpy(rows + (size_t)n * (size_t)(stored - 1), prev, row_bytes);
    }
    PyObject *canon = bytearray_of(rows, (size_t)stored * row_bytes);
    if (canon) result = Py_BuildValue("(NO)", canon, levels);
done:
    Py_XDECREF(levels);
    PyMem_Free(rows);
    PyMem_Free(prev);
    PyMem_Free(next);
    PyMem_Free(slots);
    PyMem_Free(slot_hash);
    vec_free(&start);
    vec_free(&column);
    vec_free(&target);
    release_tables(tables, 2);
    return result;
}

static PyMethodDef methods[] = {
    {"liveness_rounds", (PyCFunction)(void (*)(void))liveness_rounds, METH_FASTCALL,
     "liveness_rounds(trans, first, max_height, max_rows, deadline, hash_mask) -> "
     "(rows, levels) | None\n\nThe canonical liveness rows of a DFA (int32[S, C], -1 dead) "
     "from `first` (int32[S], each state's level-0 class by its first member): a bytearray "
     "of int32[K, S] rows and the level of each row; rows past `max_rows` - 1 overwrite the "
     "last. None when `deadline` (time.monotonic(), inf for none) passed."},
    {NULL, NULL, 0, NULL},
};

int add_levels(PyObject *module) { return PyModule_AddFunctions(module, methods); }
