"""This machine as a node (a ``nemesis.remote.Remote`` over ``sh -c``), for tests that run real shell scripts
of the nemesis or a DB adapter here instead of in a container."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from nemesis.remote import CommandResult


class LocalRemote:
    """This machine as a node: commands through ``sh -c``, atomic writes by rename."""

    name = "local"

    def run(
        self, cmd: str, *, timeout: float | None = None, check: bool = True, user: str | None = None
    ) -> CommandResult:
        done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout, check=False)
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def write_file(self, remote_path: str, data: bytes, mode: int = 0o644) -> None:
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(remote_path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, mode)
        os.replace(temp, remote_path)

    def read_file(self, remote_path: str) -> bytes:
        return Path(remote_path).read_bytes()

    def upload(self, local_path: object, remote_path: str) -> None:
        shutil.copyfile(str(local_path), remote_path)

    def download(self, remote_path: str, local_path: object) -> None:
        shutil.copyfile(remote_path, str(local_path))

    def close(self) -> None:
        pass
