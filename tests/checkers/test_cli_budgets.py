"""``python -m checkers`` under budgets, whatever the input: ``--timeout`` counted from the process's
start and held while reading (a pipe that never ends), ``--max-memory`` held for a file without
newlines, and nesting, line length and number size bounded. Every answer is one line on stderr, exit
254 (bad input) or 2 (a budget), never 1 (which says "invalid")."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from checkers.cli import main

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent / "jepsen"


def _command(*argv: str, timeout: float = 60) -> tuple[int, str, str, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "checkers", *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        check=False,
    )
    return result.returncode, result.stdout, result.stderr, time.monotonic() - started


def test_a_directory_holding_a_jepsen_history_edn(tmp_path: Path) -> None:
    store = tmp_path / "store" / "register" / "20240101T000000.000Z"
    store.mkdir(parents=True)
    (store / "history.edn").write_text((HERE / "history-bad.edn").read_text())
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(store), "--model", "cas-register"], out=out, err=err) == 1
    assert out.getvalue().startswith(f"{store}: linearizable: invalid")


def test_dev_zero_is_one_line_in_bounded_time() -> None:
    code, out, err, took = _command("check", "--timeout", "5", "/dev/zero", "--model", "cas-register")
    assert (code, out) == (254, "") and err.count("\n") == 1 and "is a device" in err
    assert took < 5


@pytest.mark.parametrize("name", ["pipe.edn", "pipe.jsonl"])
def test_the_timeout_holds_while_reading_a_pipe_that_never_ends(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    opened = threading.Event()

    def writer() -> None:  # opens the pipe and writes one line, then holds it open without writing
        with fifo.open("w") as handle:
            opened.set()
            handle.write("{:index 0 " if name.endswith(".edn") else '{"index": 0, ')  # no newline
            handle.flush()
            time.sleep(8)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    code, out, err, took = _command("check", str(fifo), "--timeout", "1", "--model", "cas-register")
    # The command answers itself (unknown, on stdout) or its supervisor stops it (stderr): one line.
    assert code == 2 and (out + err).count("\n") == 1 and "time budget of 1 s ran out" in out + err, (out, err)
    assert took < 1 + 1.5 + 1.5  # the budget, its grace, and interpreter start-up on a loaded machine


def test_the_timeout_counts_from_the_process_start() -> None:
    # Start-up and imports alone take longer than this budget: no file is read. Either the command says
    # so itself (each file unknown) or, past the grace, its supervisor stops it with one line.
    code, out, err, _ = _command("check", str(HERE / "register-good.edn"), "--timeout", "0.001",
                                 "--model", "cas-register")
    assert code == 2
    if out:
        assert err == "" and "time budget of 0.001 s ran out" in out and "before this file was read" in out
    else:
        assert err.count("\n") == 1 and "time budget of 0.001 s ran out: the command was stopped" in err


def test_max_memory_holds_for_a_file_without_newlines(tmp_path: Path) -> None:
    path = tmp_path / "one-line.jsonl"
    with path.open("wb") as handle:
        for _ in range(12):
            handle.write(b"x" * (8 << 20))  # 96 MiB, not one newline
    code, out, err, took = _command("check", str(path), "--max-memory", "8M", "--model", "cas-register")
    assert code in (2, 254) and out == "" and err.count("\n") == 1, err
    assert code == 254 or "memory budget (--max-memory 8,388,608 bytes) ran out" in err


@pytest.mark.parametrize("name", ["long.edn", "long.jsonl"])
def test_a_very_long_line_is_one_line_never_invalid(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b'{"index" ' + b"x" * (20 << 20) + b"\n")
    code, out, err, _ = _command("check", str(path), "--model", "cas-register")
    assert code in (2, 254) and out == "" and err.count("\n") == 1, err


DEEP = 1_000


@pytest.mark.parametrize(
    ("name", "text", "options"),
    [
        ("deep-line.edn", "{:index 0 :type :invoke :process 0 :f :write :value " + "[" * DEEP + "]" * DEEP + "}\n", ()),
        ("deep-vector.edn", "[{:index 0 :type :invoke :process 0 :f :write :value " + "(" * DEEP + ")" * DEEP + "}]",
         ()),
        ("deep-tagged.edn", "[#jepsen.history.Op{:index 0 :value " + "#{" * DEEP + "}" * DEEP + "}]", ()),
        ("deep.jsonl", '{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "write", "key": "k", "value": '
         + "[" * DEEP + "]" * DEEP + "}\n", ()),
        ("deep.json", '[{"index": 0, "type": "invoke", "process": 0, "f": "write", "value": '
         + "[" * DEEP + "]" * DEEP + "}]\n", ("--format", "jepsen-json")),
        ("huge-number.edn", "{:index 0 :type :invoke :process 0 :f :write :value " + "9" * 100_000 + "}\n", ()),
        ("huge-number.jsonl", '{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "write", "value": '
         + "9" * 100_000 + "}\n", ()),
    ],
)
def test_deep_nesting_and_huge_numbers_are_one_line_exit_254(
    tmp_path: Path, name: str, text: str, options: tuple[str, ...]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, out, err, _ = _command("check", str(path), "--model", "cas-register", *options)
    assert (code, out) == (254, "") and err.count("\n") == 1 and err.startswith(f"bad input: {path}"), err


def test_a_line_longer_than_the_bound_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    """A well-formed JSON line of more than MAX_LINE_BYTES (a value of 72 MiB): one line, exit 254, and
    the command's memory stays near the bound, not the line's size (it held 2 GB for a 1 GB line)."""
    from checkers.source import MAX_LINE_BYTES

    path = tmp_path / "long-value.jsonl"
    with path.open("wb") as handle:
        handle.write(b'{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "write", "value": "')
        for _ in range(9):
            handle.write(b"x" * (8 << 20))
        handle.write(b'"}\n')
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
             "sys.stderr.write(r.stdout + r.stderr)")
    result = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "checkers", "check", str(path),
                             "--model", "register"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    code, peak_kib = map(int, result.stdout.split())
    assert code == 254 and result.stderr.count("\n") == 1, result.stderr
    assert f"{path}:1: a line of more than {MAX_LINE_BYTES:,} bytes" in result.stderr
    assert peak_kib * 1024 < MAX_LINE_BYTES + (200 << 20), peak_kib  # the bound plus the interpreter
