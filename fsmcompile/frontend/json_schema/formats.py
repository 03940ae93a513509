"""`format` values as IR over decoded characters: dates, times, network names, UUIDs.

Each grammar follows its RFC (3339 for dates, 1123/5890 for host names, 5321 for
e-mail, 4291 for IPv6), written so that it accepts a *subset* of the valid strings
whenever exactness would cost too many states. The one documented relaxation is the
253-character limit on a whole host name (counting it multiplies the label automaton
by 253); see the relaxation table in docs/json_schema.md. Over-constraints (sound):
leap seconds only at 23:59:60 UTC with offset `Z`/`±00:00`; host-name labels with
`--` in positions 3-4 (A-labels such as `xn--...`) are refused because their Punycode
cannot be checked; `idn-*` formats accept their ASCII subset. URI grammars live in
`uris.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from fsmcompile.frontend.json_schema.numbers import natural_range
from fsmcompile.frontend.json_schema.uris import (
    HEX,
    IPV4,
    IPV6,
    iri,
    iri_reference,
    uri,
    uri_reference,
    uri_template,
)
from fsmcompile.ir.nodes import Node, Repeat, alt, chars, literal, optional, seq

DIGIT = chars((48, 57))
ALPHA = chars((65, 90), (97, 122))
ALNUM = chars((48, 57), (65, 90), (97, 122))
_LDH = chars((48, 57), (65, 90), (97, 122), "-")


def _digits(n: int) -> Node:
    return Repeat(DIGIT, n, n)


def _fixed(lo: int, hi: int) -> Node:
    """Two-digit zero-padded numbers in [lo, hi] (lo, hi < 100)."""
    parts = [literal(f"{v:02d}") for v in range(lo, min(hi, 9) + 1)]
    if hi >= 10:
        parts.append(natural_range(max(lo, 10), hi))
    return alt(*parts)


@cache
def full_date() -> Node:
    """`YYYY-MM-DD` with each month's day count and Gregorian leap years: exact."""
    year = _digits(4)
    long_months = alt(*(literal(m) for m in ("01", "03", "05", "07", "08", "10", "12")))
    short_months = alt(*(literal(m) for m in ("04", "06", "09", "11")))
    # Leap year: yy in {04, 08, ..., 96}, or yy == 00 and YY in {00, 04, ..., 96}.
    by_four = alt(seq(chars("02468"), chars("048")), seq(chars("13579"), chars("26")))
    by_four_not_zero = alt(
        seq(chars("0"), chars("48")),
        seq(chars("2468"), chars("048")),
        seq(chars("13579"), chars("26")),
    )
    leap_year = alt(seq(DIGIT, DIGIT, by_four_not_zero), seq(by_four, literal("00")))
    dash = chars("-")
    return alt(
        seq(year, dash, long_months, dash, _fixed(1, 31)),
        seq(year, dash, short_months, dash, _fixed(1, 30)),
        seq(year, literal("-02-"), _fixed(1, 28)),
        seq(leap_year, literal("-02-29")),
    )


@cache
def full_time() -> Node:
    """`HH:MM:SS[.frac](Z|±HH:MM)`; a leap second only as 23:59:60 at UTC (subset)."""
    hour = _fixed(0, 23)
    minute = _fixed(0, 59)
    fraction = optional(seq(chars("."), Repeat(DIGIT, 1, None)))
    offset = alt(chars("Zz"), seq(chars("+-"), hour, chars(":"), minute))
    utc = alt(chars("Zz"), seq(chars("+-"), literal("00:00")))
    return alt(
        seq(hour, chars(":"), minute, chars(":"), _fixed(0, 59), fraction, offset),
        seq(literal("23:59:60"), fraction, utc),
    )


@cache
def date_time() -> Node:
    """RFC 3339 `date-time`: full-date, `T` (either case), full-time."""
    return seq(full_date(), chars("Tt"), full_time())


@cache
def duration() -> Node:
    """ISO 8601 duration as RFC 3339 Appendix A gives it (`P1Y2M`, `PT5M`, `P3W`)."""
    num = Repeat(DIGIT, 1, None)

    def unit(letter: str) -> Node:
        return seq(num, chars(letter))

    second = unit("S")
    minute = seq(unit("M"), optional(second))
    hour = seq(unit("H"), optional(minute))
    time = seq(chars("T"), alt(hour, minute, second))
    day = unit("D")
    month = seq(unit("M"), optional(day))
    year = seq(unit("Y"), optional(month))
    date = seq(alt(day, month, year), optional(time))
    return seq(chars("P"), alt(date, time, unit("W")))


@cache
def host_label() -> Node:
    """An LDH label of 1-63 characters, not starting or ending with `-`, and without
    `--` in positions 3-4 (A-labels are refused: their Punycode is not checked)."""
    a, h = ALNUM, _LDH
    return alt(
        a,
        seq(a, a),
        seq(a, h, a),
        seq(a, h, h, a),
        seq(a, h, alt(seq(a, h), seq(chars("-"), a)), Repeat(h, 0, 58), a),
    )


@cache
def hostname() -> Node:
    """Dot-separated labels (RFC 1123); the 253-character total is NOT counted."""
    return seq(host_label(), Repeat(seq(chars("."), host_label()), 0, None))


@cache
def email() -> Node:
    """RFC 5321 mailbox: dot-atom or quoted local part, host name or address literal."""
    atext = chars((48, 57), (65, 90), (97, 122), "!#$%&'*+-/=?^_`{|}~")
    atom = Repeat(atext, 1, None)
    dot_string = seq(atom, Repeat(seq(chars("."), atom), 0, None))
    qtext = chars((32, 33), (35, 91), (93, 126))
    quoted_pair = seq(chars("\\"), chars((32, 126)))
    quoted = seq(chars('"'), Repeat(alt(qtext, quoted_pair), 0, None), chars('"'))
    literal_address = seq(chars("["), alt(IPV4, seq(literal("IPv6:"), IPV6)), chars("]"))
    return seq(alt(dot_string, quoted), chars("@"), alt(hostname(), literal_address))


@cache
def uuid() -> Node:
    """RFC 4122 text form `8-4-4-4-12` hex digits, either case."""
    groups = [Repeat(HEX, n, n) for n in (8, 4, 4, 4, 12)]
    dash = chars("-")
    return seq(groups[0], dash, groups[1], dash, groups[2], dash, groups[3], dash, groups[4])


@cache
def json_pointer() -> Node:
    """RFC 6901: `(/(unescaped | ~0 | ~1)*)*`."""
    unescaped = chars((0, 0x2E), (0x30, 0x7D), (0x7F, 0x10FFFF))
    token = Repeat(alt(unescaped, seq(chars("~"), chars("01"))), 0, None)
    return Repeat(seq(chars("/"), token), 0, None)


@cache
def relative_json_pointer() -> Node:
    """A non-negative integer, an optional `+N`/`-N` index shift, then `#` or a pointer."""
    number = alt(chars("0"), seq(chars((49, 57)), Repeat(DIGIT, 0, None)))
    shift = optional(seq(chars("+-"), chars((49, 57)), Repeat(DIGIT, 0, None)))
    return seq(number, shift, alt(chars("#"), json_pointer()))


FORMATS: dict[str, Callable[[], Node]] = {
    "date": full_date,
    "time": full_time,
    "date-time": date_time,
    "duration": duration,
    "email": email,
    "idn-email": email,
    "hostname": hostname,
    "idn-hostname": hostname,
    "ipv4": lambda: IPV4,
    "ipv6": lambda: IPV6,
    "uuid": uuid,
    "uri": uri,
    "uri-reference": uri_reference,
    "iri": iri,
    "iri-reference": iri_reference,
    "uri-template": uri_template,
    "json-pointer": json_pointer,
    "relative-json-pointer": relative_json_pointer,
}
"""Enforced formats: name → decoded-string IR (full match)."""


def format_ir(name: str) -> Node | None:
    """The decoded-string language of a known format, or None for an unknown one."""
    factory = FORMATS.get(name)
    return factory() if factory is not None else None
