"""The runtime package surface: sorted, complete `__all__`; no heavy imports."""

from __future__ import annotations

import subprocess
import sys
import types

import fsmcompile.runtime as runtime


def test_runtime_exports_sorted_and_complete():
    assert runtime.__all__ == sorted(runtime.__all__)
    public = {
        name
        for name, value in vars(runtime).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - {"annotations"} == set(runtime.__all__)


def test_import_runtime_does_not_import_torch_or_engines():
    code = (
        "import sys, fsmcompile, fsmcompile.runtime, fsmcompile.runtime.kernels;"
        "sys.exit(int(any(m in sys.modules for m in ('torch', 'triton', 'vllm', 'transformers'))))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
