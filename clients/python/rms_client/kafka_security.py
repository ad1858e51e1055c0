"""How a Kafka client connects to the cluster RMS uses: TLS (a CA file, an optional client
certificate and key, host-name verification) and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

One home: :class:`KafkaSecurity` holds the choices and :meth:`KafkaSecurity.client_options`
turns them into aiokafka's connection keyword arguments. The consumer's topic acker takes
them as a parameter; RMS's own processes build them from their ``RMS_KAFKA_*`` settings.

OAUTHBEARER is not offered: aiokafka takes a token only from a provider object written in
code, and it does not re-authenticate a connection (KIP-368), so a broker that ends sessions
when their token expires closes RMS's connections mid-flight.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any, Literal, get_args

from aiokafka.helpers import create_ssl_context
from pydantic import SecretStr

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SECURITY_PROTOCOLS: tuple[str, ...] = get_args(SecurityProtocol)
SASL_MECHANISMS: tuple[str, ...] = get_args(SaslMechanism)


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
            raise KafkaSecurityError(f"cannot load the TLS files: {error_text(exc)}") from None
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



def error_text(exc: BaseException) -> str:
    """The first line of an error, led by its type's name."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return name if not text else text if text.startswith(name) else f"{name}: {text}"
