"""Runs a Python script in fresh interpreters under different ``PYTHONHASHSEED`` values, for the tests that
prove a seeded generator's output does not follow set or dict iteration order (STYLE.md 2: a seed fixes
the output, on every interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence


def outputs_under_hash_seeds(script: str, hash_seeds: Sequence[str] = ("1", "2")) -> set[str]:
    """The distinct standard outputs of ``python -c script``, once per hash seed: one element when the
    output does not depend on the hash seed. A failing script raises ``CalledProcessError``."""
    return {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for hash_seed in hash_seeds
    }
