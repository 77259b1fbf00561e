"""The ``cluster`` plugin's known bugs as the harness reads them (``DBPlugin.extras["known_bugs"]``): for each
bug of ``cluster.core.bugs.KNOWN_BUGS``, the modes it applies to, the checker that must catch it, the
workload that can show it and what it is.

The plugin (:mod:`adapters.cluster`) publishes this table, and the simulator's detection matrix
(:mod:`adapters.cluster.matrix`) runs from it; both import it from here.
"""

from __future__ import annotations

from cluster.core.bugs import KNOWN_BUGS

CHECKER_OF_PROPERTY = {"committed-data durability": "durability"}
"""``KnownBug.caught_by`` names the property; this maps it to the checker's name where the two differ."""

KNOWN_BUGS_INFO = {
    name: {
        "modes": list(bug.modes),
        "checker": CHECKER_OF_PROPERTY.get(bug.caught_by, bug.caught_by),
        "workload": bug.workload,
        "description": bug.description,
    }
    for name, bug in sorted(KNOWN_BUGS.items())
}
