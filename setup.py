"""The C part of the runtime (`runtime/_native.c`); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "fsmcompile.runtime._native",
            sources=["runtime/_native.c"],
            extra_compile_args=["-O3", "-std=c11"],
        )
    ]
)
