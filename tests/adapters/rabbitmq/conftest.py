"""The RabbitMQ bundle the adapter's ``docker`` test uploads (the container fixtures are the suite's,
``tests/conftest.py``; how a download is found, or fetched, is the shipped adapters',
``tests/adapters/conftest.py``)."""

from __future__ import annotations

import pytest

from adapters.rabbitmq.install import RabbitBundle
from tests.adapters.conftest import fetched


@pytest.fixture(scope="session")
def rabbitmq_bundle() -> RabbitBundle:
    """The cached Debian RabbitMQ bundle, fetched through the machine's apt if missing."""
    return fetched("rabbitmq")
