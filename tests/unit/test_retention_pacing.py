"""The pace of ``rms retention run`` (history.pacing): the duty cycle, batches bounded in rows
and time, and the back-off when a batch costs more per message than the quiet database did."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from history.pacing import MAX_STRETCH, MIN_ROWS, START_ROWS, Pace, Pacer


def test_rest_keeps_work_to_the_duty_cycle() -> None:
    pacer = Pacer(Pace(duty=0.25, batch_seconds=1.0))
    rest = pacer.after_batch(1000, 0.2)
    assert rest == pytest.approx(0.6)  # 0.2 s of work in 0.8 s: a quarter
    assert 0.2 / (0.2 + rest) == pytest.approx(0.25)


def test_a_fixed_pause_is_added_to_the_rest() -> None:
    assert Pacer(Pace(duty=0.5, pause_seconds=1.5)).after_batch(1000, 0.1) == pytest.approx(1.6)


def test_unpaced_never_rests_and_keeps_its_batch_size() -> None:
    pacer = Pacer(Pace.unpaced(7))
    assert pacer.rows == 7
    for seconds in (0.001, 5.0, 0.5):
        assert pacer.after_batch(7, seconds) == 0
        assert pacer.rows == 7


def test_a_slow_batch_shrinks_the_next_one_in_proportion() -> None:
    pacer = Pacer(Pace(batch_seconds=0.25, max_rows=5000))
    assert pacer.rows == START_ROWS
    pacer.after_batch(START_ROWS, 0.5)
    assert pacer.rows == START_ROWS // 2
    pacer.after_batch(pacer.rows, 100.0)
    assert pacer.rows == MIN_ROWS  # never below


def test_a_fast_batch_grows_the_next_one_up_to_the_batch_size() -> None:
    pacer = Pacer(Pace(batch_seconds=0.25, max_rows=2000))
    pacer.after_batch(START_ROWS, 0.05)
    assert pacer.rows == 1501
    pacer.after_batch(1501, 0.05)
    assert pacer.rows == 2000
    pacer.after_batch(2000, 0.2)  # within the aim: unchanged
    assert pacer.rows == 2000


def test_a_batch_size_below_the_minimum_is_kept() -> None:
    pacer = Pacer(Pace(max_rows=10))
    pacer.after_batch(10, 30.0)
    assert pacer.rows == 10


def test_a_busy_database_stretches_the_rest() -> None:
    pacer = Pacer(Pace(duty=0.5, batch_seconds=10.0))
    assert pacer.after_batch(1000, 0.1) == pytest.approx(0.1)  # 0.1 ms a message: quiet
    assert pacer.after_batch(1000, 0.15) == pytest.approx(0.15)  # 1.5x: not busy yet
    assert pacer.after_batch(1000, 0.3) == pytest.approx(0.3 * 3)  # 3x the quiet cost
    assert pacer.after_batch(1000, 10.0) == pytest.approx(10.0 * MAX_STRETCH)  # capped
    assert pacer.after_batch(1000, 0.1) == pytest.approx(0.1)  # quiet again


@pytest.mark.parametrize("fields", [{"duty": 0}, {"duty": 1.5}, {"batch_seconds": 0},
                                    {"max_rows": 0}, {"pause_seconds": -1}])
def test_bad_settings_are_refused(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Pace(**fields)  # type: ignore[arg-type]


def test_capacity_per_day() -> None:
    assert Pace(duty=0.25).capacity_per_day(1000) == 1000 * 0.25 * 86_400


# a batch's duration is a difference of monotonic clock readings: 0 or at least a nanosecond
# (below that, as with 5e-324 s, the rest itself underflows to 0 in floating point)
@given(duty=st.floats(0.01, 1.0), seconds=st.just(0.0) | st.floats(1e-9, 60.0),
       rows=st.integers(0, 100_000), max_rows=st.integers(1, 100_000))
def test_work_never_exceeds_the_duty_cycle(duty: float, seconds: float, rows: int,
                                           max_rows: int) -> None:
    pacer = Pacer(Pace(duty=duty, max_rows=max_rows))
    rest = pacer.after_batch(rows, seconds)
    assert rest >= 0
    if seconds > 0:
        assert seconds / (seconds + rest) <= duty * (1 + 1e-9)
    assert min(MIN_ROWS, max_rows) <= pacer.rows <= max_rows
