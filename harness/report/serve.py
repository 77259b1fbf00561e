"""``harness serve``: the store over HTTP on this machine only (127.0.0.1), for browsing runs.

A plain static file server rooted at the store: the index, every report, and the run files they link to
(histories, journals and logs shown as text rather than downloaded). It binds the loopback address only,
never another interface: a store holds whatever the system under test wrote. Nothing is rendered on
request; ``harness report`` (or the analysis) writes the pages, and the index is refreshed when the
server starts.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
DEFAULT_PORT = 8000
TEXT_TYPES = {
    ".jsonl": "text/plain; charset=utf-8",
    ".log": "text/plain; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".toml": "text/plain; charset=utf-8",
    ".xml": "application/xml; charset=utf-8",
    ".html": "text/html; charset=utf-8",
}


class StoreHandler(SimpleHTTPRequestHandler):
    """Serves files under the store; run files as text; no request log on stderr unless asked."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **TEXT_TYPES}
    log: Callable[[str], None] | None = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if self.log is not None:
            self.log(f"{self.address_string()} {format % args}")

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


def make_server(
    store: str | os.PathLike[str], port: int = DEFAULT_PORT, log: Callable[[str], None] | None = None
) -> ThreadingHTTPServer:
    """A server for ``store`` bound to 127.0.0.1:``port`` (0: any free port; see ``server_address``).

    Raises ``FileNotFoundError`` when ``store`` is not a directory and ``OSError`` when the port is taken.
    """
    root = Path(store)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such store directory; run harness run first, or pass --store")
    handler = functools.partial(type("Handler", (StoreHandler,), {"log": staticmethod(log) if log else None}),
                                directory=str(root.resolve()))
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    return server


def serve(store: str | os.PathLike[str], port: int = DEFAULT_PORT, announce: Callable[[str], None] = print,
          log: Callable[[str], None] | None = None) -> None:
    """Serve ``store`` until interrupted (Ctrl-C), announcing the address first."""
    server = make_server(store, port, log)
    host, bound = server.server_address[:2]
    announce(f"serving {Path(store).resolve()} at http://{host}:{bound}/ (this machine only; Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
