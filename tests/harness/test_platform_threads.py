"""Thread pools that Ctrl-C cannot leave running behind a teardown (harness.platforms.threads): the wait
for the per-node threads goes on through the interrupt, which is raised once every call has ended."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.platforms.threads import finish_through_interrupts, run_in_threads


@pytest.fixture(autouse=True)
def _ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler, as a run typed at a terminal has it: a test runner's worker, or a
    shell's background job, may have inherited SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_in(seconds: float) -> None:
    threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT)).start()  # a real signal wakes the wait


def test_a_pool_is_waited_for_through_ctrl_c() -> None:
    """A start still creating a container when Ctrl-C comes ends before the teardown lists the run's
    containers: the wait goes on through the interrupt, which is raised after."""
    finished = threading.Event()

    def create() -> None:
        time.sleep(0.4)
        finished.set()

    pool = ThreadPoolExecutor(max_workers=1)
    started = [pool.submit(create)]
    _interrupt_in(0.1)
    with pytest.raises(KeyboardInterrupt):
        finish_through_interrupts(pool, started)
    assert finished.is_set()


def test_every_call_has_ended_when_ctrl_c_reaches_the_caller() -> None:
    """A node still being started (or paused) when Ctrl-C comes is done before the caller's teardown runs."""
    ended: list[str] = []

    def slow(node: str) -> str:
        time.sleep(0.4)
        ended.append(node)
        return node

    _interrupt_in(0.1)
    with pytest.raises(KeyboardInterrupt):
        run_in_threads({node: (lambda node=node: slow(node)) for node in ("n1", "n2", "n3")}, name="node")
    assert sorted(ended) == ["n1", "n2", "n3"]


def test_results_and_failures_stay_in_their_futures() -> None:
    def fail() -> None:
        raise RuntimeError("n2: refused")

    futures = run_in_threads({"n1": lambda: 1, "n2": fail}, name="node", max_workers=1)
    assert futures["n1"].result() == 1
    assert str(futures["n2"].exception()) == "n2: refused"
    assert run_in_threads({}, name="node") == {}
