"""harness.entry: a signal while Python still imports the harness is "interrupted" and exit 2, never a
traceback (Ctrl-C) or a silent 143 (SIGTERM); a signal started ignored stays ignored."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

# The ``harness`` command's entry point, with the import of harness.cli held for a while and announced,
# so that the signal surely lands in the middle of importing.
SLOW_IMPORT = """
import builtins, sys, time
hold = float(sys.argv[1])
real = builtins.__import__
def slow(name, *args, **kwargs):
    if name == "harness.cli":
        print("importing", flush=True)
        time.sleep(hold)
    return real(name, *args, **kwargs)
builtins.__import__ = slow
sys.argv = ["harness", "dbs"]
from harness.entry import main
sys.exit(main())
"""


def _signalled_while_importing(signum: int, hold: float = 5.0, ignore: bool = False) -> subprocess.CompletedProcess:
    # The child starts as from a terminal (the signal at its default), or with it ignored, whatever this
    # test runner inherited (under nohup SIGHUP is ignored, and ignored signals are inherited).
    def preexec() -> None:
        signal.signal(signum, signal.SIG_IGN if ignore else signal.SIG_DFL)

    process = subprocess.Popen([sys.executable, "-c", SLOW_IMPORT, str(hold)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    assert process.stdout is not None and process.stdout.readline() == "importing\n"
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_the_imports_is_interrupted_and_exit_2(signum: int) -> None:
    done = _signalled_while_importing(signum)
    assert (done.returncode, done.stderr) == (2, "interrupted\n")


def test_a_sighup_started_ignored_is_still_ignored_during_the_imports() -> None:
    done = _signalled_while_importing(signal.SIGHUP, hold=1.0, ignore=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr
