"""Fetching nats-server on the controller: ``apt-get download`` and ``dpkg-deb`` (replaced by a fake that
acts as they do), the cache outside the repository, and what a user is told when something is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from adapters.nats import install
from adapters.nats.install import NatsInstallError, cache_dir, fetch, find_binary
from harness.db import debian

DEB = "nats-server_2.9.10-1+b3_amd64.deb"


class FakeApt:
    """Acts as ``apt-get download`` (writes the .deb into its cwd, or fails ``failures`` times) and
    ``dpkg-deb`` (answers the version, unpacks a ``usr/sbin/nats-server``); records every argv."""

    def __init__(self, failures: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.failures = failures

    def __call__(self, argv: list[str], cwd: Any = None, check: bool = False, **_: Any) -> subprocess.CompletedProcess:
        self.calls.append(argv)
        if argv[:2] == ["apt-get", "download"]:
            if self.failures:
                self.failures -= 1
                return subprocess.CompletedProcess(argv, 100, "", "E: Unable to locate package nats-server\n")
            (Path(cwd) / DEB).write_bytes(b"deb")
        elif argv[:2] == ["dpkg-deb", "-f"]:
            return subprocess.CompletedProcess(argv, 0, "2.9.10-1+b3\n", "")
        elif argv[:2] == ["dpkg-deb", "-x"]:
            target = Path(argv[3]) / "usr/sbin"
            target.mkdir(parents=True)
            (target / "nats-server").write_bytes(b"ELF nats-server")
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_the_cache_lives_outside_the_repository(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("CHAOS_HARNESS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "chaos-harness" / "nats-server"
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine" / "nats-server"


def test_fetch_keeps_only_the_binary_and_the_package_version(tmp_path) -> None:
    apt = FakeApt()
    found = fetch(tmp_path, run=apt)
    assert found.path == tmp_path / "nats-server" and found.version == "nats-server 2.9.10-1+b3"
    assert (tmp_path / "nats-server").read_bytes() == b"ELF nats-server"
    assert (tmp_path / "nats-server").stat().st_mode & 0o111
    assert sorted(p.name for p in tmp_path.iterdir()) == ["VERSION", "nats-server"]
    assert [argv[:2] for argv in apt.calls] == [["apt-get", "download"], ["dpkg-deb", "-f"], ["dpkg-deb", "-x"]]
    assert find_binary(cache=tmp_path) == found


def test_apt_lists_are_updated_once_when_apt_does_not_know_the_package(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(debian.os, "geteuid", lambda: 0)
    apt = FakeApt(failures=1)
    fetch(tmp_path, run=apt)
    assert [argv[:2] for argv in apt.calls[:3]] == [["apt-get", "download"], ["apt-get", "update"],
                                                     ["apt-get", "download"]]


def test_a_download_that_keeps_failing_says_what_apt_said(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(debian.os, "geteuid", lambda: 0)
    with pytest.raises(NatsInstallError, match="apt-get download nats-server failed .E: Unable to locate package"):
        fetch(tmp_path, run=FakeApt(failures=2))
    assert not (tmp_path / "nats-server").exists()


def test_the_install_command_does_nothing_when_the_binary_is_cached(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    (tmp_path / "nats-server").mkdir()
    (tmp_path / "nats-server" / "nats-server").write_bytes(b"ELF")
    (tmp_path / "nats-server" / "VERSION").write_text("2.9.10-1+b3\n")
    assert install.main([]) == 0
    assert "nats-server 2.9.10-1+b3), already cached" in capsys.readouterr().out


def test_without_apt_the_install_command_says_what_to_do_instead(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(debian.shutil, "which", lambda name: None)
    assert install.main([]) == 254
    assert "give --db-opt binary=PATH" in capsys.readouterr().err
