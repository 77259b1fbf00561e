"""``harness.db.http.status_errors``: what an HTTP status request raises becomes a StatusError, definite
only when the node refused the connection."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from harness.db import StatusError
from harness.db.http import status_errors


def _ask(handler) -> object:  # noqa: ANN001 - an httpx.MockTransport handler
    async def main() -> object:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler), timeout=1.0) as http:
            with status_errors(1.0):
                return (await http.get("http://n1:8222/jsz")).json()

    return asyncio.run(main())


def _raise(exc: Exception):  # noqa: ANN202
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


@pytest.mark.parametrize(("exc", "definite", "words"), [
    (httpx.ConnectError("refused"), True, "connection refused: refused"),
    (httpx.ReadTimeout("slow"), False, "no answer within 1 s"),
    (httpx.RemoteProtocolError("cut"), False, "RemoteProtocolError: cut"),
])
def test_transport_failures_become_status_errors(exc: Exception, definite: bool, words: str) -> None:
    with pytest.raises(StatusError, match=words) as raised:
        _ask(_raise(exc))
    assert raised.value.definite is definite


def test_an_answer_that_is_not_json_is_not_definite_and_a_good_one_passes() -> None:
    with pytest.raises(StatusError, match="JSONDecodeError") as raised:
        _ask(lambda request: httpx.Response(200, text="<html>"))
    assert raised.value.definite is False
    assert _ask(lambda request: httpx.Response(200, json={"ok": 1})) == {"ok": 1}
