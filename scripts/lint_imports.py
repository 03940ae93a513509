"""Run import-linter (`lint-imports`) over fsmcompile as it installs.

The package installs `runtime/`, `cli/` and `grammars/` as `fsmcompile.runtime`,
`fsmcompile.cli` and `fsmcompile.grammars` (`[tool.setuptools] package-dir`). An editable
install maps them with an import hook, which grimp (the graph builder under import-linter)
does not consult: it walks the `fsmcompile/` folder alone, and the runtime, the CLI and
every contract about them would silently drop out. So this script lays the installed tree
out as symlinks in a temporary folder, puts that folder first on the path, and runs
`lint-imports` with the contracts in pyproject.toml.

Usage: python scripts/lint_imports.py [lint-imports options, e.g. --verbose]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Mirrors `[tool.setuptools] package-dir` in pyproject.toml: subpackage → top-level folder.
MAPPED_FOLDERS = {"runtime": "runtime", "cli": "cli", "grammars": "grammars"}


def stage_installed_tree(into: Path) -> Path:
    """Lay out `into/fsmcompile` as the package installs, with symlinks to the sources.

    Each extension module's stub (`_x.pyi`) is staged as `_x.py` so that grimp, which reads
    `.py` files only, sees `from fsmcompile.pkg import _x` as an import of a leaf module and
    not of the package `fsmcompile.pkg` (whose `__init__` may import much more).
    """
    sources = {"": ROOT / "fsmcompile"}
    sources.update({name: ROOT / folder for name, folder in MAPPED_FOLDERS.items()})
    for name, source in sources.items():
        target = into / "fsmcompile" / name
        for path in sorted(source.rglob("*.py*")):
            if "__pycache__" in path.parts or path.suffix not in (".py", ".pyi"):
                continue
            staged = (target / path.relative_to(source)).with_suffix(".py")
            if path.suffix == ".pyi" and path.with_suffix(".py").exists():
                continue  # a stub beside its module: the module is what imports
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.symlink_to(path)
    return into


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="fsmcompile-imports-") as tmp:
        staged = stage_installed_tree(Path(tmp))
        env = dict(os.environ, PYTHONPATH=str(staged))
        linter = Path(sys.executable).with_name("lint-imports")
        command = [str(linter) if linter.exists() else "lint-imports", "--no-cache", "--no-logo"]
        command += [*argv, str(ROOT / "pyproject.toml")]
        # lint-imports puts its working folder first on the path: run it in the staged one.
        return subprocess.run(command, cwd=staged, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
