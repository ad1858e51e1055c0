"""The report's JDBC read over TLS: ``sslmode=verify-full`` and ``sslrootcert`` of
``RMS_DATABASE_URL`` reach the PostgreSQL JDBC driver, against a server that refuses TCP
without TLS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from history.dburl import asyncpg_dsn, jdbc_target
from history.options import UsageError, parse_window
from rms.store.migrate import upgrade
from spark.inputs import JdbcSource, load_history
from tests.integration.spark.history import SINCE, UNTIL, hand_history, store
from tests.tls_support import TlsPostgres, tls_postgres_server

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def tls_history() -> Iterator[tuple[TlsPostgres, str]]:
    with tls_postgres_server() as server:
        server.server.create_database("spark_tls")
        url = server.url("spark_tls")
        upgrade(url)
        store(asyncpg_dsn(url), hand_history())
        yield server, url


def test_the_jdbc_url_carries_verify_full(tls_history: tuple[TlsPostgres, str]) -> None:
    server, url = tls_history
    target = jdbc_target(url)
    assert target.properties["sslmode"] == "verify-full"
    assert target.properties["sslrootcert"] == str(server.cafile)
    with pytest.raises(UsageError, match="Unix socket"):
        jdbc_target(server.socket_url("spark_tls"))


def test_the_report_reads_postgres_over_tls(spark_session: Any,
                                            tls_history: tuple[TlsPostgres, str]) -> None:
    _, url = tls_history
    history = load_history(spark_session, JdbcSource(url, partitions=2),
                           parse_window(SINCE, UNTIL))
    expected = {m.message_id for m in hand_history().messages}
    read = {row["message_id"] for row in history.messages.select("message_id").collect()}
    assert read and read <= expected


def test_an_untrusted_server_fails_the_jdbc_read(spark_session: Any,
                                                 tls_history: tuple[TlsPostgres, str]) -> None:
    server, url = tls_history
    untrusted = url.replace(str(server.cafile), str(server.stranger_ca))
    with pytest.raises(Exception, match=r"FAILED_JDBC\.CONNECTION"):  # the driver checked
        load_history(spark_session, JdbcSource(untrusted, partitions=1),
                     parse_window(SINCE, UNTIL)).messages.count()
