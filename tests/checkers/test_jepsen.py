"""Jepsen histories read directly (``checkers.jepsen``): EDN in Knossos' layout (one vector) and in
Jepsen's (one map per line), JSON exports, the field mapping, and known verdicts of our own EDN
histories with the features real Jepsen histories have (lone nemesis events, times going backwards,
failed cas without an error, info operations, independent keys). Knossos' own ``data/`` files are not
shipped here; ``docs/checkers.md`` gives the agreement measured against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.cli import main
from checkers.history import HistoryError, load_history
from checkers.jepsen import read_jepsen, to_json

HERE = Path(__file__).parent / "jepsen"

# file, model, extra arguments, expected exit code (0 valid, 1 invalid)
CASES = [
    ("register-good.edn", "cas-register", [], 0),
    ("register-bad.edn", "cas-register", [], 1),
    ("mismatch-bad.edn", "cas-register", [], 1),
    ("history-good.edn", "cas-register", [], 0),
    ("history-bad.edn", "cas-register", [], 1),
    ("mutex-good.edn", "mutex", [], 0),
    ("mutex-bad.edn", "mutex", [], 1),
    ("multi-register-good.edn", "multi-register", ["--initial", '{"x": 0, "y": 0}'], 0),
    ("multi-register-bad.edn", "multi-register", ["--initial", '{"x": 0, "y": 0}'], 1),
]


def _run(*argv: str) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("name", "model", "extra", "expected"), CASES, ids=[c[0] for c in CASES])
def test_our_edn_histories_get_their_known_verdicts(name: str, model: str, extra: list[str], expected: int) -> None:
    code, out, err = _run("check", str(HERE / name), "--model", model, "--json", *extra)
    assert code == expected, out + err
    entries = {e["checker"]: e for e in map(json.loads, out.splitlines())}
    assert entries["linearizable"]["valid"] is (expected == 0)


def test_failed_cas_without_error_is_dropped_and_lone_nemesis_events_are_accepted() -> None:
    history = load_history(HERE / "register-good.edn")
    cas = [op for op in history.ops if op.f == "cas"]
    assert [(op.type, op.error) for op in cas] == [("fail", None), ("fail", "cas-mismatch"), ("ok", None)]
    assert [(op.f, op.complete_index) for op in history.nemesis] == [("start", 6), ("stop", None)]
    assert history.warnings == ()


def test_jepsen_lines_with_independent_keys_and_backwards_time() -> None:
    history = load_history(HERE / "history-good.edn")
    assert {op.key for op in history.ops} == {1, 2}
    write = history.ops[0]
    assert (write.f, write.key, write.value, write.call, write.ret) == ("write", 1, 10, 0, 2)  # by index
    assert history.warnings and "time goes backwards" in history.warnings[0]
    info = next(op for op in history.ops if op.type == "info")
    assert info.error == '["timeout", "no reply"]'
    code, out, err = _run("check", str(HERE / "history-bad.edn"), "--model", "cas-register", "--json")
    assert code == 1
    assert json.loads(out)["counterexample"]["key"] == 2
    assert err.startswith("warning: ") and "time goes backwards" in err


def test_format_by_extension_or_forced(tmp_path: Path) -> None:
    ops = [
        {"process": 0, "type": "invoke", "f": "write", "value": 1},
        {"process": 0, "type": "ok", "f": "write", "value": 1},
        {"process": "nemesis", "type": "info", "f": "start"},
    ]
    exported = tmp_path / "ops.json"
    exported.write_text(json.dumps(ops))
    code, out, _ = _run("check", str(exported), "--model", "register", "--format", "jepsen-json")
    assert code == 0, out
    lines = tmp_path / "ops.jsonl"
    lines.write_text("".join(json.dumps(op) + "\n" for op in ops))
    assert [e["f"] for e in read_jepsen(lines, "jepsen-json")] == ["write", "write", "start"]
    # Without --format, .jsonl is ours, and these lines lack our index and time.
    code, _, err = _run("check", str(lines), "--model", "register")
    assert code == 254 and "missing field 'index'" in err
    copy = tmp_path / "history.txt"
    copy.write_text((HERE / "register-bad.edn").read_text())
    assert _run("check", str(copy), "--model", "cas-register", "--format", "edn")[0] == 1


def test_independent_detection_can_be_forced(tmp_path: Path) -> None:
    path = tmp_path / "pairs.edn"
    # A register whose values are pairs: detected as independent keys unless told.
    path.write_text("[{:process 0 :type :invoke :f :write :value [1 2]} {:process 0 :type :ok :f :write :value [1 2]}]")
    assert load_history(path).ops[0].key == 1
    assert load_history(path, independent="no").ops[0].value == [1, 2]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[{:process 0 :type :invoke}]", "missing field :f"),
        ("[1 2]", "expected an operation map"),
        ("[{:process 0 :type :invoke :f :read} #unknown/tag 3]", "unreadable EDN"),
        ("[{:process 0", "unreadable EDN"),
        ("[{:process 0 :type :invoke :f :read :index 1} {:process 1 :type :invoke :f :read :index 1}]", "share an :index"),
    ],
)
def test_bad_edn_is_one_line_exit_254(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "bad.edn"
    path.write_text(text)
    with pytest.raises(HistoryError, match=reason):
        load_history(path)
    code, out, err = _run("check", str(path), "--model", "cas-register")
    assert code == 254 and out == "" and len(err.splitlines()) == 1 and reason in err


def test_edn_values_become_json_values() -> None:
    import edn_format

    value = edn_format.loads('{:a #{2 1} :b [:c "d" nil] 3 1/2}')
    assert to_json(value) == {"a": [1, 2], "b": ["c", "d", None], "3": "1/2"}


def test_the_documented_mapping_names_every_field_the_reader_maps() -> None:
    import re

    import checkers.jepsen as jepsen

    docs = (Path(__file__).resolve().parents[2] / "docs" / "checkers.md").read_text(encoding="utf-8")
    in_code = set(re.findall(r"^``:(\w+)``", jepsen.__doc__ or "", re.MULTILINE))
    in_docs = set(re.findall(r"^\| `:(\w+)` \|", docs, re.MULTILINE))
    assert in_code == in_docs == {"index", "time", "process", "type", "f", "value", "error", "node"}


def test_one_map_per_line_is_read_piece_by_piece_within_the_time_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import itertools

    import checkers.edn as edn
    from checkers.judge import Budgets, judge_files

    monkeypatch.setattr(edn, "PIECE", 64)  # pieces that end inside forms, tokens and strings

    spread = tmp_path / "spread.edn"  # forms over several lines, so chunks end inside them
    spread.write_text((HERE / "history-good.edn").read_text().replace(", :f", ",\n :f"))
    whole = [op.to_json() for op in load_history(HERE / "history-good.edn").ops]
    assert [op.to_json() for op in load_history(spread, deadline=float("inf")).ops] == whole
    ticks = itertools.count()
    judgement = judge_files(spread, model="cas-register", budgets=Budgets(timeout_s=3), clock=lambda: next(ticks))
    summary = judgement.verdicts["linearizable"].summary
    assert "time budget of 3 s ran out while reading" in summary
