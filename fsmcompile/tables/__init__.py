"""What a compiled index is, as data: the tables both the compiler writes and the runtime
reads (byte DFA, token index, grammar tables, bit layout), with no compile code in them."""
