"""Character sets behind regex shorthands (`\\d \\w \\s .`) and case-insensitive matching.

Python's `re` decides `\\d`, `\\w` and `\\s` with the running interpreter's Unicode tables,
which change between Python versions, so the sets are computed from `re` itself over
every code point (once, ~10 ms each, cached) rather than copied into the source.
ECMA-262 fixes them to ASCII plus a short whitespace list; its `\\p{...}` General_Category
sets come from `unicodedata`. Case-insensitive matching (`(?i)`) is likewise asked of
`re`, but only about the ~3,000 code points that have case at all: every other code
point matches exactly itself.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from fsmcompile.ir.nodes import MAX_CODE_POINT, normalize_ranges

Ranges = tuple[tuple[int, int], ...]
"""Sorted, merged, inclusive code-point ranges."""

ECMA_DIGIT: Ranges = ((0x30, 0x39),)
ECMA_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
ECMA_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_ASCII: dict[str, Ranges] = {
    "d": ECMA_DIGIT,
    "w": ECMA_WORD,
    "s": ((0x09, 0x0D), (0x20, 0x20)),  # Python's ASCII whitespace: [ \t\n\r\f\v]
}


@lru_cache(maxsize=1)
def _every_code_point() -> str:
    """A string of all 0x110000 code points, surrogates included (10 ms, 4 MiB, once)."""
    codes = np.arange(MAX_CODE_POINT + 1, dtype="<u4").tobytes()
    return codes.decode("utf-32-le", "surrogatepass")


def _ranges_matching(pattern: str) -> Ranges:
    """Code points where the one-character `pattern` matches, as ranges."""
    return tuple(
        (m.start(), m.end() - 1) for m in re.finditer(f"(?:{pattern})+", _every_code_point())
    )


@lru_cache(maxsize=8)
def python_shorthand(letter: str, ascii_only: bool) -> Ranges:
    """`\\d`, `\\w` or `\\s` (letter "d", "w", "s") as Python's `re` matches them in str."""
    if ascii_only:
        return _ASCII[letter]
    return _ranges_matching("\\" + letter)


@lru_cache(maxsize=1)
def ecma_space() -> Ranges:
    """ECMA-262 `\\s`: WhiteSpace (incl. every Zs) plus LineTerminator."""
    import unicodedata

    zs = [
        (lo, lo)
        for lo, hi in python_shorthand("s", False)
        for lo in range(lo, hi + 1)
        if unicodedata.category(chr(lo)) == "Zs"
    ]
    fixed = [(0x09, 0x0D), (0xA0, 0xA0), (0xFEFF, 0xFEFF), *ECMA_LINE_TERMINATORS]
    return normalize_ranges([*zs, *fixed])


def complement(ranges: Ranges) -> Ranges:
    """Every code point not in `ranges`."""
    out: list[tuple[int, int]] = []
    prev = 0
    for lo, hi in ranges:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CODE_POINT:
        out.append((prev, MAX_CODE_POINT))
    return tuple(out)


def subtract(ranges: Ranges, removed: Ranges) -> Ranges:
    """`ranges` without `removed`."""
    keep = complement(removed)
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(ranges) and j < len(keep):
        lo = max(ranges[i][0], keep[j][0])
        hi = min(ranges[i][1], keep[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if ranges[i][1] < keep[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


@lru_cache(maxsize=1)
def _cased() -> tuple[tuple[int, ...], Ranges]:
    """Code points with any case mapping, plus every target of one, sorted.

    A superset of what `re` treats as cased: its simple case mappings are a subset of
    Python's full ones, and all their targets are included.
    """
    text = _every_code_point()
    found: set[int] = set()
    for base in range(0, len(text), 256):
        chunk = text[base : base + 256]
        if chunk.lower() == chunk and chunk.upper() == chunk and chunk.casefold() == chunk:
            continue
        for offset, ch in enumerate(chunk):
            variants = ch.lower() + ch.upper() + ch.casefold() + ch.title()
            if variants != ch * 4:
                found.add(base + offset)
                found.update(ord(v) for v in variants)
    codes = tuple(sorted(found))
    return codes, normalize_ranges((c, c) for c in codes)


@lru_cache(maxsize=4096)
def ignorecase(ranges: Ranges, source: str, ascii_only: bool) -> Ranges:
    """The set one atom matches under `(?i)`, given its case-sensitive set `ranges`.

    Args:
        ranges: what the atom matches without `(?i)`.
        source: the atom's own regex text (`[a-z]`, `\\x41`, `K`), compiled by `re` with
            `(?i)` to answer for the cased code points exactly as Python would.
        ascii_only: whether `(?a)` is in force (ASCII-only case folding).
    """
    codes, cased_ranges = _cased()
    matcher = re.compile(("(?ai)" if ascii_only else "(?i)") + source)
    hits = [(c, c) for c in codes if matcher.fullmatch(chr(c))]
    return normalize_ranges([*subtract(ranges, cased_ranges), *hits])


_CATEGORY_NAMES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me", "Number": "N", "Decimal_Number": "Nd", "digit": "Nd",
    "Letter_Number": "Nl", "Other_Number": "No", "Punctuation": "P", "punct": "P",
    "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi", "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z", "Space_Separator": "Zs",
    "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C", "Control": "Cc",
    "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co", "Unassigned": "Cn",
}  # fmt: skip
_CATEGORY_CODES = frozenset(_CATEGORY_NAMES.values())


@lru_cache(maxsize=1)
def _categories() -> dict[str, Ranges]:
    """General_Category → ranges, from this Python's unicodedata (~0.3 s, once)."""
    import unicodedata

    text = _every_code_point()
    spans: dict[str, list[tuple[int, int]]] = {}
    start, current = 0, unicodedata.category(text[0])
    for code in range(1, len(text) + 1):
        cat = unicodedata.category(text[code]) if code < len(text) else ""
        if cat != current:
            spans.setdefault(current, []).append((start, code - 1))
            start, current = code, cat
    out = {name: normalize_ranges(r) for name, r in spans.items()}
    for group in "LMNPSZC":
        out[group] = normalize_ranges(
            r for name, rs in spans.items() if name[0] == group for r in rs
        )
    out["LC"] = normalize_ranges([*out.get("Lu", ()), *out.get("Ll", ()), *out.get("Lt", ())])
    return out


def unicode_property(spec: str) -> Ranges | None:
    """An ECMA-262 `\\p{...}` body as ranges, or None when it is not supported here.

    Supported: General_Category values by short or long name, with or without `gc=` /
    `General_Category=`, and the binary properties `Any`, `ASCII`, `Assigned`. Scripts
    and other binary properties are not: Python's unicodedata does not have them.
    """
    name, _, value = spec.partition("=")
    if value:
        if name not in ("gc", "General_Category"):
            return None
        spec = value
    if not value and spec in ("Any", "ASCII", "Assigned"):
        if spec == "Any":
            return ((0, MAX_CODE_POINT),)
        if spec == "ASCII":
            return ((0, 0x7F),)
        return complement(_categories().get("Cn", ()))
    code = _CATEGORY_NAMES.get(spec, spec)
    if code not in _CATEGORY_CODES:
        return None
    return _categories().get(code, ())
