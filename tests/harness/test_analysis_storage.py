"""Where a store lives: local directories and URLs through Hadoop's FileSystem API.

The fast tests cover the local storage, URL parsing, partition names and the commands' refusals. The
``spark`` tests use Hadoop's own filesystem layer on ``file://`` URLs (the code path of ``hdfs://`` and
``s3a://`` stores, on the one filesystem every machine has): discovery, writes, and a whole
``harness analyze file:///...`` whose results, dataset and reports land beside the runs.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest

from harness.analysis import dataset
from harness.analysis.cli import main as analysis_main
from harness.analysis.discovery import find_runs
from harness.analysis.storage import LocalStorage, StorageError, is_url, split_url
from tests.harness.synthetic_runs import write_run

pytest_plugins = ("tests.harness.spark_fixtures",)


@pytest.mark.parametrize(
    ("url", "root", "path"),
    [
        ("hdfs://namenode:8020/chaos/store", "hdfs://namenode:8020", "/chaos/store"),
        ("s3a://bucket/nightly/store/", "s3a://bucket", "/nightly/store"),
        ("file:///srv/store", "file://", "/srv/store"),
        ("file:/srv/store", "file://", "/srv/store"),
        ("FILE:///srv/a/../store", "file://", "/srv/store"),
    ],
)
def test_urls_split_into_a_filesystem_and_a_path(url: str, root: str, path: str) -> None:
    assert is_url(url)
    assert split_url(url) == (root, PurePosixPath(path))


@pytest.mark.parametrize(
    ("url", "message"),
    [("hdfs:///chaos/store", "no host"), ("file://host/srv/store", "names no host"), ("hdfs:", "no host"), ("store/x", "not a URL")],
)
def test_a_url_that_names_nothing_is_one_sentence(url: str, message: str) -> None:
    with pytest.raises(StorageError, match=message):
        split_url(url)


def test_plain_paths_are_not_urls() -> None:
    assert not any(is_url(p) for p in ("store", "/srv/store", "./file:x", "store/latest", "C"))


def test_local_storage_writes_atomically_and_lists_without_following_links(tmp_path: Path) -> None:
    storage = LocalStorage()
    target = tmp_path / "a" / "b" / "results.json"
    storage.write_bytes(target, b"one")
    storage.write_bytes(target, b"two")
    assert storage.read_bytes(target) == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]  # no temporary left
    (tmp_path / "a" / "link").symlink_to(tmp_path / "a" / "b")
    assert storage.list_dir(tmp_path / "a") == [("b", True), ("link", False)]
    assert storage.list_dir(tmp_path / "missing") == []
    storage.remove(tmp_path / "a" / "b")
    storage.remove(tmp_path / "a" / "b")  # nothing left: no error
    assert not (tmp_path / "a" / "b").exists()
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(target)


def test_partition_directories_are_named_as_spark_names_them() -> None:
    assert dataset.escape_partition_value("reg=1%/x:y") == "reg%3D1%25%2Fx%3Ay"
    assert dataset.escape_partition_value("blazingmq-register_a.b+c") == "blazingmq-register_a.b+c"
    path = dataset.partition_dir(PurePosixPath("/s"), "runs", "t=1", "20261120T020000")
    assert str(path) == "/s/dataset/runs/test=t%3D1/run=20261120T020000"


def test_analyze_refuses_a_mix_of_paths_and_urls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, "reg", "20261120T020000", ops=10)
    assert analysis_main(["analyze", str(run), "--store", "hdfs://nn:8020/store"]) == 254
    err = capsys.readouterr().err.strip()
    assert err.startswith("harness analyze: give either plain paths or URLs") and "\n" not in err
    assert analysis_main(["analyze", "hdfs://a:1/store", "hdfs://b:1/store"]) == 254
    assert "2 filesystems" in capsys.readouterr().err


def test_a_suite_store_must_be_on_this_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert analysis_main(["suite", "suites/bugs.toml", "--store", "hdfs://nn:8020/store"]) == 254
    err = capsys.readouterr().err.strip()
    assert "written by the controller on this machine" in err and "\n" not in err


# --- through Hadoop's FileSystem API -------------------------------------------------------------


@pytest.mark.spark
def test_hadoop_storage_reads_writes_and_lists_like_the_local_one(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from harness.analysis.storage import HadoopStorage

    storage = HadoopStorage(spark, "file://")
    base = PurePosixPath(str(tmp_path))
    storage.write_bytes(base / "a" / "results.json", b'{"valid": true}')
    storage.write_bytes(base / "a" / "results.json", b'{"valid": false}')
    assert storage.read_bytes(base / "a" / "results.json") == b'{"valid": false}'
    assert (tmp_path / "a" / "results.json").read_bytes() == b'{"valid": false}'
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["results.json"]  # no .crc, no temporary
    assert storage.list_dir(base) == [("a", True)]
    assert storage.is_dir(base / "a") and storage.is_file(base / "a" / "results.json")
    assert not storage.is_file(base / "nothing") and storage.list_dir(base / "nothing") == []
    assert storage.local(base / "a") == tmp_path / "a"
    storage.remove(base / "a")
    assert not (tmp_path / "a").exists()
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(base / "a" / "results.json")


@pytest.mark.spark
def test_a_store_named_by_url_is_found_as_the_local_one(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from harness.analysis.storage import HadoopStorage

    store = tmp_path / "store"
    a = write_run(store, "reg", "20261120T020000", ops=10)
    write_run(store, "queue", "20261121T020000", ops=10)
    local = find_runs([store])
    remote = find_runs([f"file://{store}"], storage=HadoopStorage(spark, "file://"))
    assert [(str(r.path), r.test, r.run) for r in remote.runs] == [(str(r.path), r.test, r.run) for r in local.runs]
    assert str(remote.store) == str(store)
    only = find_runs([f"file://{a}"], storage=HadoopStorage(spark, "file://"))
    assert [r.run for r in only.runs] == [a.name]
    (store / "latest").symlink_to("reg/20261120T020000")
    latest = find_runs([f"file://{store}/latest"], storage=HadoopStorage(spark, "file://"))
    assert [(r.test, r.run) for r in latest.runs] == [("reg", a.name)]  # the run, not "store/latest"


@pytest.mark.spark
def test_harness_analyze_of_a_file_url_writes_beside_the_runs(spark, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    valid = write_run(store, "reg", "20261120T020000", ops=60, seed=3)
    invalid = write_run(store, "reg", "20261121T020000", ops=60, seed=4, lost_write=True)
    assert analysis_main(["analyze", f"file://{store}", "--quiet", "--summary", "--store", f"file://{store}"]) == 1
    out = capsys.readouterr().out
    assert f"dataset in file://{store}/dataset" in out and f"summary written to file://{store}/summary.json" in out
    assert json.loads((valid / "results.json").read_text())["valid"] is True
    assert json.loads((invalid / "results.json").read_text())["valid"] is False
    assert (invalid / "report.html").is_file() and (store / "index.html").is_file()  # file:// is this machine
    runs = dataset.read_table(spark, store, "runs")
    assert runs is not None and {r["run"]: r["valid"] for r in runs.collect()} == {
        valid.name: "true", invalid.name: "false",
    }
    assert not list(store.rglob("*.crc")) and not list(store.rglob(".*.tmp"))


def test_local_uris_keep_the_characters_hadoop_quotes_itself() -> None:
    uri = LocalStorage().uri(PurePosixPath("/store/cluster-raft-register-partition+kill/a b"))
    assert uri == "file:///store/cluster-raft-register-partition+kill/a b"


@pytest.mark.spark
@pytest.mark.parametrize("test", ["cluster-raft-register-partition+kill+pause", "odd [1] {a,b} name*"])
def test_runs_whose_names_hold_plus_spaces_or_glob_characters_are_read(spark, tmp_path: Path, test: str) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    run = write_run(store, test, "20261120T020000", ops=40, seed=5)
    assert analysis_main(["analyze", str(store), "--quiet"]) == 0
    assert json.loads((run / "results.json").read_text())["valid"] is True


@pytest.mark.spark
def test_a_store_whose_path_holds_glob_characters_reads_its_dataset_back(spark, tmp_path: Path) -> None:  # noqa: ANN001
    store = tmp_path / "nightly [b] {x,y} *"
    write_run(store, "reg", "20261120T020000", ops=40, seed=5)
    assert analysis_main(["analyze", str(store), "--quiet", "--store", str(store)]) == 0
    runs = dataset.read_table(spark, store, "runs")
    assert runs is not None and [r["valid"] for r in runs.collect()] == ["true"]


def test_a_local_write_cut_short_leaves_a_temporary_harness_clean_knows(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import os

    from harness import store as harness_store

    def killed(*_args: object) -> None:
        raise KeyboardInterrupt  # the writer stopped between writing its temporary and renaming it

    monkeypatch.setattr(os, "replace", killed)
    target = tmp_path / "dataset" / "journal" / "part-00000.parquet"
    with pytest.raises(KeyboardInterrupt):
        LocalStorage().write_bytes(target, b"parquet")
    left = [path.name for path in target.parent.iterdir()]
    assert [harness_store.writer_of(name) for name in left] == [os.getpid()] and not target.exists()
