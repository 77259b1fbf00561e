"""`SSHRemote`: the Remote of a node reached over SSH (paramiko: exec channels and SFTP), as Jepsen does.

Security contract: authentication is by key only (no agent, no password, no keys picked up from
``~/.ssh``), and the host must present the key pinned for it in the ``known_hosts`` file the caller
names. An unknown host is rejected (`paramiko.RejectPolicy`), never added; a host whose key changed is
rejected too. Both errors say which file to fix. `known_hosts_line` writes a pin in OpenSSH's format.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import secrets
import select
import shlex
import stat
import threading
import time
from os import PathLike
from pathlib import Path

import paramiko

from harness.remotes.command import KILL_AFTER_S, describe, finish, node_argv
from nemesis.remote import Command, CommandResult, RemoteError, RemoteTimeout

_ANSWER_GRACE_S = 5.0
"""How long after a command's own timeout (enforced on the node) the controller waits for its answer."""


def known_hosts_line(host: str, public_key: str, port: int = 22) -> str:
    """The known_hosts line pinning ``public_key`` (``"ssh-ed25519 AAAA... comment"``) for ``host:port``."""
    fields = public_key.split()
    if len(fields) < 2:
        raise ValueError(f"a public key looks like 'ssh-ed25519 AAAA...', not {public_key!r}")
    pattern = host if port == 22 else f"[{host}]:{port}"
    return f"{pattern} {fields[0]} {fields[1]}\n"


class _UnknownHostKey(paramiko.SSHException):
    pass


class _RejectUnknownHost(paramiko.RejectPolicy):
    """paramiko's RejectPolicy, raising an exception the remote can tell apart from other SSH errors."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise _UnknownHostKey(f"{hostname} presented a {key.get_name()} key that is not pinned")


class SSHRemote:
    """An SSH connection to one node, opened when constructed.

    ``known_hosts`` is an OpenSSH known_hosts file holding the host's key; ``key_filename`` the private
    key to authenticate with (as ``username``). Raises `RemoteError` when the host cannot be reached,
    its key is not the pinned one, or the key is refused.
    """

    def __init__(
        self,
        host: str,
        *,
        known_hosts: str | PathLike[str],
        key_filename: str | PathLike[str],
        name: str | None = None,
        port: int = 22,
        username: str = "root",
        connect_timeout: float = 10.0,
    ) -> None:
        self._name = name or host
        self._host, self._port, self._username = host, port, username
        self._connect_timeout = connect_timeout
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = threading.Lock()
        known_hosts = Path(known_hosts)
        if not known_hosts.is_file():
            raise RemoteError(self._name, f"known_hosts file {known_hosts} does not exist; pin {host}'s host key in it")
        self._client = paramiko.SSHClient()
        self._client.load_host_keys(str(known_hosts))
        self._client.set_missing_host_key_policy(_RejectUnknownHost())
        where = f"{username}@{host}:{port}"
        try:
            self._client.connect(
                host, port=port, username=username, key_filename=str(key_filename),
                look_for_keys=False, allow_agent=False, timeout=connect_timeout,
                banner_timeout=connect_timeout, auth_timeout=connect_timeout,
            )
        except _UnknownHostKey as error:
            self._client.close()
            raise RemoteError(
                self._name, f"host key of {host}:{port} is not in {known_hosts} ({error}); pin it and retry"
            ) from error
        except paramiko.BadHostKeyException as error:
            self._client.close()
            raise RemoteError(
                self._name,
                f"host key of {host}:{port} differs from the one pinned in {known_hosts}: the host was "
                "reinstalled or the connection is intercepted; re-pin it only after checking",
            ) from error
        except paramiko.AuthenticationException as error:
            self._client.close()
            raise RemoteError(
                self._name, f"{where} refused the key {key_filename}: add its public key to authorized_keys"
            ) from error
        except (OSError, paramiko.SSHException) as error:
            self._client.close()
            raise RemoteError(self._name, f"cannot connect to {where}: {error}") from error

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"SSHRemote({self._name!r}, {self._username}@{self._host}:{self._port})"

    def _transport(self) -> paramiko.Transport:
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise RemoteError(self._name, f"the SSH connection to {self._host}:{self._port} is closed")
        return transport

    def run(
        self, cmd: Command, *, timeout: float | None = None, check: bool = True, user: str | None = None
    ) -> CommandResult:
        argv = node_argv(cmd, timeout)
        if user is not None and user != self._username:
            switch = ["runuser", "-u", user, "--"] if self._username == "root" else ["sudo", "-n", "-u", user, "--"]
            argv = switch + argv
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout + KILL_AFTER_S + _ANSWER_GRACE_S
        try:
            channel = self._transport().open_session(timeout=self._connect_timeout)
        except (OSError, paramiko.SSHException) as error:
            raise RemoteError(self._name, f"cannot open a channel for `{describe(cmd)}`: {error}") from error
        stdout, stderr = bytearray(), bytearray()
        with channel:
            channel.exec_command(shlex.join(argv))
            # Drain both streams as they come: one SSH window covers both, so a command filling its
            # stderr while we wait on stdout would otherwise stall.
            while True:
                while channel.recv_ready():
                    stdout += channel.recv(65536)
                while channel.recv_stderr_ready():
                    stderr += channel.recv_stderr(65536)
                if channel.exit_status_ready() and channel.eof_received:
                    if not channel.recv_ready() and not channel.recv_stderr_ready():
                        break
                    continue
                if channel.closed:
                    raise RemoteError(self._name, f"the connection closed while running `{describe(cmd)}`")
                wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
                if wait <= 0:
                    raise RemoteTimeout(
                        self._name, f"`{describe(cmd)}` gave no answer within {timeout:g} s (+ grace)"
                    )
                select.select([channel], [], [], wait)
            exit_code = channel.recv_exit_status()
        return finish(
            self._name, cmd, exit_code, bytes(stdout), bytes(stderr),
            elapsed=time.monotonic() - started, timeout=timeout, check=check,
        )

    # --- files (SFTP; one SFTP session per connection, used under a lock: it is not thread-safe) ---

    def _sftp_session(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            try:
                self._sftp = self._client.open_sftp()
            except (OSError, paramiko.SSHException) as error:
                raise RemoteError(self._name, f"cannot open an SFTP session: {error}") from error
        return self._sftp

    def _file_error(self, action: str, path: str, error: Exception) -> RemoteError:
        if getattr(error, "errno", None) == errno.ENOENT:
            return RemoteError(self._name, f"cannot {action} {path}: no such file or directory")
        return RemoteError(self._name, f"cannot {action} {path}: {getattr(error, 'strerror', None) or error}")

    def _absolute(self, remote_path: str) -> str:
        if not remote_path.startswith("/"):
            raise RemoteError(self._name, f"remote paths must be absolute, not {remote_path!r}")
        return posixpath.normpath(remote_path)

    def upload(self, local_path: str | PathLike[str], remote_path: str) -> None:
        local = Path(local_path)
        if not local.exists():
            raise FileNotFoundError(f"cannot upload {local} to {self._name}: no such local file or directory")
        target = self._absolute(remote_path)
        self.run(["mkdir", "-p", posixpath.dirname(target)])
        with self._sftp_lock:
            sftp = self._sftp_session()
            try:
                self._put_tree(sftp, local, target)
            except (OSError, paramiko.SSHException) as error:
                raise self._file_error("upload to", target, error) from error

    def _put_tree(self, sftp: paramiko.SFTPClient, local: Path, target: str) -> None:
        if local.is_symlink():
            with contextlib.suppress(OSError):
                sftp.remove(target)
            sftp.symlink(os.readlink(local), target)
        elif local.is_dir():
            with contextlib.suppress(OSError):
                sftp.mkdir(target)
            sftp.chmod(target, stat.S_IMODE(local.stat().st_mode))
            for child in sorted(local.iterdir()):
                self._put_tree(sftp, child, posixpath.join(target, child.name))
        else:
            sftp.put(str(local), target)
            sftp.chmod(target, stat.S_IMODE(local.stat().st_mode))

    def download(self, remote_path: str, local_path: str | PathLike[str]) -> None:
        source = self._absolute(remote_path)
        local = Path(local_path)
        with self._sftp_lock:
            sftp = self._sftp_session()
            try:
                self._get_tree(sftp, source, local)
            except (OSError, paramiko.SSHException) as error:
                raise self._file_error("download", source, error) from error

    def _get_tree(self, sftp: paramiko.SFTPClient, source: str, local: Path) -> None:
        attributes = sftp.stat(source)
        if stat.S_ISDIR(attributes.st_mode or 0):
            local.mkdir(parents=True, exist_ok=True)
            for entry in sorted(sftp.listdir_attr(source), key=lambda entry: entry.filename):
                child = posixpath.join(source, entry.filename)
                if stat.S_ISLNK(entry.st_mode or 0):
                    (local / entry.filename).unlink(missing_ok=True)
                    (local / entry.filename).symlink_to(sftp.readlink(child))
                else:
                    self._get_tree(sftp, child, local / entry.filename)
        else:
            local.parent.mkdir(parents=True, exist_ok=True)
            partial = local.with_name(f".{local.name}.{secrets.token_hex(4)}.part")
            try:
                sftp.get(source, str(partial))
                partial.chmod(stat.S_IMODE(attributes.st_mode or 0o644))
                os.replace(partial, local)
            finally:
                partial.unlink(missing_ok=True)

    def read_file(self, remote_path: str) -> bytes:
        path = self._absolute(remote_path)
        with self._sftp_lock:
            sftp = self._sftp_session()
            try:
                with sftp.open(path, "rb") as handle:
                    handle.prefetch()
                    return handle.read()
            except (OSError, paramiko.SSHException) as error:
                raise self._file_error("read", path, error) from error

    def write_file(self, remote_path: str, data: bytes, mode: int = 0o644) -> None:
        target = self._absolute(remote_path)
        directory, base = posixpath.split(target)
        temporary = posixpath.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        for attempt in (1, 2):
            with self._sftp_lock:
                sftp = self._sftp_session()
                try:
                    with sftp.open(temporary, "wb") as handle:
                        handle.write(data)
                    sftp.chmod(temporary, mode)
                    sftp.posix_rename(temporary, target)  # rename(2): readers see old or new, never partial
                    return
                except (OSError, paramiko.SSHException) as error:
                    with contextlib.suppress(OSError, paramiko.SSHException):
                        sftp.remove(temporary)
                    if attempt == 2 or getattr(error, "errno", None) != errno.ENOENT:
                        raise self._file_error("write", target, error) from error
            self.run(["mkdir", "-p", directory])

    def close(self) -> None:
        with self._sftp_lock:
            if self._sftp is not None:
                with contextlib.suppress(OSError, paramiko.SSHException):
                    self._sftp.close()
                self._sftp = None
        self._client.close()
