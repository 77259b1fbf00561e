"""The ssh platform: a run's nodes are machines that already exist, reached over SSH as Jepsen does.

A *hosts file* (TOML, described in docs/ssh.md) names each node's machine: where the controller reaches
it (``host``: its SSH connection and the system's client port), how it logs in (``port``, ``user``,
``key``), the ``known_hosts`` file pinning the machine's host key, and where the other nodes reach it
(``peer_host``, default ``host``; the addresses partitions drop, so they must be the source addresses
the nodes' packets carry). A ``[defaults]`` table holds what every node shares::

    [defaults]
    key = "keys/chaos_ed25519"          # relative paths are relative to the hosts file
    known_hosts = "known_hosts"

    [nodes.n1]
    host = "10.0.0.11"
    [nodes.n2]
    host = "db2.example.com"
    port = 2222
    peer_host = "192.168.7.12"

A run needs one machine per data node (``n1..nN``) and, in ``fluvio`` mode, one more for the controller,
named ``sc`` in the hosts file; a ``lease`` run's store members share the machines of n1..n3 (the DB
adapter, ``adapters/cluster/db.py`` with its layout ``adapters/cluster/processes.py``, says what
runs where).

Security contract (that of `harness.remotes.ssh.SSHRemote`): key authentication only, and a host must
present the key pinned for it; an unknown host key is rejected, never added. `SSHPlatform.from_hosts_file`
checks everything that can be checked offline (the file, the key, a pin for every host) and
`SSHPlatform.start` connects and checks that each machine can take a test (root, the commands the
harness and the nemesis run). Every failure is a `SSHPlatformError` of one line saying what to do; the
controller exits 254 with it.

The platform owns no lifecycle of the machines: `close` only closes the connections. Healing faults,
resuming processes, collecting logs and wiping the system under test are the controller's teardown
through the DB adapter and the nemesis, as on every platform.
"""

from __future__ import annotations

import functools
import logging
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any

import paramiko

from harness.platforms.threads import run_in_threads
from harness.remotes.ssh import SSHRemote
from nemesis.remote import RemoteError

DOCS = "docs/ssh.md"
NODE_FIELDS = ("host", "port", "user", "key", "known_hosts", "peer_host")
DEFAULT_FIELDS = ("port", "user", "key", "known_hosts")
REQUIRED_COMMANDS = {
    "python3": "python3",
    "iptables": "iptables",
    "ps": "procps",
    "timeout": "coreutils",
    "tar": "tar",
}
"""Commands every node needs (what runs them: the DB adapter, the nemesis, `SSHRemote`) -> Debian package."""

# paramiko's transport thread logs a failed handshake with its traceback; the error reaches the user as
# one line, and the traceback goes to harness.log once the run has one, not to the terminal.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_DATA_NODE = re.compile(r"n[0-9]+")
_PARALLEL_CONNECTIONS = 16


class SSHPlatformError(Exception):
    """The ssh platform cannot run the test; the message is one line that says what to do."""

    exit_code = 254  # bad configuration or environment (ARCHITECTURE.md, exit codes)


class HostsFileError(SSHPlatformError):
    """The hosts file is missing, malformed, or names a key or known_hosts pin that does not exist."""


@dataclass(frozen=True)
class SSHHost:
    """One node's machine as the hosts file describes it (paths absolute, defaults applied)."""

    node: str
    host: str
    port: int
    user: str
    key: Path
    known_hosts: Path
    peer_host: str

    @property
    def login(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


def load_hosts(path: str | PathLike[str], nodes: Sequence[str] | None = None) -> tuple[SSHHost, ...]:
    """The hosts of ``nodes`` (default: every node of the file, in its order) from the hosts file.

    Raises `HostsFileError` naming the file, the node and the field at fault.
    """
    source = Path(path).expanduser()
    where = str(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HostsFileError(f"hosts file {where} does not exist: write one as {DOCS} shows") from None
    except (OSError, UnicodeDecodeError) as error:
        raise HostsFileError(f"cannot read the hosts file {where}: {error}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise HostsFileError(f"hosts file {where} is not valid TOML ({error}); see {DOCS}") from None
    unknown = sorted(set(document) - {"defaults", "nodes"})
    if unknown:
        raise HostsFileError(f"hosts file {where} has unknown table(s) {', '.join(unknown)}; known: defaults, nodes")
    defaults = _table(document.get("defaults", {}), f"{where}: [defaults]")
    _no_unknown_fields(defaults, DEFAULT_FIELDS, f"{where}: [defaults]")
    table = _table(document.get("nodes", {}), f"{where}: [nodes]")
    if not table:
        raise HostsFileError(f"hosts file {where} names no node: add a [nodes.n1] table with a host (see {DOCS})")
    if nodes is not None:
        missing = [node for node in nodes if node not in table]
        if missing:
            extra = [node for node in missing if not _DATA_NODE.fullmatch(node)]
            why = (f"; {', '.join(extra)} is the machine of a process besides the data nodes (sc: the fluvio "
                   "controller, docs/election-fluvio.md)") if extra else ""
            raise HostsFileError(
                f"hosts file {where} has no node {', '.join(missing)} (it has {', '.join(table)}): add them, "
                f"or run with --nodes {len(table)} if the file's nodes are n1..n{len(table)}{why}"
            )
    base = source.resolve().parent
    hosts = tuple(
        _host(node, _table(table[node], f"{where}: [nodes.{node}]"), defaults, base, where)
        for node in (nodes if nodes is not None else list(table))
    )
    _no_duplicates(hosts, where)
    for host in hosts:
        _check_pinned(host, where)
    return hosts


def _table(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HostsFileError(f"{what} must be a table of fields, not {value!r}; see {DOCS}")
    return value


def _no_unknown_fields(fields: Mapping[str, Any], known: Sequence[str], what: str) -> None:
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise HostsFileError(f"{what} has unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}")


def _host(node: str, fields: Mapping[str, Any], defaults: Mapping[str, Any], base: Path, where: str) -> SSHHost:
    what = f"{where}: node {node}"
    if not _NODE_NAME.fullmatch(node):
        raise HostsFileError(f"{what}: a node name is 1-63 of A-Z a-z 0-9 _ . - (starting alphanumeric)")
    _no_unknown_fields(fields, NODE_FIELDS, what)
    merged = {"port": 22, "user": "root", **defaults, **fields}
    for name in ("host", "key", "known_hosts"):
        if name not in merged:
            raise HostsFileError(f"{what} has no {name!r} (set it in [nodes.{node}] or [defaults])")
    for name in ("host", "user", "key", "known_hosts", "peer_host"):
        value = merged.get(name, "")
        if not isinstance(value, str) or (name in merged and not value.strip()):
            raise HostsFileError(f"{what}: {name!r} must be a non-empty string, not {value!r}")
    port = merged["port"]
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise HostsFileError(f"{what}: 'port' must be a whole number from 1 to 65535, not {port!r}")
    key = _path(merged["key"], base)
    known_hosts = _path(merged["known_hosts"], base)
    _check_key(key, what)
    if not known_hosts.is_file():
        raise HostsFileError(
            f"{what}: known_hosts file {known_hosts} does not exist: pin the hosts' keys in it with "
            f"ssh-keyscan after checking their fingerprints ({DOCS})"
        )
    host = merged["host"].strip()
    return SSHHost(node, host, port, merged["user"].strip(), key, known_hosts,
                   merged.get("peer_host", host).strip())


def _path(value: str, base: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _check_key(key: Path, what: str) -> None:
    """The key must be a private key paramiko can load without a passphrase (the agent is never used)."""
    if not key.is_file():
        raise HostsFileError(
            f"{what}: key file {key} does not exist: point 'key' at the private key whose public key is in "
            "the node's /root/.ssh/authorized_keys"
        )
    try:
        paramiko.PKey.from_path(key)
    except (paramiko.PasswordRequiredException, TypeError):  # TypeError: cryptography's "password-protected"
        raise HostsFileError(
            f"{what}: key file {key} is protected by a passphrase: give the harness a key without one "
            f"(a dedicated key: ssh-keygen -t ed25519 -N '' -f FILE)"
        ) from None
    except (OSError, ValueError, paramiko.SSHException) as error:
        hint = " (that is a public key; point 'key' at the private one)" if key.read_bytes()[:4] == b"ssh-" else ""
        raise HostsFileError(f"{what}: key file {key} is not a private key paramiko can load{hint}: {error}") from None


def _no_duplicates(hosts: Sequence[SSHHost], where: str) -> None:
    for attribute, meaning in (("login", "machine"), ("peer_host", "peer_host")):
        seen: dict[str, str] = {}
        for host in hosts:
            value = getattr(host, attribute)
            if value in seen:
                raise HostsFileError(
                    f"hosts file {where}: nodes {seen[value]} and {host.node} have the same {meaning} {value}; "
                    "each node needs its own machine"
                )
            seen[value] = host.node


def _check_pinned(host: SSHHost, where: str) -> None:
    """A host with no pinned key would be rejected at connection; say so before connecting."""
    pattern = host.host if host.port == 22 else f"[{host.host}]:{host.port}"
    try:
        known = paramiko.HostKeys(str(host.known_hosts))
    except (OSError, paramiko.SSHException) as error:
        raise HostsFileError(f"cannot read the known_hosts file {host.known_hosts}: {error}") from None
    if not known.lookup(pattern):
        port = "" if host.port == 22 else f"-p {host.port} "
        raise HostsFileError(
            f"{where}: node {host.node}: no host key of {pattern} is pinned in {host.known_hosts}: add it with "
            f"`ssh-keyscan {port}-t ed25519 {host.host} >> {host.known_hosts}` after checking its fingerprint "
            f"({DOCS})"
        )


class SSHPlatform:
    """The nodes of a test as existing machines: connects an `SSHRemote` to each, closes them.

    ``start`` connects (once; later calls hand out the same remotes), ``address`` is where the controller
    reaches a node, ``peer_host`` where the other nodes do, ``close`` closes the connections (idempotent).
    """

    def __init__(self, hosts: Sequence[SSHHost], *, connect_timeout: float = 10.0) -> None:
        if not hosts:
            raise ValueError("an ssh platform needs at least one host")
        self.hosts = {host.node: host for host in hosts}
        self.connect_timeout = connect_timeout
        self._remotes: dict[str, SSHRemote] = {}

    @classmethod
    def from_hosts_file(
        cls, path: str | PathLike[str], nodes: Sequence[str] | None = None, *, connect_timeout: float = 10.0
    ) -> SSHPlatform:
        """The platform of ``nodes`` (default: all) of a hosts file; raises `HostsFileError`."""
        return cls(load_hosts(path, nodes), connect_timeout=connect_timeout)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.hosts)

    def start(self) -> dict[str, SSHRemote]:
        """Connects to every node in parallel and checks it can take a test; returns the remotes by node.

        Raises `SSHPlatformError` naming every node that failed (and leaves no connection open).
        """
        if self._remotes:
            return dict(self._remotes)
        attempts = run_in_threads({node: functools.partial(self._connect, host) for node, host in self.hosts.items()},
                                  name="ssh", max_workers=min(_PARALLEL_CONNECTIONS, len(self.hosts)))
        errors: list[str] = []
        unexpected: BaseException | None = None
        for node, attempt in attempts.items():
            error = attempt.exception()
            if error is None:
                self._remotes[node] = attempt.result()
            elif isinstance(error, SSHPlatformError):
                errors.append(str(error))
            else:
                unexpected = unexpected or error
        if errors or unexpected is not None:
            self.close()
            if unexpected is not None:
                raise unexpected
            raise SSHPlatformError("; ".join(errors))
        return dict(self._remotes)

    def _connect(self, host: SSHHost) -> SSHRemote:
        try:
            remote = SSHRemote(
                host.host, known_hosts=host.known_hosts, key_filename=host.key, name=host.node,
                port=host.port, username=host.user, connect_timeout=self.connect_timeout,
            )
        except RemoteError as error:
            message = str(error)
            # Key and authentication errors already say what to fix; a transport failure does not.
            cause = error.__cause__
            if isinstance(cause, OSError) or type(cause) is paramiko.SSHException:
                message += f": check that {host.host} is up and sshd listens on port {host.port}, reachable from here"
            raise SSHPlatformError(message) from error
        try:
            self._check_node(host, remote)
        except BaseException:
            remote.close()
            raise
        return remote

    def _check_node(self, host: SSHHost, remote: SSHRemote) -> None:
        """Root (iptables, signals to the node's process, /opt and /var) and the commands the harness runs."""
        probe = "id -u; id -un; " + "".join(
            f"command -v {command} >/dev/null 2>&1 || echo missing {command}; " for command in REQUIRED_COMMANDS
        )
        try:  # no timeout: it would wrap the probe in coreutils' timeout, one of the commands it looks for
            lines = remote.run(probe).stdout.split()
        except RemoteError as error:
            raise SSHPlatformError(f"{error}: the node must run POSIX sh commands over SSH") from error
        uid, user = (lines[0], lines[1]) if len(lines) >= 2 else ("?", "?")
        if uid != "0":
            raise SSHPlatformError(
                f"{host.node}: {host.login} logs in as {user} (uid {uid}) but the harness needs root on the "
                f"nodes (iptables, signals, /opt): log in as root with a key (PermitRootLogin "
                f"prohibit-password; sudo is not supported), see {DOCS}"
            )
        missing = [lines[i + 1] for i in range(2, len(lines) - 1) if lines[i] == "missing"]
        if missing:
            packages = sorted({REQUIRED_COMMANDS[command] for command in missing})
            raise SSHPlatformError(
                f"{host.node}: {host.host} lacks {', '.join(missing)}: install {' '.join(packages)} there "
                f"(Debian: apt-get install {' '.join(packages)})"
            )

    def remote(self, node: str) -> SSHRemote:
        try:
            return self._remotes[node]
        except KeyError:
            raise KeyError(f"no connected node {node!r}; connected: {', '.join(self._remotes) or 'none'}") from None

    def remotes(self) -> dict[str, SSHRemote]:
        return dict(self._remotes)

    def address(self, node: str) -> str:
        """Where the controller reaches ``node`` (its SSH host; the system's clients connect there too)."""
        return self._host(node).host

    def peer_host(self, node: str) -> str:
        """Where the other nodes reach ``node``: their peer address for it and the source partitions drop."""
        return self._host(node).peer_host

    def _host(self, node: str) -> SSHHost:
        try:
            return self.hosts[node]
        except KeyError:
            raise KeyError(f"no node {node!r} in the hosts file; its nodes: {', '.join(self.hosts)}") from None

    def close(self) -> None:
        """Closes every connection; the machines and whatever runs on them are left as they are."""
        remotes, self._remotes = self._remotes, {}
        for remote in remotes.values():
            remote.close()

    def __enter__(self) -> SSHPlatform:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
