"""One report record for every scale of the redelivery worker's passes: counts add up, a
held key stays held, and a worker's tick carries its sequencer's part."""

from __future__ import annotations

from rms.usecases.reports import Report


def test_counts_add_up_and_a_held_key_stays_held() -> None:
    tick = Report()
    tick.add(Report(rounds=1, keys=2))
    tick.add(Report(published=3, failed=1, held=True))
    tick.add(Report(published=1, dead=2))
    assert tick == Report(rounds=1, keys=2, published=4, failed=1, dead=2, held=True)


def test_a_tick_carries_what_its_sequencer_did() -> None:
    first = Report(rounds=1, claimed=5, published=5, ordered=Report(rounds=1, keys=1))
    second = Report(rounds=2, claimed=1, failed=1, ordered=Report(rounds=1, published=2))
    first.add(second)
    assert first == Report(rounds=3, claimed=6, published=5, failed=1,
                           ordered=Report(rounds=2, keys=1, published=2))
    alone = Report()
    alone.add(Report(ordered=Report(dead=1)))
    assert alone.ordered == Report(dead=1)
