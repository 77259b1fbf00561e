"""No Spark process outlives the harness: ``harness analyze`` stopped by SIGTERM while Spark starts or
judges, or SIGKILLed, leaves nothing of its process group behind (the JVM once stayed for ever).

``python -m tests.harness.test_spark_orphans`` repeats the probe five times, at other moments, and prints
what each left (issue "Every way a run can end, round 2", item 1).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

HARNESS = str(Path(sys.executable).with_name("harness"))
PERF_DATA = Path("/tmp") / f"hsperfdata_{getpass.getuser()}"
"""Where HotSpot keeps a JVM's performance-data file (named by its pid) unless told not to."""


def stored_run(store: Path) -> Path:
    """A short simulated run, judged directly, for ``harness analyze`` to work on."""
    subprocess.run([HARNESS, "run", "--db", "cluster", "--platform", "sim", "--time-limit", "3", "--seed", "5",
                    "--analysis", "direct", "--no-live", "--store", str(store)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return store


def left_behind(group: int) -> list[str]:
    """The processes still in process group ``group``: pid and command line."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{stat.parent.name}: {cmdline[:120]}")
        except (OSError, IndexError, ValueError):
            continue
    return found


def probe(store: Path, delay: float, sig: int = signal.SIGTERM, linger: float = 5.0) -> list[str]:
    """Start ``harness analyze STORE`` in a process group of its own, send ``sig`` after ``delay`` seconds,
    and return what of its group is alive ``linger`` seconds after it ended. Its temporary files go to a
    directory of the probe's (``TMPDIR``), removed after: a SIGKILLed harness cannot remove its own."""
    scratch = tempfile.mkdtemp(prefix="orphans-")
    process = subprocess.Popen([HARNESS, "analyze", str(store)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True, env={**os.environ, "TMPDIR": scratch})
    group = process.pid
    try:
        time.sleep(delay)
        process.send_signal(sig)
        process.wait(timeout=120)
        deadline = time.monotonic() + linger
        while left_behind(group) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left_behind(group)
    finally:
        if process.poll() is None:
            process.kill()
        for leftover in left_behind(group):  # never leave one to the next test, whatever happened
            os.kill(int(leftover.split(":")[0]), signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stored_run(tmp_path_factory.mktemp("orphans"))


@pytest.mark.parametrize(("delay", "sig"), [(4.0, signal.SIGTERM), (9.0, signal.SIGTERM), (7.0, signal.SIGKILL)],
                         ids=["term-while-spark-starts", "term-while-it-judges", "kill"])
def test_a_stopped_analysis_leaves_no_spark_process(store: Path, delay: float, sig: int) -> None:
    assert probe(store, delay, sig) == []


@pytest.mark.parametrize("sig", [None, signal.SIGTERM], ids=["to-the-end", "term-while-it-judges"])
def test_an_analysis_leaves_none_of_sparks_temporary_files(store: Path, tmp_path: Path, sig: int | None) -> None:
    """The JVM writes its temporary files (``spark-*``, ``artifacts-*``, native libraries) in a directory of
    the harness's, in ``TMPDIR``, and the harness removes it when it ends (they were left in ``/tmp``)."""
    from harness.analysis.spark import JVM_SCRATCH_PREFIX

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    process = subprocess.Popen([HARNESS, "analyze", str(store)], env={**os.environ, "TMPDIR": str(temporary)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    written: set[str] = set()
    jvms: set[str] = set()
    perf_files: set[Path] = set()
    try:
        deadline = time.monotonic() + 240
        while process.poll() is None and time.monotonic() < deadline:
            written |= {path.name.split("-")[0] for path in temporary.glob(f"{JVM_SCRATCH_PREFIX}*/*")}
            for found in left_behind(process.pid):
                pid, command = found.split(": ", 1)
                if "java" in command.split(" ", 1)[0]:
                    jvms.add(pid)
                    perf_files |= {p for p in [PERF_DATA / pid] if p.exists()}
            if sig is not None and "spark" in written:
                process.send_signal(sig)
                sig = None
            time.sleep(0.1)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert "spark" in written  # the JVM's own temporary directories were there
    assert list(temporary.glob(f"{JVM_SCRATCH_PREFIX}*")) == []
    # HotSpot's performance-data file (in /tmp whatever TMPDIR says) is never made, so the SIGKILL that
    # ends the JVM cannot leave it behind
    assert jvms and not perf_files, (jvms, perf_files)


def test_a_signal_during_harness_runs_spark_analysis_leaves_the_run_whole_and_unjudged(tmp_path: Path) -> None:
    """``harness run --analysis spark`` judges the run once, on Spark; a SIGTERM while Spark starts stops
    that, leaves no Java process, and the run is stored whole with the controller's record, for
    ``harness analyze`` to judge: one line saying so, exit 2."""
    from harness.analysis.spark import JVM_SCRATCH_PREFIX

    log = tmp_path / "run.log"
    store = tmp_path / "store"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    with log.open("w") as output:
        process = subprocess.Popen([HARNESS, "run", "--db", "cluster", "--platform", "sim", "--time-limit", "3",
                                    "--seed", "9", "--no-live", "--analysis", "spark", "--store", str(store)],
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, "TMPDIR": str(temporary)})
    try:
        deadline = time.monotonic() + 240
        while not list(store.glob("*/*/.results.json.*.tmp")) and not list(store.glob("*/*/results.json")):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        time.sleep(1.5)  # Spark is starting (its JVM alone takes longer than this)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    text = log.read_text()
    assert code == 2 and "Traceback" not in text, text
    assert "run interrupted while it was judged; it is stored whole: harness analyze" in text, text
    results = json.loads(next(store.glob("*/*/results.json")).read_text())
    assert results["valid"] == "unknown" and results["analysed_by"].startswith("nobody yet")
    assert left_behind(process.pid) == []
    assert list(temporary.glob(f"{JVM_SCRATCH_PREFIX}*")) == []  # the JVM ended before its scratch went


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as directory:
        runs = stored_run(Path(directory))
        left = 0
        for delay in (3.0, 5.0, 7.0, 9.0, 12.0):
            behind = probe(runs, delay)
            left += len(behind)
            print(f"SIGTERM after {delay:g} s: {len(behind)} process(es) left" + "".join(f"\n  {p}" for p in behind))
        print(f"{left} left in all")
        sys.exit(1 if left else 0)
