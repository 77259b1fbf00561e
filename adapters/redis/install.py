"""Redis 7 on the controller: Debian's ``redis-server`` and ``redis-sentinel``, fetched once and bundled.

The nodes have no route to a package mirror, so the controller fetches the packages through its own apt
configuration (``apt-get download``: no host is named here), unpacks them with ``dpkg-deb -x`` and packs
what the nodes need into one tarball in a cache outside the repository
(:class:`harness.db.debian.DebianBundle` does these steps; this module says what is Redis's); the adapter
uploads it to each node and unpacks it there (``adapters.redis.db``).

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

import shutil
from pathlib import Path

from harness.db.debian import CachedBinary, DebianBundle, FetchError

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


def pack(root: Path, scratch: Path) -> dict[str, Path]:
    """What the tarball holds (module docstring), copied from the packages unpacked under ``root`` into
    ``scratch`` as executable regular files (the libraries' soname symlinks followed)."""
    wanted = {Path("bin/redis-server"): EXECUTABLE_IN_PACKAGE, Path("bin/redis-cli"): CLI_IN_PACKAGE}
    wanted.update({Path("lib") / name: LIBRARY_DIR_IN_PACKAGE / name for name in LIBRARIES})
    for target, source in wanted.items():
        if not (root / source).exists():
            raise FetchError(f"the packages hold no {source}")
        (scratch / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / source, scratch / target)
        (scratch / target).chmod(0o755)
    return {str(target): scratch / target for target in sorted(wanted)}


REDIS = DebianBundle("redis", "Redis", PACKAGES, pack, INSTALL_HINT, RedisInstallError)
BUNDLE = REDIS.tarball
cache_dir = REDIS.cache_dir
find_bundle = REDIS.find
fetch = REDIS.fetch
main = REDIS.command("python -m adapters.redis", __doc__)
