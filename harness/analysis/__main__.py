"""``python -m harness.analysis analyze|suite ...``: the analysis commands without the rest of the CLI."""

import sys

from harness.analysis.cli import main

sys.exit(main())
