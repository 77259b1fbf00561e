"""Settings for the whole test suite.

Hypothesis runs without its per-example deadline: speed is measured by the benchmarks, never by a test,
and on a loaded 2-core machine a 200 ms deadline fails correct code at random.
"""

from hypothesis import settings

settings.register_profile("harness", deadline=None)
settings.load_profile("harness")
