"""Election modes behind one interface (`base.Election`); `ELECTIONS` is the registry of mode names.

`blazingmq` (the default, seed 000) and `raft` (seed 003) live here; aeron, fluvio and lease modes
(issue 7) are added by registering another `Election` subclass.
"""

from __future__ import annotations

from cluster.core.election.aeron import AeronElection
from cluster.core.election.base import Election
from cluster.core.election.blazingmq import BlazingMQElection
from cluster.core.election.fluvio import FluvioElection
from cluster.core.election.lease import LeaseElection
from cluster.core.election.raft import RaftElection

ELECTIONS: dict[str, type[Election]] = {cls.mode: cls for cls in (BlazingMQElection, RaftElection, FluvioElection,
                                                                 AeronElection)}

#: Modes whose election needs an external store group (lease, seed 003; docs/election-lease.md). Nodes and
#: the test networks run them, but the simulator and the container adapter do not deploy the store yet, so
#: they stay out of ELECTIONS (the modes the harness composes runs from) until they do.
EXTERNAL_STORE_ELECTIONS: dict[str, type[Election]] = {LeaseElection.mode: LeaseElection}


def election_class(mode: str) -> type[Election]:
    """The Election subclass of `mode` (KeyError for an unknown one; NodeConfig validates modes first)."""
    return ELECTIONS[mode] if mode in ELECTIONS else EXTERNAL_STORE_ELECTIONS[mode]
