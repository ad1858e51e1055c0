"""How every Kafka client RMS makes connects, from its ``RMS_KAFKA_*`` settings: the TLS and
SASL choices are a :class:`rms_client.kafka_security.KafkaSecurity` (one home, shared with the
consumer's topic acker). :func:`login_problem` is the start-up check: one connection that tells
a wrong password or an untrusted certificate (fatal: the configuration is wrong) from a broker
that is merely unreachable (the clients keep trying).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from aiokafka import errors
from aiokafka.conn import create_conn

from rms_client.kafka_security import KafkaSecurity, error_text

if TYPE_CHECKING:
    from rms.config import KafkaSettings

# the errors that mean "the configuration is wrong", not "the cluster is away"
_LOGIN_REFUSED: tuple[type[BaseException], ...] = (
    errors.SaslAuthenticationFailed, errors.AuthenticationFailedError,
    errors.UnsupportedSaslMechanismError,
    errors.IllegalSaslStateError)

def kafka_security(settings: KafkaSettings) -> KafkaSecurity:
    """The choices of the ``RMS_KAFKA_*`` settings."""
    return KafkaSecurity(
        security_protocol=settings.kafka_security_protocol,
        ssl_cafile=settings.kafka_ssl_cafile,
        ssl_certfile=settings.kafka_ssl_certfile,
        ssl_keyfile=settings.kafka_ssl_keyfile,
        ssl_check_hostname=settings.kafka_ssl_check_hostname,
        sasl_mechanism=settings.kafka_sasl_mechanism,
        sasl_username=settings.kafka_sasl_username,
        sasl_password=settings.kafka_sasl_password,
    )


def client_options(settings: KafkaSettings) -> dict[str, Any]:
    """Bootstrap servers plus the connection options of the ``RMS_KAFKA_*`` settings."""
    return {"bootstrap_servers": settings.kafka_bootstrap_servers,
            **kafka_security(settings).client_options()}


async def login_problem(bootstrap_servers: str, security: KafkaSecurity, *,
                        timeout_seconds: float = 5.0) -> str | None:
    """Why the cluster refuses these credentials or this TLS set-up, in one line; None when a
    broker accepted them, or when no broker answered within ``timeout_seconds`` (an outage
    is not a configuration error: the clients keep trying)."""
    if security.security_protocol == "PLAINTEXT":
        return None
    options = security.client_options()
    with _quiet_aiokafka():  # the answer is this function's one line
        return await _first_answer(bootstrap_servers, options, timeout_seconds)


async def _first_answer(bootstrap_servers: str, options: dict[str, Any],
                        timeout_seconds: float) -> str | None:
    for host, port in _hosts(bootstrap_servers):
        try:
            async with asyncio.timeout(timeout_seconds):
                connection = await create_conn(host, port, client_id="rms-login-check",
                                               request_timeout_ms=int(timeout_seconds * 1000),
                                               **options)
        except _LOGIN_REFUSED as exc:
            return f"Kafka at {host}:{port} refused the login: {error_text(exc)}"
        except ssl.SSLError as exc:
            return f"Kafka at {host}:{port}: TLS failed: {_tls_reason(exc)}"
        except (errors.KafkaError, OSError, TimeoutError) as exc:
            if isinstance(exc.__cause__, ssl.SSLError):  # the broker refused our certificate
                return f"Kafka at {host}:{port}: TLS failed: {_tls_reason(exc.__cause__)}"
            continue  # this broker is away: ask the next one
        connection.close()
        return None
    return None


@contextlib.contextmanager
def _quiet_aiokafka() -> Iterator[None]:
    logger = logging.getLogger("aiokafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _hosts(bootstrap_servers: str) -> list[tuple[str, int]]:
    hosts = []
    for entry in bootstrap_servers.split(","):
        host, _, port = entry.strip().rpartition(":")
        if host and port.isdigit():
            hosts.append((host.strip("[]"), int(port)))
    return hosts


def _tls_reason(exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"the broker's certificate is not trusted ({exc.verify_message}): check "
                "RMS_KAFKA_SSL_CAFILE and the broker's host name")
    if "ALERT" in str(exc).upper():
        return (f"the broker refused the client certificate ({exc.reason}): check "
                "RMS_KAFKA_SSL_CERTFILE and RMS_KAFKA_SSL_KEYFILE")
    return error_text(exc)
