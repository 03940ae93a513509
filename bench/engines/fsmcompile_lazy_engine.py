"""fsmcompile with lazy indexes: `Compiler.compile_lazy`, so a spec's first mask costs its
automaton or grammar and the walks of the states the first steps visit, not the whole
index. A DFA spec's rows are made per state (`LazyTokenIndex`); a grammar spec's token
groups are walked per lexer state (`LazyGrammarIndex`)."""

from __future__ import annotations

from typing import Any

from . import fsmcompile_engine


class FsmcompileLazyEngine(fsmcompile_engine.FsmcompileEngine):
    name = "fsmcompile-lazy"
    builds_complete_index = False

    def _compile_index(self, kind: str, spec: Any, options: Any) -> Any:
        return self.compiler.compile_lazy(kind, spec, options=options)
