"""harness.db.debian, as each shipped single-package adapter uses it (etcd, NATS: their ``DebianBinary``):
``apt-get download`` and ``dpkg-deb`` replaced by a fake that acts as they do, the cache outside the
repository, apt's lists updated once, and what a user is told when something is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from adapters.etcd import install as etcd_install
from adapters.nats import install as nats_install
from harness.db import debian
from harness.db.debian import DebianBinary

INSTALLS = {"etcd": (etcd_install, etcd_install.ETCD), "nats": (nats_install, nats_install.NATS)}
"""Every shipped adapter whose system is one executable of one Debian package, with its DebianBinary."""
VERSION = "1.2.3-4+b5"


class FakeApt:
    """Acts as ``apt-get download`` (writes the package's .deb into its cwd, or fails ``failures`` times) and
    ``dpkg-deb`` (answers the version, unpacks the executable where the package keeps it); records argv."""

    def __init__(self, binary: DebianBinary, failures: int = 0) -> None:
        self.binary = binary
        self.calls: list[list[str]] = []
        self.failures = failures

    def __call__(self, argv: list[str], cwd: Any = None, check: bool = False, **_: Any) -> subprocess.CompletedProcess:
        self.calls.append(argv)
        if argv[:2] == ["apt-get", "download"]:
            if self.failures:
                self.failures -= 1
                return subprocess.CompletedProcess(argv, 100, "", f"E: Unable to locate package {argv[3]}\n")
            (Path(cwd) / f"{self.binary.package}_{VERSION}_amd64.deb").write_bytes(b"deb")
        elif argv[:2] == ["dpkg-deb", "-f"]:
            return subprocess.CompletedProcess(argv, 0, VERSION + "\n", "")
        elif argv[:2] == ["dpkg-deb", "-x"]:
            target = Path(argv[3]) / self.binary.in_package
            target.parent.mkdir(parents=True)
            target.write_bytes(b"ELF " + self.binary.name.encode())
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.fixture(params=sorted(INSTALLS))
def shipped(request: pytest.FixtureRequest) -> tuple[Any, DebianBinary]:
    return INSTALLS[request.param]


def test_the_cache_lives_outside_the_repository(shipped, monkeypatch, tmp_path) -> None:
    module, binary = shipped
    monkeypatch.delenv("CHAOS_HARNESS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert module.cache_dir() == tmp_path / "xdg" / "chaos-harness" / binary.package
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "mine"))
    assert module.cache_dir() == tmp_path / "mine" / binary.package


def test_fetch_keeps_only_the_binary_and_the_package_version(shipped, tmp_path) -> None:
    module, binary = shipped
    apt = FakeApt(binary)
    found = module.fetch(tmp_path, run=apt)
    path = tmp_path / binary.name
    assert found.path == path and found.version == f"{binary.package} {VERSION}"
    assert path.read_bytes() == b"ELF " + binary.name.encode() and path.stat().st_mode & 0o111
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["VERSION", binary.name])
    assert [argv[:2] for argv in apt.calls] == [["apt-get", "download"], ["dpkg-deb", "-f"], ["dpkg-deb", "-x"]]
    assert module.find_binary(cache=tmp_path) == found
    assert found.to_json() == {"binary": str(path), "version": found.version, "sha256": found.sha256}


def test_apt_lists_are_updated_once_when_apt_does_not_know_the_package(shipped, tmp_path, monkeypatch) -> None:
    module, binary = shipped
    monkeypatch.setattr(debian.os, "geteuid", lambda: 0)
    apt = FakeApt(binary, failures=1)
    module.fetch(tmp_path, run=apt)
    assert [argv[:2] for argv in apt.calls[:3]] == [["apt-get", "download"], ["apt-get", "update"],
                                                     ["apt-get", "download"]]


def test_a_download_that_keeps_failing_says_what_apt_said(shipped, tmp_path, monkeypatch) -> None:
    module, binary = shipped
    monkeypatch.setattr(debian.os, "geteuid", lambda: 0)
    with pytest.raises(binary.error, match=f"apt-get download {binary.package} failed .E: Unable to locate package"):
        module.fetch(tmp_path, run=FakeApt(binary, failures=2))
    assert not (tmp_path / binary.name).exists()


def test_a_binary_of_ones_own_or_none_is_one_sentence(shipped, tmp_path) -> None:
    module, binary = shipped
    with pytest.raises(binary.error, match="does not exist"):
        module.find_binary(cache=tmp_path)
    with pytest.raises(binary.error, match="no executable file there"):
        module.find_binary(str(tmp_path / "nothing"))
    own = tmp_path / "mine"
    own.write_bytes(b"ELF")
    own.chmod(0o755)
    assert module.find_binary(str(own)).version == "given by --db-opt binary"


def test_the_install_command_does_nothing_when_the_binary_is_cached(shipped, tmp_path, monkeypatch, capsys) -> None:
    module, binary = shipped
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    (tmp_path / binary.package).mkdir()
    (tmp_path / binary.package / binary.name).write_bytes(b"ELF")
    (tmp_path / binary.package / "VERSION").write_text(VERSION + "\n")
    assert module.main([]) == 0
    assert f"{binary.package} {VERSION}), already cached" in capsys.readouterr().out


def test_without_apt_the_install_command_says_what_to_do_instead(shipped, tmp_path, monkeypatch, capsys) -> None:
    module, _ = shipped
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(debian.shutil, "which", lambda name: None)
    assert module.main([]) == 254
    assert "give --db-opt binary=PATH" in capsys.readouterr().err
