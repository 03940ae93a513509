"""What the built distributions hold: scripts/check_dist.py's rules on small archives, and,
when the suite runs against the installed wheel (scripts/test_wheel.sh), the installed
files themselves."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

import fsmcompile

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_dist.py"
WHEEL = "fsmcompile-0.1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
GOOD_WHEEL = [
    "fsmcompile/__init__.py",
    "fsmcompile/py.typed",
    "fsmcompile/runtime/_native.cpython-311-x86_64-linux-gnu.so",
    "fsmcompile/runtime/_native.pyi",
    "fsmcompile/grammars/json.lark",
    "fsmcompile/grammars/examples/person.json",
    "fsmcompile-0.1.0.dist-info/RECORD",
]
installed_only = pytest.mark.skipif(
    os.environ.get("FSMCOMPILE_TEST_INSTALLED") != "1",
    reason="checks the installed wheel (scripts/test_wheel.sh)",
)


@pytest.fixture(scope="module")
def check_dist() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_dist", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_wheel(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, b"")
    return path


def test_a_wheel_of_modules_stubs_and_grammars_passes(
    check_dist: ModuleType, tmp_path: Path
) -> None:
    assert check_dist.wheel_problems(write_wheel(tmp_path / WHEEL, GOOD_WHEEL)) == []


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("fsmcompile/runtime/runtime.c", "C source or header"),
        ("fsmcompile/kernel.h", "C source or header"),
        ("native/runtime.c", "C source or header"),
        ("tests/conftest.py", "outside the fsmcompile package"),
        ("fsmcompile/grammars/README.md", "not a module, stub, grammar or example"),
    ],
)
def test_a_wheel_with_anything_else_fails(
    check_dist: ModuleType, tmp_path: Path, extra: str, problem: str
) -> None:
    [found] = check_dist.wheel_problems(write_wheel(tmp_path / WHEEL, [*GOOD_WHEEL, extra]))
    assert extra in found and problem in found


def test_a_wheel_without_compiled_module_or_manylinux_tag_fails(
    check_dist: ModuleType, tmp_path: Path
) -> None:
    names = [name for name in GOOD_WHEEL if not name.endswith(".so")]
    plain = tmp_path / WHEEL.replace("manylinux_2_17", "linux")
    problems = check_dist.wheel_problems(write_wheel(plain, names))
    assert [p.split(": ")[1] for p in problems] == [
        "no compiled module (.so)",
        "not repaired to a manylinux tag",
    ]


def test_an_sdist_must_carry_every_native_source(check_dist: ModuleType, tmp_path: Path) -> None:
    sources = check_dist.native_sources()
    assert any(name.endswith(".c") for name in sources)
    assert any(name.endswith(".h") for name in sources)

    def sdist(names: list[str]) -> Path:
        path = tmp_path / "fsmcompile-0.1.0.tar.gz"
        with tarfile.open(path, "w:gz") as archive:
            for name in names:
                archive.addfile(tarfile.TarInfo(f"fsmcompile-0.1.0/{name}"), io.BytesIO())
        return path

    full = ["setup.py", *(f"native/{name}" for name in sources)]
    assert check_dist.sdist_problems(sdist(full)) == []
    assert check_dist.sdist_problems(sdist(full[:-1])) == [
        f"fsmcompile-0.1.0.tar.gz: no native/{sources[-1]}"
    ]


@installed_only
def test_the_installed_package_is_the_wheel_without_sources() -> None:
    distribution = metadata.distribution("fsmcompile")
    files = [str(path) for path in distribution.files or []]
    assert Path(distribution.locate_file("fsmcompile/__init__.py")) == Path(fsmcompile.__file__)
    assert not [name for name in files if Path(name).suffix in {".c", ".h", ".cpp", ".hpp"}]
    compiled = [name for name in files if name.endswith(".so")]
    assert compiled
    loaded = {
        Path(module.__file__)
        for name, module in list(sys.modules.items())
        if name.startswith("fsmcompile.")
        and (getattr(module, "__file__", None) or "").endswith(".so")
    }
    assert loaded
    assert loaded <= {Path(distribution.locate_file(name)) for name in compiled}
