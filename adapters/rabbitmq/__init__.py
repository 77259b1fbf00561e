"""The ``rabbitmq`` DB plugin: Debian's RabbitMQ 3.10 on Erlang 25, clustered, the ``queue`` workload on quorum queues.

Registered through the entry point ``chaos_harness.dbs`` (``rabbitmq = "adapters.rabbitmq:plugin"``), as an
adapter in a user's own package would be; the harness does not import it. Before the first run the
controller needs RabbitMQ: ``python -m adapters.rabbitmq`` fetches Debian's ``rabbitmq-server`` and the
Erlang packages it runs on into a cache outside the repository (``adapters.rabbitmq.install``).

Options (``harness dbs rabbitmq``; ``--db-opt NAME=VALUE``); the defaults are the safe configuration
(quorum queues, publisher confirms), the others known to lose messages:

* ``queue_type``: ``quorum`` (a Raft group per queue over every node) or ``classic`` (a queue on the node
  that declared it, unreplicated: its messages are unavailable while that node is down or cut off, and
  lost with its disk);
* ``confirms``: ``on`` (a put is ``ok`` once the broker confirmed it) or ``off`` (a put is ``ok`` once the
  message is written to the socket, as a producer without publisher confirms believes).

The adapter is :class:`adapters.rabbitmq.db.RabbitDB`, its client
:class:`adapters.rabbitmq.client.RabbitQueueClient`; docs/systems/rabbitmq.md walks through both and the
runs made with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.rabbitmq.client import QUEUE_TYPES
from adapters.rabbitmq.db import RabbitDB
from adapters.rabbitmq.install import RabbitInstallError, find_bundle
from harness.db.plugin import DBContext, DBPlugin, Option

MIN_NODES = 3
OPTIONS = (
    Option("queue_type", "quorum (Raft-replicated, safe) or classic (one node's, unreplicated: unsafe)",
           default="quorum", choices=QUEUE_TYPES),
    Option("confirms", "on: a put waits for the publisher confirm; off: ok once sent (unsafe)", default="on",
           choices=("on", "off")),
)


def validate(options: Mapping[str, Any]) -> None:
    """RabbitMQ must be on the controller."""
    try:
        find_bundle()
    except RabbitInstallError as exc:
        raise ValueError(str(exc)) from None


def create(options: Mapping[str, Any], context: DBContext) -> RabbitDB:
    if len(context.nodes) < MIN_NODES:
        raise ValueError(f"rabbitmq needs at least {MIN_NODES} nodes (a quorum queue's majority must survive "
                         f"a node's loss), not {len(context.nodes)}")
    return RabbitDB(find_bundle(), queue_type=options["queue_type"], confirms=options["confirms"] == "on")


def name_parts(options: Mapping[str, Any]) -> list[str]:
    """What names the test: ``rabbitmq-classic-noconfirms-queue-partition`` (nothing for the defaults)."""
    parts = []
    if options["queue_type"] != "quorum":
        parts.append(options["queue_type"])
    if options["confirms"] != "on":
        parts.append("noconfirms")
    return parts


plugin = DBPlugin(
    name="rabbitmq",
    summary="RabbitMQ 3.10 (Debian's rabbitmq-server on Erlang 25), one broker per node clustered; queue "
            "workload on quorum queues with publisher confirms",
    create=create,
    options=OPTIONS,
    validate=validate,
    name_parts=name_parts,
    default_nemesis=("partition", "kill", "pause"),
)
