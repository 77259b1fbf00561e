"""Forked processes that start a piece of work at the same instant: for the store's writers, which must
not disturb each other when several workers of an exploration or a suite write at once."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def run_at_once(
    target: Callable[..., None], arguments: list[tuple[Any, ...]], *, timeout: float = 120
) -> list[int | None]:
    """Run ``target(*args, barrier)`` in one forked process per ``args``, all released by one barrier, and
    return their exit codes (0 each when none raised)."""
    context = multiprocessing.get_context("fork")
    start = context.Barrier(len(arguments))
    processes = [context.Process(target=target, args=(*args, start)) for args in arguments]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=timeout)
    return [process.exitcode for process in processes]
