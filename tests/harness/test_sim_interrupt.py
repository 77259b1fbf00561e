"""Ctrl-C, SIGTERM and SIGHUP end an exploration (``harness simulate --seeds``), not only the seed that was
running: a seed's run turns the signal into an interrupted run (``harness.signals``), which an exploration
must not take for a finished seed and go on to the next."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.sim import explore as explore_module
from harness.sim.explore import ExplorationInterrupted, ProcessPool, explore, run_seed
from harness.spec import TestSpec

ROOT = Path(__file__).resolve().parents[2]


def _fake_simulate(interrupt_at: int):
    """``simulate`` standing in for the real one: seed ``interrupt_at`` is interrupted, the others valid."""

    def simulate(spec: TestSpec, work: Path, checkers=None) -> SimpleNamespace:
        work.mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(spec=spec, run_dir=work, valid=True, interrupted=spec.seed == interrupt_at,
                               failed_checkers=[], unknown_checkers=[], sim_seconds=1.0, replay_command=None,
                               digest={}, results={})

    return simulate


def test_an_interrupted_seed_stops_the_exploration_and_keeps_the_seeds_before(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(explore_module, "simulate", _fake_simulate(interrupt_at=3))
    spec = TestSpec(seed=1, db="cluster", platform="sim", store=str(tmp_path / "store"))
    with pytest.raises(ExplorationInterrupted) as stopped:
        explore(spec, range(1, 11), keep_going=True, executor=ProcessPool(1))
    exploration = stopped.value.exploration
    assert [o.seed for o in exploration.outcomes] == [1, 2]
    assert exploration.interrupted and not exploration.stopped_early
    assert exploration.recorded is not None and exploration.recorded.exists()  # the seeds done are recorded
    assert not (tmp_path / "store" / ".sim-scratch").exists()


def test_run_seed_raises_for_an_interrupted_run_and_removes_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(explore_module, "simulate", _fake_simulate(interrupt_at=7))
    spec = TestSpec(seed=7, db="cluster", platform="sim", store=str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        run_seed(spec, str(tmp_path / "scratch"))
    assert not (tmp_path / "scratch" / "seed-7").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "jobs"), [(signal.SIGTERM, "1"), (signal.SIGINT, "1"), (signal.SIGTERM, "2")])
def test_harness_simulate_stops_at_a_signal_with_exit_2(tmp_path, signum, jobs) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "simulate", "--seeds", "1..500", "--keep-going", "--jobs", jobs,
         "--store", str(tmp_path / "store")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        # A shell without job control starts background commands with SIGINT ignored: undo that here.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # printed once the seeds are about to run (signals handled)
        assert first.startswith("harness simulate: 500 seeds"), first
        time.sleep(2)  # inside a seed
        process.send_signal(signum)
        output, _ = process.communicate(timeout=120)
        output = first + output
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 2, output
    assert "interrupted after" in output and "of 500 seeds" in output, output
