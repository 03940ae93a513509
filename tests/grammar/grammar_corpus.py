"""Hand-written texts for the bundled grammars: ones lark parses and near misses it rejects."""

from __future__ import annotations

VALID: dict[str, list[str]] = {
    "json": [
        '{"name": "Ada", "age": 36, "tags": ["math", "engines"], "alive": false}',
        "[1, -2.5, 3e10, 0.1E-3, -0, 1E+2]",
        '"escapes: \\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00"',
        '{"unicode": "héllo wörld ✓ 日本語 🎉", "empty": "", "nested": {"a": {"b": [[], {}]}}}',
        ' \n\t{ "spaced" :\r\n [ true , null ] }\n',
        "null",
        "0",
        '{\n  "id": 12345,\n  "items": [\n    {"sku": "A-1", "qty": 2},\n'
        '    {"sku": "B-2", "qty": 10}\n  ]\n}',
    ],
    "arithmetic": [
        "1 + 2 * 3",
        "-(a + b) ** 2 / c % 7",
        "max(a, 2 * b, min(c, .5e-3))",
        "f()",
        "2 ** -x ** 3",
        "((((1))))",
        "x1+y_2-3.",
        "1e5*2E+3",
    ],
    "sql_select": [
        "SELECT * FROM users",
        "select id, name from users where age >= 18 and name like 'A%';",
        "SELECT DISTINCT u.name, COUNT(*) AS n FROM users u LEFT OUTER JOIN orders o "
        "ON o.user_id = u.id WHERE u.age BETWEEN 18 AND 65 GROUP BY u.name "
        "HAVING COUNT(*) > 2 ORDER BY n DESC, u.name LIMIT 10 OFFSET 20;",
        "SELECT a FROM t WHERE b IS NOT NULL AND c NOT IN (1, 2, 3) -- trailing comment",
        "SELECT CASE WHEN x < 0 THEN 'neg' ELSE 'pos' END AS sign FROM t",
        'SELECT "weird col" FROM "my table" WHERE x <> 1 OR y != 2',
        "SELECT t.* FROM (SELECT 1 AS one FROM dual) t",
        "SELECT select FROM from WHERE where = 1",
        "SELECT 'it''s' || name FROM people WHERE id IN (SELECT pid FROM pets)",
    ],
    "tool_call": [
        'get_weather(city="Paris", days=3)',
        'search(query=\'lark grammars\', filters={"lang": ["en", "fr"]}, exact=false)',
        'files.read(path="/tmp/x.txt")\nfiles.write(path="/tmp/y.txt", text="hi\\n")',
        "noop()",
        "a(x=1); b(y=-2.5e3, z=None); c(flag=True,)",
        '\nsend(to=["a@b.c", "d@e.f"], body={"k": {"n": [1, 2, {"deep": null}]}})\n',
    ],
}

INVALID: dict[str, list[str]] = {
    "json": [
        '{"a": 1,}',
        "[1 2]",
        "01",
        "{'single': 1}",
        '"unterminated',
        '{"a" 1}',
        "+1",
        '"tab\tinside"',
        "[1.]",
        "tru",
        "",
    ],
    "arithmetic": ["1 +", "* 2", "f(,)", "(1", "1 2", "a..b", "2 ***3", ""],
    "sql_select": [
        "SELECT FROM users",
        "SELECT * users",
        "SELECT a AS FROM t",
        "SELECT a FROM t WHERE",
        "SELECT a FROM t LIMIT x",
        "SELECT 'unterminated FROM t",
        "SELECT a, FROM t",
        "SELECT a FROM t;;",
    ],
    "tool_call": [
        "get_weather(city=Paris)",
        "f(x=1 y=2)",
        "f(1)",
        'f(x="a"',
        "f(x=[1,,2])",
        "f(x=1) g(y=2)",
        "",
    ],
}

# Grammars whose lexing is where lark's semantics differ from "longest match": first
# alternative wins, keywords renamed by UnlessCallback, backtracking numbers, priorities,
# terminals that can only be separated by an ignored one, lazy common.lark terminals.
TRICKY = {
    "keywords_and_names": r"""
        start: stmt+
        stmt: "let" NAME "=" expr ";" | "if" expr "then" stmt | expr ";"
        ?expr: expr "<" term | expr "<=" term | expr "<>" term | expr "+" term | term
        ?term: NAME | NUMBER | "(" expr ")"
        NAME: /[a-z_][a-z0-9_]*/
        %import common.NUMBER
        %import common.WS
        %ignore WS
    """,
    "number_then_name": r"""
        start: (NUMBER | NAME | "." | "+")+
        NAME: /[a-z]+/
        %import common.NUMBER
    """,
    "first_alternative_wins": r"""
        start: (A | B)+
        A: /a|ab/
        B: /b/
    """,
    "priorities": r"""
        start: (A | B | C)+
        A.2: /a+/
        B: "aa"
        C: "c"
    """,
    "case_insensitive_keywords": r"""
        start: (SELECT NAME)+
        SELECT: "select"i
        NAME: /[a-z]+/
        %import common.WS
        %ignore WS
    """,
    "common_strings_and_comments": r"""
        start: (ESCAPED_STRING | C_COMMENT | NAME | SH_COMMENT)*
        NAME: /[a-z\\\/*"]+/
        %import common.ESCAPED_STRING
        %import common.C_COMMENT
        %import common.SH_COMMENT
        %import common.WS
        %ignore WS
    """,
    "adjacent_words": r"""
        start: item+
        item: WORD | WORD "!"
        WORD: /[a-z]+/
    """,
    "keyword_prefixes": 'start: ("in" | "inner" | "i" | "n")+\n',
}
