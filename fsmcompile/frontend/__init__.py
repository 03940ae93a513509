"""Front ends: the user's spec text (regex, JSON Schema, Lark terminals) → the regex IR.

Each front end checks its input and reports errors with positions; none builds automata
of its own beyond the emptiness and difference checks the JSON Schema keywords need.
"""
