"""Fetching RabbitMQ on the controller: ``apt-get download`` of rabbitmq-server and its Erlang packages and
``dpkg-deb`` (a fake that acts as they do), Erlang's root rewritten, packed into one tarball in the cache."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from adapters.rabbitmq.install import (
    BUNDLE,
    ERLANG_ROOT,
    PACKAGES,
    RabbitInstallError,
    fetch,
    find_bundle,
    relocate_erlang,
)

ERL = '#!/bin/sh\nif [ -z "$ERL_ROOTDIR" ]\nthen\n    ROOTDIR=/usr/lib/erlang\nelse\n    ROOTDIR=/usr/lib/erlang\nfi\n'
FILES = {
    "erlang-base": {"usr/lib/erlang/bin/erl": ERL, "usr/lib/erlang/erts-13.1.5/bin/erl": ERL,
                    "usr/lib/erlang/erts-13.1.5/bin/beam.smp": "ELF beam"},
    "rabbitmq-server": {"usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/sbin/rabbitmq-server": "#!/bin/sh\n",
                        "usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/plugins/rabbit-3.10.8.ez": "zip",
                        "usr/sbin/rabbitmq-server": "#!/bin/sh\n# the Debian wrapper\n"},
}


class FakeApt:
    """Acts as ``apt-get download`` (a .deb per package; ``missing`` ones left out) and ``dpkg-deb``."""

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
            return subprocess.CompletedProcess(argv, 0, "3.10.8-1.1+deb12u1\n", "")
        elif argv[:2] == ["dpkg-deb", "-x"]:
            package = Path(argv[2]).name.split("_")[0]
            for name, text in FILES.get(package, {}).items():
                (Path(argv[3]) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(argv[3]) / name).write_text(text)
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_fetch_bundles_erlang_relocated_and_the_server_tree(tmp_path: Path) -> None:
    apt = FakeApt()
    bundle = fetch(tmp_path, run=apt)
    assert apt.calls[0] == ["apt-get", "download", "-q", *PACKAGES]
    assert bundle.path == tmp_path / BUNDLE and bundle.version == "rabbitmq-server 3.10.8-1.1+deb12u1"
    with tarfile.open(bundle.path) as tar:
        names = set(tar.getnames())
        erl = tar.extractfile("erlang/bin/erl").read().decode()
    assert {"erlang/erts-13.1.5/bin/beam.smp", "rabbitmq/sbin/rabbitmq-server",
            "rabbitmq/plugins/rabbit-3.10.8.ez"} <= names
    assert not any("usr/sbin" in n for n in names)  # Debian's wrappers are left out
    assert erl.count(f"ROOTDIR={ERLANG_ROOT}") == 2 and "/usr/lib/erlang" not in erl
    assert find_bundle(tmp_path).sha256 == bundle.sha256


def test_relocation_leaves_other_lines_alone(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "erl").write_text("X=/usr/lib/erlang\n  ROOTDIR=/usr/lib/erlang\n")
    assert relocate_erlang(tmp_path, "/opt/x") == [tmp_path / "bin" / "erl"]
    assert (tmp_path / "bin" / "erl").read_text() == "X=/usr/lib/erlang\n  ROOTDIR=/opt/x\n"


def test_a_package_apt_cannot_find_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(RabbitInstallError, match="Unable to locate package erlang-ssl"):
        fetch(tmp_path, run=FakeApt(missing=("erlang-ssl",)))
    assert not (tmp_path / BUNDLE).exists()


def test_a_missing_bundle_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(RabbitInstallError, match="python -m adapters.rabbitmq"):
        find_bundle(tmp_path)
