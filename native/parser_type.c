/* The Python face of the grammar parser (parser.h): argument checks, error mapping and
 * the `Parser` type. */
#include "parser.h"

/* ---- Python glue ---------------------------------------------------------------------- */

/* `fsmcompile._native.OriginPending`, made once when the module is: a row asked for a
 * lexer state whose runs a lazy index has not computed yet (args: (lexer_state,)). */
static PyObject *OriginPending;

/* The exception of the call that just failed. A pending origin is no fault of the tables:
 * it is reset here (unlike `broken`), and the parser answers again once regrouped. */
static PyObject *call_failed(Parser *self) {
    int32_t pending = self->pending;
    self->failed = 0;
    self->pending = -1;
    if (self->broken)
        return PyErr_Format(PyExc_ValueError, "Parser: inconsistent tables: %s", self->broken);
    if (pending >= 0) {
        PyObject *args = Py_BuildValue("(i)", pending);
        if (args) {
            PyErr_SetObject(OriginPending, args);
            Py_DECREF(args);
        }
        return NULL;
    }
    return PyErr_NoMemory();
}

static int check_stack(Parser *self, long long stack) {
    if (self->broken) {
        call_failed(self);
        return -1;
    }
    if (stack < 0 || stack >= self->state.len) {
        PyErr_Format(PyExc_IndexError, "no stack %lld", stack);
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

static PyObject *Parser_regroup(Parser *self, PyObject *tables) {
    return parser_regroup(self, tables);
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
    {"regroup", (PyCFunction)Parser_regroup, METH_O,
     "regroup(tables): swap in new runs, token groups, dense rows and context sets (the "
     "named tables of `tables`), checked as at construction; on ValueError the old stay. "
     "Callers only append: ids handed in before keep their meaning, as the caches keep "
     "them"},
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
    .tp_name = "fsmcompile._native.Parser",
    .tp_basicsize = sizeof(Parser),
    .tp_dealloc = (destructor)Parser_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The LALR parser, mask rows and lexer steps of one grammar index (not "
              "thread-safe).",
    .tp_methods = Parser_methods,
    .tp_getset = Parser_getset,
    .tp_new = Parser_new,
};

int add_parser(PyObject *module) {
    if (!OriginPending) {
        OriginPending = PyErr_NewExceptionWithDoc(
            "fsmcompile._native.OriginPending",
            "A row needs the runs of a lexer state (args[0]) that a lazy grammar index has "
            "not computed yet: compute them, `Parser.regroup`, and ask again.",
            PyExc_LookupError, NULL);
        if (!OriginPending) return -1;
    }
    if (PyModule_AddObjectRef(module, "OriginPending", OriginPending) < 0) return -1;
    return add_type(module, &ParserType, "Parser");
}
