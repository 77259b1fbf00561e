"""What the Redis bundle holds: the Redis packages and the libraries the node image lacks, fetched through a
fake ``apt-get`` and ``dpkg-deb`` (``tests.harness.test_db_debian``, where the fetching and caching they
share with RabbitMQ is tested), Redis's one executable kept as ``bin/redis-server``, the CLI and the
libraries copied as regular executable files, and what is said when the packages lack part of it."""

from __future__ import annotations

import tarfile

import pytest

from adapters.redis.install import (
    BUNDLE,
    PACKAGES,
    RedisInstallError,
    fetch,
    find_bundle,
)
from tests.harness.test_db_debian import FakeApt, Link

FILES: dict[str, dict[str, bytes | str | Link]] = {
    "redis-tools": {"usr/bin/redis-check-rdb": b"ELF redis", "usr/bin/redis-cli": b"ELF cli"},
    "libatomic1": {"usr/lib/x86_64-linux-gnu/libatomic.so.1.2.0": b"ELF atomic",
                   "usr/lib/x86_64-linux-gnu/libatomic.so.1": Link("libatomic.so.1.2.0")},
    "liblzf1": {"usr/lib/x86_64-linux-gnu/liblzf.so.1.5": b"ELF lzf",
                "usr/lib/x86_64-linux-gnu/liblzf.so.1": Link("liblzf.so.1.5")},
    "libjemalloc2": {"usr/lib/x86_64-linux-gnu/libjemalloc.so.2": b"ELF jemalloc"},
}
VERSION = "5:7.0.15-1~deb12u10"


def test_fetch_downloads_every_package_and_packs_what_the_nodes_need(tmp_path) -> None:
    apt = FakeApt(FILES, version=VERSION)
    bundle = fetch(tmp_path, run=apt)
    assert apt.calls[0] == ["apt-get", "download", "-q", *PACKAGES]
    assert PACKAGES[0] == "redis-server"  # whose version the bundle carries
    assert {"redis-sentinel", "redis-tools", "libatomic1", "liblzf1", "libjemalloc2"} <= set(PACKAGES)
    assert bundle.path == tmp_path / BUNDLE and bundle.version == f"redis-server {VERSION}"
    with tarfile.open(bundle.path) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"bin/redis-server", "bin/redis-cli", "lib/libatomic.so.1", "lib/liblzf.so.1",
                                "lib/libjemalloc.so.2"}
        assert all(m.isfile() and m.mode & 0o111 for m in members.values())  # symlinks resolved, executable
        assert tar.extractfile("bin/redis-server").read() == b"ELF redis"
        assert tar.extractfile("lib/liblzf.so.1").read() == b"ELF lzf"
    assert find_bundle(tmp_path) == bundle


def test_packages_without_a_library_are_one_sentence(tmp_path) -> None:
    files = {**FILES, "liblzf1": {}}
    with pytest.raises(RedisInstallError) as raised:
        fetch(tmp_path, run=FakeApt(files, version=VERSION))
    assert str(raised.value) == "the packages hold no usr/lib/x86_64-linux-gnu/liblzf.so.1"
    assert not (tmp_path / BUNDLE).exists()


def test_without_a_bundle_the_error_names_what_to_run(tmp_path) -> None:
    said = "Debian's Redis is not on the controller .*python -m adapters.redis"
    with pytest.raises(RedisInstallError, match=said):
        find_bundle(tmp_path)
