"""``python -m harness``: the ``harness`` command, for environments where the script is not on the path."""

import sys

from harness.entry import main

sys.exit(main())
