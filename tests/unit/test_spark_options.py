"""Pure argument handling of ``rms report`` / ``rms export``: times, SLA targets, database
URLs. No Spark, no database."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from history.dburl import asyncpg_dsn, jdbc_target
from history.options import UsageError, Window, parse_instant, parse_window
from spark.inputs import slice_predicates
from spark.session import SessionSettings, local_cores, session_conf, spark_conf
from spark.targets import DEFAULT_SECONDS, SlaTargets, load_targets


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-03-02T10:00:00Z", datetime(2026, 3, 2, 10, tzinfo=UTC)),
    ("2026-03-02T12:00:00+02:00", datetime(2026, 3, 2, 10, tzinfo=UTC)),
    ("2026-03-02T10:00:00", datetime(2026, 3, 2, 10, tzinfo=UTC)),
    ("2026-03-02", datetime(2026, 3, 2, tzinfo=UTC)),
    ("2026-03-02T10:00:00.250Z", datetime(2026, 3, 2, 10, 0, 0, 250000, tzinfo=UTC)),
])
def test_instants_are_utc(text: str, expected: datetime) -> None:
    assert parse_instant(text, "--since") == expected


def test_bad_instants_and_windows() -> None:
    with pytest.raises(UsageError, match="--since: 'yesterday' is not an ISO 8601 time"):
        parse_instant("yesterday", "--since")
    with pytest.raises(UsageError, match="earlier"):
        parse_window("2026-03-02T11:00:00Z", "2026-03-02T10:00:00Z")
    assert parse_window(None, None).since is None


def test_spark_conf_pairs() -> None:
    assert spark_conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(UsageError, match="KEY=VALUE"):
        spark_conf(["spark.a"])


def test_targets_first_matching_pattern_wins(tmp_path: Path) -> None:
    path = tmp_path / "targets.toml"
    path.write_text('default_seconds = 120\n[topics]\n"orders.paid" = 10\n"orders.*" = 30.5\n')
    targets = load_targets(path)
    assert targets == SlaTargets(120.0, (("orders.paid", 10.0), ("orders.*", 30.5)))
    assert [targets.target_for(t) for t in ("orders.paid", "orders.shipped", "invoices")] == [
        10.0, 30.5, 120.0]
    json_path = tmp_path / "targets.json"
    json_path.write_text('{"topics": {"a?": 5}}')
    assert load_targets(json_path) == SlaTargets(DEFAULT_SECONDS, (("a?", 5.0),))
    assert load_targets(None) == SlaTargets()


@pytest.mark.parametrize(("name", "text", "message"), [
    ("t.toml", "default_seconds = -1", "positive"),
    ("t.toml", 'default_seconds = "fast"', "number of seconds"),
    ("t.toml", "[topics]\na = true", "number of seconds"),
    ("t.toml", "sla = 3", "unknown keys"),
    ("t.toml", "topics = 3", "must map"),
    ("t.toml", "default_seconds = ", "not valid TOML"),
    ("t.json", "[1, 2]", "expected a table"),
    ("t.json", "{", "not valid JSON"),
])
def test_bad_targets_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_targets(path)


def test_missing_targets_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        load_targets(tmp_path / "absent.toml")


def test_database_urls_for_each_driver() -> None:
    url = "postgresql+asyncpg://rms:p%40ss%2Fw@db.example:6432/rms?ssl=true"
    target = jdbc_target(url)
    assert target.url == "jdbc:postgresql://db.example:6432/rms"
    assert target.properties == {"driver": "org.postgresql.Driver",
                                 "ApplicationName": "rms-report", "user": "rms",
                                 "password": "p@ss/w", "sslmode": "require"}
    assert asyncpg_dsn(url) == "postgresql://rms:p%40ss%2Fw@db.example:6432/rms?sslmode=require"
    assert jdbc_target("postgresql://127.0.0.1/x").url == "jdbc:postgresql://127.0.0.1:5432/x"
    with pytest.raises(UsageError):
        jdbc_target("mysql://localhost/x")


@pytest.mark.parametrize("url", [
    "postgresql+asyncpg://rms:pw@/rms?host=10.0.0.1:5432&host=10.0.0.2:5433"
    "&target_session_attrs=read-write",
    "postgresql://rms:pw@10.0.0.1:5432,10.0.0.2:5433/rms?target_session_attrs=read-write",
])
def test_several_hosts_reach_the_writable_one(url: str) -> None:
    assert asyncpg_dsn(url) == ("postgresql://rms:pw@10.0.0.1:5432,10.0.0.2:5433/rms"
                                "?target_session_attrs=read-write")
    target = jdbc_target(url)
    assert target.url == "jdbc:postgresql://10.0.0.1:5432,10.0.0.2:5433/rms"
    assert target.properties["targetServerType"] == "primary"


def test_bad_hosts_and_session_attributes_are_refused() -> None:
    with pytest.raises(UsageError, match="port is not a number"):
        asyncpg_dsn("postgresql://rms@db:port/rms")
    with pytest.raises(UsageError, match="port is not a number"):
        asyncpg_dsn("postgresql://rms@/rms?host=db:70000")
    with pytest.raises(UsageError, match="target_session_attrs 'standby'"):
        jdbc_target("postgresql://rms@db/rms?target_session_attrs=standby")


def test_jdbc_slices_cover_the_window_once() -> None:
    window = Window(since=datetime(2026, 3, 2, tzinfo=UTC), until=datetime(2026, 3, 3, tzinfo=UTC))
    low, high = datetime(2026, 3, 2, 1, tzinfo=UTC), datetime(2026, 3, 2, 5, tzinfo=UTC)
    predicates = slice_predicates(window, "created_at", low, high, 4)
    base = ("TRUE AND created_at >= TIMESTAMPTZ '2026-03-02T00:00:00+00:00' "
            "AND created_at < TIMESTAMPTZ '2026-03-03T00:00:00+00:00' AND TRUE")
    assert predicates == [
        f"{base} AND created_at < TIMESTAMPTZ '2026-03-02T02:00:00+00:00'",
        f"{base} AND created_at >= TIMESTAMPTZ '2026-03-02T02:00:00+00:00' "
        "AND created_at < TIMESTAMPTZ '2026-03-02T03:00:00+00:00'",
        f"{base} AND created_at >= TIMESTAMPTZ '2026-03-02T03:00:00+00:00' "
        "AND created_at < TIMESTAMPTZ '2026-03-02T04:00:00+00:00'",
        f"{base} AND created_at >= TIMESTAMPTZ '2026-03-02T04:00:00+00:00'",
    ]
    # nothing in the window, or a single instant: one query
    assert slice_predicates(Window(), "created_at", None, None, 8) == ["TRUE"]
    assert slice_predicates(Window(), "created_at", low, low, 8) == ["TRUE"]


def test_session_defaults_for_local_runs_only() -> None:
    local = session_conf(SessionSettings(master="local[3]"))
    assert local["spark.sql.shuffle.partitions"] == "6"
    assert "spark.driver.memory" not in local  # Spark's default heap: the report spills
    assert local["spark.sql.session.timeZone"] == "UTC"
    mine = session_conf(SessionSettings(master="local[3]", driver_memory="3g",
                                        conf={"spark.sql.shuffle.partitions": "9",
                                              "spark.sql.session.timeZone": "Asia/Tokyo"}))
    assert (mine["spark.driver.memory"], mine["spark.sql.shuffle.partitions"]) == ("3g", "9")
    assert mine["spark.sql.session.timeZone"] == "UTC"  # buckets are UTC, always
    for cluster in (SessionSettings(master="yarn"), SessionSettings(launched_here=False)):
        conf = session_conf(cluster)
        assert "spark.sql.shuffle.partitions" not in conf and "spark.driver.memory" not in conf
    assert [local_cores(m) for m in ("local", "local[4]", "local[2,3]", "yarn")] == [
        1, 4, 2, None]
