"""The ``etcd`` DB plugin: Debian's etcd 3.4, one member per node, tested through its v3 HTTP/JSON gateway.

Registered through the entry point ``chaos_harness.dbs`` (``etcd = "adapters.etcd:plugin"``), exactly as
an adapter in a user's own package would be; the harness does not import it. Before the first run the
controller needs the etcd binary: ``bash scripts/install-etcd.sh`` fetches Debian's ``etcd-server`` into
a cache outside the repository (``adapters.etcd.install``).

Options (``harness dbs etcd``; ``--db-opt NAME=VALUE``):

* ``reads``: ``linearizable`` (etcd's default) or ``serializable``, the deliberately broken variant: every
  read, the final ones included, is answered from the member's own applied state, which a member cut off
  from the majority serves stale; the checkers must find the run invalid;
* ``binary``: an etcd binary on the controller to use instead of the cached Debian one;
* ``heartbeat_interval``, ``election_timeout``: etcd's own flags, in milliseconds (etcd refuses an
  election timeout under five heartbeats; so does :func:`validate`, before anything is deployed).

The adapter is :class:`adapters.etcd.db.EtcdDB`, its client :class:`adapters.etcd.client.EtcdWorkloadClient`;
docs/systems/etcd.md walks through both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.etcd.client import LINEARIZABLE, READ_MODES
from adapters.etcd.db import EtcdDB
from adapters.etcd.install import EtcdInstallError, find_binary
from harness.db.plugin import DBContext, DBPlugin, Option

OPTIONS = (
    Option("reads", "how clients read: linearizable (etcd's default) or serializable (stale reads: a "
           "deliberately broken variant the checkers must catch)", default=LINEARIZABLE, choices=READ_MODES,
           in_name=True),
    Option("binary", "an etcd 3.4 binary on the controller to upload instead of the cached Debian etcd-server "
           "(scripts/install-etcd.sh fetches that one)"),
    Option("heartbeat_interval", "etcd --heartbeat-interval, milliseconds", type="int", default=100,
           minimum=10, maximum=10_000),
    Option("election_timeout", "etcd --election-timeout, milliseconds (at least 5 heartbeats)", type="int",
           default=1000, minimum=50, maximum=50_000),
)


def validate(options: Mapping[str, Any]) -> None:
    """etcd's own rule on its timings, and a binary to upload."""
    if options["election_timeout"] < 5 * options["heartbeat_interval"]:
        raise ValueError(f"election_timeout ({options['election_timeout']} ms) must be at least 5 times "
                         f"heartbeat_interval ({options['heartbeat_interval']} ms), as etcd requires")
    try:
        find_binary(options["binary"])
    except EtcdInstallError as exc:
        raise ValueError(str(exc)) from None


def create(options: Mapping[str, Any], context: DBContext) -> EtcdDB:
    return EtcdDB(find_binary(options["binary"]), reads=options["reads"],
                  heartbeat_ms=options["heartbeat_interval"], election_timeout_ms=options["election_timeout"])


plugin = DBPlugin(
    name="etcd",
    summary="etcd 3.4 (Debian's etcd-server), one member per node; register workload over the v3 JSON gateway",
    create=create,
    options=OPTIONS,
    validate=validate,
    # harness run's default without clock: etcd's clock cannot be moved (EtcdDB.impossible, docs/systems/etcd.md).
    default_nemesis=("partition", "kill", "pause"),
)
