"""``release/constraints.txt`` is what the server is tested with: the environment the suite runs
in holds exactly its pins for every third-party distribution ``rms-server`` needs (``make
install`` installs under it), and the pins name none of RMS's own distributions."""

from __future__ import annotations

from release import constraints


def test_the_suite_runs_with_the_pinned_versions() -> None:
    assert constraints.differences() == []


def test_the_pins_name_no_rms_distribution_and_bound_uvicorn() -> None:
    pins = constraints.read()
    assert not set(pins) & constraints.OWN
    assert {"uvicorn", "fastapi", "sqlalchemy", "aiokafka", "asyncpg", "httptools"} <= set(pins)
