"""The C part of the runtime (`runtime/_parser.c`); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "fsmcompile.runtime._parser",
            sources=["runtime/_parser.c"],
            extra_compile_args=["-O3", "-std=c11"],
        )
    ]
)
