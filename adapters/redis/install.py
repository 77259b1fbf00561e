"""Redis 7 on the controller: Debian's ``redis-server`` and ``redis-sentinel``, fetched once and bundled.

The nodes have no route to a package mirror, so the controller fetches the packages through its own apt
configuration (``apt-get download``: no host is named here), unpacks them with ``dpkg-deb -x`` and packs
what the nodes need into one tarball in a cache outside the repository; the adapter uploads it to each
node and unpacks it there (``adapters.redis.db``).

What the tarball holds, and why:

* ``bin/redis-server``: Debian's ``redis-server`` and ``redis-sentinel`` packages hold only symlinks to
  ``/usr/bin/redis-check-rdb`` of ``redis-tools``, one executable that acts on the name it is started by
  or on ``--sentinel``: it is kept under the name ``redis-server``, and the Sentinel is started as
  ``redis-server sentinel.conf --sentinel``. ``bin/redis-cli`` (from ``redis-tools``) is there for people
  looking at a node by hand.
* ``lib/``: the shared libraries the executable links (``readelf -d``: libatomic, liblzf, libjemalloc,
  libssl, libcrypto, libsystemd, libm, libc) that the node image lacks: ``libatomic.so.1``,
  ``liblzf.so.1``, ``libjemalloc.so.2`` from :data:`LIBRARY_PACKAGES`. The processes are started with
  ``LD_LIBRARY_PATH`` there. (libssl, libcrypto and libsystemd come with the image's openssh-server.)

The cache is ``$CHAOS_HARNESS_CACHE/redis/`` (default ``${XDG_CACHE_HOME:-~/.cache}/chaos-harness``) and
holds ``redis.tar.gz`` and ``VERSION`` (the ``redis-server`` package's version). ``python -m
adapters.redis`` fills it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

from harness.db import debian
from harness.db.debian import CachedBinary, Runner

CACHE_NAME = "redis"
BUNDLE = "redis.tar.gz"
SERVER_PACKAGE = "redis-server"
REDIS_PACKAGES = ("redis-server", "redis-sentinel", "redis-tools")
LIBRARY_PACKAGES = ("libatomic1", "liblzf1", "libjemalloc2")
"""Libraries ``redis-check-rdb`` links that the node image does not have."""
PACKAGES = REDIS_PACKAGES + LIBRARY_PACKAGES
EXECUTABLE_IN_PACKAGE = Path("usr/bin/redis-check-rdb")
CLI_IN_PACKAGE = Path("usr/bin/redis-cli")
LIBRARY_DIR_IN_PACKAGE = Path("usr/lib/x86_64-linux-gnu")
LIBRARIES = ("libatomic.so.1", "liblzf.so.1", "libjemalloc.so.2")
INSTALL_HINT = "run python -m adapters.redis (it fetches Debian's redis-server and redis-sentinel with apt)"


class RedisInstallError(RuntimeError):
    """The Redis bundle is missing or could not be made: one sentence saying what to do."""


RedisBundle = CachedBinary
"""The tarball of Redis for the nodes, on the controller, as test.json records it (``kind`` ``bundle``)."""


def cache_dir() -> Path:
    """Where the bundle is kept (outside the repository)."""
    return debian.cache_dir(CACHE_NAME)


def find_bundle(cache: Path | None = None) -> RedisBundle:
    """The cached bundle; raises :class:`RedisInstallError` naming what to run when there is none."""
    cache = cache if cache is not None else cache_dir()
    path = cache / BUNDLE
    if not path.is_file():
        raise RedisInstallError(f"Debian's Redis is not on the controller ({path} does not exist): {INSTALL_HINT}")
    version_file = cache / "VERSION"
    version = version_file.read_text().strip() if version_file.is_file() else "unknown"
    return RedisBundle(path, f"{SERVER_PACKAGE} {version}", debian.sha256_of(path), kind="bundle")


def fetch(cache: Path | None = None, *, run: Runner = subprocess.run) -> RedisBundle:
    """Download the packages, unpack them, and keep the tarball of what the nodes need (module docstring)
    in ``cache``, replacing what was there atomically."""
    cache = cache if cache is not None else cache_dir()
    with debian.fetching(cache) as work:
        try:
            debs = debian.download_all(PACKAGES, work, run=run)
        except debian.FetchError as exc:
            raise RedisInstallError(str(exc)) from None
        version = debian.package_version(debs[SERVER_PACKAGE], run=run)
        root = work / "root"
        for deb in debs.values():
            debian.unpack(deb, root, run=run)
        tree = work / "tree"
        wanted = {Path("bin/redis-server"): EXECUTABLE_IN_PACKAGE, Path("bin/redis-cli"): CLI_IN_PACKAGE}
        wanted.update({Path("lib") / name: LIBRARY_DIR_IN_PACKAGE / name for name in LIBRARIES})
        for target, source in wanted.items():
            if not (root / source).exists():
                raise RedisInstallError(f"the packages hold no {source}")
            (tree / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / source, tree / target)  # follows the libraries' soname symlinks
            (tree / target).chmod(0o755)
        bundle = work / BUNDLE
        with tarfile.open(bundle, "w:gz") as tar:
            for target in sorted(wanted):
                tar.add(tree / target, arcname=str(target))
        os.replace(bundle, cache / BUNDLE)
        (cache / "VERSION").write_text(version + "\n")
    return find_bundle(cache)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m adapters.redis [--force]``: fetch Redis into the cache unless it is there."""
    return debian.install_command(argv, prog="python -m adapters.redis", description=__doc__.splitlines()[0],
                                  name="redis", find=find_bundle, fetch=fetch, error=RedisInstallError,
                                  without_apt="apt-get and dpkg-deb are needed to fetch Redis (Debian/Ubuntu)")
