"""The ``sim_seeds`` table: one row per simulated seed of every exploration, beside the analysis dataset.

Layout (the analysis dataset's conventions, ``harness.analysis.dataset``)::

    store/dataset/sim_seeds/exploration=<YYYYMMDDTHHMMSS>-<id>/part-00000.parquet

One partition per exploration (``harness simulate --seeds``, each exploration of the detection matrix),
written by the driver when the exploration ends, stopped early or not, and rewritten in place while it
runs with the seeds finished so far (``harness.sim.explore.CHECKPOINT_S``); so a query over one sweep
reads one directory, and ``spark.read.parquet("store/dataset/sim_seeds")`` reads every sweep with the
``exploration`` column from the directory name. Validity is the text ``true``, ``false`` or ``unknown``,
as in the ``verdicts`` table. Columns may be added; renaming or removing one needs a migration in the
readers.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.dataset import dataset_dir, valid_text
from harness.store import TIMESTAMP_FORMAT, temporary_name

if TYPE_CHECKING:
    from harness.sim.explore import Exploration, SeedOutcome

TABLE = "sim_seeds"
PART_FILE = "part-00000.parquet"

SIM_SEEDS: dict[str, str] = {
    "exploration": "string",  # partition column: when the exploration started, and a short id
    "test": "string",  # the test name (harness.compose), as in the runs table
    "seed": "long",
    "mode": "string",  # the DB's mode option, if it has one
    "bug": "string",  # "none" or the DB's bug options joined by "+", sorted
    "workload": "string",
    "nemesis": "string",  # fault packages joined by ","; "none" for none
    "verdict": "string",  # true, false or unknown
    "checker": "string",  # the checkers that failed (joined by ","), else those unknown, else null
    "sim_seconds": "double",  # simulated seconds of the run
    "wall_seconds": "double",  # wall seconds the seed took where it ran (simulation and judging)
    "run": "string",  # the stored run directory of an invalid seed, else null
    "replay_command": "string",
    "error": "string",  # why the simulation crashed, if it did
    "executor": "string",  # where the seeds ran: "processes N" or "spark MASTER"
}


def exploration_id(started: datetime | None = None) -> str:
    """A new exploration's partition value: its start (UTC) and a short random id."""
    moment = started or datetime.now(UTC)
    return f"{moment.strftime(TIMESTAMP_FORMAT)}-{uuid.uuid4().hex[:6]}"


def rows(exploration: Exploration, *, test: str, options: Mapping[str, Any], executor: str) -> list[dict[str, Any]]:
    """The table's rows for ``exploration`` (without the partition column), in seed order."""
    spec = exploration.spec
    mode = options.get("mode")
    bugs = options.get("bug") or options.get("bugs") or ()
    if isinstance(bugs, str):
        bugs = (bugs,)
    bug = "+".join(sorted(str(b) for b in bugs)) or "none"
    nemesis = ",".join(spec.nemesis) or "none"
    return [_row(o, test=test, mode=None if mode is None else str(mode), bug=bug, workload=spec.workload,
                 nemesis=nemesis, executor=executor) for o in exploration.outcomes]


def _row(outcome: SeedOutcome, **common: Any) -> dict[str, Any]:
    checker = ",".join(outcome.failed) or ",".join(outcome.unknown) or None
    return {"test": common["test"], "seed": outcome.seed, "mode": common["mode"], "bug": common["bug"],
            "workload": common["workload"], "nemesis": common["nemesis"], "verdict": valid_text(outcome.valid),
            "checker": checker, "sim_seconds": float(outcome.sim_seconds),
            "wall_seconds": float(outcome.wall_seconds), "run": outcome.run_dir,
            "replay_command": outcome.replay_command, "error": outcome.error, "executor": common["executor"]}


def write(store: str | Path, exploration_key: str, table_rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write one exploration's partition (replacing it if it exists); returns the Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
    columns = [name for name in SIM_SEEDS if name != "exploration"]
    schema = pa.schema([(name, types[SIM_SEEDS[name]]) for name in columns])
    table = pa.Table.from_pylist([{name: row.get(name) for name in columns} for row in table_rows], schema=schema)
    directory = Path(dataset_dir(Path(store))) / TABLE / f"exploration={exploration_key}"
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / PART_FILE
    temporary = temporary_name(target)  # one per writer; ``harness clean`` knows a killed writer's
    pq.write_table(table, temporary)
    temporary.replace(target)
    return target


def read(store: str | Path, exploration_key: str | None = None) -> list[dict[str, Any]]:
    """The table's rows (of one exploration, or all), sorted by exploration and seed: for tests and people."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = Path(dataset_dir(Path(store))) / TABLE
    found: list[dict[str, Any]] = []
    parts = sorted(base.glob(f"exploration={exploration_key or '*'}/{PART_FILE}"))
    for part in parts:
        key = part.parent.name.split("=", 1)[1]
        # Read whole, then decoded: a read by path opens the file more than once (its footer, then its
        # pages), and a checkpoint replacing it in between (:func:`write`, while an exploration runs)
        # paired one file's footer with another's pages ("Page was smaller than expected").
        content = pa.BufferReader(part.read_bytes())
        found.extend({"exploration": key, **row} for row in pq.read_table(content).to_pylist())
    return sorted(found, key=lambda row: (row["exploration"], row["seed"]))
