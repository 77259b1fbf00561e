"""The deterministic simulator: real node cores of ``cluster`` in virtual time (``harness simulate``).

Modules: ``clock`` (virtual time, per-node clocks with offset and drift), ``disk`` (storage honouring the
fsync policy), ``network`` (seeded delays, drops, duplication, reordering, partitions as grudges),
``world`` (N cores and the event queue), ``platform`` (clients, status pollers, nemesis, final phase),
``run`` (one seed -> a stored, judged run), ``explore`` (many seeds on all cores), ``shrink`` (minimal
failing runs), ``matrix`` (the detection matrix of the known bugs), ``cli`` (``harness simulate``).
See docs/simulation.md.
"""
