"""Fixtures of the RabbitMQ adapter's tests: the bundle the ``docker`` test uploads (fetched with apt when the
cache lacks it)."""

from __future__ import annotations

import pytest

from adapters.rabbitmq.install import RabbitBundle, RabbitInstallError, fetch, find_bundle


@pytest.fixture(scope="session")
def rabbitmq_bundle() -> RabbitBundle:
    """The cached Debian RabbitMQ bundle, fetched through the machine's apt if missing; a test fails, never
    skips, without it."""
    try:
        return find_bundle()
    except RabbitInstallError:
        pass
    try:
        return fetch()
    except RabbitInstallError as exc:
        pytest.fail(str(exc), pytrace=False)
