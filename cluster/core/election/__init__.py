"""Election modes behind one interface (`base.Election`); `ELECTIONS` is the registry of mode names.

`blazingmq` (the default, seed 000) and `raft` (seed 003) live here; aeron, fluvio and lease modes
(issue 7) are added by registering another `Election` subclass.
"""

from __future__ import annotations

from cluster.core.election.base import Election
from cluster.core.election.blazingmq import BlazingMQElection
from cluster.core.election.raft import RaftElection

ELECTIONS: dict[str, type[Election]] = {cls.mode: cls for cls in (BlazingMQElection, RaftElection)}
