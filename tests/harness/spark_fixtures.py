"""The one Spark session of a test process, for every ``@pytest.mark.spark`` test (ENVIRONMENT.md).

Test modules that need it declare ``pytest_plugins = ("tests.harness.spark_fixtures",)``: pytest loads a
plugin once, so the session-scoped ``spark`` fixture below is shared by all of them and started once.
``local[2]``: the machine has two cores. A missing Java or PySpark fails the test with what to run
(scripts/setup.sh installs both); it never skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.analysis.spark import SparkUnavailable, start_session

MASTER = "local[2]"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    try:
        session = start_session(MASTER)
    except SparkUnavailable as exc:
        pytest.fail(f"{exc} (scripts/setup.sh installs Java and PySpark)", pytrace=False)
    yield session
    session.stop()
