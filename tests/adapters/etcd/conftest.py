"""The etcd binary the etcd adapter's ``docker`` tests upload (the container fixtures are the suite's,
``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from adapters.etcd.install import EtcdBinary, EtcdInstallError, find_binary


@pytest.fixture(scope="session")
def etcd_binary() -> EtcdBinary:
    """The cached Debian etcd (scripts/setup.sh fetches it); a test fails, never skips, without it."""
    try:
        return find_binary()
    except EtcdInstallError as exc:
        pytest.fail(str(exc), pytrace=False)
