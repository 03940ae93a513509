"""JSON string literals as IR: decoded-value languages → escaped JSON text, lengths, keys.

Every string constraint (`pattern`, `format`, `enum`, property names) speaks about the
*decoded* value, but the automaton reads the *escaped* text. Front ends therefore build
a language over decoded code points and `encode_content` maps it through JSON's string
encoding, one character set at a time. Because JSON's encoding is a prefix code (each
escaped unit decodes to exactly one code point), mapping sets char by char commutes with
concatenation, union, repetition and intersection, so the result is sound.

Which escaped forms are allowed is a cost decision, documented in docs/json_schema.md:

* a character set that covers every code point (unconstrained string content, the
  `.*` around a searched pattern) allows every JSON escape, `\\uXXXX` and surrogate pairs
  included, so free text is matched completely;
* any narrower set allows the raw character, plus the escapes a character *needs*
  (`\\"`, `\\\\`, control characters as `\\n` or `\\u00XX`) and `\\/`. A writer that escapes
  a plain letter as `\\u0061` inside a pattern-, format- or enum-constrained string is
  rejected: an over-constraint that keeps those automata small.

Lone surrogate escapes (`\\ud800` without its pair) are never accepted: they decode to
no Unicode scalar value, and counting them would make `maxLength` ambiguous.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from fsmcompile.automaton.build import keep_built
from fsmcompile.frontend.json_schema.keywords import SPEC_FORMATS_NOT_ENFORCED
from fsmcompile.frontend.json_schema.lowering_result import Lowered
from fsmcompile.ir.nodes import (
    EMPTY,
    NOTHING,
    Alt,
    And,
    ByteSet,
    CharSet,
    Concat,
    CountedRepeat,
    Diff,
    Node,
    Repeat,
    alt,
    chars,
    counted_item,
    normalize_ranges,
    seq,
    without,
)

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.combinators import Conjunction
    from fsmcompile.frontend.json_schema.lower import Lowerer

MAX_CODE_POINT = 0x10FFFF
ANY_CHAR = CharSet(((0, MAX_CODE_POINT),))
"""Any decoded character (what a searched pattern's `.*` prefix is made of)."""

QUOTE = chars('"')
BACKSLASH = chars("\\")
_HEX = chars((48, 57), (65, 70), (97, 102))
_SHORT_ESCAPES = {0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_SPECIAL = normalize_ranges([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])


def _hex_digit(value: int) -> CharSet:
    """One hex digit of `value` (0..15), either case."""
    digit = "0123456789abcdef"[value]
    return chars(digit, digit.upper())


RAW_CHAR = CharSet(
    normalize_ranges([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, MAX_CODE_POINT)])
)
"""Characters JSON allows unescaped in a string."""

_U_NON_SURROGATE = alt(
    seq(chars((48, 57), "abcABCefEF"), _HEX, _HEX, _HEX),
    seq(chars("dD"), chars((48, 55)), _HEX, _HEX),
)
_U_HIGH = seq(chars("dD"), chars("89abAB"), _HEX, _HEX)
_U_LOW = seq(chars("dD"), chars("cdefCDEF"), _HEX, _HEX)

STRING_UNIT: Node = keep_built(
    alt(
        RAW_CHAR,
        seq(BACKSLASH, chars('"\\/bfnrt')),
        seq(BACKSLASH, chars("u"), _U_NON_SURROGATE),
        seq(BACKSLASH, chars("u"), _U_HIGH, BACKSLASH, chars("u"), _U_LOW),
    )
)
"""One decoded character in any JSON spelling: raw, short escape, `\\uXXXX`, or a pair."""

ANY_CONTENT: Node = keep_built(Repeat(STRING_UNIT, 0, None))
"""The content of any string, in every spelling (what every unconstrained string holds:
its automaton is built once per process, as is the unit's, which bounded strings repeat)."""
ANY_STRING: Node = seq(QUOTE, ANY_CONTENT, QUOTE)
"""Every JSON string."""


def _covers_everything(charset: CharSet) -> bool:
    """Whether `charset` holds every Unicode scalar value (surrogates do not matter)."""
    need = ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))
    return all(
        any(lo <= need_lo and need_hi <= hi for lo, hi in charset.ranges)
        for need_lo, need_hi in need
    )


def _intersect(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in a:
        for lo2, hi2 in b:
            if max(lo, lo2) <= min(hi, hi2):
                out.append((max(lo, lo2), min(hi, hi2)))
    return out


def _escapes(codes: list[int]) -> list[Node]:
    """The escaped spellings of the given special characters (controls, `"`, `\\`),
    grouped so a set of all 32 controls costs a handful of nodes, not 32 branches."""
    forms: list[Node] = []
    short = [_SHORT_ESCAPES[c] for c in codes if c in _SHORT_ESCAPES]
    short += [chr(c) for c in codes if c in (0x22, 0x5C)]
    if short:
        forms.append(seq(BACKSLASH, chars(*short)))
    by_high: dict[int, list[int]] = {}
    for code in codes:
        by_high.setdefault(code >> 4, []).append(code & 0xF)
    for high, lows in sorted(by_high.items()):
        digits = "".join("0123456789abcdef"[v] for v in lows)
        forms.append(
            seq(
                BACKSLASH,
                chars("u"),
                chars("0"),
                chars("0"),
                _hex_digit(high),
                chars(digits, digits.upper()),
            )
        )
    return forms


@functools.cache
def encode_charset(charset: CharSet) -> Node:
    """The JSON-escaped spellings of one decoded character from `charset`.

    A set of every character gets all spellings (see the module docstring); a narrower
    one gets the raw character plus required escapes and `\\/`. Cached: equal sets
    share one node, so the automaton builder sees each spelling once.
    """
    if _covers_everything(charset):
        return STRING_UNIT
    return _narrow_spellings(charset)


def _narrow_spellings(charset: CharSet) -> Node:
    """The raw character plus the escapes it needs, and `\\/` (see the module docstring)."""
    raw = _intersect(charset.ranges, RAW_CHAR.ranges)
    forms: list[Node] = []
    if raw:
        forms.append(CharSet(normalize_ranges(raw)))
    specials = [c for lo, hi in _intersect(charset.ranges, _SPECIAL) for c in range(lo, hi + 1)]
    forms.extend(_escapes(specials))
    if any(lo <= 0x2F <= hi for lo, hi in charset.ranges):
        forms.append(seq(BACKSLASH, chars("/")))
    return alt(*forms) if forms else NOTHING


def encode_content(node: Node) -> Node:
    """Map a language over decoded characters to the language of their JSON spellings.

    The result is the *content* of a string literal, without the quotes. Shared sub-trees
    stay shared (memoized by identity), so a DAG-shaped input does not blow up.

    Raises:
        TypeError: a `ByteSet` in the input (string values are text, not bytes).
    """
    memo: dict[int, Node] = {}
    keep: list[Node] = []

    def walk(item: Node) -> Node:
        key = id(item)
        if key in memo:
            return memo[key]
        result: Node
        if isinstance(item, CharSet):
            result = encode_charset(item)
        elif isinstance(item, Concat):
            result = Concat(tuple(walk(x) for x in item.items))
        elif isinstance(item, Alt):
            result = Alt(tuple(walk(x) for x in item.items))
        elif isinstance(item, Repeat):
            result = Repeat(walk(item.item), item.min, item.max)
        elif isinstance(item, And):
            result = And(tuple(walk(x) for x in item.items))
        elif isinstance(item, Diff):
            # A spelling decodes to one string, so removing every spelling the second part
            # has removes its strings; it has every narrow spelling of them (free parts
            # have all spellings), so the first part is kept to narrow spellings.
            kept, dropped = item.items
            result = Diff((And((walk(kept), narrow_content())), walk(dropped)))
        elif isinstance(item, ByteSet):
            raise TypeError("string values are made of characters; got a ByteSet")
        else:  # pragma: no cover - Node is a closed union
            raise TypeError(f"not an IR node: {item!r}")
        memo[key] = result
        keep.append(item)
        return result

    return walk(node)


def literal_content(text: str, *, every_spelling: bool = False) -> Node:
    """The spellings of exactly `text`: raw characters plus required escapes and `\\/`,
    or with `every_spelling` each character also as its short escape and as `\\uXXXX`
    (either case) or a surrogate pair (`JsonOptions.listed_escapes`).

    Every spelling costs the `\\uXXXX` path of each character: about six times the
    states of the words' trie (a 300-word enum: 1,698 -> 10,191 DFA states).
    """
    if not every_spelling:
        return seq(*(encode_charset(CharSet(((ord(c), ord(c)),))) for c in text)) if text else EMPTY
    return seq(*(_every_spelling(ord(c)) for c in text)) if text else EMPTY


@functools.cache
def _every_spelling(code: int) -> Node:
    """Every JSON spelling of the one code point `code` (never a lone surrogate)."""
    forms: list[Node] = []
    if any(lo <= code <= hi for lo, hi in RAW_CHAR.ranges):
        forms.append(CharSet(((code, code),)))
    short = _SHORT_ESCAPES.get(code) or (chr(code) if chr(code) in '"\\/' else None)
    if short is not None:
        forms.append(seq(BACKSLASH, chars(short)))
    if code <= 0xFFFF:
        if not 0xD800 <= code <= 0xDFFF:
            forms.append(_u_escape(code))
    else:
        high = 0xD800 + ((code - 0x10000) >> 10)
        low = 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(seq(_u_escape(high), _u_escape(low)))
    return alt(*forms) if forms else NOTHING


def _u_escape(code: int) -> Node:
    """`\\uXXXX` of one UTF-16 unit, hex digits in either case."""
    digits = [_hex_digit((code >> shift) & 0xF) for shift in (12, 8, 4, 0)]
    return seq(BACKSLASH, chars("u"), *digits)


def literal_string(text: str, *, every_spelling: bool = False) -> Node:
    """The JSON string literal of `text`, quotes included (see `literal_content`)."""
    return seq(QUOTE, literal_content(text, every_spelling=every_spelling), QUOTE)


def string_body(
    *,
    min_length: int = 0,
    max_length: int | None = None,
    contents: Iterable[Node] = (),
) -> Node:
    """String content (no quotes) whose decoded value has `min_length..max_length` code
    points and whose escaped form is in every one of `contents` (from `encode_content`).

    The length bound is a `Repeat` of one spelled character, never unrolled: its cost is
    left to the automaton builder's state budget. From `COUNTED_FROM` characters on it is
    a `CountedRepeat`, which a grammar lexer may count instead of unrolling.
    """
    parts = list(contents)
    if min_length == 0 and max_length is None and not parts:
        return ANY_CONTENT  # the kept node itself, not an equal copy
    if min_length > 0 or max_length is not None:
        counted = max_length is not None and max_length >= COUNTED_FROM
        repeat = CountedRepeat if counted else Repeat
        parts.append(repeat(STRING_UNIT, min_length, max_length))
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def content_except(excluded: Iterable[str]) -> Node:
    """The escaped content (no quotes) of strings not in `excluded`, narrowly spelled.

    A difference of automata: every narrow spelling (raw characters, required escapes,
    `\\/`; see the module docstring) minus the spellings of the excluded words. A
    spelling decodes to one string, so removing a word's spellings removes exactly that
    word; the product is about as large as the words' trie. Narrow, because a key
    spelled `\\u006d...` could decode to an excluded word only an automaton that
    tracks the trie through every escape could catch (four times the states).
    """
    words = sorted(set(excluded))
    if not words:
        return ANY_CONTENT
    return without(narrow_content(), alt(*(literal_content(w) for w in words)))


@functools.cache
def narrow_content() -> Node:
    """Narrowly spelled content of any string; built once per process (`keep_built`)."""
    return keep_built(Repeat(_narrow_spellings(ANY_CHAR), 0, None))


COUNTED_FROM = 4
"""Length bounds from here on are `CountedRepeat`s: a grammar lexer counts them when no
token of its tokenizer can write more characters into a string it starts
(`fsmcompile.index.cfg.fresh_items`: 3 for GPT-2 and Phi-3, 11 for Llama 3), and unrolls them
otherwise, as an automaton does. Either way the string is a terminal of its own, which
every member with that bound shares. Below, the few unrolled states cost less than a
terminal and a counter."""

OWN_RULE_FROM = 128
"""Length bounds from here on make the string a rule of its own (`lower_string`), so a
schema that is otherwise regular takes the grammar route to count it; below, the few
thousand unrolled states are cheaper than a grammar terminal."""

STRING_KEYWORDS = frozenset({"pattern", "format", "minLength", "maxLength"})
"""The keywords `string_content` reads (besides values a `not` excludes)."""


def string_content(lw: Lowerer, conj: Conjunction) -> Node:
    """The escaped content (no quotes) of strings under every `minLength`/`maxLength`/
    `pattern`/`format` of the conjunction, minus excluded values (`not: {enum}`) and the
    strings of excluded patterns (`not: {pattern}`, narrowly spelled)."""
    min_length = max((int(v) for _, v in conj.keyword("minLength")), default=0)
    lengths = [int(v) for _, v in conj.keyword("maxLength")]
    max_length = min(lengths) if lengths else None
    if max_length is not None and min_length > max_length:
        return NOTHING
    contents: list[Node] = []
    for part, pattern in conj.keyword("pattern"):
        content = lw.pattern_content(part, "pattern", pattern)
        if content is not None:
            contents.append(content)
    for part, name in conj.keyword("format"):
        if not isinstance(name, str):
            continue
        node = format_content(name)
        if node is not None:
            contents.append(node)
        elif name in SPEC_FORMATS_NOT_ENFORCED:
            reason = f"format {name!r}: {SPEC_FORMATS_NOT_ENFORCED[name]}"
            if lw.options.lenient_formats:
                lw.relax(part, "format", reason + "; read as any string (lenient_formats)")
            else:
                lw.report(part, "format", reason)
    for part, pattern in conj.excluded_patterns:
        if lw.pattern_content(part, "pattern", pattern) is not None:
            complement = lw.pattern_complement(pattern)
            assert complement is not None  # the pattern compiled just above
            contents.append(complement)
    excluded = [v for v in conj.excluded_values if isinstance(v, str)]
    if excluded:
        contents.append(content_except(excluded))
    return string_body(min_length=min_length, max_length=max_length, contents=contents)


def lower_string(lw: Lowerer, conj: Conjunction) -> Lowered:
    """JSON strings satisfying the conjunction's string keywords.

    A string bounded by its length from `OWN_RULE_FROM` characters on, alone or under a
    `pattern` or `format`, becomes a rule of its own: a grammar terminal then, whose length
    the runtime counts (unrolled, a bound costs about 20 lexer states per character, times
    the pattern's states: 8,192 would make 160,000; a uri under 255, 43,000). A shorter
    counted bound stays inline: counted where a grammar writes it as a terminal of its
    own anyway, unrolled in an automaton."""
    body = string_content(lw, conj)
    if body is NOTHING:
        return Lowered(NOTHING)
    node = seq(QUOTE, body, QUOTE)
    counted = counted_item(node)
    if counted is not None and counted.max is not None and counted.max >= OWN_RULE_FROM:
        return lw.rule_of(node)
    return Lowered(node)


@functools.cache
def format_content(name: str) -> Node | None:
    """The escaped content IR of a known format (cached: formats are shared, and so is
    their automaton: `keep_built`)."""
    from fsmcompile.frontend.json_schema.formats import format_ir

    node = format_ir(name)
    return None if node is None else keep_built(encode_content(node))
