"""Virtual time for the simulator: the world's true time, and each node's own clocks.

The world keeps one true time, an integer number of nanoseconds since the simulation began (integers so
that the event queue orders events exactly and the history's ``time`` field needs no rounding). Nothing in
the simulator reads the host's clock.

Each node sees two clocks, as a real process does (docs/node-core.md, "Driving the core"):

* **monotonic**: ``true seconds * (1 + drift)``. The drift is drawn once per node from the run's seed (a
  crystal running a little fast or slow); the core's timers run on this clock, so a drifting node's
  heartbeats and election timeouts fire early or late against the others'.
* **wall**: ``WALL_EPOCH + monotonic + offset (+ strobe)``. The offset starts small (NTP-like) and is what
  the clock nemesis moves (``ClockBump`` adds, ``ClockReset`` sets it back to 0, ``ClockStrobe`` flips
  it between two values), exactly like libfaketime's control file on the container platform: only the wall
  clock moves, the monotonic clock stays honest (ENVIRONMENT.md, libfaketime recipe).

Journal ``wall`` fields and the ``lease-read-wallclock`` bug read the wall clock; nothing else does.
"""

from __future__ import annotations

import math

NS = 1_000_000_000
"""Nanoseconds per second."""

WALL_EPOCH = 1_704_067_200.0
"""The wall clock of every simulated node at true time 0 (2024-01-01T00:00:00Z) before offsets: fixed, so
journals are byte-identical across replays and still read as plausible dates."""


def to_ns(seconds: float) -> int:
    """Seconds as integer nanoseconds (rounded to the nearest)."""
    return int(round(seconds * NS))


class NodeClock:
    """One node's monotonic and wall clocks as functions of the world's true time (ns)."""

    __slots__ = ("rate", "offset", "strobe_delta", "strobe_on")

    def __init__(self, drift: float = 0.0, offset: float = 0.0) -> None:
        if not (math.isfinite(drift) and -0.5 < drift < 0.5):
            raise ValueError(f"clock drift must be a small fraction (|drift| < 0.5), not {drift!r}")
        self.rate = 1.0 + drift
        self.offset = float(offset)
        self.strobe_delta = 0.0
        self.strobe_on = False

    def mono(self, now_ns: int) -> float:
        """The node's monotonic clock in seconds (what the core's timers use)."""
        return now_ns / NS * self.rate

    def wall(self, now_ns: int) -> float:
        """The node's wall clock in seconds since the Unix epoch, with the nemesis' offset applied."""
        skew = self.offset + (self.strobe_delta if self.strobe_on else 0.0)
        return WALL_EPOCH + now_ns / NS * self.rate + skew

    def true_ns(self, mono: float) -> int:
        """The first true time (ns) at which this node's monotonic clock has reached ``mono``.

        One nanosecond of margin absorbs float rounding, so a timer due at ``mono`` has fired by then.
        """
        return math.ceil(mono / self.rate * NS) + 1

    @property
    def current_offset(self) -> float:
        """The wall clock's offset from true time right now (strobe included), in seconds."""
        return self.offset + (self.strobe_delta if self.strobe_on else 0.0)
