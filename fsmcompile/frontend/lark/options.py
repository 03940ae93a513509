"""Options of the Lark path: which rule starts, how strict lark's analysis is, where
`%import` may read."""

from __future__ import annotations

from dataclasses import dataclass

from fsmcompile.errors import SpecError
from fsmcompile.frontend.lark.imports import checked_import_paths


@dataclass(frozen=True, slots=True)
class LarkOptions:
    """How a Lark grammar is read.

    Attributes:
        start: the start rule.
        strict: lark's strict mode: shift/reduce conflicts and terminal collisions become
            errors instead of being resolved the way lark resolves them.
        import_paths: folders `%import` may read grammars from, besides the bundled
            `fsmcompile.grammars` and lark's own (`imports.py`). They are part of the
            cache key, so give them absolute: the key must not depend on the working
            directory.

    Raises:
        SpecError: `start` is not a rule name, or `import_paths` is not a list of
            existing folders.
    """

    start: str = "start"
    strict: bool = False
    import_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.start, str):
            raise SpecError(f"lark option start: expected a rule name, found {self.start!r}")
        # Checked here, once: a list given for the tuple is kept as a tuple (hashable).
        object.__setattr__(self, "import_paths", checked_import_paths(self.import_paths))
        object.__setattr__(self, "strict", bool(self.strict))
