"""Check what the built distributions hold, by listing their files (scripts/wheel.sh runs it).

    python scripts/check_dist.py dist/fsmcompile-*.tar.gz dist/fsmcompile-*manylinux*.whl

The sdist must carry every C source and header of native/ (a wheel is built from it on a
machine without ours); the wheel must carry none of them, at least one compiled module,
and only what the installed package reads: Python modules, their stubs, py.typed, the
bundled grammars and their examples. The module list is not spelled out here, so the
check holds however the C code is split into extension modules.
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

NATIVE = Path(__file__).resolve().parents[1] / "native"
SOURCE_SUFFIXES = {".c", ".h", ".cc", ".cpp", ".hpp", ".cxx", ".pyx"}
PACKAGE_SUFFIXES = {".py", ".pyi", ".so", ".lark"}
EXAMPLES = PurePosixPath("fsmcompile/grammars/examples")


def native_sources() -> list[str]:
    """The C sources and headers of the tree's native/ folder, as names."""
    return sorted(p.name for p in NATIVE.iterdir() if p.suffix in SOURCE_SUFFIXES)


def sdist_problems(path: Path) -> list[str]:
    """What the sdist lacks: a native/ source or header, or setup.py to build them."""
    with tarfile.open(path) as archive:
        # Drop the leading `fsmcompile-<version>/`.
        names = {PurePosixPath(*PurePosixPath(n).parts[1:]) for n in archive.getnames()}
    wanted = [PurePosixPath("native", name) for name in native_sources()]
    problems = [f"{path.name}: no {name}" for name in wanted if name not in names]
    if not any(name.suffix == ".h" for name in wanted):
        problems.append(f"native/ holds no header: {NATIVE}")
    if PurePosixPath("setup.py") not in names:
        problems.append(f"{path.name}: no setup.py")
    return problems


def wheel_file_problem(name: PurePosixPath) -> str | None:
    """Why one file of the wheel does not belong there, or None when it does."""
    if name.suffix in SOURCE_SUFFIXES:
        return "a C source or header"
    if name.parts[0].endswith(".dist-info"):
        return None
    if name.parts[0] != "fsmcompile":
        return "outside the fsmcompile package"
    if name.suffix in PACKAGE_SUFFIXES or name.name == "py.typed" or EXAMPLES in name.parents:
        return None
    return "not a module, stub, grammar or example"


def wheel_problems(path: Path) -> list[str]:
    """Each file of the wheel that does not belong, what it lacks, an unrepaired tag."""
    with zipfile.ZipFile(path) as archive:
        names = [PurePosixPath(n) for n in archive.namelist() if not n.endswith("/")]
    problems = [
        f"{path.name}: {name} is {why}"
        for name in names
        if (why := wheel_file_problem(name)) is not None
    ]
    if not any(name.suffix == ".so" for name in names):
        problems.append(f"{path.name}: no compiled module (.so)")
    if "manylinux" not in path.name:
        problems.append(f"{path.name}: not repaired to a manylinux tag")
    return problems


def main(paths: list[str]) -> int:
    """Check each given sdist (.tar.gz) and repaired wheel (.whl)."""
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    problems: list[str] = []
    for arg in paths:
        path = Path(arg)
        if path.name.endswith(".tar.gz"):
            problems += sdist_problems(path)
        elif path.suffix == ".whl":
            problems += wheel_problems(path)
        else:
            problems.append(f"{path}: neither an sdist nor a wheel")
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_dist: {', '.join(Path(p).name for p in paths)}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
