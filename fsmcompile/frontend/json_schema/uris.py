"""URI, IRI and URI Template grammars (RFC 3986, 3987, 6570) and IP addresses as IR.

Written straight from the RFCs' ABNF, which is regular: exact, no relaxation. IRIs
are the URI grammar with `ucschar` added to the unreserved set and `iprivate` to the
query, as RFC 3987 defines them.
"""

from __future__ import annotations

from functools import cache

from fsmcompile.ir.nodes import Node, Repeat, alt, chars, literal, optional, seq

HEX = chars((48, 57), (65, 70), (97, 102))
_DIGIT = chars((48, 57))
_ALPHA = chars((65, 90), (97, 122))
_UCSCHAR = [
    (0xA0, 0xD7FF),
    (0xF900, 0xFDCF),
    (0xFDF0, 0xFFEF),
    *[(0x10000 * k, 0x10000 * k + 0xFFFD) for k in range(1, 14)],
    (0xE1000, 0xEFFFD),
]
_IPRIVATE = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]


def _star(node: Node) -> Node:
    return Repeat(node, 0, None)


def _dec_octet() -> Node:
    return alt(
        seq(literal("25"), chars((48, 53))),
        seq(chars("2"), chars((48, 52)), _DIGIT),
        seq(chars("1"), _DIGIT, _DIGIT),
        seq(chars((49, 57)), _DIGIT),
        _DIGIT,
    )


def _ipv4() -> Node:
    octet = _dec_octet()
    dot = chars(".")
    return seq(octet, dot, octet, dot, octet, dot, octet)


IPV4: Node = _ipv4()
"""Dotted quad, each octet 0-255 without leading zeros."""


def _ipv6() -> Node:
    h16 = Repeat(HEX, 1, 4)
    colon = chars(":")
    h16c = seq(h16, colon)
    ls32 = alt(seq(h16, colon, h16), IPV4)
    double = literal("::")

    def head(n: int) -> Node:
        """`[ *n( h16 ":" ) h16 ]` of RFC 3986."""
        return optional(seq(Repeat(h16c, 0, n), h16))

    return alt(
        seq(Repeat(h16c, 6, 6), ls32),
        seq(double, Repeat(h16c, 5, 5), ls32),
        seq(optional(h16), double, Repeat(h16c, 4, 4), ls32),
        seq(head(1), double, Repeat(h16c, 3, 3), ls32),
        seq(head(2), double, Repeat(h16c, 2, 2), ls32),
        seq(head(3), double, h16c, ls32),
        seq(head(4), double, ls32),
        seq(head(5), double, h16),
        seq(head(6), double),
    )


IPV6: Node = _ipv6()
"""RFC 4291 text forms, with `::` compression and an embedded IPv4 tail."""


class _Grammar:
    """RFC 3986 rules, parameterized by the extra characters an IRI allows."""

    def __init__(self, international: bool) -> None:
        extra = _UCSCHAR if international else []
        self.unreserved = chars((48, 57), (65, 90), (97, 122), "-._~", *extra)
        self.sub_delims = chars("!$&'()*+,;=")
        self.pct = seq(chars("%"), HEX, HEX)
        self.pchar = alt(self.unreserved, self.pct, self.sub_delims, chars(":@"))
        query_extra = chars("/?", *_IPRIVATE) if international else chars("/?")
        self.query = _star(alt(self.pchar, query_extra))
        self.fragment = _star(alt(self.pchar, chars("/?")))
        segment = _star(self.pchar)
        self.segment_nz = Repeat(self.pchar, 1, None)
        slash_segments = _star(seq(chars("/"), segment))
        self.path_abempty = slash_segments
        self.path_absolute = seq(chars("/"), optional(seq(self.segment_nz, slash_segments)))
        self.path_rootless = seq(self.segment_nz, slash_segments)
        nc = alt(self.unreserved, self.pct, self.sub_delims, chars("@"))
        self.path_noscheme = seq(Repeat(nc, 1, None), slash_segments)
        userinfo = _star(alt(self.unreserved, self.pct, self.sub_delims, chars(":")))
        future = seq(
            chars("vV"),
            Repeat(HEX, 1, None),
            chars("."),
            Repeat(alt(self.unreserved, self.sub_delims, chars(":")), 1, None),
        )
        ip_literal = seq(chars("["), alt(IPV6, future), chars("]"))
        reg_name = _star(alt(self.unreserved, self.pct, self.sub_delims))
        host = alt(ip_literal, IPV4, reg_name)
        port = _star(_DIGIT)
        self.authority = seq(
            optional(seq(userinfo, chars("@"))), host, optional(seq(chars(":"), port))
        )
        self.scheme = seq(_ALPHA, _star(chars((48, 57), (65, 90), (97, 122), "+-.")))

    def tail(self) -> Node:
        return seq(optional(seq(chars("?"), self.query)), optional(seq(chars("#"), self.fragment)))

    def absolute(self) -> Node:
        hier = alt(
            seq(literal("//"), self.authority, self.path_abempty),
            self.path_absolute,
            self.path_rootless,
            literal(""),
        )
        return seq(self.scheme, chars(":"), hier, self.tail())

    def relative(self) -> Node:
        part = alt(
            seq(literal("//"), self.authority, self.path_abempty),
            self.path_absolute,
            self.path_noscheme,
            literal(""),
        )
        return seq(part, self.tail())


@cache
def uri() -> Node:
    """RFC 3986 `URI` (absolute, with a scheme)."""
    return _Grammar(False).absolute()


@cache
def uri_reference() -> Node:
    """RFC 3986 `URI-reference`: a URI or a relative reference."""
    grammar = _Grammar(False)
    return alt(grammar.absolute(), grammar.relative())


@cache
def iri() -> Node:
    """RFC 3987 `IRI`."""
    return _Grammar(True).absolute()


@cache
def iri_reference() -> Node:
    """RFC 3987 `IRI-reference`."""
    grammar = _Grammar(True)
    return alt(grammar.absolute(), grammar.relative())


@cache
def uri_template() -> Node:
    """RFC 6570 level-4 URI Template (with erratum 6937: `'` is a literal)."""
    pct = seq(chars("%"), HEX, HEX)
    literals = alt(
        chars(
            (0x21, 0x21),
            (0x23, 0x24),
            (0x26, 0x3B),
            (0x3D, 0x3D),
            (0x3F, 0x5B),
            (0x5D, 0x5D),
            (0x5F, 0x5F),
            (0x61, 0x7A),
            (0x7E, 0x7E),
            *_UCSCHAR,
            *_IPRIVATE,
        ),
        pct,
    )
    varchar = alt(_ALPHA, _DIGIT, chars("_"), pct)
    varname = seq(varchar, _star(seq(optional(chars(".")), varchar)))
    prefix = seq(chars(":"), chars((49, 57)), Repeat(_DIGIT, 0, 3))
    varspec = seq(varname, optional(alt(prefix, chars("*"))))
    expression = seq(
        chars("{"),
        optional(chars("+#./;?&=,!@|")),
        varspec,
        _star(seq(chars(","), varspec)),
        chars("}"),
    )
    return _star(alt(literals, expression))
