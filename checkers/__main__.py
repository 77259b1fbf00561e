"""Entry point of ``python -m checkers`` (see :mod:`checkers.cli`)."""

import sys

from checkers.cli import main

if __name__ == "__main__":
    sys.exit(main())
