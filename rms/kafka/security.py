"""How every Kafka client RMS makes connects: TLS (a CA file, an optional client certificate
and key, host-name verification) and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

One home: :class:`KafkaSecurity` holds the choices and :meth:`KafkaSecurity.client_options`
turns them into aiokafka's connection keyword arguments. The server's processes build it from
their settings (:func:`kafka_security`); the consumer SDK's topic acker takes the same choices
as parameters. :func:`login_problem` is the start-up check: one connection that tells a wrong
password or an untrusted certificate (fatal: the configuration is wrong) from a broker that
is merely unreachable (the clients keep trying).

OAUTHBEARER is not offered: aiokafka takes a token only from a provider object written in
code, and it does not re-authenticate a connection (KIP-368), so a broker that ends sessions
when their token expires closes RMS's connections mid-flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from aiokafka import errors
from aiokafka.conn import create_conn
from aiokafka.helpers import create_ssl_context
from pydantic import SecretStr

if TYPE_CHECKING:
    from rms.config import KafkaSettings

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SECURITY_PROTOCOLS: tuple[str, ...] = get_args(SecurityProtocol)
SASL_MECHANISMS: tuple[str, ...] = get_args(SaslMechanism)

# the errors that mean "the configuration is wrong", not "the cluster is away"
_LOGIN_REFUSED: tuple[type[BaseException], ...] = (
    errors.SaslAuthenticationFailed, errors.AuthenticationFailedError,
    errors.UnsupportedSaslMechanismError,
    errors.IllegalSaslStateError)


class KafkaSecurityError(ValueError):
    """The TLS or SASL choices cannot work together, or a file they name cannot be read."""


@dataclass(frozen=True)
class KafkaSecurity:
    """The TLS and SASL choices of one Kafka client; the defaults connect in plaintext."""

    security_protocol: SecurityProtocol = "PLAINTEXT"
    ssl_cafile: str | None = None  # None: the system's trusted authorities
    ssl_certfile: str | None = None  # a client certificate, for mutual TLS
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | str | None = None  # a str is wrapped: never shown in a repr

    def __post_init__(self) -> None:
        if isinstance(self.sasl_password, str):
            object.__setattr__(self, "sasl_password", SecretStr(self.sasl_password))
        problem = self._problem()
        if problem is not None:
            raise KafkaSecurityError(problem)

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def _problem(self) -> str | None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            return (f"security protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                    f"not {self.security_protocol!r}")
        if not self.tls and (self.ssl_cafile or self.ssl_certfile or self.ssl_keyfile):
            return f"TLS files are set but the security protocol is {self.security_protocol}"
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            return "a client certificate needs its key and a key its certificate"
        if not self.sasl:
            if self.sasl_mechanism or self.sasl_username or self.sasl_password:
                return f"SASL is set but the security protocol is {self.security_protocol}"
            return None
        if self.sasl_mechanism not in SASL_MECHANISMS:
            return (f"{self.security_protocol} needs a SASL mechanism: one of "
                    f"{', '.join(SASL_MECHANISMS)}")
        if not self.sasl_username or self.sasl_password is None:
            return f"SASL {self.sasl_mechanism} needs a user name and a password"
        return None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client's TLS context (None in plaintext); reads the files it names now."""
        if not self.tls:
            return None
        try:
            context: ssl.SSLContext = create_ssl_context(cafile=self.ssl_cafile, certfile=self.ssl_certfile,
                                         keyfile=self.ssl_keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise KafkaSecurityError(f"cannot load the TLS files: {_reason(exc)}") from None
        context.check_hostname = self.ssl_check_hostname
        return context

    def client_options(self) -> dict[str, Any]:
        """aiokafka's keyword arguments for producers, consumers, admin and plain clients."""
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        if self.sasl:
            password = self.sasl_password
            options.update(sasl_mechanism=self.sasl_mechanism,
                           sasl_plain_username=self.sasl_username,
                           sasl_plain_password=password.get_secret_value()
                           if isinstance(password, SecretStr) else password)
        return options


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
            return f"Kafka at {host}:{port} refused the login: {_reason(exc)}"
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
    return _reason(exc)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return name if not text else text if text.startswith(name) else f"{name}: {text}"
