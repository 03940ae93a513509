"""Keywords no token mask can enforce, and the check that finds every use of them.

A decoder that silently ignores a constraint lets invalid output through, the worst
failure a guided decoder can have. So each keyword below is either enforced elsewhere
or reported here: strict mode raises one `UnsupportedFeatureError` listing every
(pointer, keyword) pair at once, lenient mode drops them and lists them in
`SchemaLowering.relaxed`. A keyword that applies only to a type the schema excludes
(`uniqueItems` on a string-only schema) constrains nothing and is not reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.frontend.json_schema.keywords import (
    UNSUPPORTED,
    Atom,
)
from fsmcompile.frontend.json_schema.negation import negate
from fsmcompile.frontend.json_schema.options import Relaxation


def _is_noop(keyword: str, schema: dict[str, Any]) -> bool:
    """Keywords whose value makes them constrain nothing."""
    value = schema.get(keyword)
    if keyword == "uniqueItems":
        return value is not True
    if keyword == "if":
        no_branch = "then" not in schema and "else" not in schema
        return no_branch or negate(value) is not None
    if keyword in ("minContains", "maxContains"):
        contains = schema.get("contains", None)
        return contains is None or (
            keyword == "minContains"
            and (contains is True or contains == {})
            and "maxContains" not in schema
        )
    if keyword in ("unevaluatedItems", "unevaluatedProperties"):
        return value is True or value == {}
    if keyword == "not":
        return True  # lowered through negation.py; what it cannot express is reported there
    return False


def unsupported_in(schema: dict[str, Any], atoms: frozenset[Atom]) -> Iterator[tuple[str, str]]:
    """(keyword, reason) for each unenforceable keyword of one schema object that
    constrains at least one of `atoms`."""
    for keyword in schema:
        entry = UNSUPPORTED.get(keyword)
        if entry is None or _is_noop(keyword, schema):
            continue
        applies, reason = entry
        if applies is None or applies & atoms:
            yield keyword, reason


def raise_unsupported(problems: list[Relaxation]) -> None:
    """Raise one error naming every (pointer, keyword) in `problems`, if any.

    Raises:
        UnsupportedFeatureError: `.features` lists every pair; `.pointer` and
            `.keyword` are the first one's.
    """
    if not problems:
        return
    lines = [f"  {pointer or '/'}: {keyword} ({reason})" for pointer, keyword, reason in problems]
    first_pointer, first_keyword, _ = problems[0]
    message = (
        f"{len(problems)} schema keyword(s) cannot be enforced; remove them or compile with "
        "strict=False to drop them (they are then listed in .relaxed):\n" + "\n".join(lines)
    )
    raise UnsupportedFeatureError(
        message,
        pointer=first_pointer,
        keyword=first_keyword,
        features=[(pointer, keyword) for pointer, keyword, _ in problems],
    )
