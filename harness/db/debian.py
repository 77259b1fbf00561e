"""Debian packages for nodes that have no network: fetched on the controller, unpacked, cached, uploaded.

The nodes of a test run on an internal network with no route to a package mirror (ENVIRONMENT.md), so a
system is installed the way an outside user would install it: the controller fetches its package through
its own apt configuration (``apt-get download``: no host is named here), unpacks it with ``dpkg-deb -x``,
keeps the files the nodes need in a cache outside the repository, and the adapter uploads them. The
shipped adapters declare only what is particular to their system: etcd and NATS are each a
:class:`DebianBinary` (one executable of one package), Redis and RabbitMQ each a :class:`DebianBundle`
(several packages, what the nodes need of them packed into one tarball). An adapter of the user's own may
do the same, or build on the steps they are made of: :func:`fetching`, :func:`download_all`,
:func:`package_version`, :func:`unpack` and :func:`install_command` (docs/db-adapter.md, "Installing a
system").

The cache is ``$CHAOS_HARNESS_CACHE/<name>/`` (default ``${XDG_CACHE_HOME:-~/.cache}/chaos-harness/<name>``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE_ENV = "CHAOS_HARNESS_CACHE"
TOOLS = ("apt-get", "dpkg-deb")

Runner = Callable[..., subprocess.CompletedProcess]


class FetchError(RuntimeError):
    """A package could not be fetched or holds not what was expected: one sentence saying what to do."""


def cache_dir(name: str) -> Path:
    """Where what is fetched for ``name`` is kept (outside the repository)."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root) / name
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "chaos-harness" / name


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes (what test.json records of an uploaded system)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def missing_tools() -> list[str]:
    """The tools fetching needs (:data:`TOOLS`) that this machine lacks (not Debian or Ubuntu)."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


@contextmanager
def fetching(cache: Path) -> Iterator[Path]:
    """A scratch directory inside ``cache`` (created if need be; removed afterwards), so what is made there
    moves into the cache atomically with ``os.replace``."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as scratch:
        work = Path(scratch)
        work.chmod(0o755)  # apt's download sandbox user must be able to write the .deb here
        yield work


def download(package: str, work: Path, *, run: Runner = subprocess.run) -> Path:
    """``apt-get download package`` into ``work`` and the .deb it wrote (:func:`download_all`)."""
    return download_all([package], work, run=run)[package]


def download_all(packages: Sequence[str], work: Path, *, run: Runner = subprocess.run) -> dict[str, Path]:
    """``apt-get download`` of ``packages`` into ``work`` (one call): package -> the .deb it wrote. When apt
    does not know one yet and we are root, its lists are updated once (``apt-get update``) and the
    download tried again; :class:`FetchError` quotes apt's last line when it still fails."""
    argv = ["apt-get", "download", "-q", *packages]
    done = run(argv, cwd=work, capture_output=True, text=True)
    if done.returncode != 0 and os.geteuid() == 0:
        run(["apt-get", "update", "-q"], capture_output=True, text=True)
        done = run(argv, cwd=work, capture_output=True, text=True)
    debs = {package: sorted(work.glob(f"{package}_*.deb")) for package in packages}
    missing = [package for package, found in debs.items() if not found]
    if done.returncode != 0 or missing:
        why = (done.stderr or done.stdout or "").strip().splitlines()
        said = why[-1] if why else "no package file for " + ", ".join(missing)
        raise FetchError(f"apt-get download {' '.join(packages)} failed ({said}); "
                         "check that apt reaches a Debian mirror (apt-get update)")
    return {package: found[-1] for package, found in debs.items()}


def package_version(deb: Path, *, run: Runner = subprocess.run) -> str:
    """The version a .deb declares (``dpkg-deb -f DEB Version``)."""
    done = run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def unpack(deb: Path, into: Path, *, run: Runner = subprocess.run) -> Path:
    """The files of a .deb under ``into`` (``dpkg-deb -x``: no maintainer scripts run)."""
    run(["dpkg-deb", "-x", str(deb), str(into)], capture_output=True, text=True, check=True)
    return into


def _keep(made: Path, cache: Path, name: str, version: str) -> None:
    """Move what was made in :func:`fetching`'s scratch directory into ``cache`` as ``name`` (atomically),
    with the package's ``version`` beside it in ``VERSION``."""
    os.replace(made, cache / name)
    (cache / "VERSION").write_text(version + "\n")


def _cached_version(cache: Path) -> str:
    """The version :func:`_keep` wrote into ``cache``, or ``unknown``."""
    version_file = cache / "VERSION"
    return version_file.read_text().strip() if version_file.is_file() else "unknown"


@dataclass(frozen=True)
class CachedBinary:
    """An executable (or a bundle: ``kind``) on the controller, as test.json records it."""

    path: Path
    version: str
    sha256: str
    kind: str = "binary"

    def to_json(self) -> dict[str, str]:
        return {self.kind: str(self.path), "version": self.version, "sha256": self.sha256}


class _Installer:
    """What :class:`DebianBinary` and :class:`DebianBundle` share: an adapter's ``python -m`` command."""

    def main(self, argv: Sequence[str] | None, prog: str, description: str) -> int:
        """``prog [--force]``: fetch into the cache unless it is there (:func:`install_command`)."""
        raise NotImplementedError

    def command(self, prog: str, doc: str | None) -> Callable[[Sequence[str] | None], int]:
        """The adapter's ``main(argv=None)``, what its ``__main__`` runs: :meth:`main` as ``prog``, described
        by the first line of ``doc`` (the install module's docstring)."""
        description = (doc or prog).splitlines()[0]

        def main(argv: Sequence[str] | None = None) -> int:
            return self.main(argv, prog, description)

        main.__doc__ = f"``{prog} [--force]``: fetch into the cache unless it is there (:meth:`main`)."
        return main


@dataclass(frozen=True)
class DebianBinary(_Installer):
    """One executable of one Debian package, kept in the cache as ``name`` beside a ``VERSION`` file.

    ``error`` is the adapter's own exception type, raised with one sentence; ``hint`` says how to fill the
    cache (or give a binary of one's own); ``instead`` what to do on a machine without apt.
    """

    package: str
    in_package: Path
    name: str
    hint: str
    error: type[Exception]
    instead: str

    def cache_dir(self) -> Path:
        """Where the fetched package is kept (outside the repository): ``<cache>/<package>``."""
        return cache_dir(self.package)

    def find(self, given: str | None = None, cache: Path | None = None) -> CachedBinary:
        """The binary to upload: ``given`` (a path on the controller: ``--db-opt binary=PATH``) or the cached
        Debian one; ``error`` naming what to run when there is none."""
        if given:
            path = Path(given).expanduser()
            if not path.is_file() or not os.access(path, os.X_OK):
                raise self.error(f"--db-opt binary={given}: no executable file there; {self.hint}")
            return CachedBinary(path.resolve(), "given by --db-opt binary", sha256_of(path))
        cache = cache if cache is not None else self.cache_dir()
        path = cache / self.name
        if not path.is_file():
            raise self.error(f"Debian's {self.package} binary is not on the controller "
                             f"({path} does not exist): {self.hint}")
        return CachedBinary(path, f"{self.package} {_cached_version(cache)}", sha256_of(path))

    def fetch(self, cache: Path | None = None, *, run: Runner = subprocess.run) -> CachedBinary:
        """Download the package, unpack it and keep its executable in ``cache``, replacing what was there
        atomically."""
        cache = cache if cache is not None else self.cache_dir()
        with fetching(cache) as work:
            try:
                deb = download(self.package, work, run=run)
            except FetchError as exc:
                raise self.error(str(exc)) from None
            version = package_version(deb, run=run)
            binary = unpack(deb, work / "root", run=run) / self.in_package
            if not binary.is_file():
                raise self.error(f"{deb.name} holds no {self.in_package}")
            binary.chmod(0o755)
            _keep(binary, cache, self.name, version)
        return self.find(cache=cache)

    def main(self, argv: Sequence[str] | None, prog: str, description: str) -> int:
        """``python -m adapters.X [--force]``: fetch the package into the cache unless it is there."""
        return install_command(argv, prog=prog, description=description, name=self.name, find=self.find,
                               fetch=self.fetch, error=self.error,
                               without_apt=f"apt-get and dpkg-deb are needed to fetch {self.package} "
                                           f"(Debian/Ubuntu); elsewhere {self.instead}")


Packer = Callable[[Path, Path], Mapping[str, Path]]
"""A :class:`DebianBundle`'s ``pack(root, scratch)``: what the tarball holds, chosen from the packages
unpacked under ``root``, as name in the tarball -> a file or directory (added with all it holds), in the
tarball's order. What it has to make (a copy, a rewritten script) it makes in ``scratch``, an empty
directory removed afterwards; it may also change files under ``root``. When the packages lack something it
raises :class:`FetchError` with one sentence, which the bundle raises again as its adapter's ``error``."""


@dataclass(frozen=True)
class DebianBundle(_Installer):
    """Several Debian packages, what the nodes need of them packed into one tarball: kept in the cache
    ``<cache>/<name>/`` as ``<name>.tar.gz`` beside a ``VERSION`` file (the first package's version).

    ``system`` is how sentences name it (``Debian's Redis is not on the controller``); ``packages`` are
    fetched in one ``apt-get download``, the first the one whose version the bundle carries; ``pack`` picks
    the tarball's contents (:data:`Packer`); ``error`` is the adapter's own exception type, raised with one
    sentence; ``hint`` says how to fill the cache.
    """

    name: str
    system: str
    packages: tuple[str, ...]
    pack: Packer
    hint: str
    error: type[Exception]

    @property
    def tarball(self) -> str:
        """The bundle's file name in the cache."""
        return f"{self.name}.tar.gz"

    def cache_dir(self) -> Path:
        """Where the bundle is kept (outside the repository): ``<cache>/<name>``."""
        return cache_dir(self.name)

    def find(self, cache: Path | None = None) -> CachedBinary:
        """The cached bundle (``kind`` ``bundle``); ``error`` naming what to run when there is none."""
        cache = cache if cache is not None else self.cache_dir()
        path = cache / self.tarball
        if not path.is_file():
            raise self.error(f"Debian's {self.system} is not on the controller ({path} does not exist): "
                             f"{self.hint}")
        version = f"{self.packages[0]} {_cached_version(cache)}"
        return CachedBinary(path, version, sha256_of(path), kind="bundle")

    def fetch(self, cache: Path | None = None, *, run: Runner = subprocess.run) -> CachedBinary:
        """Download the packages, unpack them all into one tree, and keep the tarball of what ``pack`` chose
        in ``cache``, replacing what was there atomically (a failed download or ``pack`` leaves the cache as
        it was)."""
        cache = cache if cache is not None else self.cache_dir()
        with fetching(cache) as work:
            try:
                debs = download_all(self.packages, work, run=run)
                version = package_version(debs[self.packages[0]], run=run)
                root = work / "root"
                for deb in debs.values():
                    unpack(deb, root, run=run)
                scratch = work / "tree"
                scratch.mkdir()
                members = self.pack(root, scratch)
            except FetchError as exc:
                raise self.error(str(exc)) from None
            bundle = work / self.tarball
            with tarfile.open(bundle, "w:gz") as tar:
                for arcname, path in members.items():
                    tar.add(path, arcname=arcname)
            _keep(bundle, cache, self.tarball, version)
        return self.find(cache)

    def main(self, argv: Sequence[str] | None, prog: str, description: str) -> int:
        """``python -m adapters.X [--force]``: fetch the packages into the cache unless the bundle is
        there."""
        return install_command(argv, prog=prog, description=description, name=self.name, find=self.find,
                               fetch=self.fetch, error=self.error,
                               without_apt=f"apt-get and dpkg-deb are needed to fetch {self.system} "
                                           "(Debian/Ubuntu)")


def install_command(argv: Sequence[str] | None, *, prog: str, description: str, name: str,
                    find: Callable[[], Any], fetch: Callable[[], Any], error: type[Exception],
                    without_apt: str) -> int:
    """An adapter's ``python -m adapters.X [--force]``: print what ``find()`` finds in the cache, else
    ``fetch()`` it (what ``--force`` always does); exit 254 with one line (``error``'s sentence, or
    ``without_apt`` on a machine without apt) when it cannot. Both return something with ``path`` and
    ``version``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--force", action="store_true", help="fetch again even if the cache holds it")
    args = parser.parse_args(argv)
    try:
        if not args.force:
            try:
                found = find()
            except error:
                pass
            else:
                print(f"{name}: {found.path} ({found.version}), already cached")
                return 0
        if missing_tools():
            raise error(without_apt)
        found = fetch()
    except (error, FetchError, OSError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 254
    print(f"{name}: {found.path} ({found.version}), fetched")
    return 0
