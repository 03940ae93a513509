"""A slow, obvious reference matcher for regex IR over code points (test oracle only).

It computes, for each node and start offset, the set of offsets where a match can end,
so it needs no automaton: the lowering's unit tests can check languages directly, and
the DFA tests can compare the builder against it.
"""

from __future__ import annotations

from fsmcompile.ir.nodes import Alt, And, ByteSet, CharSet, Concat, Diff, Node, Repeat


def ir_matches(node: Node, text: str) -> bool:
    """Whether `text` is in the language of `node` (full match)."""
    memo: dict[tuple[int, int], frozenset[int]] = {}
    n = len(text)

    def ends(item: Node, start: int) -> frozenset[int]:
        key = (id(item), start)
        if key in memo:
            return memo[key]
        memo[key] = frozenset()  # guards left recursion (none in well-formed IR)
        result: set[int] = set()
        if isinstance(item, CharSet):
            if start < n:
                code = ord(text[start])
                if any(lo <= code <= hi for lo, hi in item.ranges):
                    result.add(start + 1)
        elif isinstance(item, Concat):
            current = {start}
            for sub in item.items:
                current = {e for p in current for e in ends(sub, p)}
                if not current:
                    break
            result = current
        elif isinstance(item, Alt):
            for sub in item.items:
                result |= ends(sub, start)
        elif isinstance(item, And):
            sets = [ends(sub, start) for sub in item.items]
            result = set.intersection(*map(set, sets)) if sets else set()
        elif isinstance(item, Diff):
            result = set(ends(item.items[0], start) - ends(item.items[1], start))
        elif isinstance(item, Repeat):
            result = _repeat(item, start, ends)
        elif isinstance(item, ByteSet):
            raise TypeError("the reference matcher works on text, not bytes")
        frozen = frozenset(result)
        memo[key] = frozen
        return frozen

    return n in ends(node, 0)


def _repeat(item: Repeat, start: int, ends) -> set[int]:
    frontier = frozenset({start})
    seen: dict[frozenset[int], int] = {frontier: 0}
    history = [frontier]
    result: set[int] = set(frontier) if item.min == 0 else set()
    k = 0
    while item.max is None or k < item.max:
        k += 1
        frontier = frozenset(e for p in frontier for e in ends(item.item, p))
        if not frontier:
            break
        if frontier in seen:
            # The frontier sequence cycles from here; every later frontier is one of
            # history[first:], so collect those allowed by min/max and stop.
            first = seen[frontier]
            period = k - first
            for j, f in enumerate(history[first:]):
                step = first + j
                # smallest step' >= min with step' ≡ step (mod period), step' >= step
                target = (
                    step if step >= item.min else step + -(-(item.min - step) // period) * period
                )
                if item.max is None or target <= item.max:
                    result |= f
            break
        seen[frontier] = k
        history.append(frontier)
        if k >= item.min:
            result |= frontier
    return result
