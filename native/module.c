/* `fsmcompile._native`: every C kernel of the compiler and the runtime in one extension
 * module. Each file adds its own functions and types (module.h); this is the one place
 * the module is defined and built. */
#include "module.h"

int add_type(PyObject *module, PyTypeObject *type, const char *name) {
    if (PyType_Ready(type) < 0) return -1;
    return PyModule_AddObjectRef(module, name, (PyObject *)type);
}

static int (*const adders[])(PyObject *) = {
    add_bitmask, add_counted,   add_parser,    add_dfa_walk,  add_bits,
    add_reach,   add_refine,    add_subset,    add_subset_overlap, add_lexer,
    add_live_walk, add_role_walk, add_lalr,    add_lalr_lookaheads, add_lexcheck, add_levels,
    add_glue,    add_canonical,
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fsmcompile._native",
    .m_doc = "The C kernels of fsmcompile: the compiler's automaton, grammar and index "
             "walks, and the runtime's grammar parser, mask rows and DFA token steps.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *module = PyModule_Create(&native_module);
    if (!module) return NULL;
    for (size_t i = 0; i < sizeof(adders) / sizeof(*adders); i++) {
        if (adders[i](module) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    return module;
}
