"""The C parts, one extension module `fsmcompile._native` built from native/*.c: the
runtime's (grammar parser, mask rows, DFA token steps, bitmask writes) and the compiler's
kernels (DFA minimization, reachability, subset and product constructions, grammar lexers
and their lexing check, LALR tables, region and vocabulary walks, bit packing); everything
else is in pyproject.toml."""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "fsmcompile._native",
            sources=sorted(glob("native/*.c")),
            include_dirs=["native"],
            depends=sorted(glob("native/*.h")),
            extra_compile_args=["-O3", "-std=c11"],
        )
    ]
)
