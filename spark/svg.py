"""Inline SVG charts for ``report.html``: no script, no font or style sheet from the network,
so the page renders offline. Every text that comes from data is XML-escaped."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

PALETTE = ("#2b6cb0", "#dd6b20", "#c53030", "#2f855a", "#6b46c1", "#718096", "#b7791f")
# colours with a meaning, whatever the order of the series
OUTCOME_COLORS = {"done": "#2f855a", "in flight": "#2b6cb0", "cancelled": "#718096",
                  "dead": "#c53030"}


def color(index: int, name: str) -> str:
    return OUTCOME_COLORS.get(name, PALETTE[index % len(PALETTE)])
WIDTH = 720
HEIGHT = 240
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 28, 40

Format = Callable[[float], str]
Series = tuple[str, Sequence[float | None]]


def plain_number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def seconds_label(value: float) -> str:
    """A duration in the unit a reader expects: ms, s, min or h."""
    if value < 1:
        return f"{value * 1000:.3g} ms"
    if value < 120:
        return f"{value:.3g} s"
    if value < 7200:
        return f"{value / 60:.3g} min"
    return f"{value / 3600:.3g} h"


def percent_label(value: float) -> str:
    return f"{value * 100:.1f}%"


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is >= ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def _frame(title: str, body: str, height: int = HEIGHT) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(title)}">'
        f'<title>{escape(title)}</title>'
        f'<text x="{MARGIN_LEFT}" y="16" class="chart-title">{escape(title)}</text>'
        f"{body}</svg>"
    )


def empty_chart(title: str) -> str:
    return _frame(title, f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" '
                         'class="muted">no data in this window</text>')


def _y_axis(top: float, fmt: Format) -> str:
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    parts = []
    for i in range(5):
        value = top * i / 4
        y = HEIGHT - MARGIN_BOTTOM - plot_h * i / 4
        parts.append(f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" class="grid"/>'
                     f'<text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
                     f'class="tick">{escape(fmt(value))}</text>')
    return "".join(parts)


def _x_labels(labels: Sequence[str], xs: Sequence[float]) -> str:
    step = max(1, math.ceil(len(labels) / 8))
    return "".join(
        f'<text x="{x:.1f}" y="{HEIGHT - MARGIN_BOTTOM + 16}" text-anchor="middle" '
        f'class="tick">{escape(label)}</text>'
        for i, (label, x) in enumerate(zip(labels, xs, strict=True)) if i % step == 0
    )


def _legend(names: Sequence[str]) -> str:
    parts = []
    for i, name in enumerate(names):
        x = MARGIN_LEFT + i * 150
        parts.append(f'<rect x="{x}" y="{HEIGHT - 14}" width="10" height="10" '
                     f'fill="{color(i, name)}"/>'
                     f'<text x="{x + 14}" y="{HEIGHT - 5}" class="tick">{escape(name)}</text>')
    return "".join(parts)


def _x_positions(count: int) -> list[float]:
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    return [MARGIN_LEFT + plot_w * (i + 0.5) / count for i in range(count)]


def _scale(top: float) -> Callable[[float], float]:
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    return lambda value: HEIGHT - MARGIN_BOTTOM - plot_h * value / top


def _polylines(xs: Sequence[float], values: Sequence[float | None],
               y: Callable[[float], float], color: str) -> str:
    """Lines through consecutive known points; a gap (None) breaks the line."""
    parts, run = [], []
    for x, value in [*zip(xs, values, strict=True), (0.0, None)]:
        if value is not None:
            run.append(f"{x:.1f},{y(value):.1f}")
            parts.append(f'<circle cx="{x:.1f}" cy="{y(value):.1f}" r="2.5" fill="{color}"/>')
            continue
        if len(run) > 1:
            parts.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" '
                         'stroke-width="2"/>')
        run = []
    return "".join(parts)


def line_chart(title: str, labels: Sequence[str], series: Sequence[Series],
               fmt: Format = plain_number) -> str:
    known = [v for _, values in series for v in values if v is not None]
    if not labels or not known:
        return empty_chart(title)
    top = nice_ceiling(max(known))
    xs = _x_positions(len(labels))
    y = _scale(top)
    lines = "".join(_polylines(xs, values, y, PALETTE[i % len(PALETTE)])
                    for i, (_, values) in enumerate(series))
    body = _y_axis(top, fmt) + lines + _x_labels(labels, xs) + _legend([n for n, _ in series])
    return _frame(title, body)


def stacked_bar_chart(title: str, labels: Sequence[str], series: Sequence[Series]) -> str:
    totals = [sum(values[i] or 0 for _, values in series) for i in range(len(labels))]
    if not labels or not any(totals):
        return empty_chart(title)
    top = nice_ceiling(max(totals))
    xs = _x_positions(len(labels))
    width = max(1.0, (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / len(labels) * 0.7)
    y = _scale(top)
    bars = []
    for i, x in enumerate(xs):
        base = 0.0
        for j, (name, values) in enumerate(series):
            value = values[i] or 0
            if value:
                bars.append(
                    f'<rect x="{x - width / 2:.1f}" y="{y(base + value):.1f}" '
                    f'width="{width:.1f}" height="{y(base) - y(base + value):.1f}" '
                    f'fill="{color(j, name)}"><title>{escape(labels[i])} '
                    f"{escape(name)}: {plain_number(value)}</title></rect>")
            base += value
    body = (_y_axis(top, plain_number) + "".join(bars) + _x_labels(labels, xs)
            + _legend([n for n, _ in series]))
    return _frame(title, body)


def bar_chart(title: str, items: Sequence[tuple[str, float | None]],
              fmt: Format = plain_number, top: float | None = None) -> str:
    """Horizontal bars, one per item, labelled on the left and valued on the right."""
    known = [v for _, v in items if v is not None]
    if not items:
        return empty_chart(title)
    scale_top = top if top is not None else nice_ceiling(max(known, default=0))
    row, label_w = 22, 220
    height = MARGIN_TOP + row * len(items) + 8
    plot_w = WIDTH - label_w - 90
    rows = []
    for i, (label, value) in enumerate(items):
        y = MARGIN_TOP + i * row
        length = plot_w * (value or 0) / scale_top
        shown = "n/a" if value is None else fmt(value)
        rows.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" class="tick">'
            f"{escape(label)}</text>"
            f'<rect x="{label_w}" y="{y + 3}" width="{length:.1f}" height="{row - 6}" '
            f'fill="{PALETTE[0]}"/>'
            f'<text x="{label_w + length + 6:.1f}" y="{y + 14}" class="tick">'
            f"{escape(shown)}</text>")
    return _frame(title, "".join(rows), height)
