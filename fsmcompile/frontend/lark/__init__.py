"""Lark front end: what `%import` may read, and terminal patterns → the regex IR.

The grammar's rules and LALR analysis belong to the CFG back end (`fsmcompile.grammar`).
"""
