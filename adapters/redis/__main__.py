"""``python -m adapters.redis [--force]``: fetch Debian's Redis into the controller's cache
(``adapters.redis.install``)."""

import sys

from adapters.redis.install import main

sys.exit(main())
