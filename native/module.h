/* How each C file of `fsmcompile._native` registers what it defines: one `add_*` function
 * per file, called once by the module's init (module.c), adding its functions and types
 * to the module. -1 with an exception set when that fails. */
#ifndef FSMCOMPILE_MODULE_H
#define FSMCOMPILE_MODULE_H

#include "support.h"

int add_bitmask(PyObject *module);   /* bitmask.c: write_row */
int add_counted(PyObject *module);   /* counted.c: fitting_rows, items_grown */
int add_parser(PyObject *module);    /* parser_type.c: Parser */
int add_dfa_walk(PyObject *module);  /* dfa_walk.c: DfaWalk */
int add_bits(PyObject *module);      /* bits.c: set_token_bits, set_token_runs, row_hashes */
int add_reach(PyObject *module);     /* reach.c: mark_reached, bfs_order, reach_or */
int add_refine(PyObject *module);    /* refine.c: refine_partition */
int add_subset(PyObject *module);    /* subset.c: product_pair, product_union */
int add_subset_overlap(PyObject *module); /* subset_overlap.c: subset_concat, subset_repeat */
int add_lexer(PyObject *module);     /* lexer.c: build_lexer */
int add_live_walk(PyObject *module); /* live_walk.c: walk_live_tokens */
int add_role_walk(PyObject *module); /* role_walk.c: walk_role_functions */
int add_lalr(PyObject *module);      /* lalr_lr0.c: lalr_lr0 */
int add_lalr_lookaheads(PyObject *module); /* lalr_lookaheads.c: lalr_lookaheads */
int add_lexcheck(PyObject *module);  /* lexcheck.c: lexing_conflict */
int add_levels(PyObject *module);    /* levels.c: liveness_rounds */
int add_glue(PyObject *module);      /* glue.c: glue_concat */
int add_canonical(PyObject *module); /* canonical.c: canonical_numbering */

/* Add a type, made ready, under its short name. */
int add_type(PyObject *module, PyTypeObject *type, const char *name);

#endif
