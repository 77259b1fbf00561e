"""What a DB adapter's ``status`` that asks its system over HTTP shares: the outcome of a request that
could not be answered, as :class:`~harness.db.StatusError` (definite when nothing was asked).

Used by the shipped adapters whose systems expose their state on an HTTP endpoint (etcd's
``/debug/vars``, NATS' ``/jsz``, RabbitMQ's management API); an adapter of your own may use it too::

    async with httpx.AsyncClient(timeout=timeout) as http:
        with status_errors(timeout):
            answer = await http.get(url)
            data = answer.json()
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from harness.db import StatusError


@contextmanager
def status_errors(timeout: float) -> Iterator[None]:
    """Turn what ``httpx`` raises into :class:`StatusError`: a refused connection is definite (the node
    did not answer, nothing was read), a timeout, any other transport error or an answer that is not JSON
    (``ValueError``) is not."""
    try:
        yield
    except httpx.ConnectError as exc:
        raise StatusError(f"connection refused: {exc}", definite=True) from None
    except httpx.TimeoutException:
        raise StatusError(f"no answer within {timeout:g} s", definite=False) from None
    except (httpx.TransportError, ValueError) as exc:
        raise StatusError(f"{type(exc).__name__}: {exc}", definite=False) from None
