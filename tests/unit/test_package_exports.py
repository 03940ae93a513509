"""The package surface: a sorted, complete `__all__` and no heavy imports at import time."""

from __future__ import annotations

import subprocess
import sys
import types

import fsmcompile


def test_exports_sorted_and_complete() -> None:
    assert fsmcompile.__all__ == sorted(fsmcompile.__all__)
    public = {
        name
        for name, value in vars(fsmcompile).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - {"annotations"} == set(fsmcompile.__all__) - {"__version__"}
    assert len(fsmcompile.__all__) <= 26  # a small set of nouns, one per stage


def test_import_does_not_import_torch_redis_or_transformers() -> None:
    code = (
        "import sys, fsmcompile;"
        "heavy = ('torch', 'redis', 'transformers', 'vllm', 'lark');"
        "sys.exit(int(any(m in sys.modules for m in heavy)))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
