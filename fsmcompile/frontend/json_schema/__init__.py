"""JSON Schema front end: schema → regex IR over the instance text.

`schema_to_ir` is the one entry point; `fsmcompile.compiler.compile_json_schema`
calls it and hands the IR to the automaton builder. See docs/json_schema.md for the
supported keywords, the relaxation table and the unsupported list.
"""

from fsmcompile.frontend.json_schema.document import parse_schema_text
from fsmcompile.frontend.json_schema.lower import schema_to_ir
from fsmcompile.frontend.json_schema.options import JsonOptions, Relaxation, SchemaLowering

__all__ = ["JsonOptions", "Relaxation", "SchemaLowering", "parse_schema_text", "schema_to_ir"]
