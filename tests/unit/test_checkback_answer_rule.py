"""The one rule that turns a check-back answer into an action, for messages and transactions
alike (pure logic)."""

from __future__ import annotations

import pytest

from rms.domain.checkback import Action, Asked, Outcome, decide

CAP = 300.0


@pytest.mark.parametrize("check_count", [1, 3])
def test_committed_confirms_and_rolled_back_cancels_whatever_the_calls_left(
        check_count: int) -> None:
    asked = Asked(check_count=check_count, max_checks=3, check_after_seconds=10.0)
    assert decide(Outcome.COMMITTED, asked, CAP) == (Action.CONFIRM, 0.0)
    assert decide(Outcome.ROLLED_BACK, asked, CAP) == (Action.CANCEL, 0.0)


def test_unknown_with_calls_left_retries_after_the_capped_backoff_with_jitter() -> None:
    first = decide(Outcome.UNKNOWN, Asked(1, 5, 10.0), CAP)
    assert first[0] is Action.RETRY
    assert 10.0 * 2 * 0.8 <= first[1] <= 10.0 * 2 * 1.2  # after call 1: base * 2, +-20 %
    capped = decide(Outcome.UNKNOWN, Asked(4, 50, 100.0), CAP)
    assert capped[0] is Action.RETRY and CAP * 0.8 <= capped[1] <= CAP * 1.2


@pytest.mark.parametrize(("check_count", "max_checks"), [(3, 3), (4, 3)])
def test_unknown_on_the_last_call_exhausts(check_count: int, max_checks: int) -> None:
    asked = Asked(check_count, max_checks, 10.0)
    assert decide(Outcome.UNKNOWN, asked, CAP) == (Action.EXHAUST, 0.0)
