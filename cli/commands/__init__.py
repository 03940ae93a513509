"""One module per `fsmcompile` sub-command; each exposes `add_parser` and `run`."""
