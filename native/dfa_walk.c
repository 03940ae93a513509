/* The regex matcher's token steps (`DfaWalk`). */
#include "module.h"

/* A DFA index's tables for `advance`: a token the state's mask allows is walked byte by
 * byte through the transitions. In Python each new (state, token) pair cost a mask-bit
 * read, a row of the table copied to a list and a lookup per byte: most of a first walk's
 * `advance`. */
enum { D_TRANSITIONS, D_CLASS_OF_BYTE, D_TEXT_BYTES, D_TEXT_START, D_STATE_MASK, D_MASKS,
       NUM_DFA_BUFFERS };

/* The tables by keyword, each with its item size. */
static const TableSpec dfa_tables[NUM_DFA_BUFFERS] = {
    [D_TRANSITIONS] = {"transitions", 4}, /* int32[S * C]: next state per class, or -1 */
    [D_CLASS_OF_BYTE] = {"class_of_byte", 4}, /* int32[256] */
    [D_TEXT_BYTES] = {"text_bytes", 1},   /* uint8[...]: the text tokens' bytes, end to end */
    [D_TEXT_START] = {"text_start", 8},   /* int64[V + 1]: token v's bytes */
    [D_STATE_MASK] = {"state_mask", 4},   /* int32[S]: each state's row of `masks` */
    [D_MASKS] = {"masks", 4},             /* int32[M * W]: the allowed tokens' rows */
};

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

/* DfaWalk(*, transitions, class_of_byte, text_bytes, text_start, state_mask, masks,
 * num_classes, num_words): every table and count by keyword. */
static PyObject *DfaWalk_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    int32_t num_classes, num_words;
    if (PyTuple_GET_SIZE(args) || !kwargs) {
        PyErr_SetString(PyExc_TypeError, "DfaWalk takes its tables by keyword only");
        return NULL;
    }
    if (take_named_int(kwargs, "num_classes", &num_classes, "DfaWalk") < 0 ||
        take_named_int(kwargs, "num_words", &num_words, "DfaWalk") < 0)
        return NULL;
    if (num_classes < 1 || num_words < 0) {
        PyErr_SetString(PyExc_ValueError, "DfaWalk: num_classes must be positive, num_words "
                                          "not negative");
        return NULL;
    }
    DfaWalk *self = (DfaWalk *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    if (take_named_vectors(kwargs, dfa_tables, NUM_DFA_BUFFERS, self->buffers, &self->held,
                           "DfaWalk") < 0)
        goto fail;
    if (PyDict_GET_SIZE(kwargs) != NUM_DFA_BUFFERS + 2) { /* every name taken: the rest extra */
        PyErr_SetString(PyExc_TypeError, "DfaWalk: unexpected keyword arguments");
        goto fail;
    }
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
    .tp_name = "fsmcompile._native.DfaWalk",
    .tp_basicsize = sizeof(DfaWalk),
    .tp_dealloc = (destructor)DfaWalk_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A DFA index's token steps for the regex matcher (read-only tables).",
    .tp_methods = DfaWalk_methods,
    .tp_new = DfaWalk_new,
};


int add_dfa_walk(PyObject *module) { return add_type(module, &DfaWalkType, "DfaWalk"); }
