"""SIGTERM and SIGHUP stop a run as Ctrl-C does, also when the shell left SIGINT ignored; once the
shield is up nothing interrupts teardown; handlers are put back afterwards. While a loop runs a run's
coroutines (``run_cancelling``), an interrupt cancels the main one where it awaits, never raised inside."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from harness.signals import TEARDOWN_NOTICE, Interrupts, run_cancelling


@pytest.fixture(autouse=True)
def started_from_a_terminal():  # noqa: ANN201
    """Each test starts as a run typed at a terminal does: SIGINT, SIGTERM and SIGHUP at their defaults,
    whatever the test runner inherited (CI under ``nohup`` or as a background job has SIGHUP or SIGINT
    ignored, which the harness rightly keeps ignored); the tests that need one ignored say so."""
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL,
                signal.SIGHUP: signal.SIG_DFL}
    before = {signum: signal.signal(signum, handler) for signum, handler in defaults.items()}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _deliver(signum: int) -> None:
    """Send ``signum`` to this process and let the main thread run its handler."""
    os.kill(os.getpid(), signum)
    signal.sigtimedwait([], 0)  # a no-op system call: the handler runs when it returns


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_termination_signal_raises_keyboard_interrupt_naming_itself(signum: int) -> None:
    with Interrupts() as interrupts, pytest.raises(KeyboardInterrupt):
        _deliver(signum)
    assert interrupts.cause() == signal.Signals(signum).name


def test_sigterm_interrupts_even_where_the_shell_left_sigint_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    # A job started with `cmd &` from a script inherits SIGINT ignored; SIGTERM must still stop it.
    real = signal.getsignal
    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_IGN if signum == signal.SIGINT else real(signum))
    with Interrupts() as interrupts, pytest.raises(KeyboardInterrupt):
        _deliver(signal.SIGTERM)
    assert interrupts.cause() == "SIGTERM"


def test_a_signal_inherited_as_ignored_stays_ignored_even_under_the_shield(capsys) -> None:
    """`nohup harness run ... &`: SIGHUP was ignored when the harness started; a closed terminal must
    not stop the run, nor print the teardown notice."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with Interrupts() as interrupts:
            _deliver(signal.SIGHUP)  # no KeyboardInterrupt
            interrupts.shield()
            _deliver(signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert interrupts.received == [] and interrupts.cause() == "Ctrl-C"
        assert TEARDOWN_NOTICE not in capsys.readouterr().err
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_inside_asyncio_run_sigterm_cancels_the_main_task_like_ctrl_c() -> None:
    cancelled = []

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)  # the task unwinds (its finally blocks run), as for Ctrl-C
            raise

    with Interrupts(), pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert cancelled == [True]


def test_after_the_shield_no_signal_interrupts_and_each_prints_the_notice(capsys) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with Interrupts() as interrupts:
        interrupts.shield()
        interrupts.shield()  # idempotent
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            _deliver(signum)
    assert interrupts.received == ["SIGTERM", "SIGHUP", "Ctrl-C"]
    assert capsys.readouterr().err.count(TEARDOWN_NOTICE) == 3
    assert {s: signal.getsignal(s) for s in before} == before


def test_ctrl_c_is_the_cause_when_no_forwarded_signal_came_first() -> None:
    with Interrupts() as interrupts:
        interrupts.shield()
        _deliver(signal.SIGTERM)  # during teardown: not what interrupted the run
    assert interrupts.cause() == "Ctrl-C"


def test_outside_the_main_thread_nothing_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def body() -> None:
        with Interrupts() as interrupts:
            interrupts.shield()
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before]


@pytest.mark.parametrize(("sigint", "signum"), [
    ("default", signal.SIGTERM), ("default", signal.SIGINT), ("ignored", signal.SIGTERM),
    ("default", signal.SIGHUP),
])
def test_while_the_loop_runs_a_signal_cancels_main_where_it_awaits_not_where_it_lands(sigint, signum) -> None:
    """Raised where it lands, a ``KeyboardInterrupt`` can fall between a future's completion and the
    scheduling of its waiter's wake-up (the hung simulated run of harness.sim.loop's ``CLOSE_S``); with
    SIGINT ignored (a script's background job) ``asyncio.run`` installs no handler and a forwarded SIGTERM
    was raised there. Here it lands in code with no await, which must go on to its next await."""
    if sigint == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    seen = []

    async def main() -> None:
        try:
            _deliver(signum)
            seen.append("went on")
        except KeyboardInterrupt:
            seen.append("raised where it landed")
            raise
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled at the await")
            raise

    with Interrupts() as interrupts, pytest.raises(KeyboardInterrupt):
        run_cancelling(asyncio.Runner(), main())
    assert seen == ["went on", "cancelled at the await"]
    assert interrupts.cause() == ("Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name)
    expected = signal.SIG_IGN if sigint == "ignored" else signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is expected


def test_ctrl_c_stays_ignored_while_the_loop_runs_when_the_process_ignores_it() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def main() -> str:
        _deliver(signal.SIGINT)
        await asyncio.sleep(0.01)
        return "done"

    with Interrupts():
        assert run_cancelling(asyncio.Runner(), main()) == "done"


def test_a_main_that_catches_the_cancellation_returns_and_a_second_signal_raises_at_once() -> None:
    async def catches() -> str:
        try:
            _deliver(signal.SIGTERM)
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "caught"
        return "not cancelled"

    with Interrupts():
        assert run_cancelling(asyncio.Runner(), catches()) == "caught"

    seen = []

    async def stubborn() -> None:
        _deliver(signal.SIGTERM)  # cancels
        try:
            _deliver(signal.SIGTERM)  # the way out of a run that would not end: raised at once
        except KeyboardInterrupt:
            seen.append("second raised at once")
            raise

    with Interrupts(), pytest.raises(KeyboardInterrupt):
        run_cancelling(asyncio.Runner(), stubborn())
    assert seen == ["second raised at once"]


def test_a_signal_once_main_has_ended_is_raised_after_the_loop_closes_not_inside_it() -> None:
    """The runner's close cancels the tasks main left and runs the loop again: a signal then (here from a
    left task's cancellation) must not break their ending; it is raised once the loop is closed."""
    ended = []

    async def left_behind() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            _deliver(signal.SIGTERM)
            await asyncio.sleep(0)
            ended.append("ended")
            raise

    async def main() -> str:
        asyncio.get_running_loop().create_task(left_behind())
        await asyncio.sleep(0)
        return "done"

    with Interrupts(), pytest.raises(KeyboardInterrupt):
        run_cancelling(asyncio.Runner(), main())
    assert ended == ["ended"]


def test_a_sigint_handler_of_its_own_is_set_aside_while_the_loop_runs_and_put_back_after() -> None:
    """A SparkContext started earlier in the process leaves a SIGINT handler that raises wherever Ctrl-C
    lands; ``asyncio.Runner`` installs its own only over Python's default, so it stayed."""
    raised_by_it = []

    def sparks(signum: int, frame: object) -> None:
        raised_by_it.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, sparks)
    seen = []

    async def main() -> None:
        _deliver(signal.SIGINT)
        seen.append("went on")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled at the await")
            raise

    with Interrupts(), pytest.raises(KeyboardInterrupt):
        run_cancelling(asyncio.Runner(), main())
    assert seen == ["went on", "cancelled at the await"] and raised_by_it == []
    assert signal.getsignal(signal.SIGINT) is sparks
