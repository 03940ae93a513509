"""The DFA index: a byte DFA and a vocabulary → `TokenIndex`, one mask id per DFA state."""
