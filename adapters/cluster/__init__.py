"""The ``cluster`` DB plugin: the demo system under test (``cluster/``), registered like any user's adapter.

Options (``harness dbs`` lists them; each also has the shortcut flag shown):

* ``mode`` (``--mode``): the election algorithm, one of ``cluster.core.election.ELECTIONS``;
* ``bug`` (``--bug``, repeatable): known bugs switched on in every node (``cluster.core.bugs``), each
  only in the modes it applies to;
* ``core`` (``--core NAME=VALUE``, repeatable): ``NodeConfig`` settings for every data node, checked by
  ``cluster.core.config.check_settings`` (type and range) before anything is deployed;
* ``shards`` and ``assignment``: storage shards with primaries (seed 004, docs/shards.md), passed to the
  nodes as the ``NodeConfig`` settings of the same names; ``shards=1`` (the default) adds nothing.

The adapter itself is :class:`adapters.cluster.db.ClusterDB`; its workload client is
:class:`adapters.cluster.client.ClusterWorkloadClient`; it runs in the deterministic simulator too
(``ClusterDB.simulate``, :mod:`adapters.cluster.sim`). The plugin publishes its known bugs in ``extras``
(``known_bugs``: each bug's modes, the checker that must catch it and the workload that can show it,
:mod:`adapters.cluster.known_bugs`), for the simulator's detection matrix and the known-bugs suites, and
``opportunities``: how often a run gave its switched-on bug a chance to act, counted from the journals
(:mod:`adapters.cluster.opportunities`, ``harness.opportunities``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.cluster.db import ClusterDB
from adapters.cluster.known_bugs import KNOWN_BUGS_INFO
from adapters.cluster.opportunities import opportunities
from cluster.core.bugs import KNOWN_BUGS, validate_bugs
from cluster.core.config import ASSIGNMENTS, MAX_SHARDS, check_settings
from cluster.core.election import ELECTIONS
from harness.db.plugin import DBContext, DBPlugin, Option

DEFAULT_MODE = "blazingmq"

OPTIONS = (
    Option("mode", "election algorithm of every node", default=DEFAULT_MODE, choices=tuple(ELECTIONS),
           flag="--mode", in_name=True),
    Option("bug", "known bug switched on in every node (cluster/core/bugs.py)", repeatable=True,
           choices=tuple(sorted(KNOWN_BUGS)), flag="--bug", in_name=True),
    Option("core", "NodeConfig setting for every node, e.g. leader_quorum_timeout=0 (cluster/core/config.py)",
           type="settings", flag="--core"),
    Option("shards", "storage shards, each with a primary the leader assigns (seed 004, docs/shards.md); 1: none",
           type="int", default=1, minimum=1, maximum=MAX_SHARDS, in_name=True),
    Option("assignment", "with shards > 1: who is made primary of each shard (seed 004's masterAssignment)",
           default=ASSIGNMENTS[0], choices=ASSIGNMENTS, in_name=True),
)


def shard_settings(options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``shards`` and ``assignment`` options as node settings; nothing for their defaults, so a run
    without shards passes the nodes exactly what it passed before shards existed."""
    settings: dict[str, Any] = {}
    if options.get("shards", 1) != 1:
        settings["shards"] = options["shards"]
    if options.get("assignment", ASSIGNMENTS[0]) != ASSIGNMENTS[0]:
        settings["assignment"] = options["assignment"]
    return settings


def validate(options: Mapping[str, Any]) -> None:
    """A bug must apply to the mode; node settings must be ones a node accepts."""
    validate_bugs(options["bug"], options["mode"])
    shards = shard_settings(options)
    clash = sorted(set(shards) & set(options["core"]))
    if clash:
        raise ValueError(f"set {clash[0]} once: as --db-opt {clash[0]}=... or as --core {clash[0]}=..., not both")
    settings = {**options["core"], **shards}
    check_settings(settings, options["mode"])
    if settings.get("shards", 1) == 1:
        needing = [bug for bug in options["bug"] if KNOWN_BUGS[bug].shards]
        if needing:
            raise ValueError(f"bug {needing[0]!r} is a storage shards' bug: it needs --db-opt shards=N with N > 1")


def name_parts(options: Mapping[str, Any]) -> Sequence[str]:
    """``raft`` and, with bugs, ``bug-<names>``: ``cluster-raft-bug-vote-twice-register-partition``."""
    bugs = options.get("bug") or []
    shards = [f"shards{options['shards']}"] if options.get("shards", 1) != 1 else []
    if shards and options.get("assignment", ASSIGNMENTS[0]) != ASSIGNMENTS[0]:
        shards.append(options["assignment"])
    return [options["mode"], *shards, *([f"bug-{'+'.join(bugs)}"] if bugs else [])]


def create(options: Mapping[str, Any], context: DBContext) -> ClusterDB:
    return ClusterDB(options["mode"], options["bug"], core={**options["core"], **shard_settings(options)},
                     faketime=context.faketime, seed=context.seed)


def detection_matrix(*args: Any, **options: Any) -> Any:
    """``adapters.cluster.matrix.detection_matrix``, imported when ``harness simulate --matrix`` asks."""
    from adapters.cluster.matrix import detection_matrix as run

    return run(*args, **options)


plugin = DBPlugin(
    name="cluster",
    summary="the demo replicated node shipped with the harness (cluster/): five election modes, known bugs",
    create=create,
    options=OPTIONS,
    validate=validate,
    name_parts=name_parts,
    extras={"known_bugs": KNOWN_BUGS_INFO, "detection_matrix": detection_matrix, "opportunities": opportunities},
)
