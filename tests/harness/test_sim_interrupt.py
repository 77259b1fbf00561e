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


def _fake_simulate(interrupt_at: int, in_teardown: bool = False):
    """``simulate`` standing in for the real one: a signal comes during seed ``interrupt_at`` (and interrupts
    it, or with ``in_teardown`` comes while its teardown is shielded and lets it finish), the others valid."""

    def simulate(spec: TestSpec, work: Path, checkers=None) -> SimpleNamespace:
        work.mkdir(parents=True, exist_ok=True)
        signalled = spec.seed == interrupt_at
        return SimpleNamespace(spec=spec, run_dir=work, valid=True, error=None,
                               interrupted=signalled and not in_teardown, stop_requested=signalled,
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


def test_a_signal_during_a_seeds_teardown_stops_the_exploration_too(tmp_path, monkeypatch) -> None:
    # The shield lets that seed's teardown finish (harness.signals); the next seed must not start.
    monkeypatch.setattr(explore_module, "simulate", _fake_simulate(interrupt_at=4, in_teardown=True))
    spec = TestSpec(seed=1, db="cluster", platform="sim", store=str(tmp_path / "store"))
    with pytest.raises(ExplorationInterrupted) as stopped:
        explore(spec, range(1, 11), keep_going=True, executor=ProcessPool(1))
    assert [o.seed for o in stopped.value.exploration.outcomes] == [1, 2, 3]


def test_run_seed_raises_for_an_interrupted_run_and_removes_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(explore_module, "simulate", _fake_simulate(interrupt_at=7))
    spec = TestSpec(seed=7, db="cluster", platform="sim", store=str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        run_seed(spec, str(tmp_path / "scratch"))
    assert not (tmp_path / "scratch" / "seed-7").exists()


@pytest.mark.parametrize("signalled", [True, False])
def test_a_seed_that_crashed_while_a_signal_came_stops_the_exploration(
    tmp_path, monkeypatch, caplog, signalled
) -> None:
    """A run that a signal reached but that ended in some other error than the interrupt (a crash under way
    when it came) must still stop the exploration: it once became an unknown seed and the next seeds ran
    (CI: ``[SIGTERM-1]`` below went on for two minutes after its SIGTERM). Without a signal the same crash
    is the seed's: unknown, and the exploration goes on."""
    from harness.sim import run as sim_run

    def crashed(spec: TestSpec, *, run_dir: str, **_kwargs: object) -> SimpleNamespace:
        Path(run_dir).mkdir(parents=True)
        return SimpleNamespace(run_dir=run_dir, results={"valid": "unknown"}, valid="unknown", invoked={},
                               schedule=(), error="RuntimeError: cancelled mid-step", interrupted=False,
                               stop_requested=signalled)

    monkeypatch.setattr(sim_run, "run", crashed)
    spec = TestSpec(seed=7, db="cluster", platform="sim", store=str(tmp_path))
    if signalled:
        with pytest.raises(KeyboardInterrupt):
            run_seed(spec, str(tmp_path / "scratch"))
        assert "seed 7 ended in an error as the exploration was stopped: RuntimeError: cancel" in caplog.text
    else:
        outcome = run_seed(spec, str(tmp_path / "scratch"))
        assert outcome.valid == "unknown" and "crashed: RuntimeError: cancelled mid-step" in outcome.error
    assert not (tmp_path / "scratch" / "seed-7").exists()


def test_a_seed_whose_run_a_signal_broke_with_another_error_stops_the_exploration(
    tmp_path, monkeypatch, caplog
) -> None:
    """An error out of the seed's run itself (not a run that ended with one) while a signal came: the
    exploration stops all the same."""
    from harness.signals import Interrupts

    def broken_by_a_signal(spec: TestSpec, work: Path, checkers=None) -> SimpleNamespace:  # noqa: ANN001
        with Interrupts():
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # forwarded as Ctrl-C: a KeyboardInterrupt here
                time.sleep(5)
            except KeyboardInterrupt:
                raise OSError("the results were half written") from None
        raise AssertionError("no signal came")

    monkeypatch.setattr(explore_module, "simulate", broken_by_a_signal)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_seed(TestSpec(seed=7, db="cluster", platform="sim", store=str(tmp_path)),
                     str(tmp_path / "scratch"))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "seed 7 ended in an error as the exploration was stopped: OSError: the results" in caplog.text
    assert not (tmp_path / "scratch" / "seed-7").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "jobs"), [(signal.SIGTERM, "1"), (signal.SIGINT, "1"), (signal.SIGTERM, "2")])
def test_harness_simulate_stops_at_a_signal_with_exit_2(tmp_path, signum, jobs) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "simulate", "--seeds", "1..500", "--keep-going", "--jobs", jobs,
         "--store", str(tmp_path / "store")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # PYTHONFAULTHANDLER: a SIGABRT prints every thread's stack (in CI this case ended oddly three times:
        # killed by SIGINT after printing its table; no word in 120 s, as a run spinning in its loop's close,
        # reproduced once outside CI, did (harness.sim.loop.CLOSE_S); an unknown seed and the exploration
        # going on (the tests above)).
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"},
        # A shell without job control starts background commands with SIGINT ignored: undo that here.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # printed once the seeds are about to run (signals handled)
        assert first.startswith("harness simulate: 500 seeds"), first
        time.sleep(2)  # inside a seed
        process.send_signal(signum)
        try:
            output, _ = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            stacks, _ = process.communicate(timeout=60)
            pytest.fail(f"no exit 120 s after {signal.Signals(signum).name}; its output, then its stacks at a "
                        f"SIGABRT:\n{first}{stacks}")
        output = first + output
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 2, output
    assert "interrupted after" in output and "of 500 seeds" in output, output


def test_a_signal_during_the_teardown_lets_the_run_finish_and_asks_its_caller_to_stop(tmp_path, monkeypatch) -> None:
    """The signal that once let `harness simulate --jobs 1` run all its seeds: it came while a seed's
    teardown was shielded, so that seed ended as completed and nothing told the exploration to stop."""
    from harness import lifecycle
    from harness import run as run_module

    signalled = []
    end_record = lifecycle.end_record

    def end_record_after_a_sigterm(*args, **kwargs):  # called while the run's shield is up
        os.kill(os.getpid(), signal.SIGTERM)
        signalled.append(True)
        return end_record(*args, **kwargs)

    monkeypatch.setattr(lifecycle, "end_record", end_record_after_a_sigterm)
    spec = TestSpec(seed=5, db="cluster", platform="sim", time_limit=8.0, nemesis_interval=2.0, store=str(tmp_path))
    result = run_module.run(spec, report=False)
    assert signalled
    assert not result.interrupted and result.error is None and result.results is not None
    assert result.results["valid"] is True  # judged as any finished run
    assert result.stop_requested
