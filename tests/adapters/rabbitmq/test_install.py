"""What the RabbitMQ bundle holds: rabbitmq-server and its Erlang packages, fetched through a fake ``apt-get``
and ``dpkg-deb`` (``tests.harness.test_db_debian``, where the fetching and caching they share with Redis is
tested), Erlang's tree relocated and the server's tree packed into one tarball, and what is said when the
packages lack part of it."""

from __future__ import annotations

import tarfile
from pathlib import Path

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
from tests.harness.test_db_debian import FakeApt

ERL = ('#!/bin/sh\nif [ -z "$ERL_ROOTDIR" ]\nthen\n    ROOTDIR=/usr/lib/erlang\nelse\n'
       '    ROOTDIR=/usr/lib/erlang\nfi\n')
SERVER = "usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8"
FILES: dict[str, dict[str, bytes | str]] = {
    "erlang-base": {"usr/lib/erlang/bin/erl": ERL, "usr/lib/erlang/erts-13.1.5/bin/erl": ERL,
                    "usr/lib/erlang/erts-13.1.5/bin/beam.smp": "ELF beam"},
    "rabbitmq-server": {f"{SERVER}/sbin/rabbitmq-server": "#!/bin/sh\n",
                        f"{SERVER}/plugins/rabbit-3.10.8.ez": "zip",
                        "usr/sbin/rabbitmq-server": "#!/bin/sh\n# the Debian wrapper\n"},
}
VERSION = "3.10.8-1.1+deb12u1"


def test_fetch_bundles_erlang_relocated_and_the_server_tree(tmp_path: Path) -> None:
    apt = FakeApt(FILES, version=VERSION)
    bundle = fetch(tmp_path, run=apt)
    assert apt.calls[0] == ["apt-get", "download", "-q", *PACKAGES]
    assert PACKAGES[0] == "rabbitmq-server"  # whose version the bundle carries
    assert {"erlang-base", "erlang-crypto", "erlang-ssl"} <= set(PACKAGES)
    assert bundle.path == tmp_path / BUNDLE and bundle.version == f"rabbitmq-server {VERSION}"
    with tarfile.open(bundle.path) as tar:
        names = set(tar.getnames())
        erl = tar.extractfile("erlang/bin/erl").read().decode()
    assert {"erlang/erts-13.1.5/bin/beam.smp", "rabbitmq/sbin/rabbitmq-server",
            "rabbitmq/plugins/rabbit-3.10.8.ez"} <= names
    assert {name.split("/")[0] for name in names} == {"erlang", "rabbitmq"}  # Debian's wrappers are left out
    assert erl.count(f"ROOTDIR={ERLANG_ROOT}") == 2 and "/usr/lib/erlang" not in erl
    assert find_bundle(tmp_path).sha256 == bundle.sha256


def test_relocation_leaves_other_lines_alone(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "erl").write_text("X=/usr/lib/erlang\n  ROOTDIR=/usr/lib/erlang\n")
    assert relocate_erlang(tmp_path, "/opt/x") == [tmp_path / "bin" / "erl"]
    assert (tmp_path / "bin" / "erl").read_text() == "X=/usr/lib/erlang\n  ROOTDIR=/opt/x\n"


@pytest.mark.parametrize(("left_out", "said"), [
    ("usr/lib/erlang/bin/", "the packages hold no usr/lib/erlang/bin"),
    (f"{SERVER}/sbin/", "the packages hold no usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin/rabbitmq-server"),
])
def test_packages_without_part_of_the_bundle_are_one_sentence(tmp_path: Path, left_out: str,
                                                              said: str) -> None:
    files = {package: {path: text for path, text in held.items() if not path.startswith(left_out)}
             for package, held in FILES.items()}
    with pytest.raises(RabbitInstallError) as raised:
        fetch(tmp_path, run=FakeApt(files, version=VERSION))
    assert str(raised.value) == said
    assert not (tmp_path / BUNDLE).exists()


def test_erlang_scripts_without_a_root_are_one_sentence(tmp_path: Path) -> None:
    files = {name: dict(held) for name, held in FILES.items()}
    files["erlang-base"].update({"usr/lib/erlang/bin/erl": "#!/bin/sh\n",
                                 "usr/lib/erlang/erts-13.1.5/bin/erl": "#!/bin/sh\n"})
    said = "^no ROOTDIR= line in Erlang's start scripts under usr/lib/erlang$"
    with pytest.raises(RabbitInstallError, match=said):
        fetch(tmp_path, run=FakeApt(files, version=VERSION))


def test_a_missing_bundle_names_the_command(tmp_path: Path) -> None:
    said = "Debian's RabbitMQ is not on the controller .*python -m adapters.rabbitmq"
    with pytest.raises(RabbitInstallError, match=said):
        find_bundle(tmp_path)
