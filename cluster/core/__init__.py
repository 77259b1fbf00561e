"""The sans-IO node core of `cluster`: election, LSN-ordered replication, storage records and the
replicated state machines, fed ticks, peer messages and client requests with time and randomness passed
in (ARCHITECTURE.md "The seams", STYLE.md 1-2).

Drivers use `cluster.core.member.Node` and `Ready`; the contract is `docs/node-core.md`.
"""
