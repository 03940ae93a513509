"""Names for the ids that flow between stages, so signatures say what an int means."""

from __future__ import annotations

StateId = int
"""A state of a byte DFA (0 is the start state; -1 is the dead state)."""

TokenId = int
"""A row of the logits: an id of the tokenizer, or a padded row past it."""

MaskId = int
"""A row of a token index's mask table."""

DEAD: StateId = -1
"""The one dead state: no continuation from it ends in the language."""
