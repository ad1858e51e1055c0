"""One reading of RMS_DATABASE_URL (rms.store.dburl): the forms every command accepts and what
asyncpg and the JDBC driver get from each (pure logic; the commands' own reading of TLS and
socket URLs is tested for real in tests/system/tls/test_postgres_tls.py)."""

from __future__ import annotations

import pytest

from rms.store.dburl import DatabaseUrlError, parse_database_url


def test_tcp_with_tls_parameters() -> None:
    url = parse_database_url("postgresql+asyncpg://rms:p%40ss%2Fw@db.example:6432/rms"
                             "?sslmode=verify-full&sslrootcert=/etc/rms/ca.pem&application_name=x")
    assert url.location == "db.example:6432/rms"
    assert url.dsn() == ("postgresql://rms:p%40ss%2Fw@db.example:6432/rms?sslmode=verify-full"
                         "&sslrootcert=/etc/rms/ca.pem&application_name=x")
    target = url.jdbc("rms-report")
    assert target.url == "jdbc:postgresql://db.example:6432/rms"
    assert target.properties == {"driver": "org.postgresql.Driver", "ApplicationName": "rms-report",
                                 "user": "rms", "password": "p@ss/w", "sslmode": "verify-full",
                                 "sslrootcert": "/etc/rms/ca.pem"}
    assert "p@ss" not in repr(url)


def test_asyncpgs_ssl_word_is_read_as_sslmode() -> None:
    assert parse_database_url("postgresql://h/db?ssl=true").tls == {"sslmode": "require"}
    assert parse_database_url("postgresql://h/db?ssl=verify-full").tls == {"sslmode": "verify-full"}


def test_a_unix_socket() -> None:
    url = parse_database_url("postgresql+asyncpg://rms@/rms?host=/run/postgresql")
    assert url.unix_socket and url.location == "/run/postgresql/.s.PGSQL.5432/rms"
    assert url.dsn() == "postgresql://rms@/rms?host=/run/postgresql&port=5432"
    with pytest.raises(DatabaseUrlError, match=r"Unix socket.*--database-url"):
        url.jdbc("rms-report")


@pytest.mark.parametrize(("text", "says"), [
    ("mysql://h/db", "cannot be parsed"),
    ("postgresql://h:port/db", "port is not a number"),
    ("postgresql://h/db?port=x", "port is not a number"),
    ("postgresql://h/db?sslmode=maybe", "sslmode must be one of"),
    ("postgresql://a:5432,b:70000/db", "port is not a number"),
    ("postgresql://a/db?target_session_attrs=standby", "target_session_attrs 'standby'"),
    ("postgresql://a/db?host=/run/postgresql", "cannot be combined"),
])
def test_forms_that_cannot_work(text: str, says: str) -> None:
    with pytest.raises(DatabaseUrlError, match=says):
        parse_database_url(text)


@pytest.mark.parametrize("text", [
    "postgresql+asyncpg://rms:pw@/rms?host=10.0.0.1:5432&host=10.0.0.2:5433"
    "&target_session_attrs=read-write",
    "postgresql://rms:pw@10.0.0.1:5432,10.0.0.2:5433/rms?target_session_attrs=read-write",
])
def test_several_servers_are_tried_in_turn_for_the_writable_one(text: str) -> None:
    url = parse_database_url(text)
    assert url.hosts == (("10.0.0.1", 5432), ("10.0.0.2", 5433))
    assert url.settings == {}  # target_session_attrs is a connection parameter, not a setting
    assert url.dsn() == ("postgresql://rms:pw@10.0.0.1:5432,10.0.0.2:5433/rms"
                         "?target_session_attrs=read-write")
    jdbc = url.jdbc("rms-report")
    assert jdbc.url == "jdbc:postgresql://10.0.0.1:5432,10.0.0.2:5433/rms"
    assert jdbc.properties["targetServerType"] == "primary"
    assert "pw" not in url.location and url.location == "10.0.0.1:5432,10.0.0.2:5433/rms"
