"""One schema through fsmcompile (runs in the coverage benchmark's worker): compile it,
walk each instance's tokens through a fresh matcher, and say whether the mask let the
valid ones through and stopped the invalid ones."""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.coverage_corpus import prepare_tests
from bench.measure import percentile

SNIPPET = 300
"""Characters of a failing instance's text kept in the report."""


def walk(matcher: Any, mask: Any, ids: list[int], vocab: Any, mask_ns: list[int]) -> dict[str, Any]:
    """Feed `ids` the way a decoder would; accepted iff every bit is set and EOS at the end.

    The verdict comes from the bitmask `fill_bitmask` writes. `advance` is still called on
    every token, also a masked one (the walk stops right after), and any difference
    between the bit and advance's answer is reported as a disagreement.
    """
    clock = time.perf_counter_ns
    eos = vocab.eos_token_ids[0]
    table = vocab.token_bytes
    offset = 0
    for position, token in enumerate(ids):
        t0 = clock()
        matcher.fill_bitmask(mask)
        mask_ns.append(clock() - t0)
        allowed = bool((int(mask[token >> 5]) >> (token & 31)) & 1)
        advanced = bool(matcher.advance(token))
        piece = table[token] if token < len(table) else b""
        if not allowed or not advanced:
            return {
                "accepted": False,
                "disagreement": allowed != advanced,
                "reason": (
                    f"token {position} {piece.decode('utf-8', 'backslashreplace')!r} "
                    f"at byte {offset} {'masked' if not allowed else 'refused by advance'}"
                ),
            }
        offset += len(piece)
    t0 = clock()
    matcher.fill_bitmask(mask)
    mask_ns.append(clock() - t0)
    eos_bit = bool((int(mask[eos >> 5]) >> (eos & 31)) & 1)
    accepting = bool(matcher.is_accepting())
    eos_ok = bool(matcher.advance(eos))
    disagreement = not (eos_bit == accepting == eos_ok)
    if eos_bit and eos_ok:
        return {"accepted": True, "disagreement": disagreement}
    return {
        "accepted": False,
        "disagreement": disagreement,
        "reason": f"EOS not allowed at the end (byte {offset})",
    }


def check_schema(
    record: dict[str, Any],
    tests: list[dict[str, Any]],
    vocab: Any,
    *,
    options: dict[str, Any],
    timeout_s: float,
    max_states: int,
) -> dict[str, Any]:
    """Compile one schema and walk its instances; never raises for a bad schema."""
    import numpy as np

    from fsmcompile.compiler import compile_spec
    from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
    from fsmcompile.runtime.matcher import matcher_for

    result: dict[str, Any] = {"id": record["id"], "subset": record.get("subset")}
    started = time.perf_counter()
    try:
        compiled = compile_spec(
            "json",
            record["schema"],
            vocab,
            options=options,
            timeout_s=timeout_s,
            max_states=max_states,
            cache=False,
        )
    except UnsupportedFeatureError as exc:
        keywords = sorted({k for _, k in getattr(exc, "features", ())})
        return {**result, "outcome": "unsupported", "keywords": keywords}
    except BudgetExceededError as exc:
        seconds = time.perf_counter() - started
        limit = getattr(exc, "limit", None)
        return {**result, "outcome": "budget", "limit": limit, "seconds_spent": seconds}
    except SpecError as exc:
        return {**result, "outcome": "error", "error": _first_line(exc)}
    except RecursionError:
        return {**result, "outcome": "error", "error": "RecursionError"}
    compile_s = time.perf_counter() - started
    if compile_s > timeout_s:
        return {**result, "outcome": "budget", "limit": "timeout", "seconds_spent": compile_s}
    index = compiled.index
    result.update(
        compile_s=compile_s,
        index=type(index).__name__,
        states=compiled.num_states,
        masks=compiled.num_masks,
        tests=len(tests),
    )
    mask = np.zeros(-(-vocab.size // 32), dtype=np.int32)
    mask_ns: list[int] = []
    over = under = disagreements = tokens = 0
    first_failure: dict[str, Any] | None = None
    for test in tests:
        samples = mask_ns if test["valid"] else []
        verdict = walk(matcher_for(index), mask, test["ids"], vocab, samples)
        tokens += len(test["ids"]) if test["valid"] else 0
        disagreements += verdict["disagreement"]
        wrong = verdict["accepted"] != test["valid"]
        if not wrong:
            continue
        if test["valid"]:
            over += 1
        else:
            under += 1
        if first_failure is None or (under == 1 and not test["valid"]):
            # The first failure, or the first under-constraint, which matters more.
            first_failure = {
                "instance": test["index"],
                "valid": test["valid"],
                "description": test["description"],
                "reason": verdict.get("reason", "accepted"),
                "text": test["text"][:SNIPPET],
            }
    # Again over the same instances: the tables the first walks filled are now warm, as
    # they are for every later request of a schema a server keeps serving.
    warm_ns: list[int] = []
    for test in tests:
        if test["valid"]:
            walk(matcher_for(index), mask, test["ids"], vocab, warm_ns)
    drop_runtime_caches()
    outcome = "under" if under else "over" if over else "passed"
    result.update(
        outcome=outcome,
        over=over,
        under=under,
        disagreements=disagreements,
        tokens=tokens,
        mask_us_avg=statistics.fmean(mask_ns) / 1e3 if mask_ns else None,
        mask_us_p99=percentile(sorted(mask_ns), 99) / 1e3 if mask_ns else None,
        mask_ns=mask_ns,
        mask_us_warm_avg=statistics.fmean(warm_ns) / 1e3 if warm_ns else None,
        mask_us_warm_p99=percentile(sorted(warm_ns), 99) / 1e3 if warm_ns else None,
        mask_warm_ns=warm_ns,
    )
    if first_failure is not None:
        result["first_failure"] = first_failure
    return result


def drop_runtime_caches() -> None:
    """Empty the runtime's per-index table LRUs (up to 32 indexes each), which would
    otherwise keep the last schemas' indexes alive in a long run."""
    from fsmcompile.runtime.matcher import clear_table_memos

    clear_table_memos()


def warm_up(vocab: Any, options: dict[str, Any]) -> None:
    """Compile and walk a flat and a free-form schema, so the worker inherits the imports
    and the first schema's compile time is not charged with them."""
    for schema in ({"type": "object", "properties": {"a": {"type": "string"}}}, {}):
        record = {"id": "warm-up", "schema": schema, "tests": [{"valid": True, "data": {"a": "b"}}]}
        check_schema(
            record,
            prepare_tests(record, vocab, options["whitespace"]),
            vocab,
            options=options,
            timeout_s=30.0,
            max_states=100_000,
        )


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"
