"""The stub `fsmcompile/_native.pyi` and the C module `fsmcompile._native` agree: the same
public functions and types, and each type with the same public methods and properties.
A kernel added in C without its stub (or a stub left behind by a removed one) fails here,
before mypy quietly types a call against a name that is not there."""

from __future__ import annotations

import ast
from pathlib import Path

import fsmcompile
from fsmcompile import _native

STUB = Path(fsmcompile.__file__).with_name("_native.pyi")


def _public(names: object) -> set[str]:
    return {name for name in names if not name.startswith("_")}  # type: ignore[attr-defined]


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def test_stub_names_every_public_name_of_the_module() -> None:
    tree = _stub_tree()
    in_stub = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    }
    assert in_stub == _public(dir(_native)) - {"__doc__"}


def test_stub_types_have_the_module_types_members() -> None:
    """Each type's own members: an exception type's inherited ones (`args`) are not
    listed in the stub, as they are not the module's."""
    for node in _stub_tree().body:
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
            continue
        in_stub = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        kind = getattr(_native, node.name)
        inherited = _public(dir(kind.__mro__[1]))
        assert _public(in_stub) == _public(dir(kind)) - inherited, node.name


def test_every_function_is_built_in_c_in_the_one_module() -> None:
    assert _native.__name__ == "fsmcompile._native"
    for name in _public(dir(_native)):
        member = getattr(_native, name)
        assert getattr(member, "__module__", "fsmcompile._native") in {None, "fsmcompile._native"}
