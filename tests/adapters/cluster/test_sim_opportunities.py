"""A simulated run with a known bug switched on carries its opportunities (``adapters.cluster.opportunities``)
in ``results.json`` and in its report's timeline caption; a run without a bug carries none (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.render import write_report
from harness.sim.run import simulate
from harness.spec import TestSpec

# the suite's package for this pair (suites/bugs-all-modes.toml), 20 simulated seconds
PAIR = dict(db="cluster", nemesis=("timeout-storm", "leader-churn"), client_binding="node", platform="sim",
            time_limit=20.0)


def test_a_promote_outside_lrs_run_counts_the_scs_choices(tmp_path: Path) -> None:
    spec = TestSpec(seed=1000, db_options={"mode": "fluvio", "bug": ["promote-outside-lrs"]}, **PAIR)
    result = simulate(spec, tmp_path / "bug")
    found = result.results["opportunities"]["promote-outside-lrs"]
    assert found["count"] >= 1 and 0 <= found["acted"] <= found["count"]
    stored = json.loads((result.run_dir / "results.json").read_text())
    assert stored["opportunities"] == result.results["opportunities"]
    page = write_report(result.run_dir).read_text()
    assert f"Opportunities for promote-outside-lrs: {found['count']} (" in page

    control = simulate(TestSpec(seed=1000, db_options={"mode": "fluvio"}, **PAIR), tmp_path / "control")
    assert "opportunities" not in control.results
    assert "Opportunities for" not in write_report(control.run_dir).read_text()
