"""``python -m checkers check``: verdict lines, JSON lines, exit codes, bad input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.cli import main
from checkers.registry import CHECKERS
from tests.checkers.scenario import HistoryBuilder, JournalBuilder
from workloads.generator import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _register_run(directory: Path, *, lose_write: bool = False) -> Path:
    """A run directory: history with LSNs, a heal and final reads; journals of two nodes."""
    b = HistoryBuilder()
    b.op(0, "write", "k", 1, lsn=(1, 1), node="n1")
    b.op(1, "write", "k", 2, lsn=(1, 2), node="n1")
    b.op(2, "read", "k", output=2, lsn=(1, 2), node="n1")
    b.op(9, "status", output={"node": "n1", "role": "leader", "term": 1, "leader": "n1"})
    b.invoke("nemesis", "heal")
    b.complete("nemesis", "ok", "heal")
    final = 1 if lose_write else 2
    b.op(3, "read", "k", output=final, lsn=(1, final), node="n2")
    b.write(directory / "history.jsonl")
    for node in ("n1", "n2"):
        j = JournalBuilder(node)
        j.start()
        j.role("leader" if node == "n1" else "follower", 1, "n1")
        j.apply((1, 1), "k", {"f": "write", "value": 1})
        j.apply((1, 2), "k", {"f": "write", "value": 2})
        j.write(directory / "nodes")
    return directory / "history.jsonl"


def test_valid_run_runs_every_applicable_checker(tmp_path: Path) -> None:
    path = _register_run(tmp_path / "run")
    code, out, err = _run("check", str(path), "--model", "register")
    lines = out.splitlines()
    checkers = [line.split(": ")[1] for line in lines]
    # The run has all a register run has (statuses, LSNs, journals, final reads): every checker of the
    # register workload applies, in the registry's order.
    assert checkers == [name for name in CHECKERS if name in WORKLOADS["register"].checkers]
    assert all(line.split(": ")[2] == "valid" for line in lines), out
    assert (code, err) == (0, "")


def test_lost_write_exits_1_and_json_lines_have_the_results_shape(tmp_path: Path) -> None:
    path = _register_run(tmp_path / "run", lose_write=True)
    code, out, _ = _run(
        "check", str(tmp_path / "run"), "--model", "register", "--json", "--checker", "durability"
    )
    assert code == 1
    (entry,) = [json.loads(line) for line in out.splitlines()]
    assert set(entry) == {"file", "checker", "valid", "summary", "counterexample", "stats"}
    assert (entry["file"], entry["checker"], entry["valid"]) == (str(tmp_path / "run"), "durability", False)
    assert entry["counterexample"]["lost"][0]["value"] == 2
    assert path.exists()


def test_unknown_and_none_invalid_exits_2(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    path = b.write(tmp_path / "h.jsonl")
    code, out, _ = _run(
        "check", str(path), "--model", "register", "--checker", "linearizable,lsn-monotonicity"
    )
    assert code == 2
    first, second = out.splitlines()
    assert first.startswith(f"{path}: linearizable: valid: ")
    assert second.startswith(f"{path}: lsn-monotonicity: unknown: ")


def test_default_checkers_for_a_bare_history(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    b.op(1, "read", "k", output=1)
    path = b.write(tmp_path / "h.jsonl")
    code, out, _ = _run("check", str(path), "--model", "register")
    assert [line.split(": ")[1] for line in out.splitlines()] == ["linearizable"]
    assert code == 0


def test_malformed_history_exits_254_and_other_files_are_still_checked(tmp_path: Path) -> None:
    good = _register_run(tmp_path / "run")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"index": 0, "time": 0, "process": 0, "type": "ok", "f": "read", "key": null}\n')
    code, out, err = _run("check", str(bad), str(good), "--model", "register", "--checker", "durability")
    assert code == 254
    assert err == f"bad input: {bad}:1: ok completion for process 0 without an invoke\n"
    assert out.startswith(f"{good}: durability: valid")


DEEP = 1_200
"""Deeper than Python's recursion limit: a value nested this far raised RecursionError and exited 1."""


@pytest.mark.parametrize(("name", "text", "options"), [
    ("deep.jsonl", '{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "write", "key": "k", "value": '
     + "[" * DEEP + "]" * DEEP + "}\n", ()),
    ("deep.edn", "[{:index 0 :type :invoke :process 0 :f :write :value " + "[" * DEEP + "]" * DEEP + "}]\n", ()),
    ("deep.json", '[{"index": 0, "type": "invoke", "process": 0, "f": "write", "value": '
     + "[" * DEEP + "]" * DEEP + "}]\n", ("--format", "jepsen-json")),
])
def test_a_value_nested_too_deeply_is_bad_input_not_invalid(
    tmp_path: Path, name: str, text: str, options: tuple[str, ...]
) -> None:
    history = tmp_path / name
    history.write_text(text)
    code, _, err = _run("check", str(history), "--model", "cas-register", *options)
    assert code == 254
    assert err.startswith(f"bad input: {history}") and "nested too deeply" in err and err.count("\n") == 1


@pytest.mark.parametrize("options", [(), ("--format", "edn"), ("--format", "jepsen-json")])
def test_a_device_is_refused_rather_than_read_for_ever(options: tuple[str, ...]) -> None:
    """``/dev/zero`` is one endless line: it grew to 5 GB past any ``--timeout``."""
    code, _, err = _run("check", "/dev/zero", "--timeout", "5", "--model", "cas-register", *options)
    assert (code, err) == (254, "bad input: /dev/zero: is a device, not a history file\n")


def test_a_crash_of_the_checker_is_255_never_a_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history = _register_run(tmp_path / "run")

    def crash(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug in a checker")

    monkeypatch.setattr("checkers.cli.check", crash)
    code, out, err = _run("check", str(history), "--model", "register")
    assert code == 255 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: the checker crashed (exit 255): ZeroDivisionError: a bug")


def test_bad_journal_is_bad_input(tmp_path: Path) -> None:
    path = _register_run(tmp_path / "run")
    journal = tmp_path / "run" / "nodes" / "n2" / "journal.jsonl"
    journal.write_text(journal.read_text() + '{"node": "n2", "seq": 9, "wall": 1, "event": "stop"}\n')
    code, _, err = _run("check", str(path), "--model", "register")
    assert code == 254
    assert err == f"bad input: {journal}:5: seq is 9, expected 4\n"


def test_explicit_journals_directory(tmp_path: Path) -> None:
    _register_run(tmp_path / "run")
    history = tmp_path / "elsewhere" / "history.jsonl"
    history.parent.mkdir()
    history.write_text((tmp_path / "run" / "history.jsonl").read_text())
    code, out, _ = _run(
        "check",
        str(history),
        "--model",
        "register",
        "--journals",
        str(tmp_path / "run" / "nodes"),
        "--checker",
        "lsn-monotonicity,single-leader-per-term",
        "--json",
    )
    entries = [json.loads(line) for line in out.splitlines()]
    assert [e["checker"] for e in entries] == ["lsn-monotonicity", "single-leader-per-term"]
    assert entries[0]["stats"]["apply_events"] == 4
    assert code == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "x.jsonl", "--model", "graph"], "invalid choice: 'graph'"),
        (["check", "x.jsonl"], "required: --model"),
        (["check", "x.jsonl", "--model", "register", "--checker", "nope"], "unknown checker 'nope'"),
        (["check", "x.jsonl", "--model", "register", "--timeout", "0"], "--timeout must be positive"),
        ([], "required: command"),
    ],
)
def test_bad_arguments_exit_254_with_one_line(argv: list[str], message: str) -> None:
    code, out, err = _run(*argv)
    assert code == 254 and out == ""
    assert err.count("\n") == 1 and message in err, err


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    code, _, err = _run("check", str(tmp_path / "absent.jsonl"), "--model", "register")
    assert code == 254 and "absent.jsonl: no such file" in err


DOCUMENTED_CHECKERS = ("linearizable", "single-leader-per-term", "lsn-monotonicity", "durability", "log")
"""An explicit list because the list is the contract: the checker names ``--checker`` takes, ``list``
prints and ``results.json`` records (docs/checkers.md; the CLI's interface is kept stable). A checker may
be added; none of these may go or be renamed."""


def test_list_names_every_registered_checker_and_keeps_the_documented_names() -> None:
    code, out, _ = _run("list")
    assert code == 0
    names = [line.split(":")[0] for line in out.splitlines()]
    assert names == list(CHECKERS)
    assert set(DOCUMENTED_CHECKERS) <= set(names)


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    path = _register_run(tmp_path / "run", lose_write=True)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "checkers",
            "check",
            str(path),
            "--model",
            "register",
            "--checker",
            "durability",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout.startswith(f"{path}: durability: invalid: 1 lost")


def test_queue_history_gets_durability_by_default(tmp_path: Path) -> None:
    b = HistoryBuilder()
    message = {"guid": "g1", "value": 1}
    b.op(0, "put", "q", message)
    b.invoke("nemesis", "heal")
    b.complete("nemesis", "ok", "heal")
    b.op(1, "consume", "q", output=message)
    b.op(1, "consume", "q", output=None)
    path = b.write(tmp_path / "h.jsonl")
    code, out, _ = _run("check", str(path), "--model", "queue")
    assert [line.split(": ")[1:3] for line in out.splitlines()] == [
        ["linearizable", "valid"],
        ["durability", "valid"],
    ]
    assert code == 0
