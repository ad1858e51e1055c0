"""The transaction's transition table (rms.domain.transaction_transitions) as the renderer reads
it: every row renders against the transactions table (its effects are columns of it), starts
from ``pending``, and moves the messages of the transaction by a row of the message table that
applies to how they are stored. Their effects on the database are walked by the transaction
tests (tests/integration/api/test_transactions.py, tests/integration/checkback/test_transactions.py)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from rms.domain import transaction_transitions as ledger
from rms.domain import transitions as table
from rms.domain.transactions import TransactionState
from rms.store.schema import transactions
from rms.store.transitions import core_values

GIVEN: dict[str, Any] = {"lease": 45.0, "token": "claim-token", "delay": 30.0,
                         "check_after": 10.0}


@pytest.mark.parametrize("change", ledger.TABLE, ids=lambda c: c.action)
def test_every_row_renders_against_the_transactions_table(
        change: ledger.TransactionTransition) -> None:
    assert set(change.effects) <= set(transactions.c.keys())
    values = core_values(change, GIVEN, transactions)
    sql = str(update(transactions).values(**values).compile())
    assert all(name in sql for name in change.effects)
    assert change.source is TransactionState.PENDING


@pytest.mark.parametrize("change", [c for c in ledger.TABLE if c.message is not None],
                         ids=lambda c: c.action)
def test_the_messages_move_from_the_state_they_are_stored_in(
        change: ledger.TransactionTransition) -> None:
    assert change.member.source is ledger.PREPARE_MEMBER.target
    assert change.member in table.TABLE


def test_a_transaction_message_is_never_due_on_its_own() -> None:
    assert "next_check_at" not in ledger.PREPARE_MEMBER.effects
    assert "next_check_at" in table.PREPARE.effects


def test_a_row_that_moves_no_message_says_so() -> None:
    with pytest.raises(ValueError, match="moves no message"):
        _ = ledger.RETRY_CHECK.member
