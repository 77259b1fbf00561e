"""The store layout of FORMATS.md: run directories, the latest link, atomic JSON, finding a run."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness import store
from harness.compose import compose
from harness.spec import ConfigError, TestSpec
from harness.store import RunDir, StoreError


def test_run_directory_is_named_by_test_and_utc_second(tmp_path) -> None:
    started = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=2)))
    run = store.create_run(tmp_path, "cluster-blazingmq-register", started)
    assert run.path == tmp_path / "cluster-blazingmq-register" / "20260304T030607"
    assert run.nodes.is_dir()
    assert run.test_name == "cluster-blazingmq-register"
    assert (tmp_path / "latest").resolve() == run.path.resolve()
    assert not os.path.isabs(os.readlink(tmp_path / "latest"))
    assert run.journal("n1") == run.path / "nodes" / "n1" / "journal.jsonl"
    assert run.journal("n1").parent.is_dir()


def test_a_second_run_in_the_same_second_does_not_overwrite_the_first(tmp_path) -> None:
    started = datetime(2026, 1, 1, tzinfo=UTC)
    first = store.create_run(tmp_path, "t", started)
    second = store.create_run(tmp_path, "t", started)
    assert first.path.name == "20260101T000000"
    assert second.path.name == "20260101T000000-2"
    assert (tmp_path / "latest").resolve() == second.path.resolve()


def test_test_names_become_one_safe_directory_name() -> None:
    assert store.safe_name("cluster blazingmq/register partition,kill") == "cluster-blazingmq-register-partition-kill"
    assert store.safe_name("a+b=c.d") == "a+b=c.d"
    with pytest.raises(StoreError, match="no usable characters"):
        store.safe_name("///")


def test_json_documents_round_trip_and_leave_no_temporary_file(tmp_path) -> None:
    run = store.create_run(tmp_path, "t", datetime(2026, 1, 1, tzinfo=UTC))
    store.write_json(run.test_json, {"seed": 42, "nodes": ["n1", "n2"]})
    assert store.read_json(run.test_json) == {"seed": 42, "nodes": ["n1", "n2"]}
    count = store.write_jsonl(run.schedule, [{"at": 1.5, "f": "kill"}, {"at": 3.0, "f": "heal"}])
    assert count == 2
    assert store.read_jsonl(run.schedule) == [{"at": 1.5, "f": "kill"}, {"at": 3.0, "f": "heal"}]
    assert sorted(p.name for p in run.path.iterdir()) == ["nodes", "schedule.jsonl", "test.json"]


def test_find_run_accepts_a_run_latest_or_a_store(tmp_path) -> None:
    run = store.create_run(tmp_path, "t", datetime(2026, 1, 1, tzinfo=UTC))
    store.write_json(run.test_json, {"seed": 1})
    assert store.find_run(run.path) == RunDir(run.path.resolve())
    assert store.find_run(tmp_path / "latest") == RunDir(run.path.resolve())
    assert store.find_run(tmp_path) == RunDir(run.path.resolve())


def test_find_run_says_what_is_wrong(tmp_path) -> None:
    with pytest.raises(StoreError, match="no such directory"):
        store.find_run(tmp_path / "missing")
    with pytest.raises(StoreError, match="not a stored run"):
        store.find_run(tmp_path)


def test_unreadable_documents_name_the_file_and_line(tmp_path) -> None:
    bad = tmp_path / "schedule.jsonl"
    bad.write_text('{"at": 1}\n[1]\n', encoding="utf-8")
    with pytest.raises(StoreError, match=r"schedule.jsonl:2: expected a JSON object"):
        store.read_jsonl(bad)
    broken = tmp_path / "test.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(StoreError, match="test.json: bad JSON"):
        store.read_json(broken)


def test_versions_and_commit_describe_the_controller(tmp_path) -> None:
    found = store.versions()
    assert found["python"].count(".") == 2
    assert "docker" in found
    assert store.git_commit(tmp_path) is None
    json.dumps(found)


@pytest.mark.parametrize("name", sorted(store.STORE_ENTRIES) + ["LATEST", "Index.html"])
def test_a_test_named_like_one_of_the_stores_own_entries_is_refused(name: str) -> None:
    """``--name latest`` stored the run inside the previous run (a symlink loop); ``dataset`` hid it from
    ``harness analyze``; ``index.html`` crashed with FileExistsError."""
    with pytest.raises(StoreError, match="taken by the store itself"):
        store.test_directory(name)
    with pytest.raises(ConfigError, match="taken by the store itself"):
        compose(TestSpec(seed=1, db="cluster", platform="sim", name=name))


def test_a_test_name_longer_than_a_directory_name_may_be_is_refused() -> None:
    assert store.test_directory("x" * store.NAME_MAX) == "x" * store.NAME_MAX
    with pytest.raises(StoreError, match="longer than a directory name may be"):
        store.test_directory("x" * (store.NAME_MAX + 1))


@pytest.mark.parametrize("where", ["a-file", "/proc/no-store", "/sys/kernel/no-store"])
def test_a_store_that_cannot_hold_runs_is_one_sentence(tmp_path, where: str) -> None:
    if where == "a-file":
        where = str(tmp_path / "a-file")
        Path(where).write_text("")
    with pytest.raises(StoreError, match=f"--store {where}: (a file is there|cannot hold runs)"):
        store.create_run(where, "test", datetime.now(UTC))
