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
import struct
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
    is not a configuration error: the clients keep trying). A listener that speaks the other
    protocol (TLS where the settings say plaintext, or the reverse) is named too: the clients
    would otherwise retry it forever as if the broker were down."""
    options = security.client_options()
    with _quiet_aiokafka():  # the answer is this function's one line
        return await _first_answer(bootstrap_servers, options, security.security_protocol,
                                   timeout_seconds)


async def _first_answer(bootstrap_servers: str, options: dict[str, Any], protocol: str,
                        timeout_seconds: float) -> str | None:
    for host, port in _hosts(bootstrap_servers):
        try:
            async with asyncio.timeout(timeout_seconds):
                connection = await create_conn(host, port, client_id="rms-login-check",
                                               request_timeout_ms=int(timeout_seconds * 1000),
                                               **options)
        except _LOGIN_REFUSED as exc:
            return f"Kafka at {host}:{port} refused the login: {error_text(exc)}"
        except (errors.KafkaError, OSError, TimeoutError) as exc:
            cause = exc if isinstance(exc, ssl.SSLError) else exc.__cause__
            if isinstance(cause, ssl.SSLCertVerificationError) or (
                    isinstance(cause, ssl.SSLError) and "ALERT" in str(cause).upper()):
                return f"Kafka at {host}:{port}: TLS failed: {_tls_reason(cause)}"
            mismatch = await listener_mismatch(host, port, protocol, timeout_seconds)
            if mismatch is not None:
                return mismatch
            if isinstance(cause, ssl.SSLError):
                return f"Kafka at {host}:{port}: TLS failed: {_tls_reason(cause)}"
            continue  # this broker is away: ask the next one
        connection.close()
        # a plaintext connection opens on a TLS port as well: ask the listener itself
        return (None if protocol in TLS_PROTOCOLS
                else await listener_mismatch(host, port, protocol, timeout_seconds))
    return None


TLS_PROTOCOLS = ("SSL", "SASL_SSL")
# ApiVersions v0 with correlation id 0x524d53 and client id "rms": every Kafka listener answers
# it in the clear before any login, when it is a plaintext one
_CORRELATION = 0x524D53
_API_VERSIONS = struct.pack(">hhih", 18, 0, _CORRELATION, 3) + b"rms"


async def listener_mismatch(host: str, port: int, protocol: str,
                            timeout_seconds: float) -> str | None:
    """A line naming the mismatch when the listener at ``host:port`` speaks plaintext Kafka
    where ``protocol`` is TLS, or TLS where it is plaintext; None otherwise (RMS never falls
    back: the operator fixes the setting or the address)."""
    where = f"Kafka at {host}:{port}"
    if protocol in TLS_PROTOCOLS:
        if await _speaks_plaintext_kafka(host, port, timeout_seconds):
            return (f"{where} is a plaintext listener, but RMS_KAFKA_SECURITY_PROTOCOL is "
                    f"{protocol}: point RMS_KAFKA_BOOTSTRAP_SERVERS at the cluster's TLS listener")
        return None
    if await _speaks_tls(host, port, timeout_seconds):
        return (f"{where} is a TLS listener, but RMS_KAFKA_SECURITY_PROTOCOL is {protocol}: "
                "set it to SSL or SASL_SSL (with RMS_KAFKA_SSL_CAFILE), or point "
                "RMS_KAFKA_BOOTSTRAP_SERVERS at a plaintext listener")
    return None


async def _speaks_plaintext_kafka(host: str, port: int, timeout_seconds: float) -> bool:
    try:
        async with asyncio.timeout(timeout_seconds):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS)
                answer = await reader.readexactly(8)
            finally:
                writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    return int.from_bytes(answer[4:8], "big", signed=True) == _CORRELATION


async def _speaks_tls(host: str, port: int, timeout_seconds: float) -> bool:
    """Whether a TLS handshake completes (certificates unchecked: only the protocol counts)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout_seconds):
            _, writer = await asyncio.open_connection(host, port, ssl=context)
    except (OSError, TimeoutError):  # ssl.SSLError is an OSError
        return False
    writer.close()
    return True


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
