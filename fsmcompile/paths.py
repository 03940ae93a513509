"""Where fsmcompile keeps files on this machine; read at call time so tests can redirect it."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """`$FSMCOMPILE_CACHE_DIR`, else `$XDG_CACHE_HOME/fsmcompile`, else `~/.cache/fsmcompile`.

    Decoded vocabularies and the disk tier of the index cache both live below it.
    """
    explicit = os.environ.get("FSMCOMPILE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "fsmcompile"
