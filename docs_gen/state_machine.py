"""The state machine's picture (an SVG for the site and for GitHub alike), drawn from the
transition table of :mod:`rms.domain.transitions`: every transition that appends an event to
a message's history is an arrow from the states it applies to (a new message: the dot) to the
state it leaves, labelled with its action; one that flags the message dead says so. The
transitions without an event of their own (the workers' claims, publish outcomes, a
check-back's retry) change no state and are left out."""

from __future__ import annotations

import math
from collections import defaultdict
from xml.sax.saxutils import escape

from rms.domain.states import TERMINAL_STATES, State
from rms.domain.transitions import TABLE, Transition

NEW = "new"
WIDTH, HEIGHT = 900, 330
BOX_W, BOX_H = 130, 44
# where each state is drawn (its centre); a state missing here fails the generator
POSITIONS: dict[str, tuple[float, float]] = {
    NEW: (40, 150), State.PENDING_SEND.value: (230, 150), State.SENT.value: (540, 150),
    State.DONE.value: (810, 150), State.DELETED.value: (230, 280)}
LINE = 15  # label line height

Edge = tuple[str, str]


def edges() -> dict[Edge, list[str]]:
    """(from, to) → the labels of its transitions, in the table's order."""
    found: dict[Edge, list[str]] = defaultdict(list)
    for transition in TABLE:
        if transition.event is None:
            continue
        sources = sorted(str(source) for source in transition.sources) or [NEW]
        for source in sources:
            found[(source, transition.target.value)].append(_label(transition))
    return dict(found)


def _label(transition: Transition) -> str:
    return transition.action + (" (flags dead)" if transition.effects.get("dead") is True else "")


def _position(node: str) -> tuple[float, float]:
    if node not in POSITIONS:
        raise ValueError(f"state {node!r} has no place in docs_gen/state_machine.py POSITIONS")
    return POSITIONS[node]


def _border(node: str, towards: tuple[float, float]) -> tuple[float, float]:
    """Where the line from ``node``'s centre towards a point leaves its box (or dot)."""
    x, y = _position(node)
    dx, dy = towards[0] - x, towards[1] - y
    if node == NEW:
        length = math.hypot(dx, dy) or 1
        return x + 8 * dx / length, y + 8 * dy / length
    scale = min(BOX_W / 2 / abs(dx) if dx else math.inf, BOX_H / 2 / abs(dy) if dy else math.inf)
    return x + dx * scale, y + dy * scale


def _crosses(a: tuple[float, float], b: tuple[float, float], skip: set[str]) -> bool:
    """Whether the segment a-b passes through another state's box."""
    for node, (x, y) in POSITIONS.items():
        if node in skip or node == NEW:
            continue
        for step in range(1, 20):
            px, py = a[0] + (b[0] - a[0]) * step / 20, a[1] + (b[1] - a[1]) * step / 20
            if abs(px - x) <= BOX_W / 2 and abs(py - y) <= BOX_H / 2:
                return True
    return False


def _text(x: float, y: float, lines: list[str], anchor: str = "middle") -> list[str]:
    return [f'<text x="{x:.0f}" y="{y + index * LINE:.0f}" text-anchor="{anchor}" '
            f'class="label">{escape(line)}</text>' for index, line in enumerate(lines)]


def _loop(node: str, labels: list[str]) -> list[str]:
    x, y = _position(node)
    start, end = x + 20, x + 55
    bottom = y + BOX_H / 2
    path = (f'<path d="M{start:.0f},{bottom:.0f} C{start:.0f},{bottom + 50:.0f} '
            f'{end:.0f},{bottom + 50:.0f} {end:.0f},{bottom + 1:.0f}" class="edge"/>')
    return [path, *_text(end + 8, bottom + 40, labels, anchor="start")]


def _arrow(source: str, target: str, labels: list[str]) -> list[str]:
    if source == target:
        return _loop(source, labels)
    a, b = _position(source), _position(target)
    if _crosses(a, b, {source, target}):
        middle = ((a[0] + b[0]) / 2, min(a[1], b[1]) - 110)
        start, end = _border(source, middle), _border(target, middle)
        control = (middle[0], middle[1])
        path = (f'<path d="M{start[0]:.0f},{start[1]:.0f} Q{control[0]:.0f},{control[1]:.0f} '
                f'{end[0]:.0f},{end[1]:.0f}" class="edge"/>')
        return [path, *_text(control[0], (start[1] + control[1]) / 2 - 4, labels)]
    start, end = _border(source, b), _border(target, a)
    line = (f'<line x1="{start[0]:.0f}" y1="{start[1]:.0f}" x2="{end[0]:.0f}" '
            f'y2="{end[1]:.0f}" class="edge"/>')
    if abs(start[0] - end[0]) < 1:  # vertical: the labels beside it
        return [line, *_text(start[0] + 10, (start[1] + end[1]) / 2, labels, anchor="start")]
    top = (start[1] + end[1]) / 2 - 8 - LINE * (len(labels) - 1)
    return [line, *_text((start[0] + end[0]) / 2, top, labels)]


def _node(node: str) -> list[str]:
    x, y = _position(node)
    if node == NEW:
        return [f'<circle cx="{x:.0f}" cy="{y:.0f}" r="8" class="start"/>']
    kind = "terminal" if State(node) in TERMINAL_STATES else "state"
    return [f'<rect x="{x - BOX_W / 2:.0f}" y="{y - BOX_H / 2:.0f}" width="{BOX_W}" '
            f'height="{BOX_H}" rx="10" class="{kind}"/>',
            f'<text x="{x:.0f}" y="{y + 5:.0f}" text-anchor="middle" class="name">'
            f'{escape(node)}</text>']


STYLE = (".state{fill:#e8eefc;stroke:#3b5bab;stroke-width:1.5}"
         ".terminal{fill:#dff3e4;stroke:#2e7d4f;stroke-width:2.5}"
         ".start{fill:#333}.edge{fill:none;stroke:#555;stroke-width:1.4;"
         "marker-end:url(#arrow)}"
         ".name{font:600 15px sans-serif;fill:#1d2b50}.label{font:12px sans-serif;fill:#333}")


def render() -> str:
    """The SVG document."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'width="{WIDTH}" height="{HEIGHT}" role="img" '
             'aria-label="The message state machine">',
             "<title>The message state machine, drawn from rms/domain/transitions.py</title>",
             f"<style>{STYLE}</style>",
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
             'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
             'fill="#555"/></marker></defs>',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>']
    for (source, target), labels in edges().items():
        parts += _arrow(source, target, labels)
    for node in POSITIONS:
        parts += _node(node)
    return "\n".join([*parts, "</svg>"]) + "\n"
