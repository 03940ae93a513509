"""Read a request's constraint from its vLLM sampling params (offline or over HTTP).

Two spellings reach `SamplingParams.extra_args`:

- nested, from the offline API: `extra_args={"fsmcompile": {"regex": "[0-9]+"}}`; the
  value may also be the same object as JSON text;
- flat, from the OpenAI server's `vllm_xargs`, whose values can only be strings, numbers
  or lists: `{"fsmcompile_regex": "[0-9]+", "fsmcompile_start_after": "</think>"}`, with
  `fsmcompile_json_schema` holding the schema as JSON text.

Both come down to one `RequestSpec`. The checks here are the cheap ones that let the API
server answer HTTP 400 before the request reaches the engine; compiling happens there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fsmcompile.errors import SpecError

from .sources import check_index_reference

EXTRA_ARGS_KEY = "fsmcompile"
"""The key under `SamplingParams.extra_args` that holds a request's spec (nested form)."""

FLAT_PREFIX = EXTRA_ARGS_KEY + "_"
"""Prefix of the flat keys (`fsmcompile_regex`, ...) sent through `vllm_xargs`."""

SPEC_KINDS = ("regex", "json_schema", "grammar", "index")
_FIELDS = (*SPEC_KINDS, "start_after")

_PARSE_CHECK_MAX_CHARS = 4096
"""Regexes up to this length are parsed at the API boundary (a few ms at most); longer
ones are left to the engine, so a huge pattern cannot stall the server's event loop."""


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request's constraint as read from its sampling params.

    `text` is the spec's canonical text (JSON Schemas are dumped with sorted keys), so
    equal specs share one compiled index.
    """

    kind: str
    text: str
    start_after: str | None = None

    @classmethod
    def from_params(cls, params: Any) -> RequestSpec | None:
        """Read the spec from `params.extra_args`; None when the request is not guided.

        Raises:
            SpecError: the entry is malformed: not exactly one of regex, json_schema,
                grammar or index (plus an optional start_after); a value of the wrong
                type; JSON text that does not parse; both spellings at once; or an
                unknown `fsmcompile_*` key.
        """
        extra = getattr(params, "extra_args", None)
        if not extra:
            return None
        entry = _entry_of(extra)
        if entry is None:
            return None
        return cls._from_entry(entry)

    @classmethod
    def _from_entry(cls, entry: dict[str, Any]) -> RequestSpec:
        unknown = sorted(set(entry) - set(_FIELDS))
        kinds = [k for k in SPEC_KINDS if k in entry]
        if unknown or len(kinds) != 1:
            raise SpecError(
                f"fsmcompile: expected exactly one of {', '.join(SPEC_KINDS)} (and optionally "
                f"start_after), found {sorted(entry)}"
            )
        kind = kinds[0]
        value = entry[kind]
        if kind == "json_schema":
            value = _canonical_schema(value)
        if not isinstance(value, str):
            raise SpecError(f"fsmcompile {kind}: expected a string, found {type(value).__name__}")
        start_after = entry.get("start_after")
        if start_after is not None and (not isinstance(start_after, str) or not start_after):
            raise SpecError("fsmcompile start_after: expected a non-empty string")
        return cls(kind, value, start_after)

    def check(self) -> None:
        """The API boundary's extra checks: regex syntax and the index reference rule.

        Raises:
            SpecError: the regex does not parse (with its position), or `index` names
                a path outside the allowed directories (see `sources`).
        """
        if self.kind == "regex" and len(self.text) <= _PARSE_CHECK_MAX_CHARS:
            from fsmcompile.frontend.regex.parser import parse_regex

            parse_regex(self.text)
        elif self.kind == "index":
            check_index_reference(self.text)


def _entry_of(extra: Any) -> dict[str, Any] | None:
    """The nested entry, or one built from the flat keys; None if neither is there."""
    if not isinstance(extra, dict):
        return None
    flat = {k[len(FLAT_PREFIX) :]: v for k, v in extra.items() if k.startswith(FLAT_PREFIX)}
    if EXTRA_ARGS_KEY not in extra:
        if not flat:
            return None
        unknown = sorted(FLAT_PREFIX + k for k in flat if k not in _FIELDS)
        if unknown:
            raise SpecError(
                f"fsmcompile: unknown keys {unknown}; the flat keys are "
                f"{', '.join(FLAT_PREFIX + k for k in _FIELDS)}"
            )
        return flat
    if flat:
        raise SpecError(
            f'fsmcompile: give the spec either under "{EXTRA_ARGS_KEY}" or as '
            f"{FLAT_PREFIX}* keys, not both (found {sorted(FLAT_PREFIX + k for k in flat)})"
        )
    entry = extra[EXTRA_ARGS_KEY]
    if isinstance(entry, str):
        entry = _parse_json(entry, EXTRA_ARGS_KEY)
    if not isinstance(entry, dict):
        raise SpecError(
            f'fsmcompile: "{EXTRA_ARGS_KEY}" must be an object (or its JSON text), '
            f"found {type(entry).__name__}"
        )
    return entry


def _canonical_schema(value: Any) -> Any:
    """A JSON Schema (dict or JSON text) as canonical text; other types pass through."""
    if isinstance(value, str):
        value = _parse_json(value, "json_schema")
        if not isinstance(value, (dict, bool)):
            raise SpecError(
                f"fsmcompile json_schema: expected an object, found JSON {type(value).__name__}"
            )
    if isinstance(value, (dict, bool)):
        try:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"fsmcompile json_schema: not JSON-serializable: {exc}") from None
    return value


def _parse_json(text: str, field: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"fsmcompile {field}: invalid JSON at line {exc.lineno} column {exc.colno} "
            f"(char {exc.pos}): {exc.msg}"
        ) from None
    except RecursionError:
        raise SpecError(f"fsmcompile {field}: JSON nested too deeply") from None


__all__ = ["EXTRA_ARGS_KEY", "FLAT_PREFIX", "SPEC_KINDS", "RequestSpec"]
