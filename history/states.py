"""The domain's states as the history's SQL reads them (the export and the Spark report
select the open messages, those that can still change)."""

from __future__ import annotations

from rms.domain.states import OPEN_STATES


def open_states_sql() -> str:
    """The open states as an SQL list of literals: ``'pending-send', 'sent'``."""
    return ", ".join(f"'{state.value}'" for state in sorted(OPEN_STATES))
