"""Platforms: what brings up a run's nodes and hands out a `nemesis.remote.Remote` per node.

`harness.platforms.docker` runs nodes as local containers (the default).
"""
