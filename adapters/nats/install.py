"""The nats-server binary on the controller: Debian's ``nats-server``, fetched once and cached.

The nodes have no route to a package mirror, so the controller fetches the package through its own apt
configuration (``apt-get download nats-server``: no host is named here), unpacks it with ``dpkg-deb -x``
and keeps the one file the nodes need, ``usr/sbin/nats-server`` (a Go binary that links nothing but libc),
in a cache outside the repository (``harness.db.debian``, shared by the adapters). The adapter uploads it
to each node (``adapters.nats.db``).

The cache is ``$CHAOS_HARNESS_CACHE/nats-server/`` (default ``${XDG_CACHE_HOME:-~/.cache}/chaos-harness``)
and holds ``nats-server`` and ``VERSION`` (the package's version). ``python -m adapters.nats`` (what
``scripts/install-nats.sh`` runs) fills it; ``--db-opt binary=PATH`` uses a nats-server of the user's own.
"""

from __future__ import annotations

from pathlib import Path

from harness.db.debian import CachedBinary, DebianBinary

PACKAGE = "nats-server"
BINARY_IN_PACKAGE = Path("usr/sbin/nats-server")
INSTALL_HINT = "run scripts/install-nats.sh (python -m adapters.nats), or give --db-opt binary=PATH"

NatsBinary = CachedBinary
"""A nats-server binary on the controller, as test.json records it."""


class NatsInstallError(RuntimeError):
    """The nats-server binary is missing or could not be fetched: one sentence saying what to do."""


NATS = DebianBinary(PACKAGE, BINARY_IN_PACKAGE, "nats-server", INSTALL_HINT, NatsInstallError,
                    "give --db-opt binary=PATH to a nats-server 2.9 binary")

cache_dir = NATS.cache_dir
find_binary = NATS.find
fetch = NATS.fetch
main = NATS.command("python -m adapters.nats", __doc__)
