"""Nemesis: seeded fault generators (pure data) and the fault implementations over a node's shell."""
