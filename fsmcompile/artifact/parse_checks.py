"""The LALR table invariants the C parser's loops rely on, beyond ids in range.

The parser (`native/parser_*.c`) keeps stacks as paths through the table: a shift or a
goto pushes the state it names, a reduce by rule r pops `rule_len[r]` states and pushes
`goto[exposed, rule_lhs[r]]`. Two things a table built by lark guarantees and an altered
one need not:

- a reduce never pops past the bottom of the stack. Every stack is a path from the start
  state, so it is at least as deep as the shortest such path to its top state: a reduce by
  r in state s is safe when `rule_len[r] <= depth(s)` (breadth-first, O(P x symbols));
- reductions on one lookahead end. The parser reduces until it shifts or fails; a table
  whose reductions on some terminal lead back to a state that reduces on it again would
  loop forever (or grow the stack forever, with empty rules). The check over-approximates
  the state a reduce exposes by every state `rule_len[r]` edges before s, and refuses a
  table where some lookahead's reductions can form a cycle: sound (no real loop passes)
  and, for lark's tables, where a lookahead's reductions climb the grammar towards its
  start, never met.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.sorted_keys import concatenated_ranges

if TYPE_CHECKING:
    from fsmcompile.artifact.validate import Body

_UNREACHED = np.iinfo(np.int64).max


def check_parse_table(body: Body, columns: dict[str, npt.NDArray[Any]], start: int) -> None:
    """Refuse a table whose reductions could pop past the stack or never end."""
    action = columns["action"].astype(np.int64)
    goto = columns["goto"].astype(np.int64)
    rule_lhs = columns["rule_lhs"].astype(np.int64)
    rule_len = columns["rule_len"].astype(np.int64)
    states = action.shape[0]
    src_shift, col = np.nonzero(action > 0)
    src_goto, nonterminal = np.nonzero(goto >= 0)
    src = np.concatenate([src_shift, src_goto])
    dst = np.concatenate([action[src_shift, col] - 1, goto[src_goto, nonterminal]])
    symbol = np.concatenate([col, action.shape[1] + nonterminal])
    _check_one_symbol_per_state(body, src, dst, symbol, action.shape[1])
    depth = _depths(src, dst, states, start)
    red_state, red_symbol = np.nonzero(action < 0)
    red_rule = -action[red_state, red_symbol] - 1
    short = np.flatnonzero(rule_len[red_rule] > depth[red_state])
    if short.shape[0]:
        at = int(short[0])
        s, t = int(red_state[at]), int(red_symbol[at])
        raise body.fail(
            f"/table/action/{s}/{t}",
            "a reduce pops past the bottom of every stack reaching its state",
            expected=f"rule_len <= {depth[s]}",
            found=f"rule {red_rule[at]} of length {rule_len[red_rule[at]]}",
        )
    _check_reductions_end(body, action, goto, rule_lhs, rule_len, src, dst)


def _check_one_symbol_per_state(
    body: Body,
    src: npt.NDArray[np.int64],
    dst: npt.NDArray[np.int64],
    symbol: npt.NDArray[np.int64],
    num_terminals: int,
) -> None:
    """Every edge into a state reads the same symbol (its accessing symbol, as in every
    LR automaton). A shift redirected to a state of another symbol would also hand that
    terminal the lexer context of the wrong state, multiplying the readings a token's
    walk follows."""
    width = int(symbol.max(initial=0)) + 1
    pairs = np.unique(dst * width + symbol)
    targets = pairs // width
    clash = np.flatnonzero(targets[1:] == targets[:-1])
    if clash.shape[0]:
        state = int(targets[clash[0]])
        at = int(np.flatnonzero(dst == state)[-1])
        part = "action" if symbol[at] < num_terminals else "goto"
        column = symbol[at] if part == "action" else symbol[at] - num_terminals
        raise body.fail(
            f"/table/{part}/{int(src[at])}/{int(column)}",
            "edges into one parser state read different symbols",
            expected="one accessing symbol per state",
            found=f"state {state} entered by several",
        )


def _depths(
    src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], states: int, start: int
) -> npt.NDArray[np.int64]:
    """int64[P]: the fewest edges from `start` to each state (`_UNREACHED` if none)."""
    order = np.argsort(src, kind="stable")
    dst_sorted = dst[order]
    bounds = np.searchsorted(src[order], np.arange(states + 1))
    depth = np.full(states, _UNREACHED, dtype=np.int64)
    depth[start] = 0
    frontier = np.array([start], dtype=np.int64)
    level = 0
    while frontier.shape[0]:
        level += 1
        lo, hi = bounds[frontier], bounds[frontier + 1]
        reached = np.concatenate([dst_sorted[a:b] for a, b in zip(lo, hi, strict=True)])
        reached = np.unique(reached)
        frontier = reached[depth[reached] == _UNREACHED]
        depth[frontier] = level
    return depth


def _check_reductions_end(
    body: Body,
    action: npt.NDArray[np.int64],
    goto: npt.NDArray[np.int64],
    rule_lhs: npt.NDArray[np.int64],
    rule_len: npt.NDArray[np.int64],
    src: npt.NDArray[np.int64],
    dst: npt.NDArray[np.int64],
) -> None:
    """Refuse a table where reductions on some lookahead can run forever.

    Reductions on lookahead t from a top state s, before they pop s, depend on s alone:
    they stop (a shift or an error), or pop s and k more states with a goto on A pending
    (`RETURN(k, A)`; an empty rule pushes above s and that state's outcome decides), or
    never end (`_outcomes`). A run that never ends and never stops either never pops its
    top (an outcome that loops) or keeps replacing the top above one fixed state b,
    each outcome `RETURN(0, A)` making goto[b, A] the new top (a cycle over the table's
    edges b -> s, `_replacement_cycle`): every other step lowers the stack.
    """
    pops, lhs = _outcomes(body, action, goto, rule_lhs, rule_len)
    _replacement_cycle(body, pops, lhs, goto, src, dst)


_STOP = -1


def _outcomes(
    body: Body,
    action: npt.NDArray[np.int64],
    goto: npt.NDArray[np.int64],
    rule_lhs: npt.NDArray[np.int64],
    rule_len: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(pops, lhs), int64[P, T + 1] each: per (top state, lookahead), the states popped
    below the top (`_STOP` where reductions stop first) and the nonterminal then reduced
    to. O(P x T) numpy, plus a walk per empty-rule reduce (lark's tables have few)."""
    reduce = action < 0
    rule = np.where(reduce, -action - 1, 0)
    pops = np.where(reduce, rule_len[rule] - 1, _STOP)
    lhs = np.where(reduce, rule_lhs[rule], -1)
    for s, t in zip(*np.nonzero((pops == -1) & reduce), strict=True):
        _resolve_empty(body, int(s), int(t), pops, lhs, goto)
    return pops, lhs


def _resolve_empty(
    body: Body,
    state: int,
    t: int,
    pops: npt.NDArray[np.int64],
    lhs: npt.NDArray[np.int64],
    goto: npt.NDArray[np.int64],
) -> None:
    """The outcome of an empty-rule reduce at (state, t), into pops / lhs: each frame is
    a state whose reduce pushed above it, and the top its reductions have reached."""
    unresolved = -2  # pops of an empty-rule reduce not yet followed
    pops[state, t] = unresolved
    frames: list[tuple[int, int, set[int]]] = []
    below, top = state, int(goto[state, lhs[state, t]])
    seen: set[int] = set()
    while True:
        if top < 0:  # the goto is undefined: the parser stops
            result = (_STOP, -1)
        elif pops[top, t] == unresolved:
            if top in (f[0] for f in frames) or top == below:
                raise _loop(body, state, t)
            frames.append((below, top, seen))
            below, top, seen = top, int(goto[top, lhs[top, t]]), set()
            continue
        elif pops[top, t] == -1 and lhs[top, t] >= 0:  # an empty rule, not followed yet
            pops[top, t] = unresolved
            frames.append((below, top, seen))
            below, top, seen = top, int(goto[top, lhs[top, t]]), set()
            continue
        else:
            result = (int(pops[top, t]), int(lhs[top, t]))
        # `result` is what happens above `below` with `top` on it.
        if result[0] == 0:  # the top is replaced: goto from `below`
            if top in seen:
                raise _loop(body, below, t)
            seen.add(top)
            top = int(goto[below, result[1]])
            continue
        done = (result[0] - 1, result[1]) if result[0] > 0 else (_STOP, -1)
        pops[below, t], lhs[below, t] = done
        if not frames:
            return
        below, top, seen = frames.pop()
        # `top` was the frame's top state: its outcome is now known; go round again.


def _loop(body: Body, state: int, t: int) -> Exception:
    return body.fail(
        f"/table/action/{state}/{t}",
        "reductions on one lookahead can run forever from this state",
        expected="reductions that end in a shift, an error or a pop",
        found="a cycle of reductions",
    )


def _replacement_cycle(
    body: Body,
    pops: npt.NDArray[np.int64],
    lhs: npt.NDArray[np.int64],
    goto: npt.NDArray[np.int64],
    src: npt.NDArray[np.int64],
    dst: npt.NDArray[np.int64],
) -> None:
    """Refuse a cycle of `RETURN(0, A)` replacements over the edges b -> s on one
    lookahead (each maps b -> s to b -> goto[b, A]).

    First without the lookahead (one link per edge and distinct A of its top, peeled in
    O(E + links)): lark's tables have no cycle even then. Only the edges left on or
    after a cycle are checked per lookahead, where the replacements are a map from
    edge to edge and pointer doubling finds its cycles in O(log) numpy steps."""
    states, symbols = pops.shape
    keys = np.unique(src * states + dst)
    below, top = keys // states, keys % states
    replaced_state, replaced_on = np.nonzero(pops == 0)
    if not replaced_state.shape[0]:
        return
    nonterminals = int(goto.shape[1])
    pairs = np.unique(replaced_state * nonterminals + lhs[replaced_state, replaced_on])
    pair_state, pair_lhs = pairs // nonterminals, pairs % nonterminals
    by_top = np.argsort(top, kind="stable")
    bounds = np.searchsorted(top[by_top], np.arange(states + 1))
    counts = bounds[pair_state + 1] - bounds[pair_state]
    link_pair = np.repeat(np.arange(pairs.shape[0]), counts)
    link_edge = by_top[concatenated_ranges(counts) + bounds[pair_state][link_pair]]
    target = goto[below[link_edge], pair_lhs[link_pair]]
    keep = target >= 0
    link_edge, target = link_edge[keep], target[keep]
    link_dst = np.searchsorted(keys, below[link_edge] * states + target)
    left = _peel(keys.shape[0], link_edge, link_dst)
    if not left.any():
        return
    edge_ids, lookaheads = np.nonzero((pops[top] == 0) & left[:, None])
    nodes = edge_ids.shape[0]
    if not nodes:
        return
    target = goto[below[edge_ids], lhs[top[edge_ids], lookaheads]]
    target_key = below[edge_ids] * states + np.maximum(target, 0)
    at = np.minimum(np.searchsorted(keys, target_key), keys.shape[0] - 1)
    node_keys = edge_ids * symbols + lookaheads
    wanted = at * symbols + lookaheads
    hit = np.minimum(np.searchsorted(node_keys, wanted), nodes - 1)
    linked = (target >= 0) & (keys[at] == target_key) & (node_keys[hit] == wanted)
    nxt = np.append(np.where(linked, hit, nodes), nodes)  # node `nodes`: stopped
    for _ in range(nodes.bit_length() + 1):
        nxt = nxt[nxt]
    cyclic = np.flatnonzero(nxt[:nodes] != nodes)
    if cyclic.shape[0]:
        edge, t = int(edge_ids[cyclic[0]]), int(lookaheads[cyclic[0]])
        raise _loop(body, int(top[edge]), t)


def _peel(
    count: int, link_src: npt.NDArray[np.int64], link_dst: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """bool[count]: the nodes on a cycle of the links or reachable from one (Kahn's
    peeling of nodes without incoming links; O(nodes + links))."""
    order = np.argsort(link_src, kind="stable")
    starts = np.searchsorted(link_src[order], np.arange(count + 1)).tolist()
    targets = link_dst[order].tolist()
    degree = np.bincount(link_dst, minlength=count).tolist()
    ready = [n for n in range(count) if degree[n] == 0]
    while ready:
        n = ready.pop()
        for m in targets[starts[n] : starts[n + 1]]:
            degree[m] -= 1
            if degree[m] == 0:
                ready.append(m)
    return np.asarray(degree, dtype=np.int64) > 0
