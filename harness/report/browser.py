"""Headless Chromium over the DevTools protocol: open a report, collect what went wrong, take a screenshot,
follow links with every dialog hooked.

The browser tests (``pytest -m browser``) and the README screenshot use it. Chromium (Debian's
``chromium``, installed by ``scripts/install-chromium.sh``) is started headless with an empty profile
and a DevTools port on 127.0.0.1; the page is driven through one websocket (``websocket-client``).
:func:`open_page` loads one page and reports on it; :func:`browser_tab` gives a :class:`Tab` to drive
through several pages, in which ``alert``, ``confirm``, ``prompt`` and ``print`` are replaced before any
script of a page runs, so a test sees every call (:attr:`Tab.dialogs`) that a script injected through
hostile data would make.

What :func:`open_page` reports, and why through DevTools rather than Chromium's stderr log: the stderr
log prints every console message at the same level, so a ``console.error`` cannot be told from a
``console.log``. DevTools gives each message its level, every uncaught exception, every failed load, and
every request the page made, so a test can also assert that a report fetched nothing from a network.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
)
DEFAULT_WINDOW = (1400, 2000)
DIALOG_BINDING = "chaosHarnessDialog"
# Evaluated in every new document before its own scripts: each dialog call is reported through the
# DevTools binding (which survives navigation) and answered as if dismissed.
DIALOG_HOOK = """(() => {
  const report = (kind, args) => window.BINDING(JSON.stringify(
    {kind: kind, url: location.href, args: Array.prototype.map.call(args, String)}));
  for (const kind of ["alert", "confirm", "prompt", "print"]) {
    window[kind] = function () { report(kind, arguments); return kind === "confirm" ? false : null; };
  }
})();""".replace("BINDING", DIALOG_BINDING)


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or did not answer; says what to do."""


@dataclass
class PageVisit:
    """What happened while a page loaded: console errors, exceptions, failed loads, requests made."""

    url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: Path | None = None
    dialogs: list[dict[str, Any]] = field(default_factory=list)  # alert, confirm, prompt, print calls

    @property
    def external_requests(self) -> list[str]:
        """Requests to anything but the page's own directory tree on disk (``file:``, ``data:``)."""
        return [url for url in self.requests if not url.startswith(("file:", "data:", "about:"))]


def find_chromium() -> str:
    """The Chromium binary (``CHROMIUM`` in the environment, else ``/usr/bin/chromium``)."""
    candidate = os.environ.get("CHROMIUM") or CHROMIUM
    if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        found = shutil.which("chromium")
        if found is None:
            raise BrowserError(
                f"no Chromium at {candidate}: install it with scripts/install-chromium.sh (apt-get install chromium)"
            )
        return found
    return candidate


class _DevTools:
    """One websocket to one page target; commands are answered in order, events are collected."""

    def __init__(self, ws_url: str, timeout: float) -> None:
        try:
            import websocket  # websocket-client; imported here so the report package works without it
        except ImportError:
            raise BrowserError(
                "the DevTools client needs websocket-client: .venv/bin/python -m pip install websocket-client "
                "(the project's test dependencies include it)"
            ) from None

        self._timeout_error = websocket.WebSocketTimeoutException
        self._ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self._timeout = timeout
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _post(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        self._next_id += 1
        self._ws.send(json.dumps({"id": self._next_id, "method": method, "params": dict(params or {})}))
        return self._next_id

    def _receive(self) -> dict[str, Any]:
        """The next message; events are kept, and a native dialog (which would block the page) is dismissed."""
        message = json.loads(self._ws.recv())
        if "method" in message:
            self.events.append(message)
            if message["method"] == "Page.javascriptDialogOpening":
                self._post("Page.handleJavaScriptDialog", {"accept": False})
        return message

    def send(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        ident = self._post(method, params)
        while True:
            message = self._receive()
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"DevTools {method} failed: {message['error']}")
                return message.get("result", {})

    def wait_for(self, methods: str | tuple[str, ...], deadline: float, since: int = 0) -> dict[str, Any] | None:
        """The first event among ``methods`` from the ``since``-th on, or None if none came by ``deadline``."""
        methods = (methods,) if isinstance(methods, str) else methods
        for event in self.events[since:]:
            if event["method"] in methods:
                return event
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                self._ws.settimeout(remaining)
                message = self._receive()
                if message.get("method") in methods:
                    return message
        except self._timeout_error:
            pass
        finally:
            self._ws.settimeout(self._timeout)
        return None

    def close(self) -> None:
        self._ws.close()


def _console_errors(events: Sequence[Mapping[str, Any]]) -> list[str]:
    errors: list[str] = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            errors.append("console." + params["type"] + ": " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in args
            ))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            description = details.get("exception", {}).get("description") or details.get("text", "")
            errors.append(f"uncaught exception: {description} (line {details.get('lineNumber', 0) + 1})")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            errors.append(f"{entry.get('source', 'log')}: {entry.get('text', '')} {entry.get('url', '')}".strip())
    return errors


@contextmanager
def _chromium(window: tuple[int, int], timeout: float) -> Iterator[str]:
    """Start headless Chromium with a fresh profile; yield its DevTools HTTP address; stop it."""
    binary = find_chromium()
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    argv = [
        binary,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={window[0]},{window[1]}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "about:blank",
    ]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.is_file() or not port_file.read_text().strip():
            if process.poll() is not None:
                stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
                raise BrowserError(f"chromium exited with {process.returncode} before it listened: {stderr[-500:]}")
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium did not open its DevTools port within {timeout:g} s")
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()
        _remove_singleton_dir(Path(profile))
        shutil.rmtree(profile, ignore_errors=True)


def _remove_singleton_dir(profile: Path) -> None:
    """Remove the directory of the profile's ``SingletonSocket`` that Chromium makes in the temporary
    directory (``org.chromium.Chromium.*``) and leaves there when it is terminated: one per browser."""
    try:
        target = Path(os.readlink(profile / "SingletonSocket"))
    except OSError:
        return
    if target.parent.name.startswith("org.chromium.Chromium."):
        shutil.rmtree(target.parent, ignore_errors=True)


def _page_target(address: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"{address}/json/list", timeout=timeout) as response:
            targets = json.loads(response.read())
        pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        if time.monotonic() > deadline:
            raise BrowserError("chromium shows no page target")
        time.sleep(0.05)


@dataclass(frozen=True)
class Followed:
    """Where clicking a link led: the link as written and as resolved, and what was loaded."""

    href: str  # the attribute as written in the page
    resolved: str  # the URL the browser made of it
    landed: str | None  # the URL of the document (or fragment) it led to; None if nothing was loaded
    status: int | None  # the HTTP status of the document loaded (None for a fragment, a file, or nothing)


class Tab:
    """One page target of a running Chromium (from :func:`browser_tab`), dialogs hooked."""

    def __init__(self, devtools: _DevTools, window: tuple[int, int], timeout: float) -> None:
        self._devtools = devtools
        self._window = window
        self._timeout = timeout

    @property
    def dialogs(self) -> list[dict[str, Any]]:
        """Every dialog a page asked for since the tab opened: ``{"kind", "url", "args"}`` from the hook,
        ``{"kind": "native …"}`` for one that opened anyway (it was dismissed)."""
        found: list[dict[str, Any]] = []
        for event in self._devtools.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.bindingCalled" and params.get("name") == DIALOG_BINDING:
                found.append(json.loads(params["payload"]))
            elif event["method"] == "Page.javascriptDialogOpening":
                found.append({"kind": f"native {params.get('type')}", "url": params.get("url"),
                              "args": [params.get("message", "")]})
        return found

    @property
    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads of every page since the tab opened."""
        return _console_errors(self._devtools.events)

    @property
    def requests(self) -> list[str]:
        """The URL of every request any page made since the tab opened."""
        return [e["params"]["request"]["url"] for e in self._devtools.events
                if e["method"] == "Network.requestWillBeSent"]

    def goto(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        since = len(self._devtools.events)
        self._devtools.send("Page.navigate", {"url": url})
        if self._devtools.wait_for("Page.loadEventFired", time.monotonic() + self._timeout, since) is None:
            raise BrowserError(f"{url} did not finish loading within {self._timeout:g} s")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` evaluated in the page."""
        result = self._devtools.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"evaluating {expression[:80]} failed: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: str | os.PathLike[str], *, full_page: bool = False,
                   region: tuple[int, int] | None = None) -> Path:
        """Write a PNG of the window, of the whole page (``full_page``), or of the band ``region`` =
        (top, height) in CSS pixels; return its path."""
        params: dict[str, Any] = {"format": "png"}
        width = self._window[0]
        if region is not None:
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": region[0], "width": width, "height": region[1], "scale": 1})
        elif full_page:
            metrics = self._devtools.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1})
        shot = self._devtools.send("Page.captureScreenshot", params)
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(shot["data"]))
        return target

    def follow(self, index: int, settle: float = 5.0) -> Followed:
        """Click the ``index``-th ``a[href]`` of the page as a person would, and wait up to ``settle`` s
        for what it leads to: the load of another document, or a move within this one."""
        link = f"document.querySelectorAll('a[href]')[{int(index)}]"
        href, resolved = self.evaluate(f"[{link}.getAttribute('href'), {link}.href]")
        since = len(self._devtools.events)
        self.evaluate(f"{link}.click()")
        deadline = time.monotonic() + settle
        event = self._devtools.wait_for(("Page.loadEventFired", "Page.navigatedWithinDocument"), deadline, since)
        if event is None:
            return Followed(href, resolved, None, None)
        if event["method"] == "Page.navigatedWithinDocument":
            return Followed(href, resolved, event["params"]["url"], None)
        status = None
        for earlier in self._devtools.events[since:]:
            params = earlier.get("params", {})
            if earlier["method"] == "Network.responseReceived" and params.get("type") == "Document":
                status = params["response"].get("status")
        return Followed(href, resolved, self.evaluate("location.href"), status)


@contextmanager
def browser_tab(window: tuple[int, int] = DEFAULT_WINDOW, timeout: float = 60.0) -> Iterator[Tab]:
    """Start headless Chromium and yield one :class:`Tab` in it, with dialogs hooked; stop it after."""
    with _chromium(window, timeout) as address:
        devtools = _DevTools(_page_target(address, timeout), timeout)
        try:
            for domain in ("Runtime", "Log", "Page", "Network"):
                devtools.send(f"{domain}.enable")
            devtools.send("Runtime.addBinding", {"name": DIALOG_BINDING})
            devtools.send("Page.addScriptToEvaluateOnNewDocument", {"source": DIALOG_HOOK})
            devtools.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": window[0], "height": window[1], "deviceScaleFactor": 1, "mobile": False},
            )
            devtools.events.clear()
            yield Tab(devtools, window, timeout)
        finally:
            devtools.close()


def open_page(
    path: str | os.PathLike[str],
    *,
    screenshot: str | os.PathLike[str] | None = None,
    evaluate: Mapping[str, str] | None = None,
    window: tuple[int, int] = DEFAULT_WINDOW,
    full_page: bool = False,
    timeout: float = 60.0,
    region: tuple[int, int] | None = None,
) -> PageVisit:
    """Load ``path`` (a local HTML file) in headless Chromium and report what happened.

    ``evaluate`` maps names to JavaScript expressions evaluated after the load (their JSON values land in
    ``PageVisit.values``); ``screenshot`` writes a PNG of the window, of the whole page with ``full_page``,
    or of the band ``region`` = (top, height) of the page in CSS pixels.
    """
    url = Path(path).resolve().as_uri()
    visit = PageVisit(url=url)
    with browser_tab(window, timeout) as tab:
        tab.goto(url)
        tab.evaluate("document.readyState")  # one round trip lets late console messages and exceptions arrive
        for name, expression in (evaluate or {}).items():
            visit.values[name] = tab.evaluate(expression)
        if screenshot is not None:
            visit.screenshot = tab.screenshot(screenshot, full_page=full_page, region=region)
        tab.evaluate("0")
        visit.console_errors = tab.console_errors
        visit.requests = tab.requests
        visit.dialogs = tab.dialogs
    return visit


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.report.browser PAGE.html [--screenshot FILE] [--full-page]``: print console
    errors, external requests and dialogs a script opened; exit 1 if there were any."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.report.browser", description=main.__doc__)
    parser.add_argument("page")
    parser.add_argument("--screenshot", default=None)
    parser.add_argument("--full-page", action="store_true")
    parser.add_argument("--region", default=None, metavar="TOP,HEIGHT", help="only this band of the page")
    parser.add_argument("--width", type=int, default=DEFAULT_WINDOW[0])
    parser.add_argument("--height", type=int, default=DEFAULT_WINDOW[1])
    args = parser.parse_args(argv)
    region = tuple(int(v) for v in args.region.split(",")) if args.region else None
    visit = open_page(args.page, screenshot=args.screenshot, window=(args.width, args.height),
                      full_page=args.full_page, region=region)
    for error in visit.console_errors:
        print(f"console error: {error}")
    for url in visit.external_requests:
        print(f"external request: {url}")
    for dialog in visit.dialogs:
        print(f"dialog: {dialog['kind']}({', '.join(dialog['args'])})")
    if visit.screenshot:
        print(f"screenshot: {visit.screenshot}")
    return 1 if visit.console_errors or visit.external_requests or visit.dialogs else 0


if __name__ == "__main__":
    raise SystemExit(main())
