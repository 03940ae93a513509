"""Random token walks through a regular schema's `TokenIndex`, for soundness checks."""

from __future__ import annotations

from typing import Any

import numpy as np
from support import load_vocabulary

from fsmcompile.compiler import compile_json_schema
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import DEAD


def gpt2_index(schema: Any, **options: Any) -> TokenIndex:
    """The token index of a regular schema for the real GPT-2 vocabulary (no cache)."""
    index = compile_json_schema(schema, load_vocabulary("gpt2"), cache=False, **options)
    assert isinstance(index, TokenIndex), "the schema should compile to one DFA"
    return index


def walk_to_end(
    index: TokenIndex, seed: int, *, lean_closing: float = 0.0, limit: int = 400
) -> bytes:
    """The bytes of random tokens drawn from each state's mask until EOS.

    With `lean_closing`, that share of the draws picks among allowed tokens starting
    with `}` (or EOS), for languages where a value may go on for ever (trailing zeros).

    Raises:
        AssertionError: a masked token led to DEAD, or no EOS within `limit` tokens.
    """
    vocab = index.vocabulary
    rng = np.random.default_rng(seed)
    eos = vocab.eos_token_ids[0]
    closing = {t for t, data in enumerate(vocab.token_bytes) if data.startswith(b"}")} | {eos}
    state, out = 0, []  # state 0 starts every DFA
    for _ in range(limit):
        allowed = index.allowed_token_ids(state)
        ending = [t for t in allowed.tolist() if t in closing]
        lean = ending and rng.random() < lean_closing
        token = int(rng.choice(ending if lean else allowed))
        if token == eos:
            return vocab.decode_bytes(out)
        state = index.next_state(state, token)
        assert state != DEAD, "a masked token leaves the language"
        out.append(token)
    raise AssertionError(f"the walk did not end within {limit} tokens")
