"""``python -m adapters.etcd [--force]``: fetch Debian's etcd-server into the controller's cache
(``adapters.etcd.install``); what ``scripts/install-etcd.sh`` runs."""

import sys

from adapters.etcd.install import main

sys.exit(main())
