"""The C parts: the runtime's (`runtime/_native.c`) and the compiler's kernels (DFA
minimization, reachability, subset and product constructions, grammar lexers and their
lexing check, LALR tables, region and vocabulary walks, bit packing); everything else is in
pyproject.toml."""

from setuptools import Extension, setup


def kernel(name: str, source: str) -> Extension:
    """One C module, built the same way as every other (the compiler's share `_kernel.h`)."""
    return Extension(
        name,
        sources=[source],
        include_dirs=["fsmcompile"],
        depends=["fsmcompile/_kernel.h"],
        extra_compile_args=["-O3", "-std=c11"],
    )


setup(
    ext_modules=[
        kernel("fsmcompile.runtime._native", "runtime/_native.c"),
        kernel("fsmcompile.automaton._reach", "fsmcompile/automaton/_reach.c"),
        kernel("fsmcompile.automaton._refine", "fsmcompile/automaton/_refine.c"),
        kernel("fsmcompile.automaton._subset", "fsmcompile/automaton/_subset.c"),
        kernel("fsmcompile.index._bits", "fsmcompile/index/_bits.c"),
        kernel("fsmcompile.index._lexer", "fsmcompile/index/_lexer.c"),
        kernel("fsmcompile.index._live_walk", "fsmcompile/index/_live_walk.c"),
        kernel("fsmcompile.index._role_walk", "fsmcompile/index/_role_walk.c"),
        kernel("fsmcompile.spec.lark._lalr", "fsmcompile/spec/lark/_lalr.c"),
        kernel("fsmcompile.spec.lark._lexcheck", "fsmcompile/spec/lark/_lexcheck.c"),
    ]
)
