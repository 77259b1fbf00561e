"""Election modes behind one interface (`base.Election`); `ELECTIONS` is the registry of mode names.

Five modes, one per seed's algorithm: `blazingmq` (the default, seed 000), `raft` (seed 003), `aeron`
(seed 001), `fluvio` (seed 002: a controller process, the SC, names the leader) and `lease` (seed 003's
election through an external linearizable store, a separate `raft` group). `ELECTIONS` is what the
harness composes runs from (`harness run --mode`, suites, the simulator's matrix): every mode in it is
deployable, the two that need processes besides the data nodes included (docs/db-adapter.md).
"""

from __future__ import annotations

from cluster.core.election.aeron import AeronElection
from cluster.core.election.base import Election
from cluster.core.election.blazingmq import BlazingMQElection
from cluster.core.election.fluvio import FluvioElection
from cluster.core.election.lease import LeaseElection
from cluster.core.election.raft import RaftElection

ELECTIONS: dict[str, type[Election]] = {
    cls.mode: cls for cls in (BlazingMQElection, RaftElection, FluvioElection, AeronElection, LeaseElection)
}

#: Modes whose election needs an external store group (`lease`): a driver must deploy and link the store
#: (`NodeConfig.store`, `--store`). A subset of ELECTIONS, kept as a name for drivers that ask.
EXTERNAL_STORE_ELECTIONS: dict[str, type[Election]] = {LeaseElection.mode: LeaseElection}


def election_class(mode: str) -> type[Election]:
    """The Election subclass of `mode` (KeyError for an unknown one; NodeConfig validates modes first)."""
    return ELECTIONS[mode]
