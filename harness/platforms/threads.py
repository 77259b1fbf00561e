"""Thread pools that Ctrl-C cannot leave running behind a teardown.

The platforms do their per-node work in parallel threads: create containers, connect over SSH, start or
stop the system on each node, apply a fault to each target. A Ctrl-C (or a signal the harness turns into
it) that ends the wait for those threads early used to let them run on while the teardown started: a
container created after the teardown listed the run's containers, a node started after the teardown
stopped it, a node paused after the driver stopped tracking what it paused. Here the wait goes on until
every call has ended, and the interrupt is raised after. It waits on the futures, not the threads: a
``Thread.join`` that Ctrl-C interrupts leaves the thread marked as ended while it runs on (CPython 3.11),
which is how ``ThreadPoolExecutor``'s own ``with`` block lost them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

K = TypeVar("K")
T = TypeVar("T")


def finish_through_interrupts(pool: ThreadPoolExecutor, futures: Iterable[Future[Any]]) -> None:
    """Wait until every one of ``futures`` has ended, even when Ctrl-C comes meanwhile (re-raised once they
    all have); then shut ``pool`` down."""
    interrupted: BaseException | None = None
    pending = set(futures)
    while pending:
        try:
            _, pending = wait(pending)
        except KeyboardInterrupt as exc:
            interrupted = exc
    pool.shutdown(wait=False)
    if interrupted is not None:
        raise interrupted


def run_in_threads(calls: Mapping[K, Callable[[], T]], *, name: str,
                   max_workers: int | None = None) -> dict[K, Future[T]]:
    """Run every call in parallel (one thread each, or ``max_workers``) and return their futures, every one
    of them ended; a Ctrl-C meanwhile is raised once they all have (:func:`finish_through_interrupts`).
    A call's exception stays in its future."""
    pool = ThreadPoolExecutor(max_workers=max_workers or max(1, len(calls)), thread_name_prefix=name)
    futures: dict[K, Future[T]] = {}
    try:
        for key, call in calls.items():
            futures[key] = pool.submit(call)
    finally:  # no call may still be running when the caller (or its teardown) goes on
        finish_through_interrupts(pool, futures.values())
    return futures
