"""``python -m adapters.nats [--force]``: fetch Debian's nats-server into the controller's cache
(``adapters.nats.install``); what ``scripts/install-nats.sh`` runs."""

import sys

from adapters.nats.install import main

sys.exit(main())
