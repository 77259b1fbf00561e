"""Stand-ins for ``harness.suite.run_case`` that a suite can run in spawned processes (``--jobs``):
module-level functions, so that a child process imports them by name.

:func:`paired_run` proves that two cases run at once without timing anything: case ``2k`` and case
``2k + 1`` each mark that they started and wait for the other's mark, which only a suite running both
at the same time can give (alone, each gives up after :data:`PARTNER_WAIT_S` and says so).
:func:`quick_run` only stores a run; :func:`dying_run` ends its process abruptly for the case of index 1,
as a killed or crashed child would.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.suite import Case, CaseRun

PARTNER_WAIT_S = 60.0


def _stored(case: Case, store: str, note: dict) -> CaseRun:
    run_dir = Path(store) / f"t{case.index}" / "20261122T020000"
    run_dir.mkdir(parents=True)
    (run_dir / "test.json").write_text(json.dumps({"seed": case.seed, **note}), encoding="utf-8")
    return CaseRun(run_dir, f"harness run --seed {case.seed}", seconds=0.5)


def paired_run(case: Case, store: str) -> CaseRun:
    marks = Path(store) / "marks"
    marks.mkdir(parents=True, exist_ok=True)
    (marks / str(case.index)).touch()
    partner = marks / str(case.index ^ 1)
    deadline = time.monotonic() + PARTNER_WAIT_S
    while not partner.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return _stored(case, store, {"met_partner": partner.exists(), "pid": os.getpid()})


def quick_run(case: Case, store: str) -> CaseRun:
    return _stored(case, store, {"pid": os.getpid()})


def dying_run(case: Case, store: str) -> CaseRun:
    if case.index == 1:
        os._exit(3)
    return _stored(case, store, {"pid": os.getpid()})
