"""The Porcupine corpus (``../shared/corpora/porcupine``) written as Jepsen EDN, in both layouts (one
map per line, and Knossos' single vector): the same operations as the JSONL files and the verdicts
``MANIFEST.json`` expects. Skipped, saying so, where ``../shared`` is absent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.history import load_history
from checkers.linearizability import check_linearizability
from tests.checkers.test_corpus import CORPUS, _entries  # the corpus and its listing, in one place


def _edn(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + " ".join(_edn(v) for v in value) + "]"
    return json.dumps(value)  # numbers, and strings with JSON's escapes (EDN's, for these)


def _line(event: dict[str, Any]) -> str:
    value = event["value"] if event["key"] is None else [event["key"], event["value"]]
    fields = [
        f":index {event['index']}", f":time {event['time']}", f":type :{event['type']}",
        f":process {_edn(event['process']) if event['process'] != 'nemesis' else ':nemesis'}",
        f":f :{event['f']}", f":value {_edn(value)}",
    ]
    if event.get("error") is not None:
        fields.append(f":error {_edn(event['error'])}")
    return "{" + ", ".join(fields) + "}"


@pytest.mark.parametrize("entry", _entries())
def test_edn_layouts_of_the_corpus_get_the_same_operations_and_verdicts(entry: dict[str, Any], tmp_path: Path) -> None:
    source = CORPUS / entry["file"]
    events = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = [_line(event) for event in events]
    independent = "no" if all(event["key"] is None for event in events) else "yes"
    expected_ops = [op.to_json() for op in load_history(source).ops]
    by_line = tmp_path / "history.edn"
    by_line.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    vector = tmp_path / "knossos.edn"
    vector.write_text("[" + "\n ".join(lines) + "]\n", encoding="utf-8")
    for path in (by_line, vector):
        history = load_history(path, independent=independent)
        assert [op.to_json() for op in history.ops] == expected_ops, path.name
        verdict = check_linearizability(history.ops, entry["model"], timeout_s=60)
        expected = entry["expected_linearizable"]
        if expected is None:
            assert verdict.valid == "unknown"
        else:
            assert verdict.valid is expected, (path.name, verdict.summary)
