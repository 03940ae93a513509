"""Timing, memory and machine helpers shared by the side-by-side benchmark (`python -m bench`).

Everything here is engine-neutral: the parent process uses it to describe the machine and
summarize samples, the worker processes use it to read their own RSS. No engine is
imported here, so importing this module never charges one engine's import to another.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import resource
import statistics
from collections.abc import Sequence
from typing import Any

PACKAGES = ("fsmcompile", "xgrammar", "outlines_core", "llguidance", "torch", "numpy", "tokenizers")


def rss_bytes() -> int:
    """Current resident set size of this process, from /proc/self/statm (0 where absent).

    Current, not peak: the growth across one compile is `after - before`. Allocators keep
    freed pages, so the figure is an upper bound on what the artifact itself holds.
    """
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            resident_pages = int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """Peak resident set size of this process image so far.

    VmHWM from /proc/self/status where there is one: unlike ru_maxrss, which a child
    inherits from the parent it was forked from, it starts afresh at exec.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, linear interpolation."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def summarize(values: Sequence[float]) -> dict[str, float] | None:
    """count, avg, p50, p90, p99 and max of a sample; None for an empty one."""
    if not values:
        return None
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "avg": statistics.fmean(ordered),
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "max": ordered[-1],
    }


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_version(name: str) -> str | None:
    """The installed distribution version of `name`, or None when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """Where and when the numbers were taken: CPU, cores, load, Python, package versions."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {name: package_version(name) for name in PACKAGES},
    }


def describe_machine(info: dict[str, Any]) -> str:
    """One paragraph for stdout and the Markdown report."""
    versions = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v is not None)
    return (
        f"{info['date']} on {info['cpu_model']} ({info['cpu_count']} cores, load average "
        f"{info['load_average_1m']:.1f} at start: the machine was shared with other work), "
        f"{info['platform']}, Python {info['python']}; {versions}"
    )
