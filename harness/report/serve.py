"""``harness serve``: the store over HTTP for browsing runs, safe whatever the store holds.

A store holds what the system under test wrote (its logs, its file names) and may hold symbolic links,
so the server trusts nothing in it. What it does, and what it refuses (a refusal is an empty-handed 404,
its reason in the request log):

- **Only regular files inside the store.** A request path is decoded segment by segment (``..``, an
  encoded ``/`` or NUL, invalid UTF-8 are refused), then resolved with every symbolic link followed; the
  real path must lie inside the store's own real path. ``store/latest`` and other links within the store
  work; a link to ``/etc/passwd``, to ``/`` or to a directory outside does not. Devices, FIFOs and sockets
  are refused too, and the file is opened without following a link in its last component. A file with
  more than one hard link is refused: a hard link inside the store to a file outside it cannot be told
  from the file itself by its path (the harness writes none).
- **Only a store.** A directory with no run, suite or dataset in it is refused (``harness serve --store /``
  wrote ``/index.html``), and so is it by ``harness report``.
- **No directory listings.** ``/`` answers with ``index.html``; any other directory is refused. The index
  links every run and suite, and each report links the run's files: that is the navigation.
- **Only the harness's own pages are HTML.** ``index.html``, ``<test>/<run>/report.html`` and
  ``suites/<name>/<stamp>/suite.html`` are served as HTML under :data:`harness.report.render.PAGE_POLICY`;
  every other file as plain text, JSON or a download, with ``nosniff`` and a sandboxing policy, so an
  ``.html``, ``.svg`` or ``.xml`` file a node wrote cannot run a script in the browser.
- **127.0.0.1 by default.** ``bind`` (``harness serve --bind ADDR``) chooses another address; any address
  but a loopback one exposes the whole store, without password or encryption, to everyone who can reach
  it.
- **Host header checked on loopback.** Bound to a loopback address, the server answers only requests
  whose ``Host`` is ``127.0.0.1``, ``localhost``, ``[::1]`` or the bound address (any port); others get
  400. This stops DNS rebinding: a web page elsewhere that points its own name at 127.0.0.1 cannot read the
  store through the browser of someone running ``harness serve``.

Nothing is rendered on request; ``harness report`` (or the analysis) writes the pages, and the index is
refreshed when the server starts.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlsplit

from harness.report.index import INDEX, SUITE_PAGE
from harness.report.render import PAGE_POLICY, REPORT
from harness.store import SUITES_DIR

HOST = "127.0.0.1"
DEFAULT_PORT = 8000
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
PAGE_TYPE = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
# Run files by suffix; anything else is a download. HTML, SVG and XML files other than the harness's own
# pages are shown as text: a browser would run a script in them.
FILE_TYPES = {
    ".json": "application/json; charset=utf-8",
    ".jsonl": TEXT, ".log": TEXT, ".txt": TEXT, ".toml": TEXT, ".csv": TEXT,
    ".xml": TEXT, ".html": TEXT, ".svg": TEXT,
    ".png": "image/png",
}
DOWNLOAD = "application/octet-stream"
# Pages get the policy they also carry in a <meta> tag (plus what only a header can say); other files
# are sandboxed: no script, no plugin, no fetch, whatever their content.
PAGE_HEADER_POLICY = f"{PAGE_POLICY}; frame-ancestors 'none'"
FILE_HEADER_POLICY = "default-src 'none'; sandbox; frame-ancestors 'none'"
HOST_HEADER = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[^\[\]:]+)(?::[0-9]{1,5})?")
UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Refused(Exception):
    """A request the server does not answer with a file; the message says why (for the log only)."""


@dataclass(frozen=True)
class Served:
    """A file the server may send: its real path and how it is presented."""

    path: str
    content_type: str
    page: bool


def _is_page(parts: tuple[str, ...]) -> bool:
    """Whether a path inside the store (its real path's parts) is one of the pages the harness writes."""
    return (
        parts == (INDEX,)
        or (len(parts) == 3 and parts[2] == REPORT)
        or (len(parts) == 4 and parts[0] == SUITES_DIR and parts[3] == SUITE_PAGE)
    )


def locate(root: str, request_path: str) -> Served:
    """The file of the store at real path ``root`` that ``request_path`` (a request target) names.

    Raises ``Refused`` for anything but a regular file whose real path is inside ``root`` (module
    docstring); ``/`` names ``index.html``.
    """
    names = []
    for raw in urlsplit(request_path).path.split("/"):
        try:
            name = unquote(raw, errors="strict")
        except UnicodeDecodeError:
            raise Refused("the path is not UTF-8") from None
        if "/" in name or "\0" in name:
            raise Refused("an encoded '/' or NUL in the path")
        if name == "..":
            raise Refused("'..' in the path")
        if name not in ("", "."):
            names.append(name)
    real = os.path.realpath(os.path.join(root, *(names or [INDEX])))
    if real != root and not real.startswith(root + os.sep):
        raise Refused("it resolves outside the store (a symbolic link)")
    try:
        mode = os.stat(real).st_mode
    except OSError:
        raise Refused("no such file") from None
    if stat.S_ISDIR(mode):
        raise Refused("a directory (no listings: the index and reports link every file)")
    if not stat.S_ISREG(mode):
        raise Refused("not a regular file")
    if os.stat(real).st_nlink > 1:
        raise Refused("a file with several hard links (one may be outside the store)")
    page = _is_page(tuple(Path(os.path.relpath(real, root)).parts))
    content_type = PAGE_TYPE if page else FILE_TYPES.get(Path(real).suffix.lower(), DOWNLOAD)
    return Served(real, content_type, page)


def is_loopback(address: str) -> bool:
    """Whether ``address`` (an IP address) is a loopback address."""
    return ipaddress.ip_address(address).is_loopback


def host_allowed(header: str | None, names: frozenset[str]) -> bool:
    """Whether a ``Host`` header names one of ``names`` (with any port or none)."""
    if header is None:
        return False
    found = HOST_HEADER.fullmatch(header.strip())
    return found is not None and found.group("name").lower() in names


class StoreHandler(BaseHTTPRequestHandler):
    """Answers GET and HEAD with files of ``server.root`` (module docstring); other methods get 501."""

    server: StoreServer
    server_version = "chaos-harness"
    policy = FILE_HEADER_POLICY

    def do_GET(self) -> None:  # noqa: N802 - the base class's naming
        opened = self._open()
        if opened is not None:
            with opened:
                try:
                    shutil.copyfileobj(opened, self.wfile)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the browser went away

    def do_HEAD(self) -> None:  # noqa: N802 - the base class's naming
        opened = self._open()
        if opened is not None:
            opened.close()

    def _open(self) -> BinaryIO | None:
        """Check the request, send the headers of its file and return the open file, or send the refusal."""
        self.policy = FILE_HEADER_POLICY
        hosts = self.server.allowed_hosts
        if hosts is not None and (len(self.headers.get_all("Host") or []) > 1
                                  or not host_allowed(self.headers.get("Host"), hosts)):
            self._refuse(HTTPStatus.BAD_REQUEST, f"unexpected Host header {self.headers.get('Host')!r}",
                         "unexpected Host header: use http://127.0.0.1:PORT/")
            return None
        try:
            served = locate(self.server.root, self.path)
            # No link is followed in the last component (it was resolved above), and a FIFO cannot block.
            opened = os.fdopen(os.open(served.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")
        except Refused as refusal:
            self._refuse(HTTPStatus.NOT_FOUND, str(refusal))
            return None
        except OSError as exc:
            self._refuse(HTTPStatus.NOT_FOUND, str(exc.strerror or exc))
            return None
        status = os.fstat(opened.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:  # replaced since it was located
            opened.close()
            self._refuse(HTTPStatus.NOT_FOUND, "not a regular file with one link")
            return None
        self.policy = PAGE_HEADER_POLICY if served.page else FILE_HEADER_POLICY
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", served.content_type)
        self.send_header("Content-Length", str(status.st_size))
        self.send_header("Last-Modified", self.date_time_string(status.st_mtime))
        self.end_headers()
        return opened

    def _refuse(self, code: HTTPStatus, reason: str, answer: str = "not found") -> None:
        """Answer ``code`` with one line of text (never what was asked for); log the reason."""
        self.log_message('"%s" %d refused: %s', self.requestline, code.value, reason)
        body = f"{code.value} {answer}\n".encode()
        self.send_response_only(code)
        self.send_header("Server", self.version_string())
        self.send_header("Date", self.date_time_string())
        self.send_header("Content-Type", TEXT)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", self.policy)
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log = self.server.log
        if log is not None:
            line = f"{self.address_string()} {format % args}"
            log(UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", line))  # a path cannot drive the terminal


class StoreServer(ThreadingHTTPServer):
    """The HTTP server of one store: its real path, the Host names it accepts, its request log."""

    daemon_threads = True

    def __init__(self, store: Path, address: tuple[str, int], log: Callable[[str], None] | None) -> None:
        self.root = os.path.realpath(store)
        self.log = log
        bind = address[0]
        self.address_family = socket.AF_INET6 if ipaddress.ip_address(bind).version == 6 else socket.AF_INET
        literal = f"[{bind}]" if self.address_family == socket.AF_INET6 else bind
        self.allowed_hosts = frozenset((*LOOPBACK_NAMES, literal)) if is_loopback(bind) else None
        super().__init__(address, StoreHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}/" if self.address_family == socket.AF_INET6 else f"http://{host}:{port}/"


def make_server(
    store: str | os.PathLike[str], port: int = DEFAULT_PORT, log: Callable[[str], None] | None = None,
    bind: str = HOST,
) -> StoreServer:
    """A server for ``store`` bound to ``bind``:``port`` (0: any free port; see ``server_address``).

    Raises ``FileNotFoundError`` when ``store`` is not a directory, ``ValueError`` when ``bind`` is not an
    IP address and ``OSError`` when the address cannot be bound (the port is taken, the address is not
    this machine's).
    """
    root = Path(store)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such store directory; run harness run first, or pass --store")
    return StoreServer(root, (bind, port), log)


def serve(store: str | os.PathLike[str], port: int = DEFAULT_PORT, announce: Callable[[str], None] = print,
          log: Callable[[str], None] | None = None, bind: str = HOST) -> None:
    """Serve ``store`` until interrupted (Ctrl-C), announcing the address first."""
    server = make_server(store, port, log, bind)
    reach = ("this machine only" if server.allowed_hosts is not None else
             f"WARNING: everyone who can reach {bind} can read this store, no password, no encryption")
    announce(f"serving {Path(store).resolve()} at {server.url} ({reach}; Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
