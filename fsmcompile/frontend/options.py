"""Typed front-end options from what callers give: a `JsonOptions`, a `LarkOptions`, or
the mapping the CLI and the serving adapters build, checked key by key.

Options are part of the cache key. Only the fields that differ from their defaults go
into it (`options_key`), so spelling out a default names the same index as leaving it out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeAlias, TypeVar

from fsmcompile.errors import SpecError
from fsmcompile.frontend.identity import Kind
from fsmcompile.frontend.json_schema.options import JsonOptions
from fsmcompile.frontend.lark.options import LarkOptions

__all__ = ["OptionsArg", "SpecOptions", "options_from_mapping", "options_key", "typed_options"]

SpecOptions: TypeAlias = JsonOptions | LarkOptions
"""The options of a kind that takes some (a regex takes none)."""
OptionsArg: TypeAlias = SpecOptions | Mapping[str, Any] | None
"""What an options argument accepts: typed options, their fields as a mapping, or None."""

OptionsT = TypeVar("OptionsT", JsonOptions, LarkOptions)


def options_from_mapping(cls: type[OptionsT], label: str, mapping: Mapping[str, Any]) -> OptionsT:
    """`cls(**mapping)`, refusing keys `cls` has no field for by name.

    Raises:
        SpecError: an unknown key ("unknown {label} options [...]"), or a value the
            options' own checks refuse.
    """
    names = [field.name for field in dataclasses.fields(cls)]
    unknown = sorted(set(mapping) - set(names))
    if unknown:
        raise SpecError(f"unknown {label} options {unknown}; expected some of {names}")
    return cls(**mapping)


def typed_options(kind: Kind, options: OptionsArg) -> SpecOptions | None:
    """The typed options of a `kind` spec: its defaults for None, a mapping converted
    (`options_from_mapping`), typed options as given. None for a regex.

    Raises:
        SpecError: an unknown spec kind, an unknown option key, or options for a regex.
        TypeError: typed options of another kind.
    """
    if kind == "json":
        return _typed(JsonOptions, kind, options)
    if kind == "lark":
        return _typed(LarkOptions, kind, options)
    if kind != "regex":
        raise SpecError(f"unknown spec kind {kind!r}; expected 'regex', 'json' or 'lark'")
    if isinstance(options, JsonOptions | LarkOptions) or options:
        raise SpecError(f"a regex takes no options, found {options!r}")
    return None


def _typed(cls: type[OptionsT], kind: str, options: OptionsArg) -> OptionsT:
    if options is None:
        return cls()
    if isinstance(options, Mapping):
        return options_from_mapping(cls, kind, options)
    if not isinstance(options, cls):
        raise TypeError(f"{kind} options must be {cls.__name__}, not {type(options).__name__}")
    return options


def options_key(options: SpecOptions | None) -> dict[str, Any]:
    """The fields of `options` that differ from their defaults, for cache keys and spec
    hashes (JSON-ready: mappings as dicts, tuples as lists)."""
    if options is None:
        return {}
    defaults = type(options)()
    key: dict[str, Any] = {}
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        if value != getattr(defaults, field.name):
            key[field.name] = _plain(value)
    return key


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value
