"""The Remote protocol: how the controller reaches one node's shell and files.

Partitions (iptables), kills and pauses (signals), clock skew (libfaketime's control file) and the DB
adapters are written against this protocol only, so one implementation of each serves every platform
(docker containers, SSH hosts) and every system under test. The implementations live in
`harness.remotes`; nemesis and workloads must not import `harness`, so the protocol lives here.

Contract shared by every implementation:

* ``run(cmd)`` runs a command on the node as ``user`` (default: the remote's own user, root on our
  nodes). A ``str`` is a shell command line (``sh -c``); a ``list`` is an argv, run without a shell
  (each element reaches the program as one argument). With ``timeout``, a command still running after
  that many seconds is killed on the node and :class:`RemoteTimeout` is raised: its effect is unknown
  (it may or may not have happened), which callers record as ``info``. With ``check`` (default), a
  non-zero exit raises :class:`RemoteError`; without it the :class:`CommandResult` is returned as is.
  ``run`` returns when the command's output streams close: a process meant to outlive the command
  (a node started in the background) must redirect its stdout and stderr, e.g. to its log file.
* ``upload``/``download`` copy a file or a whole directory tree; the destination becomes a copy of the
  source (parents are created).
* ``write_file`` is atomic: the data goes to a temporary file in the same directory which is then renamed
  over the target, so a reader (e.g. libfaketime polling its control file) never sees a partial file.
* Every failure to reach the node, to find a file or to run a command is a :class:`RemoteError` whose
  message is one line that names the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from typing import Protocol, runtime_checkable

Command = str | list[str]
"""A shell command line (``str``) or an argv run without a shell (``list[str]``)."""


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: its exit code and its output, decoded as UTF-8 (bad bytes replaced)."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class RemoteError(Exception):
    """A node could not be reached, a file was missing, or a command failed (its result attached)."""

    def __init__(self, node: str, message: str, result: CommandResult | None = None) -> None:
        self.node = node
        self.result = result
        super().__init__(f"{node}: {' '.join(message.split())}")


class RemoteTimeout(RemoteError):
    """A command outlived its timeout and was killed; whether it took effect is unknown."""


@runtime_checkable
class Remote(Protocol):
    """A connection to one node. Implementations: ``harness.remotes.DockerRemote``, ``SSHRemote``."""

    @property
    def name(self) -> str:
        """The node id (``n1``), used in every error message."""
        ...

    def run(
        self, cmd: Command, *, timeout: float | None = None, check: bool = True, user: str | None = None
    ) -> CommandResult: ...

    def upload(self, local_path: str | PathLike[str], remote_path: str) -> None: ...

    def download(self, remote_path: str, local_path: str | PathLike[str]) -> None: ...

    def write_file(self, remote_path: str, data: bytes, mode: int = 0o644) -> None: ...

    def read_file(self, remote_path: str) -> bytes: ...

    def close(self) -> None: ...
