"""Inline SVG for the report's figures, built in Python, escaped in one place.

Every figure of the report is an :class:`Svg`: elements appended in drawing order (later ones on top),
rendered to markup by :meth:`Svg.markup`. Text and tooltips usually come from the system under test
(keys, values, errors), so every string that reaches the markup passes through ``markupsafe.escape``
here, and only here; coordinates are numbers formatted by this module. Styling is by CSS class (the
report's stylesheet), which keeps each element short: 100,000-operation runs draw thousands of them.

:class:`Scale` maps history time (nanoseconds) onto x and picks readable ticks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

NS = 1_000_000_000
TICK_STEPS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600,
                900, 1800, 3600, 7200)


def _n(value: float) -> str:
    """A coordinate: one decimal, no trailing ``.0``."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def seconds_label(seconds: float, step: float | None = None) -> str:
    """``12 s``, ``1.25 s``, ``3 min``, chosen by the tick step (or the value)."""
    step = step if step is not None else seconds
    if step >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    if step >= 1:
        return f"{seconds:g} s"
    decimals = max(0, -math.floor(math.log10(step)) if step > 0 else 3)
    return f"{seconds:.{decimals}f} s"


@dataclass(frozen=True)
class Scale:
    """History time ``[t0, t1]`` (ns) onto ``[x0, x1]`` (px)."""

    t0: int
    t1: int
    x0: float
    x1: float

    def x(self, t: float) -> float:
        span = max(self.t1 - self.t0, 1)
        return self.x0 + (t - self.t0) * (self.x1 - self.x0) / span

    def clamp(self, t: float) -> float:
        return min(max(self.x(t), self.x0), self.x1)

    def ticks(self, target: int = 10) -> list[tuple[float, str]]:
        span_s = max(self.t1 - self.t0, 1) / NS
        step = next((s for s in TICK_STEPS_S if span_s / s <= target), TICK_STEPS_S[-1])
        first = math.ceil(self.t0 / NS / step)
        ticks = []
        k = first
        while k * step * NS <= self.t1:
            seconds = round(k * step, 6)
            ticks.append((self.x(seconds * NS), seconds_label(seconds, step)))
            k += 1
        return ticks


class Svg:
    """One figure: width, height, and elements in drawing order."""

    def __init__(self, width: float, height: float = 0, *, label: str = "", css_id: str | None = None) -> None:
        self.width = width
        self.height = height
        self.label = label
        self.css_id = css_id
        self._parts: list[str] = []

    def __len__(self) -> int:
        return len(self._parts)

    @staticmethod
    def _title(title: str | None) -> str:
        return f"<title>{escape(title)}</title>" if title else ""

    def rect(self, x: float, y: float, w: float, h: float, cls: str, title: str | None = None,
             rx: float | None = None) -> None:
        radius = f' rx="{_n(rx)}"' if rx else ""
        body = self._title(title)
        end = f">{body}</rect>" if body else "/>"
        self._parts.append(
            f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0.0))}" height="{_n(max(h, 0.0))}"'
            f'{radius} class="{escape(cls)}"{end}'
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, cls: str, title: str | None = None) -> None:
        body = self._title(title)
        end = f">{body}</line>" if body else "/>"
        self._parts.append(
            f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" class="{escape(cls)}"{end}'
        )

    def polyline(self, points: Sequence[tuple[float, float]], cls: str, title: str | None = None) -> None:
        if len(points) < 2:
            return
        coords = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        body = self._title(title)
        end = f">{body}</polyline>" if body else "/>"
        self._parts.append(f'<polyline points="{coords}" class="{escape(cls)}"{end}')

    def path(self, d: str, cls: str, title: str | None = None) -> None:
        """``d`` must be built from numbers by the caller (it is not escaped text)."""
        body = self._title(title)
        end = f">{body}</path>" if body else "/>"
        self._parts.append(f'<path d="{escape(d)}" class="{escape(cls)}"{end}')

    def circle(self, cx: float, cy: float, r: float, cls: str, title: str | None = None) -> None:
        body = self._title(title)
        end = f">{body}</circle>" if body else "/>"
        self._parts.append(f'<circle cx="{_n(cx)}" cy="{_n(cy)}" r="{_n(r)}" class="{escape(cls)}"{end}')

    def text(self, x: float, y: float, text: str, cls: str = "", anchor: str = "start",
             title: str | None = None, max_chars: int | None = None) -> None:
        shown = text
        if max_chars is not None and len(shown) > max_chars:
            shown = shown[: max(max_chars - 1, 1)] + "…"
            title = title or text
        anchor_attr = f' text-anchor="{anchor}"' if anchor != "start" else ""
        cls_attr = f' class="{escape(cls)}"' if cls else ""
        self._parts.append(
            f'<text x="{_n(x)}" y="{_n(y)}"{anchor_attr}{cls_attr}>{self._title(title)}{escape(shown)}</text>'
        )

    def mark(self) -> int:
        """A position in the drawing order, for :meth:`insert` (to draw something under what follows)."""
        return len(self._parts)

    def insert(self, position: int, other: Svg) -> None:
        """Draw ``other``'s elements at ``position`` (from :meth:`mark`): under everything added since."""
        self._parts[position:position] = other._parts

    def axis(self, scale: Scale, y_top: float, y_bottom: float, *, labels: bool = True, target: int = 12) -> None:
        """Vertical grid lines at the scale's ticks from ``y_top`` to ``y_bottom``, labelled above."""
        for x, label in scale.ticks(target):
            self.line(x, y_top, x, y_bottom, "grid")
            if labels:
                self.text(x, y_top - 4, label, "tick", anchor="middle")

    def markup(self) -> Markup:
        ident = f' id="{escape(self.css_id)}"' if self.css_id else ""
        label = f' role="img" aria-label="{escape(self.label)}"' if self.label else ""
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg"{ident} class="figure" viewBox="0 0 {_n(self.width)} '
            f'{_n(self.height)}" width="{_n(self.width)}" height="{_n(self.height)}"{label}>'
        )
        return Markup(head + "".join(self._parts) + "</svg>")


def short(value: object, limit: int = 40) -> str:
    """A value as a person reads it in a tooltip or a label: JSON-ish, cut at ``limit`` characters."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def nice_max(values: Iterable[float]) -> float:
    """A round upper bound (1, 2 or 5 times a power of ten) above every value (at least 1)."""
    top = max(values, default=1.0)
    if top <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(top))
    for factor in (1, 2, 5, 10):
        if top <= factor * power:
            return factor * power
    return 10 * power
