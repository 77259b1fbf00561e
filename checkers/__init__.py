"""Pure checkers over a history (and the nodes' journals): single leader per term, LSN monotonicity,
committed-data durability and linearizability. No I/O beyond reading what they are given."""
