"""``python -m adapters.rabbitmq [--force]``: fetch Debian's RabbitMQ and Erlang into the controller's cache
(``adapters.rabbitmq.install``)."""

import sys

from adapters.rabbitmq.install import main

sys.exit(main())
