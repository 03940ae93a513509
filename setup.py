"""The C parts: the runtime's (`native/runtime.c`) and the compiler's kernels (DFA
minimization, reachability, subset and product constructions, grammar lexers and their
lexing check, LALR tables, region and vocabulary walks, bit packing); everything else is in
pyproject.toml."""

from setuptools import Extension, setup


def kernel(name: str, source: str) -> Extension:
    """One C module, built the same way as every other (the compiler's share `kernel.h`)."""
    return Extension(
        name,
        sources=[source],
        include_dirs=["native"],
        depends=["native/kernel.h"],
        extra_compile_args=["-O3", "-std=c11"],
    )


setup(
    ext_modules=[
        kernel("fsmcompile.runtime._native", "native/runtime.c"),
        kernel("fsmcompile.automaton._reach", "native/reach.c"),
        kernel("fsmcompile.automaton._refine", "native/refine.c"),
        kernel("fsmcompile.automaton._subset", "native/subset.c"),
        kernel("fsmcompile.tables._bits", "native/bits.c"),
        kernel("fsmcompile.index.cfg._lexer", "native/lexer.c"),
        kernel("fsmcompile.index.dfa._live_walk", "native/live_walk.c"),
        kernel("fsmcompile.index.dfa._role_walk", "native/role_walk.c"),
        kernel("fsmcompile.grammar._lalr", "native/lalr.c"),
        kernel("fsmcompile.grammar._lexcheck", "native/lexcheck.c"),
    ]
)
