"""The UNCOMMITTED read option of seed 002's consumer consistency model, kept so its danger can be shown.

Seed 002 ("Consumer Consistency Model"): "Consumers can choose to receive either COMMITTED or UNCOMMITTED
records. The second method is discouraged as it cannot deterministically survive various failure
scenarios." A read request may carry `"consistency": "committed"` (the default: the linearizable read
index of docs/node-core.md) or `"uncommitted"`: the leader then answers at once from its whole log, the
entries it appended but a replica set has not yet stored included. If that leader fails before they
commit, a new leader never had them: the value a consumer saw is lost, which the linearizability and
durability checkers report (tests/cluster/test_fluvio.py shows both verdicts). The option is valid in
every mode; only a leader answers it.

A poll of a log (`LogQuery`) read this way returns the committed records and then the appends of the
unapplied suffix at the offsets they would take if committed: records past the high watermark (seed 002:
past the HW, up to the LEO). The known bug `read-beyond-hw` answers every poll so, at any node.
"""

from __future__ import annotations

from typing import Any

from cluster.core.log import Log
from cluster.core.statemachine import LogQuery, StateMachine

COMMITTED = "committed"
UNCOMMITTED = "uncommitted"
READ_CONSISTENCY = (COMMITTED, UNCOMMITTED)


def uncommitted_read(log: Log, applied_index: int, state_machine: StateMachine, key: str | LogQuery
                     ) -> tuple[Any, list[int] | None]:
    """The register `key` as the leader's log has it, applied entries and the unapplied suffix alike:
    the value and the LSN of the entry that produced it (a cas in the suffix counts when it would match).
    For a `LogQuery`, the records from its offset up to the end of the leader's log (the LEO)."""
    if type(key) is LogQuery:
        return _uncommitted_poll(log, applied_index, state_machine, key)
    value, lsn = state_machine.read(key)
    for index in range(applied_index + 1, log.last_index + 1):
        entry = log.entry(index)
        if entry.get("key") != key:
            continue
        if entry["f"] == "write":
            value, lsn = entry["value"], entry["lsn"]
        elif entry["f"] == "cas" and entry["value"][0] == value:
            value, lsn = entry["value"][1], entry["lsn"]
    return value, lsn


def _uncommitted_poll(log: Log, applied_index: int, state_machine: StateMachine, query: LogQuery
                      ) -> tuple[list[list[Any]], list[int] | None]:
    records = [[offset, value] for offset, (value, _) in enumerate(state_machine.logs.get(query.key, []))]
    for index in range(applied_index + 1, log.last_index + 1):
        entry = log.entry(index)
        if entry.get("f") == "append" and entry.get("key") == query.key:
            records.append([len(records), entry["value"]])
    start = max(query.start, 0)
    return records[start:start + query.limit], None  # no LSN, as for a committed poll
