"""The ``redis`` DB plugin: Debian's Redis 7.0 with Sentinel, a master and replicas, a Sentinel per node.

Registered through the entry point ``chaos_harness.dbs`` (``redis = "adapters.redis:plugin"``), as an
adapter in a user's own package would be; the harness does not import it. Before the first run the
controller needs Redis: ``python -m adapters.redis`` fetches Debian's ``redis-server`` and
``redis-sentinel`` into a cache outside the repository (``adapters.redis.install``). It runs the
``register`` workload only.

Options (``harness dbs redis``; ``--db-opt NAME=VALUE``), Redis's documented mitigation of lost writes,
all off by default (the default Sentinel setup, which loses acknowledged writes under partitions):

* ``min-replicas``: ``min-replicas-to-write`` on every server: a master refuses writes unless that many
  replicas acknowledged within ``max-lag`` seconds;
* ``max-lag``: ``min-replicas-max-lag``, seconds (Redis's default 10); only with ``min-replicas``;
* ``wait``: after each write and cas the client sends ``WAIT N``; fewer replicas acknowledging in time
  makes the write ``info``.

The adapter is :class:`adapters.redis.db.RedisDB`, its client
:class:`adapters.redis.client.RedisRegisterClient`; docs/systems/redis.md walks through both and the runs
made with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.redis.db import RedisDB
from adapters.redis.install import RedisInstallError, find_bundle
from harness.db.plugin import DBContext, DBPlugin, Option

MAX_REPLICAS = 8
OPTIONS = (
    Option("min-replicas", "min-replicas-to-write: a master refuses writes without this many replicas that "
           "acknowledged within max-lag seconds (0: off; at most nodes - 1)", type="int", default=0, minimum=0,
           maximum=MAX_REPLICAS),
    Option("max-lag", "min-replicas-max-lag, seconds; only with min-replicas", type="int", default=10, minimum=1,
           maximum=60),
    Option("wait", "WAIT for this many replicas after each write and cas; fewer in time: info (0: off; at "
           "most nodes - 1)", type="int", default=0, minimum=0, maximum=MAX_REPLICAS),
)


def validate(options: Mapping[str, Any]) -> None:
    """``max-lag`` only with ``min-replicas``, and Redis to upload."""
    if options["max-lag"] != 10 and not options["min-replicas"]:
        raise ValueError("option max-lag: only means something with min-replicas=N (N >= 1)")
    try:
        find_bundle()
    except RedisInstallError as exc:
        raise ValueError(str(exc)) from None


def create(options: Mapping[str, Any], context: DBContext) -> RedisDB:
    replicas = len(context.nodes) - 1
    for name in ("min-replicas", "wait"):
        if options[name] > replicas:
            raise ValueError(f"option {name}: {options[name]} replicas, and {len(context.nodes)} nodes have only "
                             f"{replicas}")
    return RedisDB(find_bundle(), min_replicas=options["min-replicas"], max_lag=options["max-lag"],
                   wait=options["wait"])


def name_parts(options: Mapping[str, Any]) -> list[str]:
    """What names the test: ``redis-min2-wait2-register-partition`` (nothing for the defaults)."""
    parts = []
    if options["min-replicas"]:
        parts.append(f"min{options['min-replicas']}")
    if options["wait"]:
        parts.append(f"wait{options['wait']}")
    return parts


plugin = DBPlugin(
    name="redis",
    summary="Redis 7.0 with Sentinel (Debian's redis-server, redis-sentinel), a master, replicas and a Sentinel "
            "per node; register workload at the master Sentinel names",
    create=create,
    options=OPTIONS,
    validate=validate,
    name_parts=name_parts,
    default_nemesis=("partition", "kill", "pause"),
)
