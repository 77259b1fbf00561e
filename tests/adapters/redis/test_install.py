"""Fetching Redis on the controller: ``apt-get download`` of the Redis packages and the libraries the node
image lacks, and ``dpkg-deb`` (a fake that acts as they do), packed into one tarball in the cache."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from adapters.redis.install import (
    BUNDLE,
    PACKAGES,
    RedisInstallError,
    cache_dir,
    fetch,
    find_bundle,
)

FILES = {
    "redis-tools": {"usr/bin/redis-check-rdb": b"ELF redis", "usr/bin/redis-cli": b"ELF cli"},
    "libatomic1": {"usr/lib/x86_64-linux-gnu/libatomic.so.1.2.0": b"ELF atomic"},
    "liblzf1": {"usr/lib/x86_64-linux-gnu/liblzf.so.1.5": b"ELF lzf"},
    "libjemalloc2": {"usr/lib/x86_64-linux-gnu/libjemalloc.so.2": b"ELF jemalloc"},
}
LINKS = {"libatomic1": ("usr/lib/x86_64-linux-gnu/libatomic.so.1", "libatomic.so.1.2.0"),
         "liblzf1": ("usr/lib/x86_64-linux-gnu/liblzf.so.1", "liblzf.so.1.5")}


class FakeApt:
    """Acts as ``apt-get download`` (a .deb per package into its cwd; ``missing`` ones left out) and
    ``dpkg-deb`` (the version; unpacking the package's files and soname symlinks); records every argv."""

    def __init__(self, missing: tuple[str, ...] = ()) -> None:
        self.calls: list[list[str]] = []
        self.missing = missing

    def __call__(self, argv: list[str], cwd: Any = None, check: bool = False, **_: Any) -> subprocess.CompletedProcess:
        self.calls.append(argv)
        if argv[:2] == ["apt-get", "download"]:
            for package in argv[3:]:
                if package not in self.missing:
                    (Path(cwd) / f"{package}_1.0_amd64.deb").write_bytes(b"deb")
            if self.missing:
                return subprocess.CompletedProcess(argv, 100, "", f"E: Unable to locate package {self.missing[0]}\n")
        elif argv[:2] == ["dpkg-deb", "-f"]:
            return subprocess.CompletedProcess(argv, 0, "5:7.0.15-1~deb12u10\n", "")
        elif argv[:2] == ["dpkg-deb", "-x"]:
            package = Path(argv[2]).name.split("_")[0]
            root = Path(argv[3])
            for name, data in FILES.get(package, {}).items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(data)
            if package in LINKS:
                link, target = LINKS[package]
                (root / link).symlink_to(target)
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_the_cache_lives_outside_the_repository(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" / "redis"
    monkeypatch.delenv("CHAOS_HARNESS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "chaos-harness" / "redis"


def test_fetch_downloads_every_package_and_packs_what_the_nodes_need(tmp_path) -> None:
    apt = FakeApt()
    bundle = fetch(tmp_path, run=apt)
    assert apt.calls[0] == ["apt-get", "download", "-q", *PACKAGES]
    assert {"redis-server", "redis-sentinel", "redis-tools"} <= set(PACKAGES)
    assert bundle.path == tmp_path / BUNDLE and bundle.version == "redis-server 5:7.0.15-1~deb12u10"
    with tarfile.open(bundle.path) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"bin/redis-server", "bin/redis-cli", "lib/libatomic.so.1", "lib/liblzf.so.1",
                                "lib/libjemalloc.so.2"}
        assert all(m.isfile() and m.mode & 0o111 for m in members.values())  # symlinks resolved, executable
        assert tar.extractfile("bin/redis-server").read() == b"ELF redis"
        assert tar.extractfile("lib/liblzf.so.1").read() == b"ELF lzf"
    assert find_bundle(tmp_path) == bundle
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fetch-")]


def test_a_package_apt_cannot_find_is_one_sentence(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)  # not root: no apt-get update
    with pytest.raises(RedisInstallError, match="apt-get download .* failed .E: Unable to locate package liblzf1"):
        fetch(tmp_path, run=FakeApt(missing=("liblzf1",)))
    assert not (tmp_path / BUNDLE).exists()


def test_without_a_bundle_the_error_names_what_to_run(tmp_path) -> None:
    with pytest.raises(RedisInstallError, match="python -m adapters.redis"):
        find_bundle(tmp_path)
