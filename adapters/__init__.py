"""The DB adapters that ship with the project, each a plugin registered through the entry-point group
``chaos_harness.dbs`` exactly as a user's own adapter package would be (``harness/db/plugin.py``).

Nothing in ``harness/`` imports this package: the controller finds an adapter by name, through the entry
point. ``cluster`` adapts the demo system under test (``cluster/``); ``etcd`` adapts Debian's
``etcd-server``.
"""
