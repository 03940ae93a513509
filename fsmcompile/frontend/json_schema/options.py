"""Options and result types of the JSON Schema front end (schema → regex IR)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fsmcompile.errors import SchemaError
from fsmcompile.frontend.json_schema.any_order import MAX_ANY_ORDER
from fsmcompile.ir.nodes import Node

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
        nesting_limit: None (default) compiles recursive `$ref`s and free-form values
            (`{}`, an absent `additionalProperties` or `items`) exactly, as a grammar. An
            integer unrolls them that many levels deep into one DFA instead: deeper
            instances are refused, but masks cost ~1 µs instead of a grammar's few µs
            (tens on first use) and compiles are faster. A trade for servers whose
            outputs never nest deep.
        strict: True raises `UnsupportedFeatureError` listing every keyword that cannot
            be enforced; False drops them and reports them in `SchemaLowering.relaxed`.
        remote_schemas: documents for `$ref`s to other URIs, keyed by absolute URI
            (without fragment). Nothing is ever fetched from the network.
        draft: the dialect; "auto" reads `$schema` and defaults to 2020-12, as
            `jsonschema.validators.validator_for` does.
        lenient_formats: False (default) treats a format the specification defines but
            no automaton can check (`regex`: a valid regex nests its groups without
            bound) as unenforceable, like any such keyword. True reads it as any string,
            even in strict mode, and lists it in `SchemaLowering.relaxed`: for schemas
            whose `format: regex` fields matter less than compiling at all.
        integer_fractions: False (default) writes an `integer` as `-?(0|[1-9][0-9]*)`:
            JSON Schema calls `1.0` an integer, but most JSON parsers read it as a
            float, which a consumer of an integer field may refuse. True also accepts
            the integral value followed by `.0`, `.00`, ... (exact: bounds, `multipleOf`
            and excluded values hold for the value, which the zeros do not change); with
            `exponent_numbers` also with an exponent.
        listed_escapes: False (default) spells listed strings (`enum`/`const` strings,
            property names, `propertyNames` values) raw, with only the escapes a
            character needs and `\\/`. True also accepts every other JSON spelling of
            them (`\\u0061` for `a`, `\\u00E9`, short escapes), for models that escape
            freely; it costs about six times the states of those strings' automata,
            which is why it is off.
        exponent_numbers: False (default) writes a `number` under a bound other than 0
            without an exponent (`150`, not `1.5e2`, under `maximum: 500`). True also
            accepts every text with an exponent whose value lies inside the bounds,
            exactly, for exponents up to 20 in magnitude (`1.5e2`, `15000E-2`, `1e+007`;
            a zero mantissa with any exponent); with `integer_fractions` an `integer`
            too may be written so (`1e2`, `1.5E+2`), and `enum`/`const` numbers match in
            those spellings. Off because each exponent costs the number's automaton
            about 15 states (`maximum: 500`: 12 -> 323).
        any_order_max: 0 (default) keeps an object's listed properties in schema order.
            N > 0 lets objects with 2 to N listed properties write them in any order,
            exactly: each at most once, the required ones all present, extra keys
            anywhere between them. The automaton remembers which listed keys it has
            seen, up to 2**N sets, each with its own copy of the values after it, so N
            is at most `MAX_ANY_ORDER` (8); objects with more properties keep schema
            order.
    """

    whitespace: Whitespace = "compact"
    max_whitespace_chars: int = 20
    nesting_limit: int | None = None
    strict: bool = True
    remote_schemas: Mapping[str, Any] = field(default_factory=dict, hash=False)
    draft: Draft = "auto"
    lenient_formats: bool = False
    integer_fractions: bool = False
    listed_escapes: bool = False
    exponent_numbers: bool = False
    any_order_max: int = 0

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
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise SchemaError(
                    f"{name} must be true or false, found {getattr(self, name)!r}", "", name
                )
        for name in _COUNTS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise SchemaError(f"{name} must be an integer, found {value!r}", "", name)
        if not 0 <= self.any_order_max <= MAX_ANY_ORDER:
            raise SchemaError(
                f"any_order_max must be between 0 and {MAX_ANY_ORDER} (2**N sets of seen "
                f"keys), found {self.any_order_max}",
                "",
                "any_order_max",
            )
        if self.max_whitespace_chars < 0 or (self.nesting_limit or 0) < 0:
            raise SchemaError("max_whitespace_chars and nesting_limit must be >= 0", "", "options")


_FLAGS = ("strict", "lenient_formats", "integer_fractions", "listed_escapes", "exponent_numbers")
"""The options that are true or false: a request's "yes" must not pass as true (and name
another cache entry)."""
_COUNTS = ("max_whitespace_chars", "nesting_limit", "any_order_max")
"""The integer options (`nesting_limit` may be None); a bool or a float is refused."""


@dataclass(frozen=True, slots=True)
class SchemaLowering:
    """The regex IR of a schema plus what it does not enforce exactly.

    Attributes:
        node: IR over code points (the start rule); every text it matches is a valid
            instance (soundness),
            except for the documented relaxations and, in lenient mode, `relaxed`.
        relaxed: (pointer, keyword, reason) for each keyword that was dropped; in
            strict mode, where the others raise instead, only the formats that
            `lenient_formats` relaxes.
        rules: the rules `Ref` nodes in `node` (and in each other) name: recursive
            `$ref`s and free-form values. Empty when the schema is regular, which
            compiles to one DFA; otherwise it compiles as a grammar (`from_rules.py`).
    """

    node: Node
    relaxed: list[Relaxation]
    rules: dict[str, Node] = field(default_factory=dict)

    @property
    def regular(self) -> bool:
        """Whether one finite automaton holds the whole language."""
        return not self.rules
