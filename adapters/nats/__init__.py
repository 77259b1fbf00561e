"""The ``nats`` DB plugin: Debian's nats-server 2.9 (JetStream), one server per node, a stream per log.

Registered through the entry point ``chaos_harness.dbs`` (``nats = "adapters.nats:plugin"``), as an
adapter in a user's own package would be; the harness does not import it. Before the first run the
controller needs the binary: ``bash scripts/install-nats.sh`` fetches Debian's ``nats-server`` into a
cache outside the repository (``adapters.nats.install``). It runs the ``log`` workload only.

Options (``harness dbs nats``; ``--db-opt NAME=VALUE``):

* ``replicas``: copies of each stream (JetStream's ``num_replicas``), 3 by default; at most the number of
  nodes. With ``replicas=1`` a stream lives on one server and nothing else holds its records;
* ``storage``: ``file`` (the default) or ``memory``: a killed server restarts with its streams' messages
  and their Raft state gone, so a kill of a majority of a stream's replicas (or of its only one) loses
  acknowledged appends. ``replicas=1 storage=memory`` is the deliberately unsafe configuration the
  checkers must catch (docs/systems/nats.md);
* ``binary``: a nats-server on the controller to use instead of the cached Debian one.

The adapter is :class:`adapters.nats.db.NatsDB`, its client :class:`adapters.nats.client.NatsLogClient`;
docs/systems/nats.md walks through both and the runs made with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.nats.client import STORAGES
from adapters.nats.db import NatsDB
from adapters.nats.install import NatsInstallError, find_binary
from harness.db.plugin import DBContext, DBPlugin, Option

OPTIONS = (
    Option("replicas", "copies of each stream (JetStream num_replicas); with storage=memory, 1 is the "
           "deliberately unsafe variant the checkers must catch", type="int", default=3, minimum=1, maximum=5,
           in_name=True),
    Option("storage", "where streams keep their messages: file, or memory (unsafe: a killed server forgets "
           "them)", default="file", choices=STORAGES, in_name=True),
    Option("binary", "a nats-server 2.9 binary on the controller to upload instead of the cached Debian "
           "nats-server (scripts/install-nats.sh fetches that one)"),
)


def validate(options: Mapping[str, Any]) -> None:
    """A binary to upload."""
    try:
        find_binary(options["binary"])
    except NatsInstallError as exc:
        raise ValueError(str(exc)) from None


def create(options: Mapping[str, Any], context: DBContext) -> NatsDB:
    if options["replicas"] > len(context.nodes):
        raise ValueError(f"replicas={options['replicas']} needs at least {options['replicas']} nodes, and the "
                         f"test has {len(context.nodes)}")
    return NatsDB(find_binary(options["binary"]), replicas=options["replicas"], storage=options["storage"])


plugin = DBPlugin(
    name="nats",
    summary="NATS JetStream 2.9 (Debian's nats-server), one server per node; log workload, a stream per log",
    create=create,
    options=OPTIONS,
    validate=validate,
    # harness run's default without clock: a Go program's clock cannot be moved (NatsDB.impossible).
    default_nemesis=("partition", "kill", "pause"),
)
