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
when its next event is due, carries out one event at a time, and schedules calls at a true time.

**One queue.** The loop keeps no timers of its own: ``call_at`` (and so ``call_later``, ``asyncio.sleep``,
``asyncio.timeout``) schedules the timer's handle as an event of the world, and when the world reaches
it, a handle not cancelled meanwhile joins the loop's ready queue. So a message arriving, a node's timer
and a coroutine's timeout are ordered by one rule, the world's ``(time, sequence)``, and waiting costs
one tuple in one heap instead of asyncio's own timer heap beside the world's.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import selectors
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from harness import signals

NS = 1_000_000_000
T = TypeVar("T")
log = logging.getLogger(__name__)


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

    def schedule(self, at_ns: int, function: Callable[[Any], Any], argument: Any = None) -> None:
        """Call ``function(argument)`` as an event at true time ``at_ns`` (now, if that is past)."""
        ...


class Stalled(RuntimeError):
    """Every coroutine waits and nothing is scheduled anywhere, or some coroutine waits for no time again
    and again: either way virtual time can never go on."""


SPIN_TURNS = 100_000
"""Turns of the loop at one virtual instant after which a simulation is :class:`Stalled`: a coroutine
that waits for no time in a loop (a deadline a rounding error away) keeps the loop busy while the clock
never moves, which without this guard is a run that never ends. The busiest instant of a 60 s run takes
17-19 turns (seed 3: blazingmq with 4 shards, fluvio under two storms, lease)."""

CLOSE_S = 60.0
"""Virtual seconds the tasks still pending when a simulated run's main coroutine ends have, once cancelled,
to end (:func:`run_simulated`): a task that outlives its cancellation (one that catches it and waits
again) would otherwise keep the world's nodes going for ever while the loop waits for it, a run that
never ends at 100% of a core (seen once in about 600 runs stopped by SIGTERM at a random moment: a worker
whose awaited future held its reply but never woke it, docs/simulation.md; the ways a signal could lose
such a wake-up that were found are closed, ``harness.signals.run_cancelling``, though which one that run
took is not known). Closing takes virtual milliseconds when every task ends as it should."""


class _VirtualSelector(selectors.BaseSelector):
    """The selector asyncio's loop waits on: instead of waiting for I/O it advances virtual time.

    The loop registers only its own self-pipe here (no coroutine does real I/O in a simulation); the
    registrations are kept so that the loop's bookkeeping works, and never reported ready.
    """

    def __init__(self, world: EventSource) -> None:
        self.world = world
        self.loop: VirtualTimeLoop | None = None
        self.horizon_ns: int | None = None  # no event past it is carried out (run_simulated, closing)
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
        """Called by the loop when it has nothing ready to run (``timeout`` ``None``: its timers are the
        world's events) or to poll (``0``). Carries out the world's events until one of them gives the
        loop something to do."""
        if timeout is not None:
            if timeout <= 0:
                return []
            raise RuntimeError("the virtual-time loop keeps no timers of its own (they are world events)")
        world, loop = self.world, self.loop
        assert loop is not None
        pending = loop._ready  # type: ignore[attr-defined]
        run_next, next_event_ns = world.run_next, world.next_event_ns
        horizon = self.horizon_ns
        if horizon is None:
            while not pending:
                if next_event_ns() is None:
                    raise Stalled(f"the simulation stalled at {world.now / NS:.3f} s: every task waits and "
                                  "nothing is scheduled")
                run_next()
            return []
        while not pending:
            due = next_event_ns()
            if due is None or due > horizon:
                raise Stalled(f"the simulation stalled at {world.now / NS:.3f} s: "
                              + ("every task waits and nothing is scheduled" if due is None else
                                 f"tasks cancelled when the run ended still waited {CLOSE_S:g} s later"))
            run_next()
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock is ``world.now`` and whose waits advance it (module docstring)."""

    def __init__(self, world: EventSource) -> None:
        selector = _VirtualSelector(world)
        super().__init__(selector)
        selector.loop = self
        self.world = world
        self._instant = world.now
        self._turns = 0  # turns of the loop at virtual instant ``_instant`` (SPIN_TURNS)
        self.set_debug(False)

    def time(self) -> float:
        return self.world.now / NS

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        """A timer as a world event (module docstring, "One queue"); ``cancel()`` works as usual."""
        self._check_closed()  # type: ignore[attr-defined]
        handle = asyncio.TimerHandle(when, callback, args, self, context)
        self.world.schedule(math.ceil(when * NS), self._due, handle)
        return handle

    def _due(self, handle: asyncio.TimerHandle) -> None:
        if not handle._cancelled:  # type: ignore[attr-defined]
            self._ready.append(handle)  # type: ignore[attr-defined]

    def call_soon(self, callback: Callable[..., Any], *args: Any,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        """``BaseEventLoop.call_soon`` without its debug-mode checks (this loop never runs in debug mode):
        a future's completion wakes its task through here, once per wait."""
        if self._debug:  # type: ignore[attr-defined]
            return super().call_soon(callback, *args, context=context)
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def _run_once(self) -> None:
        """One iteration of the loop, as ``BaseEventLoop._run_once`` makes it with no timers of its own and
        a selector that never reports I/O: when nothing is ready (and the loop is not stopping), carry out
        the world's events until one of them makes something ready; then run what is ready now, in order
        (what those callbacks make ready runs in the next iteration)."""
        if self._debug:  # type: ignore[attr-defined]
            return super()._run_once()  # type: ignore[misc]
        ready = self._ready  # type: ignore[attr-defined]
        if not ready and not self._stopping:  # type: ignore[attr-defined]
            self._selector.select(None)  # type: ignore[attr-defined]
        now = self.world.now
        if now != self._instant:
            self._instant, self._turns = now, 0
        else:
            self._turns += 1
            if self._turns > SPIN_TURNS:
                raise Stalled(f"the simulation stalled at {now / NS:.3f} s: {SPIN_TURNS:,} turns of the loop "
                              "without the virtual clock moving (a wait of no time, in a loop)")
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()


def run_simulated(world: EventSource, main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a :class:`VirtualTimeLoop` over ``world``, as ``asyncio.run`` runs a
    coroutine on asyncio's own loop (an ``asyncio.Runner``): tasks still pending when ``main`` returns are
    cancelled, the loop is closed after, and an interrupt (Ctrl-C, and what ``harness.signals`` forwards)
    cancels ``main`` and then raises ``KeyboardInterrupt`` (``harness.signals.run_cancelling``), never
    inside the loop, where it could fall between a future's completion and the scheduling of its
    waiter's wake-up: that task would wait for ever while the world's nodes go on.

    The tasks still pending when ``main`` ends are cancelled and given :data:`CLOSE_S` virtual seconds
    to end. One still waiting then is a harness defect: :class:`Stalled` is raised naming it, unless
    ``main`` ended in an exception (a ``KeyboardInterrupt``, say), which goes on with the stall logged."""
    runner = asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(world))
    loop = runner.get_loop()
    asyncio.set_event_loop(loop)
    return signals.run_cancelling(runner, main,
                                  lambda raised: _close(runner, loop, world, raising=not raised))


def _close(runner: asyncio.Runner, loop: asyncio.AbstractEventLoop, world: EventSource, *,
           raising: bool) -> None:
    """Close ``runner`` (it cancels the tasks left and runs the loop until they end), within
    :data:`CLOSE_S` of virtual time (:func:`run_simulated`)."""
    asyncio.set_event_loop(None)
    selector = loop._selector  # type: ignore[attr-defined]
    selector.horizon_ns = world.now + math.ceil(CLOSE_S * NS)
    try:
        runner.close()
    except Stalled as stall:
        left = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in left:
            task._log_destroy_pending = False  # type: ignore[attr-defined]  # said here, not again at exit
        waiting = "; ".join(_describe(task) for task in left)
        if raising:
            raise Stalled(f"{stall} ({waiting or 'no task named'})") from None
        log.warning("%s (%s); the run's own end goes on", stall, waiting or "no task named")


def _describe(task: asyncio.Task[Any]) -> str:
    """A pending task: its name and where its coroutine waits (asyncio gives a suspended task's own frame,
    not those of the coroutines it awaits)."""
    frames = ", ".join(f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})"
                       for frame in task.get_stack())
    return f"{task.get_name()} waiting in {frames or 'no frame'}"
