"""The import contracts of pyproject.toml (`[tool.importlinter]`): stages import only the
stages below them, the runtime never imports the compile side, and no imports form a
cycle. Run here as well as in the lint step so that `make test` catches a regression."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lint_imports.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
