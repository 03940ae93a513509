"""Engine adapters for the side-by-side benchmark, one module per engine.

Each adapter implements `base.Engine` (`prepare_vocab`, `compile`, `start`; the timed walk
is shared). Adapters are imported lazily by name, inside the worker process that runs
them, so no engine's import cost or global state leaks into another's measurements.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .base import Engine

#: name → (adapter module, the import name of the engine's package)
ENGINES: dict[str, tuple[str, str]] = {
    "fsmcompile": ("bench.engines.fsmcompile_engine", "fsmcompile"),
    "fsmcompile-lazy": ("bench.engines.fsmcompile_lazy_engine", "fsmcompile"),
    "xgrammar": ("bench.engines.xgrammar_engine", "xgrammar"),
    "outlines": ("bench.engines.outlines_engine", "outlines_core"),
    "llguidance": ("bench.engines.llguidance_engine", "llguidance"),
}


def is_installed(name: str) -> bool:
    """Whether the engine's package can be imported here (without importing it)."""
    return importlib.util.find_spec(ENGINES[name][1]) is not None


def load_engine(name: str, **options: Any) -> Engine:
    """An adapter instance; `options` go to adapters that take them (fsmcompile: timeout_s)."""
    module = importlib.import_module(ENGINES[name][0])
    cls = next(
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, Engine) and obj is not Engine
    )
    try:
        engine: Engine = cls(**options)
    except TypeError:
        engine = cls()
    return engine
