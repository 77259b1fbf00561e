"""Remotes: the implementations of `nemesis.remote.Remote` through which the controller reaches nodes.

`DockerRemote` execs into a local container through the Docker engine; `SSHRemote` reaches any host over
SSH with a pinned host key. Both run commands with the contract of `harness.remotes.command`.
"""

from harness.remotes.docker import DockerRemote
from harness.remotes.ssh import SSHRemote, known_hosts_line

__all__ = ["DockerRemote", "SSHRemote", "known_hosts_line"]
