"""``python -m harness.report report|serve ...``: the report commands without the rest of the CLI."""

import sys

from harness.report.cli import main

sys.exit(main())
