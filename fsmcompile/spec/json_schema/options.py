"""Options and result types of the JSON Schema front end (schema → regex IR)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fsmcompile.automaton.ir import Node
from fsmcompile.errors import SchemaError

Whitespace = Literal["compact", "standard", "flexible"]
Draft = Literal["auto", "2020-12", "2019-09", "draft-07", "draft-06", "draft-04"]

DRAFTS: tuple[str, ...] = ("auto", "2020-12", "2019-09", "draft-07", "draft-06", "draft-04")
WHITESPACES: tuple[str, ...] = ("compact", "standard", "flexible")

Relaxation = tuple[str, str, str]
"""(JSON pointer, keyword, reason): one constraint that lenient mode did not enforce."""


@dataclass(frozen=True, slots=True)
class JsonOptions:
    """How a schema is lowered.

    Attributes:
        whitespace: "compact" emits `{"a":1,"b":[1,2]}` (what `json.dumps(...,
            separators=(",", ":"))` writes and what most servers want, since every
            extra whitespace choice is a place a small model can wander); "standard"
            is `json.dumps`' default, `", "` and `": "`; "flexible" allows
            `[ \\t\\n\\r]{0,max_whitespace_chars}` at every structural point, enough for
            pretty-printed output a few levels deep.
        max_whitespace_chars: the bound of one whitespace run in "flexible" mode. It is
            bounded because an unbounded run lets a model emit whitespace forever, and
            every extra allowed character costs automaton states at every structural
            point; 20 fits a newline plus indentation five levels deep.
        strict: True raises `UnsupportedFeatureError` listing every keyword that cannot
            be enforced; False drops them and reports them in `SchemaLowering.relaxed`.
        max_recursion_depth: how many times one recursive `$ref` may be expanded inside
            itself, and how deeply nested an unconstrained (`{}`) value may be. Deeper
            instances are rejected (an over-constraint, never a relaxation).
        remote_schemas: documents for `$ref`s to other URIs, keyed by absolute URI
            (without fragment). Nothing is ever fetched from the network.
        draft: the dialect; "auto" reads `$schema` and defaults to 2020-12, as
            `jsonschema.validators.validator_for` does.
    """

    whitespace: Whitespace = "compact"
    max_whitespace_chars: int = 20
    strict: bool = True
    max_recursion_depth: int = 3
    remote_schemas: Mapping[str, Any] = field(default_factory=dict, hash=False)
    draft: Draft = "auto"

    def __post_init__(self) -> None:
        if self.whitespace not in WHITESPACES:
            raise SchemaError(
                f"unknown whitespace option {self.whitespace!r}; expected one of "
                f"{', '.join(WHITESPACES)}",
                "",
                "whitespace",
            )
        if self.draft not in DRAFTS:
            raise SchemaError(
                f"unknown draft {self.draft!r}; expected one of {', '.join(DRAFTS)}", "", "draft"
            )
        if self.max_recursion_depth < 0 or self.max_whitespace_chars < 0:
            raise SchemaError(
                "max_recursion_depth and max_whitespace_chars must be >= 0", "", "options"
            )


@dataclass(frozen=True, slots=True)
class SchemaLowering:
    """The regex IR of a schema plus what it does not enforce exactly.

    Attributes:
        node: IR over code points; every text it matches is a valid instance (soundness),
            except for the documented relaxations and, in lenient mode, `relaxed`.
        relaxed: (pointer, keyword, reason) for each keyword that was dropped; always
            empty in strict mode, where those raise instead.
        depth_limited: pointers of recursive `$ref`s (or `{}` values) whose expansion was
            cut at `max_recursion_depth`: deeper instances are rejected there.
    """

    node: Node
    relaxed: list[Relaxation]
    depth_limited: list[str]
