"""fsmcompile with lazy rows: `Compiler.compile_lazy`, so a DFA spec's first mask costs
one vocabulary walk from the start state instead of the whole index (issue 47's first
step). Grammar specs compile in full, as with the eager adapter."""

from __future__ import annotations

from typing import Any

from . import fsmcompile_engine


class FsmcompileLazyEngine(fsmcompile_engine.FsmcompileEngine):
    name = "fsmcompile-lazy"
    builds_complete_index = False

    def _compile_index(self, kind: str, spec: Any, options: Any) -> Any:
        return self.compiler.compile_lazy(kind, spec, options=options)
