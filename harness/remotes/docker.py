"""`DockerRemote`: the Remote of a node that is a local Docker container (docker SDK 7.x).

Commands run through ``docker exec`` (the engine's exec API); files move as tar archives through the
engine's archive API (``put_archive``/``get_archive``, what ``docker cp`` uses), so the container needs
no sshd and no network route to the controller. Files written here are owned by root on the node.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import secrets
import shutil
import tarfile
import tempfile
import time
from os import PathLike
from pathlib import Path

import requests.exceptions
from docker.client import DockerClient
from docker.errors import APIError, DockerException, NotFound

from harness.remotes.command import describe, finish, node_argv
from nemesis.remote import Command, CommandResult, RemoteError, RemoteTimeout

_MAX_SYMLINK_HOPS = 8


def _absolute(node: str, remote_path: str) -> str:
    if not remote_path.startswith("/"):
        raise RemoteError(node, f"remote paths must be absolute, not {remote_path!r}")
    normalized = posixpath.normpath(remote_path)
    if normalized == "/":
        raise RemoteError(node, "the node's root directory cannot be copied as a whole")
    return normalized


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


class DockerRemote:
    """Reaches one container through the Docker engine ``client`` talks to.

    ``container`` is the container's id or name; ``name`` is the node id used in messages (by default the
    container's name). The client belongs to the caller (the platform) unless ``owns_client`` is set, in
    which case `close` closes it.
    """

    def __init__(
        self, client: DockerClient, container: str, name: str | None = None, *, owns_client: bool = False
    ) -> None:
        self._client = client
        self._api = client.api
        self._container = container
        self._name = name or container
        self._owns_client = owns_client

    @property
    def name(self) -> str:
        return self._name

    @property
    def container(self) -> str:
        """The container id or name this remote execs into."""
        return self._container

    def __repr__(self) -> str:
        return f"DockerRemote({self._name!r}, container={self._container!r})"

    def _engine_error(self, action: str, error: Exception) -> RemoteError:
        if isinstance(error, NotFound):
            return RemoteError(self._name, f"{action}: container {self._container} does not exist (any more)")
        if isinstance(error, APIError):
            return RemoteError(self._name, f"{action}: {error.explanation or error}")
        if isinstance(error, requests.exceptions.Timeout):
            return RemoteTimeout(self._name, f"{action}: the Docker engine did not answer in time")
        return RemoteError(self._name, f"{action}: cannot talk to the Docker engine ({error})")

    def run(
        self, cmd: Command, *, timeout: float | None = None, check: bool = True, user: str | None = None
    ) -> CommandResult:
        argv = node_argv(cmd, timeout)
        started = time.monotonic()
        try:
            exec_id = self._api.exec_create(self._container, argv, stdout=True, stderr=True, user=user or "")
            stdout, stderr = self._api.exec_start(exec_id, demux=True)
            exit_code = self._api.exec_inspect(exec_id)["ExitCode"]
        except (DockerException, requests.exceptions.RequestException) as error:
            raise self._engine_error(f"cannot run `{describe(cmd)}`", error) from error
        if exit_code is None:
            raise RemoteError(self._name, f"`{describe(cmd)}` ended without an exit code")
        return finish(
            self._name, cmd, exit_code, stdout, stderr,
            elapsed=time.monotonic() - started, timeout=timeout, check=check,
        )

    def _put_archive(self, directory: str, archive: bytes) -> None:
        try:
            self._api.put_archive(self._container, directory, archive)
            return
        except NotFound:
            pass  # the directory is missing (or the container is gone: the mkdir below says which)
        except (DockerException, requests.exceptions.RequestException) as error:
            raise self._engine_error(f"cannot copy into {directory}", error) from error
        self.run(["mkdir", "-p", directory])
        try:
            self._api.put_archive(self._container, directory, archive)
        except (DockerException, requests.exceptions.RequestException) as error:
            raise self._engine_error(f"cannot copy into {directory}", error) from error

    def _get_archive(self, remote_path: str) -> tarfile.TarFile:
        try:
            stream, _stat = self._api.get_archive(self._container, remote_path)
            data = b"".join(stream)
        except NotFound as error:
            raise RemoteError(self._name, f"no such file or directory: {remote_path}") from error
        except (DockerException, requests.exceptions.RequestException) as error:
            raise self._engine_error(f"cannot copy {remote_path} from the node", error) from error
        return tarfile.open(fileobj=io.BytesIO(data))

    def upload(self, local_path: str | PathLike[str], remote_path: str) -> None:
        local = Path(local_path)
        if not local.exists():
            raise FileNotFoundError(f"cannot upload {local} to {self._name}: no such local file or directory")
        target = _absolute(self._name, remote_path)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(local, arcname=posixpath.basename(target), filter=_as_root)
        self._put_archive(posixpath.dirname(target), buffer.getvalue())

    def download(self, remote_path: str, local_path: str | PathLike[str]) -> None:
        source = _absolute(self._name, remote_path)
        local = Path(local_path)
        local.parent.mkdir(parents=True, exist_ok=True)
        with self._get_archive(source) as tar, tempfile.TemporaryDirectory(dir=local.parent) as staging:
            try:
                tar.extractall(staging, filter="data")
            except tarfile.TarError as error:
                raise RemoteError(self._name, f"cannot unpack {source} into {local}: {error}") from error
            extracted = Path(staging) / posixpath.basename(source)
            if extracted.is_dir():
                shutil.copytree(extracted, local, symlinks=True, dirs_exist_ok=True)
            else:
                os.replace(extracted, local)

    def read_file(self, remote_path: str) -> bytes:
        path = _absolute(self._name, remote_path)
        for _ in range(_MAX_SYMLINK_HOPS):
            with self._get_archive(path) as tar:
                member = tar.next()
                if member is None:
                    raise RemoteError(self._name, f"the engine returned an empty archive for {path}")
                if member.isfile():
                    content = tar.extractfile(member)
                    assert content is not None
                    return content.read()
                if member.isdir():
                    raise RemoteError(self._name, f"{path} is a directory, not a file")
                if not member.issym():
                    raise RemoteError(self._name, f"{path} is not a regular file")
                path = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.linkname))
        raise RemoteError(self._name, f"too many symbolic links resolving {remote_path}")

    def write_file(self, remote_path: str, data: bytes, mode: int = 0o644) -> None:
        target = _absolute(self._name, remote_path)
        directory, base = posixpath.split(target)
        temporary = posixpath.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        info = _as_root(tarfile.TarInfo(posixpath.basename(temporary)))
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.addfile(info, io.BytesIO(data))
        self._put_archive(directory, buffer.getvalue())
        try:
            self.run(["mv", "-f", temporary, target])  # rename(2) within one directory: atomic
        except RemoteError:
            with contextlib.suppress(RemoteError):
                self.run(["rm", "-f", temporary], check=False)
            raise

    def close(self) -> None:
        if self._owns_client:
            self._client.close()
