"""Regex front end: a Python-`re` or ECMA-262 pattern → the regex IR."""

from fsmcompile.frontend.regex.parser import MAX_GROUP_DEPTH, parse_regex

__all__ = ["MAX_GROUP_DEPTH", "parse_regex"]
