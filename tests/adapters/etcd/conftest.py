"""The etcd binary the etcd adapter's ``docker`` tests upload (the container fixtures are the suite's,
``tests/conftest.py``; how a download is found is the shipped adapters', ``tests/adapters/conftest.py``)."""

from __future__ import annotations

import pytest

from adapters.etcd.install import EtcdBinary
from tests.adapters.conftest import fetched


@pytest.fixture(scope="session")
def etcd_binary() -> EtcdBinary:
    """The cached Debian etcd (scripts/setup.sh fetches it)."""
    return fetched("etcd")
