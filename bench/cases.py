"""The cases every engine runs: a regex suite, hand-picked JSON Schemas, a fixed
JSONSchemaBench sample and two context-free grammars, each with labelled instances.

A case is plain data (it travels to the worker processes as JSON): the spec in the form
fsmcompile compiles, the texts that must be accepted and those that must be rejected,
and, where a peer needs its own dialect of the same language, `peer_specs[engine]`.
JSON instances are written compact (`separators=(",", ":")`, `ensure_ascii=False`:
fsmcompile's default whitespace; every peer's default whitespace allows it too; UTF-8 as a
model writes it, as MaskBench does). JSON-via-CFG documents are pretty-printed instead.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "jsonschemabench"
if not CORPUS.exists() and Path("/work/shared/corpora/jsonschemabench").exists():
    CORPUS = Path("/work/shared/corpora/jsonschemabench")  # a checkout outside the project
JSB_SUBSETS = ("Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow")

WORDS_50 = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu apple "
    "banana cherry damson elder fig grape honeydew kiwi lemon mango nectarine olive peach "
    "quince raspberry strawberry tangerine ugli vanilla watermelon ximenia yam zucchini"
).split()
assert len(WORDS_50) == 50

LITERAL_600 = (
    (
        "the quick brown fox jumps over the lazy dog while seven wizards quietly hex "
        "the jovial boxer, "
    )
    * 8
)[:600]

TEXT_1500 = (
    "Grammar engines trade compile time for mask time; some pay once, some per token. " * 19
)[:1500]


@dataclass(frozen=True)
class Case:
    """One spec and its labelled instances.

    Attributes:
        id: unique within the run (JSONSchemaBench cases keep the corpus id).
        suite: the case-set it belongs to.
        kind: 'regex', 'json' (JSON Schema) or 'lark'.
        spec: regex text, schema object or .lark text, as fsmcompile takes it.
        valid / invalid: instance texts to accept / reject.
        peer_specs: engine name → its own text for the same language (Lark cases).
    """

    id: str
    suite: str
    kind: str
    spec: Any
    valid: tuple[str, ...]
    invalid: tuple[str, ...]
    peer_specs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def regex_suite() -> list[Case]:
    """The issue's regex suite: common field formats plus three index-size stressors."""
    rows: list[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = [
        (
            "iso_datetime",
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            ("2024-03-15T12:34:56Z", "1999-12-31T23:59:59.123456+05:30"),
            ("2024-03-15 12:34:56Z", "2024-3-15T12:34:56Z"),
        ),
        (
            "email",
            r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
            ("ada.lovelace@example.com", "first+tag@sub.domain.org"),
            ("ada@example", "ada@@example.com"),
        ),
        (
            "ipv4",
            r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)",
            ("192.168.1.254", "8.8.8.8"),
            ("256.1.1.1", "1.2.3"),
        ),
        (
            "float",
            r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
            ("-0.5e-10", "3.14159", "42"),
            ("01.5", "1."),
        ),
        (
            "phone",
            r"\+?1?[-. ]?\(?\d{3}\)?[-. ]?\d{3}[-. ]?\d{4}",
            ("+1 (555) 123-4567", "555.123.4567"),
            ("555-1234", "555-123-45678"),
        ),
        ("words_50", "(" + "|".join(WORDS_50) + ")", ("kilo", "zucchini"), ("kil", "mangos")),
        ("cjk_plus", "[\u4e00-\u9fff]+", ("汉字测试", "中文"), ("汉字a", "")),
        (
            "literal_600",
            LITERAL_600.replace(".", r"\."),
            (LITERAL_600,),
            (LITERAL_600[:-1] + "X", LITERAL_600[:300]),
        ),
        (
            "not_quote_2000",
            r'[^"]{0,2000}',
            ("a short line of text", TEXT_1500),
            ('has a " quote', "x" * 2001),
        ),
    ]
    return [
        Case(name, "regex", "regex", pattern, valid, invalid)
        for name, pattern, valid, invalid in rows
    ]


def _obj(properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **extra,
    }


def _forty_properties() -> tuple[dict[str, Any], list[Any], list[Any]]:
    types = ("string", "integer", "boolean", "number")
    samples = {"string": "v", "integer": 7, "boolean": True, "number": 2.5}
    props = {f"p{i:02d}": {"type": types[i % 4]} for i in range(40)}
    full = {f"p{i:02d}": samples[types[i % 4]] for i in range(40)}
    required = [f"p{i:02d}" for i in range(20)]
    only_required = {k: full[k] for k in required}
    missing = {k: v for k, v in only_required.items() if k != "p05"}
    wrong = {**only_required, "p01": "seven"}
    return _obj(props, required), [full, only_required], [missing, wrong]


def schema_suite() -> list[Case]:
    """Ten hand-picked schemas, one per feature family the issue names."""
    point = _obj({"x": {"type": "number"}, "y": {"type": "number"}}, ["x", "y"])
    node = _obj(
        {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        },
        ["value"],
    )
    forty, forty_valid, forty_invalid = _forty_properties()
    rows: list[tuple[str, dict[str, Any], list[Any], list[Any]]] = [
        (
            "flat",
            _obj(
                {
                    "name": {"type": "string"},
                    "age": {"type": "integer"},
                    "active": {"type": "boolean"},
                },
                ["name", "age"],
            ),
            [{"name": "Ada", "age": 36, "active": True}, {"name": "Bob", "age": 7}],
            [{"name": "Ada"}, {"name": "Ada", "age": "36"}],
        ),
        (
            "enums",
            _obj(
                {
                    "color": {"enum": ["red", "green", "blue"]},
                    "size": {"type": "string", "enum": ["S", "M", "L", "XL"]},
                    "level": {"const": 3},
                },
                ["color", "size", "level"],
            ),
            [{"color": "green", "size": "XL", "level": 3}],
            [
                {"color": "purple", "size": "S", "level": 3},
                {"color": "red", "size": "S", "level": 4},
            ],
        ),
        (
            "nested_arrays",
            _obj(
                {
                    "matrix": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "number"}},
                    },
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                },
                ["matrix", "tags"],
            ),
            [{"matrix": [[1, 2.5], [-3, 4e10], []], "tags": ["a", "b"]}],
            [{"matrix": [[1, "x"]], "tags": ["a"]}, {"matrix": [], "tags": []}],
        ),
        (
            "formats",
            _obj(
                {
                    "id": {"type": "string", "format": "uuid"},
                    "created": {"type": "string", "format": "date-time"},
                    "email": {"type": "string", "format": "email"},
                    "day": {"type": "string", "format": "date"},
                },
                ["id", "created", "email", "day"],
            ),
            [
                {
                    "id": "123e4567-e89b-12d3-a456-426614174000",
                    "created": "2024-03-15T12:34:56Z",
                    "email": "ada@example.com",
                    "day": "2024-02-29",
                }
            ],
            [
                {
                    "id": "not-a-uuid",
                    "created": "2024-03-15T12:34:56Z",
                    "email": "ada@example.com",
                    "day": "2024-02-29",
                },
                {
                    "id": "123e4567-e89b-12d3-a456-426614174000",
                    "created": "2024-03-15T12:34:56Z",
                    "email": "ada",
                    "day": "2024-02-29",
                },
            ],
        ),
        (
            "defs",
            {
                "$defs": {"point": point},
                **_obj(
                    {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}},
                    ["start", "end"],
                ),
            },
            [{"start": {"x": 0, "y": 1.5}, "end": {"x": -2, "y": 3}}],
            [{"start": {"x": 0}, "end": {"x": 1, "y": 2}}],
        ),
        (
            "recursion",
            {"$defs": {"node": node}, "$ref": "#/$defs/node"},
            [{"value": 1, "children": [{"value": 2}, {"value": 3, "children": [{"value": 4}]}]}],
            [{"value": 1, "children": [{"children": []}]}],
        ),
        (
            "any_of",
            _obj(
                {
                    "contact": {
                        "anyOf": [
                            {"type": "string", "format": "email"},
                            _obj(
                                {"phone": {"type": "string", "pattern": "^[0-9]{3}-[0-9]{4}$"}},
                                ["phone"],
                            ),
                        ]
                    },
                    "priority": {
                        "anyOf": [{"type": "integer", "minimum": 1, "maximum": 5}, {"type": "null"}]
                    },
                },
                ["contact", "priority"],
            ),
            [
                {"contact": "ada@example.com", "priority": 3},
                {"contact": {"phone": "555-1234"}, "priority": None},
            ],
            [
                {"contact": {"phone": "5551234"}, "priority": 1},
                {"contact": "ada@example.com", "priority": 9},
            ],
        ),
        ("forty_properties", forty, forty_valid, forty_invalid),
        (
            "max_items_50",
            _obj(
                {
                    "items": {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 0},
                        "maxItems": 50,
                    }
                },
                ["items"],
            ),
            [{"items": list(range(50))}, {"items": []}],
            [{"items": list(range(51))}, {"items": [1, -2]}],
        ),
        (
            "string_bounds",
            _obj(
                {
                    "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                    "bio": {"type": "string", "maxLength": 200},
                    "nick": {"type": "string", "minLength": 2, "maxLength": 12},
                },
                ["code", "bio", "nick"],
            ),
            [{"code": "ABC-123", "bio": "Likes graphs and automata.", "nick": "ada"}],
            [
                {"code": "abc-123", "bio": "", "nick": "ada"},
                {"code": "ABC-123", "bio": "", "nick": "a"},
            ],
        ),
    ]
    return [
        Case(
            name,
            "json_schema",
            "json",
            schema,
            tuple(map(compact, valid)),
            tuple(map(compact, invalid)),
        )
        for name, schema, valid, invalid in rows
    ]


def jsonschemabench_sample(per_subset: int, max_tests: int | None = None) -> list[Case]:
    """The first `per_subset` ids with a valid test of each subset, in corpus order."""
    cases = []
    for subset in JSB_SUBSETS:
        taken = 0
        with open(CORPUS / subset / "schemas.jsonl", encoding="utf-8") as handle:
            for line in handle:
                if taken >= per_subset:
                    break
                record = json.loads(line)
                valid = [compact(t["data"]) for t in record["tests"] if t["valid"]]
                invalid = [compact(t["data"]) for t in record["tests"] if not t["valid"]]
                if not valid:
                    continue
                taken += 1
                cases.append(
                    Case(
                        record["id"],
                        "jsonschemabench",
                        "json",
                        record["schema"],
                        tuple(valid[:max_tests]),
                        tuple(invalid[:max_tests]),
                    )
                )
    return cases


ARITHMETIC_EBNF = r"""
root ::= ws sum ws
sum ::= product (ws [-+] ws product)*
product ::= unary (ws [*/%] ws unary)*
unary ::= [-+] ws unary | power
power ::= atom (ws "**" ws unary)?
atom ::= number | name ws "(" ws (sum (ws "," ws sum)* ws)? ")" | name | "(" ws sum ws ")"
number ::= ([0-9]+ ("." [0-9]*)? | "." [0-9]+) ([eE] [-+]? [0-9]+)?
name ::= [A-Za-z_] [A-Za-z0-9_]*
ws ::= [ \t\r\n]*
"""


def cfg_suite(num_json_docs: int) -> list[Case]:
    """JSON through a grammar (not a schema) and two non-JSON grammars (arithmetic, a SQL
    SELECT subset)."""
    docs: list[str] = []
    for subset in JSB_SUBSETS:
        with open(CORPUS / subset / "schemas.jsonl", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                texts = [
                    json.dumps(t["data"], indent=2, ensure_ascii=False)
                    for t in record["tests"]
                    if t["valid"]
                ]
                if texts and len(texts[0]) < 4000:
                    docs.append(texts[0])
                    break
    docs = docs[:num_json_docs]
    json_invalid = ('{"a": 1,}', "{'a': 1}", '{"a": [1, 2}', '{"a": 01}')
    arithmetic_valid = (
        "1 + 2 * 3",
        "max(a, 2 * b) - 3.5 / (x + 1)",
        "-2 ** 2 + f(g(1), .5e-3) % 7",
        "((alpha_1))",
    )
    arithmetic_invalid = ("1 + * 2", "f(1,", "2 3", "a ** ")
    sql_valid = (
        "SELECT * FROM users",
        "select id, name from users where age >= 18 and name like 'A%';",
        "SELECT DISTINCT u.name, COUNT(*) AS n FROM users u LEFT OUTER JOIN orders o "
        "ON o.user_id = u.id WHERE u.age BETWEEN 18 AND 65 GROUP BY u.name "
        "HAVING COUNT(*) > 2 ORDER BY n DESC, u.name LIMIT 10 OFFSET 20;",
        "SELECT CASE WHEN x < 0 THEN 'neg' ELSE 'pos' END AS sign FROM t",
    )
    sql_invalid = (
        "SELECT FROM users",
        "SELECT * users",
        "SELECT a FROM t LIMIT x",
        "SELECT a, FROM t",
    )
    return [
        Case(
            "json_cfg",
            "cfg",
            "lark",
            (ROOT / "grammars" / "json.lark").read_text(),
            tuple(docs),
            json_invalid,
            {"xgrammar": "builtin:json"},
        ),
        Case(
            "arithmetic",
            "cfg",
            "lark",
            (ROOT / "grammars" / "arithmetic.lark").read_text(),
            arithmetic_valid,
            arithmetic_invalid,
            {"xgrammar": ARITHMETIC_EBNF},
        ),
        Case(
            "sql_select",
            "cfg",
            "lark",
            (ROOT / "grammars" / "sql_select.lark").read_text(),
            sql_valid,
            sql_invalid,
            {},
        ),
    ]


def case_sets(*, quick: bool, per_subset: int) -> dict[str, list[Case]]:
    """Case-set name → cases; each engine runs each set in its own worker process."""
    if quick:
        keep_regex = {"iso_datetime", "email", "words_50"}
        keep_schema = {"flat", "enums", "defs"}
        # Two case-sets, not four: each worker start costs seconds (XGrammar's ~4 s).
        return {
            "regex": [c for c in regex_suite() if c.id in keep_regex],
            "json": [c for c in schema_suite() if c.id in keep_schema]
            + jsonschemabench_sample(1, max_tests=2)[:2]
            + cfg_suite(num_json_docs=2)[:1],
        }
    return {
        "regex": regex_suite(),
        "json_schema": schema_suite(),
        "jsonschemabench": jsonschemabench_sample(per_subset),
        "cfg": cfg_suite(num_json_docs=5),
    }
