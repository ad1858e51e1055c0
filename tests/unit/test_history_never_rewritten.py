"""The history is written in its true order and never rewritten: no statement of RMS changes
an event's ``id`` or ``at`` (the store's statements, as their rendered golden files show them,
and any SQL written in the code). A delivery's ``publishing`` event is completed in place (its
``event`` and ``detail``), which is the one update of ``message_events`` there is."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [path for folder in ("rms", "message_service", "confirm_service", "recovery_service",
                               "history", "spark")
           for path in (ROOT / folder).rglob("*.py")]
GOLDEN = sorted((ROOT / "rms" / "store" / "sql").glob("*.sql"))
# an UPDATE of the events table and what follows it up to the end of its SET list
_UPDATE = re.compile(r"UPDATE\s+message_events\b[^;]*?\bSET\b(?P<set>[^;]*?)(\bWHERE\b|\bFROM\b|$)",
                     re.IGNORECASE | re.DOTALL)


def _set_columns(sql: str) -> set[str]:
    found: set[str] = set()
    for match in _UPDATE.finditer(sql):
        found |= {name.lower() for name in re.findall(r"(\w+)\s*=", match.group("set"))}
    return found


def _core_updates(tree: ast.AST) -> set[str]:
    """Columns given to ``.values(...)`` of ``update(message_events)`` calls."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "values" and "update(message_events)" in ast.unparse(node)):
            found |= {keyword.arg for keyword in node.keywords if keyword.arg}
    return found


def test_no_statement_rewrites_an_events_id_or_time() -> None:
    assert GOLDEN and SOURCES
    rewritten = {}
    for path in GOLDEN:
        columns = _set_columns(path.read_text())
        if columns & {"id", "at"}:
            rewritten[path.name] = columns
    for path in SOURCES:
        text = path.read_text()
        columns = _set_columns(text) | _core_updates(ast.parse(text))
        if columns & {"id", "at"}:
            rewritten[str(path.relative_to(ROOT))] = columns
    assert rewritten == {}


def test_the_scan_finds_a_rewrite() -> None:
    assert _set_columns("UPDATE message_events e SET id = r.new_id, at = r.at FROM r") == {
        "id", "at"}
    tree = ast.parse("update(message_events).where(x).values(at=func.now())")
    assert _core_updates(tree) == {"at"}
    assert _set_columns("UPDATE message_events SET event = 'published', detail = d WHERE x") == {
        "event", "detail"}
