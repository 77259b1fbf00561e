"""``harness serve`` against a store that tries to leak: symbolic links to a file, a directory and ``/``
outside the store, ``..`` in every spelling, directory listings, a FIFO, pages a node wrote, and
requests naming another host. The server runs on 127.0.0.1 on an ephemeral port, stopped by the
fixtures; requests are sent raw (``http.client``), so nothing normalises the path before the server sees
it."""

from __future__ import annotations

import http.client
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.report.cli import main
from harness.report.index import write_index
from harness.report.render import PAGE_POLICY, write_report
from harness.report.serve import StoreServer, host_allowed, make_server
from tests.harness.report_runs import write_run

SECRET = "the secret outside the store"
RUN = "cluster-raft-ok/20251114T021304"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<tmp>/store`` with one reported run, beside ``<tmp>/outside`` that holds a secret."""
    base = tmp_path_factory.mktemp("serve")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET, encoding="utf-8")
    root = base / "store"
    run = write_run(root, ops=100, seed=3, failing=False, stamp="20251114T021304", test="cluster-raft-ok")
    write_report(run)
    write_index(root)
    (run / "secret.txt").symlink_to(outside / "secret.txt")
    (run / "outside").symlink_to(outside)
    (run / "root").symlink_to("/")
    (run / "relative").symlink_to("../../../outside/secret.txt")
    (root / "latest").symlink_to(RUN)
    os.mkfifo(run / "fifo.log")
    (run / "nodes" / "n1" / "evil.html").write_text("<script>alert(1)</script>", encoding="utf-8")
    (run / "nodes" / "n1" / "evil.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(2)"/>')
    os.link(outside / "secret.txt", run / "hard-linked.txt")
    return root


def _serving(server: StoreServer) -> Iterator[StoreServer]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[StoreServer]:
    yield from _serving(make_server(store, port=0))


def get(server: StoreServer, path: str, host: str | None = "127.0.0.1", method: str = "GET",
        ) -> tuple[int, http.client.HTTPMessage, bytes]:
    """(status, headers, body) of one raw request; ``host`` None sends no Host header."""
    address, port = server.server_address[:2]
    connection = http.client.HTTPConnection(address, port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def test_a_report_and_the_run_files_are_served(server: StoreServer) -> None:
    for path in ("/", "/index.html", f"/{RUN}/report.html", "/latest/report.html"):
        status, headers, body = get(server, path)
        assert status == 200, path
        assert headers["Content-Type"] == "text/html; charset=utf-8" and b"<!doctype html>" in body
        assert headers["Content-Security-Policy"].startswith(PAGE_POLICY)
        assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, body = get(server, f"/{RUN}/history.jsonl")
    assert status == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.startswith(b'{"index":0,')
    status, headers, body = get(server, f"/{RUN}/history.jsonl", method="HEAD")
    assert status == 200 and int(headers["Content-Length"]) > 1000 and body == b""


@pytest.mark.parametrize("path", [f"/{RUN}/secret.txt", f"/{RUN}/relative"])
def test_a_symlink_to_a_file_outside_the_store_is_refused(server: StoreServer, path: str) -> None:
    status, _, body = get(server, path)
    assert status == 404 and SECRET.encode() not in body and body == b"404 not found\n"


@pytest.mark.parametrize("path", [f"/{RUN}/outside/secret.txt", f"/{RUN}/outside/", f"/{RUN}/outside"])
def test_a_symlink_to_a_directory_outside_the_store_is_refused(server: StoreServer, path: str) -> None:
    status, _, body = get(server, path)
    assert status == 404 and SECRET.encode() not in body and b"secret.txt" not in body


@pytest.mark.parametrize("path", [f"/{RUN}/root/", f"/{RUN}/root/etc/passwd", f"/{RUN}/root/etc/"])
def test_a_symlink_to_the_root_is_refused(server: StoreServer, path: str) -> None:
    status, _, body = get(server, path)
    assert status == 404 and b"root:" not in body and b"etc" not in body


@pytest.mark.parametrize("path", [
    "/../outside/secret.txt", "/%2e%2e/outside/secret.txt", "/%2E%2E/%2e%2e/etc/passwd",
    f"/{RUN}/../../../outside/secret.txt", "/..%2foutside%2fsecret.txt", "/..%5coutside%5csecret.txt",
    "http://127.0.0.1/../outside/secret.txt", "/%00/etc/passwd", "/%ff%fe",
])
def test_dot_dot_and_encoded_escapes_are_refused(server: StoreServer, path: str) -> None:
    status, _, body = get(server, path)
    assert status == 404 and SECRET.encode() not in body


@pytest.mark.parametrize("path", ["/cluster-raft-ok/", "/cluster-raft-ok", f"/{RUN}/", f"/{RUN}/nodes/", "/latest/"])
def test_directories_are_never_listed(server: StoreServer, path: str) -> None:
    status, _, body = get(server, path)
    assert status == 404 and b"history.jsonl" not in body and b"20251114T021304" not in body


def test_a_fifo_is_refused_without_blocking(server: StoreServer) -> None:
    assert get(server, f"/{RUN}/fifo.log")[0] == 404


@pytest.mark.parametrize("name", ["evil.html", "evil.svg"])
def test_a_page_a_node_wrote_is_served_as_sandboxed_text(server: StoreServer, name: str) -> None:
    status, headers, body = get(server, f"/{RUN}/nodes/n1/{name}")
    assert status == 200 and b"alert(" in body
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in headers["Content-Security-Policy"] and "default-src 'none'" in headers["Content-Security-Policy"]


@pytest.mark.parametrize("host", [
    "evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.example:80", "127.0.0.2",
    "[::1].evil.example", "", None, "127.0.0.1:80:80", "user@127.0.0.1",
])
def test_on_loopback_a_request_naming_another_host_is_refused(server: StoreServer, host: str | None) -> None:
    status, _, body = get(server, "/index.html", host=host)
    assert status == 400 and b"Chaos test runs" not in body


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:8000", "[::1]"])
def test_on_loopback_the_loopback_names_are_accepted(server: StoreServer, host: str) -> None:
    status, _, body = get(server, "/index.html", host=host)
    assert status == 200 and b"Chaos test runs" in body


def test_the_host_check_follows_the_bound_address(store: Path) -> None:
    for server in _serving(make_server(store, port=0, bind="127.0.0.2")):
        assert get(server, "/index.html", host=f"127.0.0.2:{server.server_address[1]}")[0] == 200
        assert get(server, "/index.html", host="evil.example")[0] == 400
    assert host_allowed("10.0.0.5:8000", frozenset({"10.0.0.5"}))
    assert not host_allowed("10.0.0.5:8000", frozenset({"127.0.0.1"}))


def test_the_request_log_cannot_drive_the_terminal(store: Path) -> None:
    lines: list[str] = []
    for server in _serving(make_server(store, port=0, log=lines.append)):
        get(server, "/%1b%5b31mred%1b%5b0m")
        get(server, f"/{RUN}/secret.txt")
    assert any("refused" in line and "outside the store" in line for line in lines)
    assert all("\x1b" not in line for line in lines)


def test_serve_refuses_a_bad_address_or_a_taken_port_in_one_line(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--store", str(store), "--bind", "localhost.example"]) == 254
    err = capsys.readouterr().err
    assert "is not an IP address" in err and len(err.strip().splitlines()) == 1
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        assert main(["serve", "--store", str(store), "--port", str(taken.getsockname()[1])]) == 254
    err = capsys.readouterr().err
    assert "cannot listen on 127.0.0.1 port" in err and len(err.strip().splitlines()) == 1


def test_a_hard_link_to_a_file_outside_the_store_is_refused(server: StoreServer) -> None:
    status, _, body = get(server, f"/{RUN}/hard-linked.txt")
    assert status == 404 and SECRET.encode() not in body


@pytest.mark.parametrize("command", ["serve", "report"])
def test_a_directory_that_is_not_a_store_gets_no_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``harness serve --store /`` wrote ``/index.html``: a directory without a run, suite or dataset is
    refused, and nothing is written into it."""
    (tmp_path / "notes.txt").write_text("not a run")
    assert main([command, "--store", str(tmp_path)]) == 254
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
