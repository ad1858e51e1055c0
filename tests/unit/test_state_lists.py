"""Every list of message states outside the domain is the domain's list
(:class:`rms.domain.states.State`): the dashboard's, the Go and TypeScript clients', and every
state a query outside the domain compares with. Adding a state fails here until each place
knows it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from history.states import open_states_sql
from rms.domain.states import OPEN_STATES, State
from rms.domain.transactions import TransactionState

ROOT = Path(__file__).resolve().parents[2]
STATES = [state.value for state in State]


def _read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def test_the_dashboard_lists_the_domain_states_in_order() -> None:
    [listed] = re.findall(r"const STATES = \[([^\]]*)\]",
                          _read("message_service/dashboard/static/dashboard.js"))
    assert re.findall(r'"([^"]+)"', listed) == STATES


def test_the_go_client_names_every_state() -> None:
    [block] = re.findall(r"// Message states[^\n]*\nconst \(\n(.*?)\n\)",
                         _read("clients/go/types.go"), re.DOTALL)
    assert re.findall(r'State\w+\s*=\s*"([^"]+)"', block) == STATES


def test_the_typescript_client_names_every_state() -> None:
    [union] = re.findall(r"export type MessageState = ([^;]+);",
                         _read("clients/typescript/src/producer.ts"))
    assert re.findall(r'"([^"]+)"', union) == STATES


def test_the_open_states_are_the_ones_not_final() -> None:
    assert open_states_sql() == "'pending-send', 'sent'"
    assert {State.PENDING_SEND, State.SENT} == OPEN_STATES


# a state compared with in SQL or in a Spark column expression, written as a literal
_COMPARED = re.compile(
    r"""\bstate\s*=\s*'([\w-]+)'|(?:col\("state"\)|\["state"\])\s*[!=]=\s*"([\w-]+)"|"""
    r"""\bstate\s+IN\s*\(([^)]*)\)""",
    re.IGNORECASE)
KNOWN = set(STATES) | {state.value for state in TransactionState}


def _compared_states(text: str) -> set[str]:
    found: set[str] = set()
    for sql, spark, listed in _COMPARED.findall(text):
        found |= {sql or spark} if sql or spark else set(re.findall(r"'([\w-]+)'", listed))
    return found


def test_every_state_a_query_names_is_a_domain_state() -> None:
    """Outside the domain and the store (which take theirs from the domain), wherever a state
    is still written out (the benchmark's hand-written SQL), it is one of the domain's."""
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    unknown = {name: states - KNOWN for name in listed if not name.startswith("tests/")
               for states in [_compared_states(_read(name))] if states - KNOWN}
    assert unknown == {}


def test_the_schema_allows_exactly_the_domain_states() -> None:
    schema = _read("rms/store/schema.py")
    checks = dict((name, set(re.findall(r"'([\w-]+)'", listed))) for listed, name in re.findall(
        r'"state IN \(([^)]*)\)", name="(\w+)"', schema))
    assert checks == {"messages_state_check": set(STATES),
                      "transactions_state_check": {s.value for s in TransactionState}}


def test_the_scan_sees_a_state() -> None:
    assert _compared_states("WHERE state IN ('pending-send', 'sent') AND x") == {
        "pending-send", "sent"}
    assert _compared_states('col("state") == "done"') == {"done"}
    assert _compared_states('state = "ok"  # a Python name') == set()
    assert _compared_states("AND state = 'sent'") == {"sent"}
    assert _compared_states('if current["state"] != "parked":') == {"parked"}
