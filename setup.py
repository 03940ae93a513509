"""The C parts: the runtime's (`runtime/_native.c`) and the compiler's kernels; everything
else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "fsmcompile.runtime._native",
            sources=["runtime/_native.c"],
            extra_compile_args=["-O3", "-std=c11"],
        ),
        Extension(
            "fsmcompile.index._bits",
            sources=["fsmcompile/index/_bits.c"],
            extra_compile_args=["-O3", "-std=c11"],
        ),
        Extension(
            "fsmcompile.automaton._refine",
            sources=["fsmcompile/automaton/_refine.c"],
            extra_compile_args=["-O3", "-std=c11"],
        ),
        Extension(
            "fsmcompile.index._role_walk",
            sources=["fsmcompile/index/_role_walk.c"],
            extra_compile_args=["-O3", "-std=c11"],
        ),
    ]
)
