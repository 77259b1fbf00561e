"""docs/node-core.md shows the reference tables generated from the code (STYLE.md 9: one source of
truth; a test fails when they drift)."""

from __future__ import annotations

from pathlib import Path

from cluster.core import reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "node-core.md"


def test_the_reference_tables_in_the_doc_match_the_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert reference.replace_block(text) == text, (
        "docs/node-core.md is out of date: run `.venv/bin/python -m cluster.core.reference docs/node-core.md`")


def test_every_definition_appears_in_the_tables() -> None:
    rendered = reference.render()
    for name in ("ElectionScouting", "FollowerLSNRequest", "VoteRequest", "leadership-lost", "vote-twice",
                 "dedup_window", "applied"):
        assert f"`{name}`" in rendered, name
