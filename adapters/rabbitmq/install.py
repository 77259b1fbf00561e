"""RabbitMQ 3.10 on the controller: Debian's ``rabbitmq-server`` and the Erlang 25 it runs on, bundled once.

The nodes have no route to a package mirror, so the controller fetches the packages through its own apt
configuration (``apt-get download``: no host is named here), unpacks them with ``dpkg-deb -x`` (no
maintainer scripts run) and packs what the nodes need into one tarball in a cache outside the repository
(:class:`harness.db.debian.DebianBundle` does these steps; this module says what is RabbitMQ's); the adapter
uploads it to each node and unpacks it into :data:`INSTALL_DIR` (``adapters.rabbitmq.db``).

What the tarball holds, and why:

* ``erlang/``: Debian's ``/usr/lib/erlang`` from ``erlang-base`` and the Erlang applications
  ``rabbitmq-server`` depends on (:data:`ERLANG_PACKAGES`). Erlang's start scripts (``bin/erl``,
  ``erts-*/bin/erl``, ``bin/start``) name their root directory literally (``ROOTDIR=/usr/lib/erlang``);
  it is rewritten to :data:`ERLANG_ROOT`, as Erlang's own ``Install`` script does when a release moves.
  The emulator links only libraries the node image has (libc, libm, libstdc++, libgcc_s, libtinfo, libz;
  ``crypto.so`` libcrypto), so no library is bundled.
* ``rabbitmq/``: the server's tree (``/usr/lib/rabbitmq/lib/rabbitmq_server-<version>``: ``sbin/`` with
  ``rabbitmq-server`` and the CLI tools, ``plugins/``, ``escript/``). Debian's ``/usr/sbin`` wrappers,
  which switch to a ``rabbitmq`` user and read ``/etc``, are left out: the adapter starts
  ``rabbitmq/sbin/rabbitmq-server`` itself with every path in its environment.

The cache is ``$CHAOS_HARNESS_CACHE/rabbitmq/`` (default ``${XDG_CACHE_HOME:-~/.cache}/chaos-harness``) and
holds ``rabbitmq.tar.gz`` and ``VERSION`` (the ``rabbitmq-server`` package's version). ``python -m
adapters.rabbitmq`` fills it.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.db.debian import CachedBinary, DebianBundle, FetchError

SERVER_PACKAGE = "rabbitmq-server"
ERLANG_PACKAGES = (
    "erlang-base", "erlang-asn1", "erlang-crypto", "erlang-eldap", "erlang-ftp", "erlang-inets",
    "erlang-mnesia", "erlang-os-mon", "erlang-parsetools", "erlang-public-key", "erlang-runtime-tools",
    "erlang-snmp", "erlang-ssl", "erlang-syntax-tools", "erlang-tftp", "erlang-tools", "erlang-xmerl",
)
"""``rabbitmq-server``'s Erlang dependencies (``apt-cache depends rabbitmq-server``, Debian bookworm)."""
PACKAGES = (SERVER_PACKAGE, *ERLANG_PACKAGES)
INSTALL_DIR = "/opt/chaos-rabbitmq"
"""Where the nodes unpack the bundle (``adapters.rabbitmq.db``); the Erlang scripts are rewritten for it."""
ERLANG_ROOT = f"{INSTALL_DIR}/erlang"
ERLANG_IN_PACKAGE = Path("usr/lib/erlang")
SERVER_IN_PACKAGE = Path("usr/lib/rabbitmq/lib")
ROOTDIR_SCRIPTS = ("bin/erl", "bin/start", "erts-*/bin/erl", "erts-*/bin/start")
"""Erlang's scripts that name their root directory."""
INSTALL_HINT = "run python -m adapters.rabbitmq (it fetches Debian's rabbitmq-server and Erlang with apt)"
_ROOTDIR = re.compile(r"^(\s*ROOTDIR=)\S+$", re.MULTILINE)


class RabbitInstallError(RuntimeError):
    """The RabbitMQ bundle is missing or could not be made: one sentence saying what to do."""


RabbitBundle = CachedBinary
"""The tarball of RabbitMQ and Erlang for the nodes, as test.json records it (``kind`` ``bundle``)."""


def relocate_erlang(erlang: Path, root: str = ERLANG_ROOT) -> list[Path]:
    """Point Erlang's start scripts under ``erlang`` at ``root`` (their ``ROOTDIR=`` lines); the scripts
    rewritten."""
    rewritten = []
    for pattern in ROOTDIR_SCRIPTS:
        for script in sorted(erlang.glob(pattern)):
            text = script.read_text()
            new = _ROOTDIR.sub(lambda m: m.group(1) + root, text)
            if new != text:
                script.write_text(new)
                rewritten.append(script)
    return rewritten


def pack(root: Path, scratch: Path) -> dict[str, Path]:
    """What the tarball holds (module docstring), from the packages unpacked under ``root``: Erlang's tree,
    relocated in place to :data:`ERLANG_ROOT`, and the server's (``scratch`` is not needed)."""
    erlang = root / ERLANG_IN_PACKAGE
    servers = sorted((root / SERVER_IN_PACKAGE).glob("rabbitmq_server-*"))
    if not (erlang / "bin").is_dir():
        raise FetchError(f"the packages hold no {ERLANG_IN_PACKAGE}/bin")
    if not servers or not (servers[-1] / "sbin" / "rabbitmq-server").is_file():
        raise FetchError(f"the packages hold no {SERVER_IN_PACKAGE}/rabbitmq_server-*/sbin/rabbitmq-server")
    if not relocate_erlang(erlang):
        raise FetchError(f"no ROOTDIR= line in Erlang's start scripts under {ERLANG_IN_PACKAGE}")
    return {"erlang": erlang, "rabbitmq": servers[-1]}


RABBITMQ = DebianBundle("rabbitmq", "RabbitMQ", PACKAGES, pack, INSTALL_HINT, RabbitInstallError)
BUNDLE = RABBITMQ.tarball
cache_dir = RABBITMQ.cache_dir
find_bundle = RABBITMQ.find
fetch = RABBITMQ.fetch
main = RABBITMQ.command("python -m adapters.rabbitmq", __doc__)
