"""``harness.interpreter.Signal`` interleaves exactly as ``asyncio.Event`` under ``asyncio.timeout`` did.

The interpreter's workers, pollers and nemesis wait on a signal between their steps; on the simulator's
virtual-time loop every wake-up is ordered by the world, so a bounded wait that woke a task one turn of the
loop earlier or later than the old timeout would change a seed's history. Random scenarios of tasks that
sleep, wait with and without bounds (ties, zero and vanishing durations included) and set signals run once
with :class:`Signal` and once with the pattern it replaced; the traces must be the same, step for step.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Callable
from typing import Any

import pytest

from harness.interpreter import Signal
from harness.sim.loop import run_simulated


class Calls:
    """A world that only carries out the loop's timers (``harness.sim.loop.EventSource``)."""

    def __init__(self) -> None:
        self.now = 0
        self.queue: list[tuple[int, int, Callable[[Any], Any], Any]] = []
        self.sequence = 0

    def schedule(self, at_ns: int, function: Callable[[Any], Any], argument: Any = None) -> None:
        self.sequence += 1
        heapq.heappush(self.queue, (max(at_ns, self.now), self.sequence, function, argument))

    def next_event_ns(self) -> int | None:
        return self.queue[0][0] if self.queue else None

    def run_next(self) -> None:
        self.now, _, function, argument = heapq.heappop(self.queue)
        function(argument)


class EventUnderTimeout:
    """What the interpreter did before: ``asyncio.Event``, bounded by ``asyncio.timeout``."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self) -> None:
        self.event.set()

    async def wait(self) -> bool:
        return await self.event.wait()

    async def wait_at_most(self, seconds: float) -> bool:
        if self.event.is_set():
            return True
        try:
            async with asyncio.timeout(seconds):
                await self.event.wait()
        except TimeoutError:
            return False
        return True


DURATIONS = (0.0, 1e-30, 0.25, 0.5, 0.5, 1.0, 1.0, 2.0)
"""Ties on purpose: equal durations from equal starts end at the same instant."""


def scenario(seed: int) -> list[list[tuple[str, int, float]]]:
    rng = random.Random(seed)
    tasks = []
    for _ in range(rng.randint(2, 6)):
        steps = []
        for _ in range(rng.randint(1, 8)):
            kind = rng.choice(("sleep", "bounded", "bounded", "wait", "set"))
            steps.append((kind, rng.randrange(3), rng.choice(DURATIONS)))
        tasks.append(steps)
    tasks.append([("sleep", 0, 5.0), ("set", 0, 0.0), ("set", 1, 0.0), ("set", 2, 0.0)])  # nobody waits for ever
    return tasks


def trace(make: Callable[[], Any], tasks: list[list[tuple[str, int, float]]]) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []

    async def run_task(number: int, steps: list[tuple[str, int, float]], signals: list[Any]) -> None:
        loop = asyncio.get_running_loop()
        for step, (kind, which, seconds) in enumerate(steps):
            result: Any = None
            if kind == "sleep":
                await asyncio.sleep(seconds)
            elif kind == "bounded":
                result = await signals[which].wait_at_most(seconds)
            elif kind == "wait":
                result = await signals[which].wait()
            else:
                signals[which].set()
            seen.append((number, step, kind, loop.time(), result))

    async def main() -> None:
        signals = [make() for _ in range(3)]
        await asyncio.gather(*(run_task(n, steps, signals) for n, steps in enumerate(tasks)))

    run_simulated(Calls(), main())
    return seen


@pytest.mark.parametrize("seed", range(200))
def test_a_signal_wakes_its_waiters_in_the_same_turns_as_an_event_under_a_timeout(seed: int) -> None:
    tasks = scenario(seed)
    assert trace(Signal, tasks) == trace(EventUnderTimeout, tasks)


def test_a_timer_that_fires_after_set_but_before_the_waiter_resumes_wins() -> None:
    # Tasks 0 and 1 wake in the same turn (signal 1); task 0's vanishing bound is due at once (call_soon),
    # and task 1 sets signal 0 before that timer runs: the timeout's cancellation won that race, so the
    # wait reports the time up although the flag was set first.
    tasks = [[("wait", 1, 0.0), ("bounded", 0, 1e-30)], [("wait", 1, 0.0), ("set", 0, 0.0)],
             [("sleep", 0, 1.0), ("set", 1, 0.0)]]
    expected = trace(EventUnderTimeout, tasks)
    assert [entry for entry in expected if entry[2] == "bounded"] == [(0, 1, "bounded", 1.0, False)]
    assert [entry[:3] for entry in expected].index((1, 1, "set")) < [entry[:3] for entry in expected].index(
        (0, 1, "bounded"))
    assert trace(Signal, tasks) == expected
