/* The walk of a region shape's role functions over the vocabulary trie
 * (`role_functions.walk_role_functions`), for several entry depths in one pass.
 *
 * It runs for every new string-region shape (a JSON string with a format or pattern) of
 * every compile. As numpy, level by level, it cost 3-70 ms a shape with Llama 3 (275k
 * trie nodes), a large share of a median JSON Schema compile; here it is one pass over
 * the nodes in id order at a memo lookup per node and entry depth.
 *
 * Same model as before: the function of a path maps each starting role to the role it ends
 * in (-1: gone). Functions are interned (id 0 sends every role out, id 1 is the identity),
 * and a function's move by a byte is computed once, with the roles that leave the region on
 * that byte. Each node keeps one function id per entry depth; an entry depth at or below
 * the node keeps DEAD, so a token that ends there reads "no role".
 *
 * Only the Python C API is used (no numpy headers): arrays come in through the buffer
 * protocol, and the exits go back as bytearrays of native int64s.
 */
#include "module.h"
#include <stdint.h>
#include <string.h>

#define DEAD 0
#define IDENTITY 1
#define MAX_ROLES 128 /* roles are int8 */

#if defined(__GNUC__)
#define COLD __attribute__((noinline, cold)) /* keeps the walk's loop tight */
#else
#define COLD
#endif

/* ---- interned role functions and their memoized moves ------------------------------- */

typedef struct {
    int m;                /* roles */
    const int32_t *step;  /* int32[rows, 256]: a role's move by byte: role, -1 or m + sink */
    int8_t *values;       /* int8[cap, m]: where each function sends each starting role */
    int32_t *moves;       /* int32[cap, 256]: 2 * next function + 1 if a role leaves; -1 unknown */
    int32_t *exit_of;     /* int32[cap, 256]: where that move's exits start in `pool` */
    int32_t count, cap;
    int32_t *slots;       /* hash table of function ids, -1 empty */
    size_t slot_mask;
    int32_t *pool;        /* per move with exits: n, then n (role, sink) pairs, roles ascending */
    size_t pool_len, pool_cap;
} Functions;

static void functions_free(Functions *f) {
    PyMem_Free(f->values);
    PyMem_Free(f->moves);
    PyMem_Free(f->exit_of);
    PyMem_Free(f->slots);
    PyMem_Free(f->pool);
}

static size_t hash_roles(const int8_t *roles, int m) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (int r = 0; r < m; r++) h = (h ^ (uint8_t)roles[r]) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 31));
}

static int slots_grow(Functions *f) {
    size_t cap = f->slots ? (f->slot_mask + 1) * 2 : 64;
    int32_t *slots = PyMem_Malloc(cap * sizeof(int32_t));
    if (!slots) return -1;
    memset(slots, 0xff, cap * sizeof(int32_t));
    for (int32_t id = 0; id < f->count; id++) {
        size_t i = hash_roles(f->values + (size_t)id * f->m, f->m) & (cap - 1);
        while (slots[i] >= 0) i = (i + 1) & (cap - 1);
        slots[i] = id;
    }
    PyMem_Free(f->slots);
    f->slots = slots;
    f->slot_mask = cap - 1;
    return 0;
}

/* The id of the function `roles` (int8[m]), interned on first sight; -1 when out of memory. */
static int32_t intern(Functions *f, const int8_t *roles) {
    size_t i = hash_roles(roles, f->m) & f->slot_mask;
    for (int32_t id; (id = f->slots[i]) >= 0; i = (i + 1) & f->slot_mask) {
        if (memcmp(f->values + (size_t)id * f->m, roles, (size_t)f->m) == 0) return id;
    }
    if (f->count == INT32_MAX / 2) return -1; /* moves hold 2 * id + 1 */
    if (f->count == f->cap) {
        int32_t cap = f->cap ? (f->cap > INT32_MAX / 4 ? INT32_MAX / 2 : f->cap * 2) : 64;
        int8_t *values = PyMem_Realloc(f->values, (size_t)cap * f->m);
        if (values) f->values = values;
        int32_t *moves = PyMem_Realloc(f->moves, (size_t)cap * 256 * sizeof(int32_t));
        if (moves) f->moves = moves;
        int32_t *exit_of = PyMem_Realloc(f->exit_of, (size_t)cap * 256 * sizeof(int32_t));
        if (exit_of) f->exit_of = exit_of;
        if (!values || !moves || !exit_of) return -1;
        memset(f->moves + (size_t)f->cap * 256, 0xff, (size_t)(cap - f->cap) * 256 * 4);
        f->cap = cap;
    }
    int32_t id = f->count++;
    memcpy(f->values + (size_t)id * f->m, roles, (size_t)f->m);
    f->slots[i] = id;
    if ((size_t)f->count * 2 > f->slot_mask + 1 && slots_grow(f) < 0) return -1;
    return id;
}

static int pool_push(Functions *f, int32_t value) {
    if (f->pool_len == f->pool_cap) {
        size_t cap = f->pool_cap ? f->pool_cap * 2 : 1024;
        int32_t *pool = PyMem_Realloc(f->pool, cap * sizeof(int32_t));
        if (!pool) return -1;
        f->pool = pool;
        f->pool_cap = cap;
    }
    f->pool[f->pool_len++] = value;
    return 0;
}

/* Compute the move of function `id` by `byte` into `moves`; -1 when out of memory. */
COLD static int resolve(Functions *f, int32_t id, int byte) {
    int8_t next[MAX_ROLES];
    size_t start = f->pool_len;
    int32_t leaving = 0;
    for (int r = 0; r < f->m; r++) {
        int8_t role = f->values[(size_t)id * f->m + r];
        int32_t to = role >= 0 ? f->step[(size_t)role * 256 + byte] : -1;
        if (to >= f->m) {
            if ((leaving == 0 && pool_push(f, 0) < 0) || pool_push(f, r) < 0 ||
                pool_push(f, to - f->m) < 0)
                return -1;
            leaving++;
            to = -1;
        }
        next[r] = (int8_t)to;
    }
    int32_t found = intern(f, next); /* may move the tables: index them afterwards */
    if (found < 0) return -1;
    size_t at = (size_t)id * 256 + byte;
    f->moves[at] = 2 * found + (leaving > 0);
    if (leaving) {
        f->pool[start] = leaving;
        f->exit_of[at] = (int32_t)start;
    }
    return 0;
}

/* ---- the exits of one entry depth ------------------------------------------------------ */

typedef struct {
    int64_t *items; /* (depth, node, sink, role) in walk order */
    size_t len, cap;
} Exits;

static int exits_push(Exits *e, int64_t depth, int64_t node, int64_t sink, int64_t role) {
    if (e->len + 4 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 1024;
        int64_t *items = PyMem_Realloc(e->items, cap * sizeof(int64_t));
        if (!items) return -1;
        e->items = items;
        e->cap = cap;
    }
    e->items[e->len++] = depth;
    e->items[e->len++] = node;
    e->items[e->len++] = sink;
    e->items[e->len++] = role;
    return 0;
}

/* (node, sink, role) bytearrays of native int64s, level by level: the walk meets a level's
 * nodes in level order, so a stable counting sort by depth gives that order. `count` is
 * scratch of num_levels + 1. */
static PyObject *exits_columns(const Exits *e, int64_t *count, Py_ssize_t num_levels) {
    size_t n = e->len / 4;
    PyObject *columns[3] = {NULL, NULL, NULL};
    int64_t *out[3];
    for (int k = 0; k < 3; k++) {
        columns[k] = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int64_t)));
        if (!columns[k]) {
            Py_XDECREF(columns[0]);
            Py_XDECREF(columns[1]);
            return NULL;
        }
        out[k] = (int64_t *)PyByteArray_AS_STRING(columns[k]);
    }
    memset(count, 0, (size_t)(num_levels + 1) * sizeof(int64_t));
    for (size_t i = 0; i < n; i++) count[e->items[4 * i] + 1]++;
    for (Py_ssize_t d = 0; d < num_levels; d++) count[d + 1] += count[d];
    for (size_t i = 0; i < n; i++) {
        const int64_t *item = e->items + 4 * i;
        int64_t at = count[item[0]]++;
        out[0][at] = item[1];
        out[1][at] = item[2];
        out[2][at] = item[3];
    }
    return Py_BuildValue("(NNN)", columns[0], columns[1], columns[2]);
}

/* ---- the walk ------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t m, width, num_nodes, num_levels, num_tokens;
    const uint8_t *node_byte;
    const int64_t *node_depth;
    const int32_t *token_node;
    int8_t *end_role; /* int8[width, num_tokens, m] */
} Trie;

/* Fill `at` (int32[num_nodes, width], zeros) with each node's function per entry depth
 * (DEAD at or below it: it ends no token there) and `exits` with each entry depth's exits;
 * -1 with an exception set on failure. `path` is scratch of int32[num_levels, width],
 * `alive` of char[num_levels].
 *
 * Nodes are numbered depth first (`TokenTrie`), so one pass in id order, keeping the
 * functions of the current path by depth, visits every node after its parent; it meets a
 * level's nodes in level order, and reads and writes every array in order. (A walk by
 * child ranges, depth first or level by level, spent most of its time on branch misses or
 * cache misses: 3-4 ms for one entry depth with Llama 3.) Cost: one memoized move per node
 * and entry depth above it; a node under one that every entry depth has left stays DEAD. */
static int walk_preorder(Functions *f, const Trie *t, int32_t *at, Exits *exits,
                         int32_t *path, char *alive) {
    Py_ssize_t width = t->width;
    /* path[d][c], c <= d: the function to continue from at the depth-d node of the current
     * path for entry depth c (IDENTITY at c = d: it starts there). */
    path[0] = IDENTITY;
    alive[0] = 1;
    if (t->node_depth[0] != 0) goto bad_trie;
    int64_t d = 0; /* the previous node's depth */
    for (Py_ssize_t n = 1; n < t->num_nodes; n++) {
        int64_t depth = t->node_depth[n];
        /* Depth first: the next node is a child of the previous one or of an ancestor. */
        if (depth < 1 || depth > d + 1 || depth >= t->num_levels) goto bad_trie;
        d = depth;
        if (!alive[d - 1]) {
            alive[d] = 0;
            continue; /* `at` stays DEAD */
        }
        int byte = t->node_byte[n];
        const int32_t *from = path + (d - 1) * width;
        int32_t *to = path + d * width, *stored = at + (size_t)n * width;
        Py_ssize_t entered = d < width ? d : width; /* each has a function (maybe DEAD) */
        int live = d < width; /* entry depth d starts here */
        for (Py_ssize_t c = 0; c < entered; c++) {
            size_t key = (size_t)from[c] * 256 + byte;
            int32_t move = f->moves[key];
            if (move < 0) {
                if (resolve(f, from[c], byte) < 0) goto nomem;
                move = f->moves[key];
            }
            to[c] = stored[c] = move >> 1;
            live |= move >> 1 > DEAD;
            if (move & 1) {
                const int32_t *pairs = f->pool + f->exit_of[key];
                for (int32_t e = 0; e < pairs[0]; e++) {
                    if (exits_push(&exits[c], d, n, pairs[2 + 2 * e], pairs[1 + 2 * e]))
                        goto nomem;
                }
            }
        }
        for (Py_ssize_t c = entered; c < width; c++) stored[c] = DEAD; /* ends no token */
        if (d < width) to[d] = IDENTITY;
        alive[d] = (char)live;
    }
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
bad_trie:
    PyErr_SetString(PyExc_ValueError,
                    "walk_role_functions: node depths are not those of a depth-first numbering");
    return -1;
}

/* end_role[c, k] = the roles of token k's function at entry depth c (DEAD: all -1). */
static int fill_end_roles(const Functions *f, const Trie *t, const int32_t *at) {
    for (Py_ssize_t k = 0; k < t->num_tokens; k++) {
        if (t->token_node[k] < 0 || t->token_node[k] >= t->num_nodes) {
            PyErr_SetString(PyExc_ValueError, "walk_role_functions: a token node out of range");
            return -1;
        }
    }
    Py_ssize_t m = f->m;
    for (Py_ssize_t c = 0; c < t->width; c++) {
        int8_t *dst = t->end_role + (size_t)c * t->num_tokens * m;
        for (Py_ssize_t k = 0; k < t->num_tokens; k++, dst += m) {
            const int8_t *src = f->values + (size_t)at[(size_t)t->token_node[k] * t->width + c] * m;
            for (Py_ssize_t r = 0; r < m; r++) dst[r] = src[r]; /* m is small: no memcpy call */
        }
    }
    return 0;
}

/* Check the arrays' shapes against each other and the table's moves; -1 with ValueError
 * set if they do not fit. */
static int check_sizes(const Py_buffer *table, const Py_buffer *end_role, const Trie *t) {
    Py_ssize_t rows = table->ndim == 2 ? table->shape[0] : 0;
    if (table->ndim != 2 || table->shape[1] != 256 || t->m < 1 || t->m > MAX_ROLES ||
        rows < t->m || rows > INT32_MAX / 2) {
        PyErr_Format(PyExc_ValueError,
                     "walk_role_functions: expected 1 to %d roles and a table of int32[rows >= "
                     "roles, 256]; got %zd roles and a table of %zd bytes",
                     MAX_ROLES, t->m, table->len);
        return -1;
    }
    if (end_role->ndim != 3 || end_role->shape[0] < 1 || end_role->shape[1] != t->num_tokens ||
        end_role->shape[2] != t->m) {
        PyErr_Format(PyExc_ValueError,
                     "walk_role_functions: expected end_role of int8[depths >= 1, tokens = %zd, "
                     "roles = %zd]",
                     t->num_tokens, t->m);
        return -1;
    }
    if (t->num_nodes < 1 || t->num_levels < 1) {
        PyErr_Format(PyExc_ValueError,
                     "walk_role_functions: expected a trie of at least one node and level; got "
                     "%zd nodes and %zd levels",
                     t->num_nodes, t->num_levels);
        return -1;
    }
    const int32_t *step = table->buf;
    for (Py_ssize_t i = 0; i < t->m * 256; i++) {
        if (step[i] < -1 || step[i] >= rows) {
            PyErr_Format(PyExc_ValueError,
                         "walk_role_functions: role %zd moves to %d on byte %zd; a move is -1, "
                         "a role or a sink (0 to %zd)",
                         i / 256, (int)step[i], i % 256, rows - 1);
            return -1;
        }
    }
    return 0;
}

enum { TABLE, NODE_BYTE, NODE_DEPTH, TOKEN_NODE, OUT, HELD };

static PyObject *walk_role_functions(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    static const int sizes[HELD] = {4, 1, 8, 4, 1};
    static const char *names[HELD] = {"table", "node_byte", "node_depth", "token_node",
                                      "end_role"};
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "walk_role_functions takes seven arguments");
        return NULL;
    }
    PyObject *arrays[HELD] = {args[0], args[2], args[3], args[5], args[6]};
    Py_ssize_t m = PyLong_AsSsize_t(args[1]);
    Py_ssize_t num_levels = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer views[HELD];
    int held = 0;
    PyObject *result = NULL;
    Functions f = {0};
    Exits *exits = NULL;
    int32_t *at = NULL, *path = NULL;
    char *alive = NULL;
    int64_t *count = NULL;
    Trie t = {0};
    for (; held < HELD; held++) {
        int flags = held == OUT ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(arrays[held], &views[held], flags) < 0) goto done;
        if (views[held].itemsize != sizes[held]) {
            PyErr_Format(PyExc_TypeError, "walk_role_functions: %s has items of %zd bytes, not %d",
                         names[held], views[held].itemsize, sizes[held]);
            held++;
            goto done;
        }
    }
    t.m = m;
    t.num_nodes = views[NODE_BYTE].len;
    t.num_levels = num_levels;
    t.num_tokens = views[TOKEN_NODE].len / 4;
    t.node_byte = views[NODE_BYTE].buf;
    t.node_depth = views[NODE_DEPTH].buf;
    t.token_node = views[TOKEN_NODE].buf;
    t.end_role = views[OUT].buf;
    if (views[NODE_DEPTH].len / 8 != t.num_nodes) {
        PyErr_SetString(PyExc_ValueError,
                        "walk_role_functions: node_byte and node_depth differ in length");
        goto done;
    }
    if (check_sizes(&views[TABLE], &views[OUT], &t) < 0) goto done;
    t.width = views[OUT].shape[0];

    f.m = (int)m;
    f.step = views[TABLE].buf;
    int8_t roles[MAX_ROLES];
    memset(roles, 0xff, sizeof(roles));
    if (slots_grow(&f) < 0 || intern(&f, roles) != DEAD) goto nomem;
    for (int r = 0; r < f.m; r++) roles[r] = (int8_t)r;
    if (intern(&f, roles) != IDENTITY) goto nomem;
    memset(f.moves + DEAD * 256, 0, 256 * sizeof(int32_t)); /* DEAD stays DEAD, no exits */

    exits = PyMem_Calloc((size_t)t.width, sizeof(Exits));
    /* Zero is DEAD: the nodes under a dead one are skipped and end no token. */
    at = PyMem_Calloc((size_t)t.num_nodes * (size_t)t.width, sizeof(int32_t));
    path = PyMem_Malloc((size_t)t.num_levels * (size_t)t.width * sizeof(int32_t));
    alive = PyMem_Malloc((size_t)t.num_levels);
    count = PyMem_Malloc((size_t)(t.num_levels + 1) * sizeof(int64_t));
    if (!exits || !at || !path || !alive || !count) goto nomem;
    if (walk_preorder(&f, &t, at, exits, path, alive) < 0 || fill_end_roles(&f, &t, at) < 0)
        goto done;

    result = PyList_New(t.width);
    if (!result) goto done;
    for (Py_ssize_t c = 0; c < t.width; c++) {
        PyObject *columns = exits_columns(&exits[c], count, t.num_levels);
        if (!columns) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, c, columns);
    }
    goto done;
nomem:
    PyErr_NoMemory();
done:
    functions_free(&f);
    if (exits) {
        for (Py_ssize_t c = 0; c < t.width; c++) PyMem_Free(exits[c].items);
        PyMem_Free(exits);
    }
    PyMem_Free(at);
    PyMem_Free(path);
    PyMem_Free(alive);
    PyMem_Free(count);
    while (--held >= 0) PyBuffer_Release(&views[held]);
    return result;
}

static PyMethodDef module_functions[] = {
    {"walk_role_functions", (PyCFunction)(void (*)(void))walk_role_functions, METH_FASTCALL,
     "walk_role_functions(table, num_roles, node_byte, node_depth, num_levels, token_node, "
     "end_role) -> [(exit_node, exit_sink, exit_role)] per entry depth: fills end_role "
     "int8[depths, tokens, roles], returns the exits as bytearrays of native int64s"},
    {NULL, NULL, 0, NULL},
};

int add_role_walk(PyObject *module) { return PyModule_AddFunctions(module, module_functions); }
