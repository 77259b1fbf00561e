"""The etcd server binary on the controller: Debian's ``etcd-server``, fetched once and cached.

The nodes run on an internal network with no route to a package mirror, so etcd is installed the way an
outside user would install it: the controller fetches the package through its own apt configuration
(``apt-get download etcd-server``: no host is named here), unpacks it with ``dpkg-deb -x``, and keeps the
one file the nodes need, ``usr/bin/etcd`` (a Go binary that links nothing but libc), in a cache outside
the repository. The adapter uploads it to each node (``adapters.etcd.db``).

The cache is ``$CHAOS_HARNESS_CACHE/etcd-server/`` (default ``${XDG_CACHE_HOME:-~/.cache}/chaos-harness``)
and holds ``etcd`` and ``VERSION`` (the package's version). ``python -m adapters.etcd`` (what
``scripts/install-etcd.sh`` runs) fills it; ``--db-opt binary=PATH`` uses an etcd binary of the user's
own instead.
"""

from __future__ import annotations

from pathlib import Path

from harness.db.debian import CachedBinary, DebianBinary

PACKAGE = "etcd-server"
BINARY_IN_PACKAGE = Path("usr/bin/etcd")
INSTALL_HINT = "run scripts/install-etcd.sh (python -m adapters.etcd), or give --db-opt binary=PATH"

EtcdBinary = CachedBinary
"""A etcd binary on the controller, as test.json records it."""


class EtcdInstallError(RuntimeError):
    """The etcd binary is missing or could not be fetched: one sentence saying what to do."""


ETCD = DebianBinary(PACKAGE, BINARY_IN_PACKAGE, "etcd", INSTALL_HINT, EtcdInstallError,
                    "give --db-opt binary=PATH to an etcd 3.4 binary")

cache_dir = ETCD.cache_dir
find_binary = ETCD.find
fetch = ETCD.fetch
main = ETCD.command("python -m adapters.etcd", __doc__)
