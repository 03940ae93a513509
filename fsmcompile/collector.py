"""Python's cyclic garbage collector, paused while a compile runs.

A compile keeps hundreds of thousands of containers alive at once (lark's LALR item sets,
IR nodes, walk tables), and the collector's full passes walk them all to free nothing: in
ten Github_ultra and ten Github_medium schemas of JSONSchemaBench, collections took 6.7 s
of the run, pauses of up to 135 ms each; paused during compiles, 0.4 s. Reference
counting still frees everything that holds no cycle at once; the few cycles a compile
leaves wait for the collector's next pass after it (peak memory of the two largest
sample schemas: 475 against 487 MB).

The collector has one switch for the whole process, so overlapping compiles share one
pause, and it is left as the caller had it: a process that disabled it keeps it disabled.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_active = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector disabled (see the module docstring)."""
    global _active, _resume
    with _lock:
        if _active == 0:
            _resume = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _resume:
                gc.enable()
