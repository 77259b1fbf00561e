"""Several processes replacing the same store file at once (``harness.store.replacing``): workers of an
exploration or a suite each rewrite the store's ``index.html`` and their runs' documents, so two writers of
one file meet, and each must replace it whole without disturbing the other.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from harness import store
from tests.harness.at_once import run_at_once

WRITERS = 6
WRITES = 200
SIZE = 64 * 1024  # large enough that a write is several system calls, so writers interleave


def _rewrite(path: Path, writer: int, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait()
    for write in range(WRITES):
        if write % 2:
            store.write_json(path, {"writer": writer, "write": write, "pad": "x" * SIZE})
        else:
            store.write_text(path, json.dumps({"writer": writer, "write": write, "pad": "y" * SIZE}) + "\n")


def test_processes_replacing_one_file_at_once_never_fail_and_leave_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    codes = run_at_once(_rewrite, [(path, writer) for writer in range(WRITERS)])
    assert codes == [0] * WRITERS  # no writer's replace lost its file
    last = store.read_json(path)  # whole: one writer's document, not a mix or a truncation
    assert set(last) == {"writer", "write", "pad"} and len(last["pad"]) == SIZE
    assert [p.name for p in tmp_path.iterdir()] == ["index.json"]  # no temporary left


def test_a_write_that_fails_leaves_the_old_file_whole_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    store.write_json(path, {"verdict": True})

    def unserialisable(_: object) -> str:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError), store.replacing(path) as temporary:
        temporary.write_text("half")
        unserialisable(None)
    assert store.read_json(path) == {"verdict": True}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_each_process_writes_its_own_temporary_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    mine = store.temporary_name(path)
    assert mine.parent == tmp_path and mine.name.startswith(".report.html.") and mine.name.endswith(".tmp")
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        theirs = pool.apply(store.temporary_name, (path,))
    assert theirs != mine
