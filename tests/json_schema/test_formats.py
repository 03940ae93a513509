"""Formats: exact calendars, network names, URIs; documented subsets and relaxations."""

from __future__ import annotations

import datetime
import ipaddress
import uuid as uuid_module

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.frontend.json_schema.formats import FORMATS

from .conftest import dfa_of

DFAS = {name: dfa_of(factory()) for name, factory in FORMATS.items()}


def ok(name: str, text: str) -> bool:
    return DFAS[name].matches(text.encode())


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 9999), st.integers(1, 12), st.integers(1, 31))
def test_date_is_exact_including_leap_years(year: int, month: int, day: int) -> None:
    text = f"{year:04d}-{month:02d}-{day:02d}"
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    valid = day <= [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    if year > 0:  # cross-check the table against the standard library
        try:
            datetime.date(year, month, day)
            assert valid
        except ValueError:
            assert not valid
    assert ok("date", text) is valid, text


@pytest.mark.parametrize(
    "text, valid",
    [
        ("08:30:06Z", True),
        ("23:59:60Z", True),
        ("23:59:60+00:00", True),
        ("01:29:60+01:30", False),  # valid leap second, refused (documented subset)
        ("22:59:60Z", False),
        ("24:00:00Z", False),
        ("08:30:06.283185z", True),
        ("12:00:00", False),
        ("01:02:03+24:00", False),
    ],
)
def test_time(text: str, valid: bool) -> None:
    assert ok("time", text) is valid


@settings(max_examples=100, deadline=None)
@given(st.ip_addresses(v=4))
def test_ipv4_accepts_every_dotted_quad(address) -> None:
    assert ok("ipv4", str(address))


@settings(max_examples=150, deadline=None)
@given(st.ip_addresses(v=6))
def test_ipv6_accepts_every_canonical_and_exploded_form(address: ipaddress.IPv6Address) -> None:
    assert ok("ipv6", str(address))
    assert ok("ipv6", address.exploded)


@pytest.mark.parametrize("text", ["1.2.3", "256.1.1.1", "01.1.1.1", "1.2.3.4.5"])
def test_ipv4_rejects(text: str) -> None:
    assert not ok("ipv4", text)


@pytest.mark.parametrize("text", [":::", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "::1%eth0"])
def test_ipv6_rejects(text: str) -> None:
    assert not ok("ipv6", text)


@settings(max_examples=50, deadline=None)
@given(st.uuids())
def test_uuid(value: uuid_module.UUID) -> None:
    assert ok("uuid", str(value)) and ok("uuid", str(value).upper())
    assert not ok("uuid", value.hex)


@pytest.mark.parametrize(
    "text, valid",
    [
        ("www.example.com", True),
        ("a--b.com", True),
        ("-host", False),
        ("host-", False),
        ("example.", False),
        ("xn--9n2bp8q.com", False),  # A-labels refused: Punycode is not checked (subset)
        ("a" * 63 + ".com", True),
        ("a" * 64 + ".com", False),
    ],
)
def test_hostname(text: str, valid: bool) -> None:
    assert ok("hostname", text) is valid


def test_hostname_total_length_is_a_documented_relaxation() -> None:
    long_name = ".".join(["a" * 63] * 5)  # 319 characters: invalid, yet accepted
    assert ok("hostname", long_name)


@pytest.mark.parametrize(
    "text, valid",
    [
        ("joe.bloggs@example.com", True),
        ('"joe bloggs"@example.com', True),
        ("joe@[127.0.0.1]", True),
        ("joe@[IPv6:::1]", True),
        ("te..st@example.com", False),
        (".test@example.com", False),
        ("joe@invalid=domain.com", False),
        ("2962", False),
    ],
)
def test_email(text: str, valid: bool) -> None:
    assert ok("email", text) is valid


@pytest.mark.parametrize(
    "name, text, valid",
    [
        ("uri", "http://example.com/a?b=c#d", True),
        ("uri", "urn:isbn:0451450523", True),
        ("uri", "//example.com/relative", False),
        ("uri", "http://[2001:db8::7]/c=GB?objectClass?one", True),
        ("uri", "http:// space.com", False),
        ("uri-reference", "../relative/path", True),
        ("uri-reference", "#fragment", True),
        ("uri-reference", "\\\\WINDOWS\\fileshare", False),
        ("iri", "http://ƒøø.ßår/?∂éœ=πîx#πîüx", True),
        ("uri-template", "http://example.com/dictionary/{term:1}/{term}", True),
        ("uri-template", "http://example.com/dictionary/{term:1}/{term", False),
        ("json-pointer", "/foo/bar~0/~1", True),
        ("json-pointer", "/foo/bar~2", False),
        ("relative-json-pointer", "1/foo", True),
        ("relative-json-pointer", "0#", True),
        ("relative-json-pointer", "-1/foo", False),
        ("duration", "P4DT12H30M5S", True),
        ("duration", "P1W", True),
        ("duration", "PT1D", False),
        ("duration", "P", False),
        ("date-time", "1963-06-19T08:30:06.283185Z", True),
        ("date-time", "1963-06-19 08:30:06Z", False),
    ],
)
def test_other_formats(name: str, text: str, valid: bool) -> None:
    assert ok(name, text) is valid


def test_format_applies_to_strings_only(accepts) -> None:
    check = accepts({"format": "date"})
    assert check("2020-02-29") and not check("2021-02-29")
    assert check(12) and check(None) and check([1]) and check({"a": 1})


def test_unknown_format_is_an_annotation(accepts) -> None:
    check = accepts({"type": "string", "format": "int32"})
    assert check("anything")


def test_regex_format_is_reported() -> None:
    from fsmcompile.errors import UnsupportedFeatureError
    from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

    with pytest.raises(UnsupportedFeatureError, match="regex"):
        schema_to_ir({"type": "string", "format": "regex"}, options=JsonOptions())
    lowering = schema_to_ir(
        {"type": "string", "format": "regex"}, options=JsonOptions(strict=False)
    )
    assert [(p, k) for p, k, _ in lowering.relaxed] == [("", "format")]


def test_lenient_formats_reads_regex_format_as_any_string(accepts) -> None:
    from fsmcompile.errors import UnsupportedFeatureError
    from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

    schema = {"type": "object", "properties": {"p": {"type": "string", "format": "regex"}}}
    with pytest.raises(UnsupportedFeatureError) as raised:
        schema_to_ir(schema, options=JsonOptions())
    assert (raised.value.pointer, raised.value.keyword) == ("/properties/p", "format")
    lowering = schema_to_ir(schema, options=JsonOptions(lenient_formats=True))
    assert [(p, k) for p, k, _ in lowering.relaxed] == [("/properties/p", "format")]
    assert "lenient_formats" in lowering.relaxed[0][2]
    check = accepts(schema, lenient_formats=True)
    assert check({"p": "^a+$"}) and check({"p": "("}) and not check({"p": 1})
    # Only the formats: other unenforceable keywords still raise in strict mode.
    with pytest.raises(UnsupportedFeatureError, match="multipleOf"):
        schema_to_ir({"type": "number", "multipleOf": 3}, options=JsonOptions(lenient_formats=True))


def test_lenient_formats_flows_through_the_public_compile(gpt2) -> None:
    from fsmcompile import compile_json_schema
    from fsmcompile.errors import UnsupportedFeatureError

    schema = {"type": "string", "format": "regex"}
    with pytest.raises(UnsupportedFeatureError):
        compile_json_schema(schema, gpt2, cache=False)
    assert compile_json_schema(schema, gpt2, cache=False, lenient_formats=True) is not None
