"""A virtual-time asyncio event loop: how the simulator drives the harness's one interpreter.

The controller's rules (workers, think times, operation deadlines, status polling, the nemesis, the final
phase: ``harness.interpreter``) and the bundled system's client (``cluster.client``) are written once, as
asyncio code that reads time only from its event loop and waits only through it. On real platforms they
run on asyncio's own loop; in the simulator they run on :class:`VirtualTimeLoop`, whose clock is the
simulated world's true time and which never sleeps: when every coroutine is waiting, it moves time
straight to whichever comes first, the loop's next timer or the world's next event (a message arriving,
a node's timer), and carries that out. This is a mock clock in the manner of trio's ``MockClock``,
applied to asyncio: the same code, a different sense of time, and a run that a seed fixes exactly.

Determinism: the loop's ready queue is FIFO and its timers are a heap filled in program order, the world
orders its events by ``(time, sequence)``, and nothing here touches a real socket, thread or clock; so
the same seed gives the same interleaving, byte for byte. Code driven by this loop must not use threads
(``asyncio.to_thread``) or real I/O.

The world is any :class:`EventSource`: it keeps the true time in integer nanoseconds (``now``), says
when its next event is due and carries out one event at a time.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Coroutine, Mapping
from typing import Any, Protocol, TypeVar

NS = 1_000_000_000
T = TypeVar("T")


class EventSource(Protocol):
    """A simulated world as the loop sees it."""

    now: int
    """True time, nanoseconds since the simulation began; the loop moves it forward, never back."""

    def next_event_ns(self) -> int | None:
        """When the next event is due (``None``: nothing is scheduled)."""
        ...

    def run_next(self) -> None:
        """Carry out the next event, setting ``now`` to its time."""
        ...


class Stalled(RuntimeError):
    """Every coroutine waits and nothing is scheduled anywhere: the simulation can never go on."""


class _VirtualSelector(selectors.BaseSelector):
    """The selector asyncio's loop waits on: instead of waiting for I/O it advances virtual time.

    The loop registers only its own self-pipe here (no coroutine does real I/O in a simulation); the
    registrations are kept so that the loop's bookkeeping works, and never reported ready.
    """

    def __init__(self, world: EventSource) -> None:
        self.world = world
        self.loop: VirtualTimeLoop | None = None
        self._keys: dict[int, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys.pop(fd)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        self.unregister(fileobj)
        return self.register(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return dict(self._keys)

    def close(self) -> None:
        self._keys.clear()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Called by the loop with the seconds until its next timer (``0``: callbacks are ready; ``None``:
        no timer). Carries out the world's events due before that timer, as long as none of them gives
        the loop something to do, then moves time to the timer."""
        if timeout is not None and timeout <= 0:
            return []
        world, loop = self.world, self.loop
        assert loop is not None
        limit = None if timeout is None else world.now + math.ceil(timeout * NS)
        ready = loop.ready
        ran = False
        while True:
            due = world.next_event_ns()
            if due is None or (limit is not None and due > limit):
                break
            world.run_next()
            ran = True
            if ready():
                return []
        if limit is not None:
            world.now = max(world.now, limit)
        elif not ran:
            raise Stalled(f"the simulation stalled at {world.now / NS:.3f} s: every task waits and nothing "
                          "is scheduled")
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock is ``world.now`` and whose waits advance it (module docstring)."""

    def __init__(self, world: EventSource) -> None:
        selector = _VirtualSelector(world)
        super().__init__(selector)
        selector.loop = self
        self.world = world
        self.set_debug(False)

    def time(self) -> float:
        return self.world.now / NS

    def ready(self) -> bool:
        """Whether callbacks wait to run (the loop's own ready queue: asyncio has no public accessor)."""
        return bool(self._ready)  # type: ignore[attr-defined]


def run_simulated(world: EventSource, main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a :class:`VirtualTimeLoop` over ``world``; the loop is closed after.
    Tasks still pending when ``main`` returns are cancelled, as ``asyncio.run`` does."""
    loop = VirtualTimeLoop(world)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            asyncio.set_event_loop(None)
            loop.close()
