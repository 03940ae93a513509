"""Code-point ranges → UTF-8 byte-range sequences: how character sets become byte automata.

Every spec talks in code points; the DFA reads bytes. A code-point range becomes a few
sequences of byte ranges (`[E1-EC][80-BF][80-BF]`), each sequence one path through the
byte automaton. The split is the one RE2 and Rust's `utf8-ranges` use: first by encoded
length, then by alignment so every later byte range is a full `[80-BF]` or a single
prefix byte. Only shortest forms are produced and surrogates (U+D800..U+DFFF) are dropped,
so the automaton never accepts bytes that are not valid UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

ByteRange = tuple[int, int]
"""Inclusive byte range (lo, hi), 0 <= lo <= hi <= 255."""

Utf8Sequence = tuple[ByteRange, ...]
"""One to four byte ranges: the encodings of one aligned block of code points."""

SURROGATE_LO = 0xD800
SURROGATE_HI = 0xDFFF
MAX_CODE_POINT = 0x10FFFF
_MAX_BY_LENGTH = (0x7F, 0x7FF, 0xFFFF)  # last code point encoded in 1, 2, 3 bytes


def encode(code_point: int) -> bytes:
    """The UTF-8 bytes of one code point (surrogates included: callers exclude them)."""
    return chr(code_point).encode("utf-8", "surrogatepass")


def _split_range(lo: int, hi: int) -> list[Utf8Sequence]:
    """Sequences for one code-point range, in increasing code-point order."""
    out: list[Utf8Sequence] = []
    stack = [(lo, hi)]
    while stack:
        start, end = stack.pop()
        while True:
            if start > end:
                break
            if start <= SURROGATE_HI and end >= SURROGATE_LO:
                # Cut the surrogate block out; the part above it is handled later.
                if end > SURROGATE_HI:
                    stack.append((SURROGATE_HI + 1, end))
                end = SURROGATE_LO - 1
                continue
            cut = next((m for m in _MAX_BY_LENGTH if start <= m < end), None)
            if cut is not None:
                stack.append((cut + 1, end))
                end = cut
                continue
            if end <= 0x7F:
                out.append(((start, end),))
                break
            aligned = True
            for i in (1, 2, 3):
                mask = (1 << (6 * i)) - 1
                if start & ~mask != end & ~mask:
                    if start & mask:
                        stack.append(((start | mask) + 1, end))
                        end = start | mask
                        aligned = False
                        break
                    if end & mask != mask:
                        stack.append((end & ~mask, end))
                        end = (end & ~mask) - 1
                        aligned = False
                        break
            if not aligned:
                continue
            first, last = encode(start), encode(end)
            out.append(tuple((a, b) for a, b in zip(first, last, strict=True)))
            break
    return out


@lru_cache(maxsize=4096)
def utf8_sequences(ranges: tuple[tuple[int, int], ...]) -> tuple[Utf8Sequence, ...]:
    """All byte-range sequences for sorted, disjoint, inclusive code-point `ranges`.

    Cached: the same few sets (`\\d`, `[^"]`, `.`) recur in almost every spec.
    """
    out: list[Utf8Sequence] = []
    for lo, hi in ranges:
        out.extend(_split_range(max(lo, 0), min(hi, MAX_CODE_POINT)))
    return tuple(out)


def byte_boundaries(sequences: Iterable[Utf8Sequence]) -> set[int]:
    """The byte values where a byte range starts or ends+1: the cuts between byte classes."""
    cuts: set[int] = set()
    for seq in sequences:
        for lo, hi in seq:
            cuts.add(lo)
            cuts.add(hi + 1)
    return cuts
