"""Where a store lives, for the analysis: a directory of this machine, or any filesystem Spark reaches.

``harness analyze`` takes plain paths and URLs. A plain path (``store``, ``/srv/chaos/store``) is a
directory of this machine: :class:`LocalStorage`, read and written with the standard library. A URL
(``file:///shared/store``, ``hdfs://namenode:8020/chaos/store``, ``s3a://bucket/store`` where the user
has added the S3 connector to Spark) goes through Hadoop's ``FileSystem`` API in the driver's JVM
(:class:`HadoopStorage`): the same layer Spark's own readers use in the tasks, so whatever Spark can read,
the driver can list and write, with the credentials and connectors of the Spark installation.

Both kinds address files by a :class:`~pathlib.PurePath` (``Path`` for local stores, ``PurePosixPath``
of the URL's path for Hadoop ones), so discovery and the pipeline navigate a store the same way and only
:meth:`Storage.uri` says where a file is for Spark's readers.

What each kind guarantees for a write (``results.json``, the dataset's files, ``summary.json``): the
file is written beside its final name and renamed over it. On a local filesystem that replacement is
atomic; through Hadoop the old file is deleted first where the filesystem refuses to rename over one
(HDFS), so a reader may briefly find none; on object stores a rename is a copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path, PurePath, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

from harness.store import temporary_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//[^/]*)?(/.*)?$")
_URL_START = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


class StorageError(ValueError):
    """A location that cannot be used: one sentence naming it and what to do."""


class Storage(Protocol):
    """The file operations the analysis needs, on local directories or through Hadoop."""

    def uri(self, path: PurePath) -> str:
        """Where ``path`` is, for Spark's readers (a ``file:`` URI for local paths)."""

    def display(self, path: PurePath) -> str:
        """``path`` as the user named it: a local path, or a URL."""

    def local(self, path: PurePath) -> Path | None:
        """``path`` on this machine's filesystem, or ``None`` when it is elsewhere (HDFS, S3)."""

    def is_dir(self, path: PurePath) -> bool: ...

    def is_file(self, path: PurePath) -> bool: ...

    def size(self, path: PurePath) -> int | None:
        """The file's size in bytes, or ``None`` when there is no such file."""

    def list_dir(self, path: PurePath) -> list[tuple[str, bool]]:
        """The entries of a directory as (name, is a directory), sorted by name; empty if it is none."""

    def read_bytes(self, path: PurePath) -> bytes:
        """The file's bytes; raises ``FileNotFoundError`` when there is none."""

    def write_bytes(self, path: PurePath, data: bytes) -> None:
        """Replace ``path`` with ``data`` (parents made), written aside and renamed into place."""

    def remove(self, path: PurePath) -> None:
        """Delete a file or a whole directory; nothing if it does not exist."""


def is_url(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` is a URL (``scheme://...``, ``file:/...``) rather than a plain path."""
    return isinstance(text, str) and bool(_URL_START.match(text))


class LocalStorage:
    """A store on this machine's filesystem (also a shared filesystem mounted at the same path on every
    Spark worker: the tasks read it through ``file:`` URIs)."""

    def uri(self, path: PurePath) -> str:
        # Not ``Path.as_uri()``: Hadoop's Path takes a string's characters as they are and quotes them
        # itself, so a percent-escape would be looked up literally (``partition%2Bkill`` for the
        # ``partition+kill`` every multi-nemesis test name holds).
        return "file://" + str(Path(path).absolute())

    def display(self, path: PurePath) -> str:
        return str(path)

    def local(self, path: PurePath) -> Path | None:
        return Path(path)

    def is_dir(self, path: PurePath) -> bool:
        return Path(path).is_dir()

    def is_file(self, path: PurePath) -> bool:
        return Path(path).is_file()

    def size(self, path: PurePath) -> int | None:
        try:
            status = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return status.st_size if not os.path.isdir(path) else None

    def list_dir(self, path: PurePath) -> list[tuple[str, bool]]:
        try:
            with os.scandir(path) as entries:
                # Symbolic links to directories are not followed (``store/latest``, links out of the store).
                return sorted((e.name, e.is_dir(follow_symlinks=False)) for e in entries)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read_bytes(self, path: PurePath) -> bytes:
        return Path(path).read_bytes()

    def write_bytes(self, path: PurePath, data: bytes) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = temporary_name(target)  # named as every writer of the store names it: harness clean knows it
        with temporary.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)

    def remove(self, path: PurePath) -> None:
        target = Path(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)


class HadoopStorage:
    """A store reached through Hadoop's ``FileSystem`` API in the driver's JVM (any URL Spark reads).

    ``root`` is the URL's scheme and authority (``hdfs://namenode:8020``, ``file://``); paths are the
    URL's path part. Needs the running Spark session: the JVM, its Hadoop configuration and connectors.
    """

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.root = root
        self._jvm: Any = spark.sparkContext._jvm
        self._conf: Any = spark.sparkContext._jsc.hadoopConfiguration()
        try:
            self._fs: Any = self._path(PurePosixPath("/")).getFileSystem(self._conf)
        except Exception as exc:  # noqa: BLE001 - py4j wraps the JVM's reasons (no connector, bad host)
            raise StorageError(
                f"Spark cannot reach {self.root}/ ({_first_line(exc)}); check the URL, and for object "
                "storage add its connector to Spark (e.g. --spark-conf spark.jars.packages=...)"
            ) from None
        # Hadoop's local filesystem would write a .crc file beside every file it writes.
        if hasattr(self._fs, "setWriteChecksum"):
            self._fs.setWriteChecksum(False)

    def _path(self, path: PurePath) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self.uri(path))

    def uri(self, path: PurePath) -> str:
        return f"{self.root}{path}"

    def display(self, path: PurePath) -> str:
        return self.uri(path)

    def local(self, path: PurePath) -> Path | None:
        return Path(str(path)) if self.root == "file://" else None

    def _status(self, path: PurePath) -> Any | None:
        try:
            return self._fs.getFileStatus(self._path(path))
        except Exception as exc:  # noqa: BLE001
            if "FileNotFoundException" in str(exc):
                return None
            raise StorageError(f"{self.uri(path)}: {_first_line(exc)}") from None

    def is_dir(self, path: PurePath) -> bool:
        status = self._status(path)
        return status is not None and status.isDirectory()

    def is_file(self, path: PurePath) -> bool:
        status = self._status(path)
        return status is not None and status.isFile()

    def size(self, path: PurePath) -> int | None:
        status = self._status(path)
        return int(status.getLen()) if status is not None and status.isFile() else None

    def list_dir(self, path: PurePath) -> list[tuple[str, bool]]:
        try:
            statuses = self._fs.listStatus(self._path(path))
        except Exception as exc:  # noqa: BLE001
            if "FileNotFoundException" in str(exc):
                return []
            raise StorageError(f"{self.uri(path)}: {_first_line(exc)}") from None
        return sorted((s.getPath().getName(), bool(s.isDirectory())) for s in statuses)

    def read_bytes(self, path: PurePath) -> bytes:
        if not self.is_file(path):
            raise FileNotFoundError(self.uri(path))
        stream = self._fs.open(self._path(path))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_bytes(self, path: PurePath, data: bytes) -> None:
        target = PurePosixPath(path)
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        self._fs.mkdirs(self._path(target.parent))
        stream = self._fs.create(self._path(temporary), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
        destination = self._path(target)
        if self._fs.exists(destination):
            self._fs.delete(destination, False)
        if not self._fs.rename(self._path(temporary), destination):
            raise StorageError(f"{self.uri(target)}: could not rename the new file into place")

    def remove(self, path: PurePath) -> None:
        self._fs.delete(self._path(path), True)


def json_document(data: Any) -> bytes:
    """A JSON document as the store writes them (``results.json``, ``summary.json``): indented, UTF-8,
    a final newline; what :func:`harness.store.write_json` writes on a local disk."""
    return (json.dumps(data, indent=2, ensure_ascii=False, default=repr) + "\n").encode("utf-8")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred", "Trace", "at ")):
            return line.removeprefix("py4j.protocol.Py4JJavaError: ")
    return type(exc).__name__


def split_url(url: str) -> tuple[str, PurePosixPath]:
    """A URL into the storage root (scheme and authority) and the path within it.

    ``hdfs://nn:8020/chaos/store`` -> (``hdfs://nn:8020``, ``/chaos/store``); ``file:///srv/store`` and
    ``file:/srv/store`` -> (``file://``, ``/srv/store``). Raises :class:`StorageError`.
    """
    match = _URL.match(url)
    if not match:
        raise StorageError(f"{url!r} is not a URL like hdfs://namenode:8020/store or file:///srv/store")
    scheme, authority, rest = match.group(1).lower(), match.group(2) or "", match.group(3)
    if scheme == "file":
        if authority not in ("", "//"):
            raise StorageError(f"{url}: a file URL names no host (file:///path/to/store)")
        root = "file://"
    else:
        if authority in ("", "//"):
            raise StorageError(f"{url}: no host in the URL; write {scheme}://HOST[:PORT]/path")
        root = f"{scheme}:{authority}"
    path = PurePosixPath(rest or "/")
    if not path.is_absolute():
        raise StorageError(f"{url}: the path after the host must be absolute")
    return root, PurePosixPath(os.path.normpath(str(path)))


_GLOB = re.compile(r"([\\*?\[\]{}])")


def literal(uri: str) -> str:
    """``uri`` for Spark's file readers, which take every path as a Hadoop glob pattern: the pattern's
    special characters escaped, so that a run directory named ``a[1]`` or ``{x}`` means itself."""
    return _GLOB.sub(r"\\\1", uri)
