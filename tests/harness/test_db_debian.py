"""harness.db.debian: ``apt-get download`` and ``dpkg-deb`` replaced by a fake that acts as they do
(:class:`FakeApt`, which the adapters' own install tests use too). A ``DebianBinary`` as each shipped
single-package adapter uses it (etcd, NATS), and a ``DebianBundle`` (several packages packed into one
tarball, as Redis and RabbitMQ are) on a toy system and on the shipped ones: the cache outside the
repository, apt's lists updated once, the cache replaced atomically, and what a user is told when
something is missing."""

from __future__ import annotations

import subprocess
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.etcd import install as etcd_install
from adapters.nats import install as nats_install
from adapters.rabbitmq import install as rabbitmq_install
from adapters.redis import install as redis_install
from harness.db import debian
from harness.db.debian import DebianBinary, DebianBundle, FetchError

INSTALLS = {"etcd": (etcd_install, etcd_install.ETCD), "nats": (nats_install, nats_install.NATS)}
"""Every shipped adapter whose system is one executable of one Debian package, with its DebianBinary."""
BUNDLES = {"rabbitmq": (rabbitmq_install, rabbitmq_install.RABBITMQ),
           "redis": (redis_install, redis_install.REDIS)}
"""Every shipped adapter whose system is several Debian packages in one tarball, with its DebianBundle."""
VERSION = "1.2.3-4+b5"


@dataclass(frozen=True)
class Link:
    """A symbolic link a fake package holds, to ``target`` (as soname links are)."""

    target: str


class FakeApt:
    """Acts as ``apt-get download`` (a .deb per package into its cwd; it fails ``failures`` times first, and
    always leaves out the ``missing`` packages, saying so) and ``dpkg-deb`` (answers ``version``; unpacks
    the package's ``files``: path -> bytes, text or a :class:`Link`); records every argv."""

    def __init__(self, files: Mapping[str, Mapping[str, bytes | str | Link]], *, version: str = VERSION,
                 failures: int = 0, missing: tuple[str, ...] = ()) -> None:
        self.files, self.version = files, version
        self.calls: list[list[str]] = []
        self.failures, self.missing = failures, missing

    def __call__(self, argv: list[str], cwd: Any = None, check: bool = False,
                 **_: Any) -> subprocess.CompletedProcess:
        self.calls.append(argv)
        if argv[:2] == ["apt-get", "download"]:
            if self.failures:
                self.failures -= 1
                return subprocess.CompletedProcess(argv, 100, "", f"E: Unable to locate package {argv[3]}\n")
            for package in argv[3:]:
                if package not in self.missing:
                    (Path(cwd) / f"{package}_{self.version}_amd64.deb").write_bytes(b"deb")
            if self.missing:
                said = f"E: Unable to locate package {self.missing[0]}\n"
                return subprocess.CompletedProcess(argv, 100, "", said)
        elif argv[:2] == ["dpkg-deb", "-f"]:
            return subprocess.CompletedProcess(argv, 0, self.version + "\n", "")
        elif argv[:2] == ["dpkg-deb", "-x"]:
            package = Path(argv[2]).name.split("_")[0]
            for name, content in self.files.get(package, {}).items():
                path = Path(argv[3]) / name
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, Link):
                    path.symlink_to(content.target)
                elif isinstance(content, str):
                    path.write_text(content)
                else:
                    path.write_bytes(content)
        return subprocess.CompletedProcess(argv, 0, "", "")


def binary_apt(binary: DebianBinary, failures: int = 0) -> FakeApt:
    """A FakeApt whose package holds the executable where ``binary`` looks for it."""
    executable = {str(binary.in_package): b"ELF " + binary.name.encode()}
    return FakeApt({binary.package: executable}, failures=failures)


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
    apt = binary_apt(binary)
    found = module.fetch(tmp_path, run=apt)
    path = tmp_path / binary.name
    assert found.path == path and found.version == f"{binary.package} {VERSION}"
    assert path.read_bytes() == b"ELF " + binary.name.encode() and path.stat().st_mode & 0o111
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["VERSION", binary.name])
    assert [argv[:2] for argv in apt.calls] == [["apt-get", "download"], ["dpkg-deb", "-f"],
                                                 ["dpkg-deb", "-x"]]
    assert module.find_binary(cache=tmp_path) == found
    assert found.to_json() == {"binary": str(path), "version": found.version, "sha256": found.sha256}


def test_apt_lists_are_updated_once_when_apt_does_not_know_the_package(shipped, tmp_path,
                                                                       monkeypatch) -> None:
    module, binary = shipped
    monkeypatch.setattr(debian.os, "geteuid", lambda: 0)
    apt = binary_apt(binary, failures=1)
    module.fetch(tmp_path, run=apt)
    assert [argv[:2] for argv in apt.calls[:3]] == [["apt-get", "download"], ["apt-get", "update"],
                                                     ["apt-get", "download"]]


def test_a_download_that_keeps_failing_says_what_apt_said(shipped, tmp_path, monkeypatch) -> None:
    module, binary = shipped
    monkeypatch.setattr(debian.os, "geteuid", lambda: 0)
    said = f"apt-get download {binary.package} failed .E: Unable to locate package"
    with pytest.raises(binary.error, match=said):
        module.fetch(tmp_path, run=binary_apt(binary, failures=2))
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


def test_the_install_command_does_nothing_when_the_binary_is_cached(shipped, tmp_path, monkeypatch,
                                                                    capsys) -> None:
    module, binary = shipped
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    (tmp_path / binary.package).mkdir()
    (tmp_path / binary.package / binary.name).write_bytes(b"ELF")
    (tmp_path / binary.package / "VERSION").write_text(VERSION + "\n")
    assert module.main([]) == 0
    assert f"{binary.package} {VERSION}), already cached" in capsys.readouterr().out


def test_without_apt_the_install_command_says_what_to_do_instead(shipped, tmp_path, monkeypatch,
                                                                  capsys) -> None:
    module, _ = shipped
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(debian.shutil, "which", lambda name: None)
    assert module.main([]) == 254
    assert "give --db-opt binary=PATH" in capsys.readouterr().err


class ToyInstallError(RuntimeError):
    """The toy adapter's own error."""


TOY_FILES: dict[str, dict[str, bytes | str | Link]] = {
    "toy-server": {"usr/bin/toy": b"ELF toy", "usr/share/doc/toy/README": "left out"},
    "libtoy1": {"usr/lib/toy/libtoy.so.1.0": b"ELF lib", "usr/lib/toy/libtoy.so.1": Link("libtoy.so.1.0")},
}
"""What the toy system's packages unpack to."""


def toy_pack(root: Path, scratch: Path) -> dict[str, Path]:
    """A file copied into ``scratch`` and a directory taken as the packages hold it, in the order given."""
    if not (root / "usr/bin/toy").is_file():
        raise FetchError("the packages hold no usr/bin/toy")
    (scratch / "toy").write_bytes((root / "usr/bin/toy").read_bytes() + b" copied")
    return {"lib": root / "usr/lib/toy", "bin/toy": scratch / "toy"}


TOY = DebianBundle("toy", "Toy", ("toy-server", "libtoy1"), toy_pack, "run python -m toy", ToyInstallError)


def test_a_bundle_packs_what_pack_chose_under_its_names_with_the_first_packages_version(tmp_path) -> None:
    apt = FakeApt(TOY_FILES)
    found = TOY.fetch(tmp_path, run=apt)
    assert apt.calls[0] == ["apt-get", "download", "-q", "toy-server", "libtoy1"]
    assert apt.calls[1] == ["dpkg-deb", "-f", str(apt.calls[1][2]), "Version"]
    assert Path(apt.calls[1][2]).name.startswith("toy-server_")
    unpacked = [Path(argv[2]).name.split("_")[0] for argv in apt.calls if argv[:2] == ["dpkg-deb", "-x"]]
    assert sorted(unpacked) == ["libtoy1", "toy-server"]
    assert found.path == tmp_path / "toy.tar.gz" and found.version == f"toy-server {VERSION}"
    assert found.to_json() == {"bundle": str(found.path), "version": found.version, "sha256": found.sha256}
    with tarfile.open(found.path) as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["lib", "lib/libtoy.so.1", "lib/libtoy.so.1.0", "bin/toy"]
        assert members[1].issym() and members[1].linkname == "libtoy.so.1.0"  # a directory is taken as it is
        assert tar.extractfile("bin/toy").read() == b"ELF toy copied"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["VERSION", "toy.tar.gz"]  # no scratch left behind
    assert (tmp_path / "VERSION").read_text() == VERSION + "\n"
    assert TOY.find(tmp_path) == found


def test_what_the_packages_lack_is_the_adapters_sentence_and_the_cache_is_left_as_it_was(tmp_path) -> None:
    (tmp_path / "toy.tar.gz").write_bytes(b"the bundle before")
    (tmp_path / "VERSION").write_text("0.9\n")
    files = {"toy-server": {"usr/share/doc/toy/README": "no binary"}}
    with pytest.raises(ToyInstallError, match="^the packages hold no usr/bin/toy$"):
        TOY.fetch(tmp_path, run=FakeApt(files))
    assert (tmp_path / "toy.tar.gz").read_bytes() == b"the bundle before"
    assert TOY.find(tmp_path).version == "toy-server 0.9"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["VERSION", "toy.tar.gz"]


def test_a_package_apt_cannot_find_is_one_sentence_quoting_apt(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(debian.os, "geteuid", lambda: 1000)  # not root: no apt-get update
    apt = FakeApt(TOY_FILES, missing=("libtoy1",))
    said = ("apt-get download toy-server libtoy1 failed .E: Unable to locate package libtoy1.; "
            "check that apt reaches a Debian mirror")
    with pytest.raises(ToyInstallError, match=said):
        TOY.fetch(tmp_path, run=apt)
    assert [argv[:2] for argv in apt.calls] == [["apt-get", "download"]]
    assert not (tmp_path / "toy.tar.gz").exists()


def test_without_a_bundle_the_error_names_the_system_and_what_to_run(tmp_path) -> None:
    with pytest.raises(ToyInstallError) as raised:
        TOY.find(tmp_path)
    assert str(raised.value) == (f"Debian's Toy is not on the controller ({tmp_path / 'toy.tar.gz'} does not "
                                 "exist): run python -m toy")


def test_the_bundle_install_command_fetches_once_then_finds_it_cached(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(debian, "missing_tools", lambda: [])
    apt = FakeApt(TOY_FILES)
    fetch = DebianBundle.fetch
    monkeypatch.setattr(DebianBundle, "fetch", lambda self, cache=None: fetch(self, cache, run=apt))
    assert TOY.main([], "python -m toy", "toy") == 0
    fetched = f"toy: {tmp_path / 'toy' / 'toy.tar.gz'} (toy-server {VERSION}), fetched"
    assert fetched in capsys.readouterr().out
    assert TOY.main([], "python -m toy", "toy") == 0
    assert f"(toy-server {VERSION}), already cached" in capsys.readouterr().out
    assert [argv[:2] for argv in apt.calls].count(["apt-get", "download"]) == 1


def test_an_adapters_command_is_named_by_its_prog_and_described_by_its_docstrings_first_line(capsys) -> None:
    main = TOY.command("python -m toy", "Toy on the controller, bundled.\n\nHow it is bundled.\n")
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0 and out.startswith("usage: python -m toy [-h] [--force]")
    assert "Toy on the controller, bundled." in out and "How it is bundled" not in out


@pytest.fixture(params=sorted(BUNDLES))
def shipped_bundle(request: pytest.FixtureRequest) -> tuple[str, Any, DebianBundle]:
    return (request.param, *BUNDLES[request.param])


def test_a_shipped_bundle_is_cached_under_its_systems_name(shipped_bundle, monkeypatch, tmp_path) -> None:
    name, module, bundle = shipped_bundle
    monkeypatch.delenv("CHAOS_HARNESS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert module.cache_dir() == tmp_path / "xdg" / "chaos-harness" / name
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "mine"))
    assert module.cache_dir() == tmp_path / "mine" / name
    assert module.BUNDLE == f"{name}.tar.gz" and bundle.packages == module.PACKAGES


def test_a_shipped_bundle_found_in_the_cache_carries_its_server_packages_version(shipped_bundle,
                                                                                 tmp_path) -> None:
    name, module, bundle = shipped_bundle
    (tmp_path / f"{name}.tar.gz").write_bytes(b"tarball")
    (tmp_path / "VERSION").write_text(VERSION + "\n")
    found = module.find_bundle(tmp_path)
    assert found.version == f"{name}-server {VERSION}"
    assert found.to_json()["bundle"] == str(tmp_path / f"{name}.tar.gz")
    with pytest.raises(bundle.error, match=f"python -m adapters.{name}"):
        module.find_bundle(tmp_path / "empty")


def test_without_apt_a_shipped_bundles_install_command_is_one_line(shipped_bundle, tmp_path, monkeypatch,
                                                                      capsys) -> None:
    _, module, bundle = shipped_bundle
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(debian.shutil, "which", lambda name: None)
    assert module.main([]) == 254
    assert capsys.readouterr().err == (f"error: apt-get and dpkg-deb are needed to fetch {bundle.system} "
                                       "(Debian/Ubuntu)\n")
