"""The nats-server binary on the controller: Debian's ``nats-server``, fetched once and cached.

The nodes have no route to a package mirror, so the controller fetches the package through its own apt
configuration (``apt-get download nats-server``: no host is named here), unpacks it with ``dpkg-deb -x``
and keeps the one file the nodes need, ``usr/sbin/nats-server`` (a Go binary that links nothing but libc),
in a cache outside the repository. The adapter uploads it to each node (``adapters.nats.db``).

The cache is ``$CHAOS_HARNESS_CACHE/nats-server/`` (default ``${XDG_CACHE_HOME:-~/.cache}/chaos-harness``)
and holds ``nats-server`` and ``VERSION`` (the package's version). ``python -m adapters.nats`` (what
``scripts/install-nats.sh`` runs) fills it; ``--db-opt binary=PATH`` uses a nats-server of the user's own.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "nats-server"
BINARY_IN_PACKAGE = Path("usr/sbin/nats-server")
CACHE_ENV = "CHAOS_HARNESS_CACHE"
INSTALL_HINT = "run scripts/install-nats.sh (python -m adapters.nats), or give --db-opt binary=PATH"

Runner = Callable[..., subprocess.CompletedProcess]


class NatsInstallError(RuntimeError):
    """The nats-server binary is missing or could not be fetched: one sentence saying what to do."""


@dataclass(frozen=True)
class NatsBinary:
    """A nats-server binary on the controller, as test.json records it."""

    path: Path
    version: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"binary": str(self.path), "version": self.version, "sha256": self.sha256}


def cache_dir() -> Path:
    """Where the fetched package is kept (outside the repository)."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root) / PACKAGE
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "chaos-harness" / PACKAGE


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def find_binary(given: str | None = None, cache: Path | None = None) -> NatsBinary:
    """The binary to upload: ``given`` (a path on the controller) or the cached Debian one; raises
    :class:`NatsInstallError` naming what to run when there is none."""
    if given:
        path = Path(given).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise NatsInstallError(f"--db-opt binary={given}: no executable file there; {INSTALL_HINT}")
        return NatsBinary(path.resolve(), "given by --db-opt binary", _sha256(path))
    cache = cache if cache is not None else cache_dir()
    path = cache / "nats-server"
    if not path.is_file():
        raise NatsInstallError(f"Debian's {PACKAGE} binary is not on the controller ({path} does not exist): "
                               f"{INSTALL_HINT}")
    version_file = cache / "VERSION"
    version = version_file.read_text().strip() if version_file.is_file() else "unknown"
    return NatsBinary(path, f"{PACKAGE} {version}", _sha256(path))


def fetch(cache: Path | None = None, *, run: Runner = subprocess.run) -> NatsBinary:
    """Download ``nats-server`` with apt (running ``apt-get update`` once if apt does not know it yet and
    we are root), unpack it and keep its binary in ``cache``, replacing what was there atomically."""
    cache = cache if cache is not None else cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as scratch:
        work = Path(scratch)
        work.chmod(0o755)  # apt's download sandbox user must be able to write the .deb here
        download = run(["apt-get", "download", "-q", PACKAGE], cwd=work, capture_output=True, text=True)
        if download.returncode != 0 and os.geteuid() == 0:
            run(["apt-get", "update", "-q"], capture_output=True, text=True)
            download = run(["apt-get", "download", "-q", PACKAGE], cwd=work, capture_output=True, text=True)
        debs = sorted(work.glob(f"{PACKAGE}_*.deb"))
        if download.returncode != 0 or not debs:
            why = (download.stderr or download.stdout or "").strip().splitlines()
            raise NatsInstallError(f"apt-get download {PACKAGE} failed ({why[-1] if why else 'no package file'}); "
                                   "check that apt reaches a Debian mirror (apt-get update)")
        deb = debs[-1]
        version = run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True)
        run(["dpkg-deb", "-x", str(deb), str(work / "root")], capture_output=True, text=True, check=True)
        binary = work / "root" / BINARY_IN_PACKAGE
        if not binary.is_file():
            raise NatsInstallError(f"{deb.name} holds no {BINARY_IN_PACKAGE}")
        binary.chmod(0o755)
        os.replace(binary, cache / "nats-server")
        (cache / "VERSION").write_text(version.stdout.strip() + "\n")
    return find_binary(cache=cache)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m adapters.nats [--force]``: fetch nats-server into the cache unless it is there."""
    parser = argparse.ArgumentParser(prog="python -m adapters.nats", description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="fetch again even if the cache holds a binary")
    args = parser.parse_args(argv)
    try:
        if not args.force:
            try:
                found = find_binary()
            except NatsInstallError:
                pass
            else:
                print(f"nats-server: {found.path} ({found.version}), already cached")
                return 0
        if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
            raise NatsInstallError("apt-get and dpkg-deb are needed to fetch nats-server (Debian/Ubuntu); "
                                   "elsewhere give --db-opt binary=PATH to a nats-server 2.9 binary")
        found = fetch()
    except (NatsInstallError, OSError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 254
    print(f"nats-server: {found.path} ({found.version}), fetched")
    return 0
