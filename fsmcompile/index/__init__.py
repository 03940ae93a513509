"""The index stage: a byte DFA (`dfa/`) or an LALR grammar (`cfg/`) and a vocabulary → the
token-level tables in `fsmcompile.tables` that the artifact stores and the runtime reads."""
