"""How a consumer acknowledges a message to RMS as its own app: over HTTP with the app's API key
(:class:`HttpAcker`) or as a signed record on the ack topic (:class:`TopicAcker`). Neither
needs a database: :mod:`rms_client.consumer` runs them after the inbox's commit.

An acker that holds an API key also tells which app that key acts as (``GET /v1/apps/me``):
the consumer checks it at start against the app name it was given. RMS names the apps that
still owe a message in its records' ``rms-awaiting`` header; a consumer given another name
than its key's app would find that name in none of them and skip every record."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import httpx
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from rms_client import http, tracing
from rms_client.ack_records import ack_value, signed_ack_headers
from rms_client.kafka_security import KafkaSecurity
from rms_client.signing import secret_key

WHOAMI_PATH = "/v1/apps/me"


class WrongApp(ValueError):
    """The app name a consumer was given is not the app its API key acts as (or RMS knows
    no such key): the consumer refuses to run."""


class AckResult(StrEnum):
    ACKED = "acked"  # RMS has (or the ack topic holds) the ack
    REFUSED = "refused"  # RMS said no for good (unknown id, topic not consumable, ...)
    FAILED = "failed"  # could not reach RMS / the broker; RMS will re-deliver, then we ack again


@dataclass(frozen=True, slots=True)
class Ack:
    message_id: str
    result: AckResult
    status: int | None = None
    detail: str | None = None


class Acker(Protocol):
    async def ack(self, message_id: str, created_at: str | None = None) -> Ack:
        """Acknowledge ``message_id``; ``created_at`` is the acknowledged record's
        ``rms-created-at`` header, which binds the ack to that instance of the id."""
        ...

    async def close(self) -> None: ...


class HttpAcker:
    """``POST /v1/messages/{id}/ack`` with the consumer app's API key (the ack is that app's).
    Retries transient failures (network, 429, 5xx) a few times; a 4xx answer is final."""

    def __init__(self, rms_url: str | None = None, api_key: str | None = None, *,
                 client: httpx.AsyncClient | None = None, retries: int = 3,
                 backoff_seconds: float = 0.2, timeout_seconds: float = 10.0) -> None:
        if client is None and rms_url is None:
            raise ValueError("HttpAcker needs rms_url or client")
        self._owned = client is None
        self._client = client or httpx.AsyncClient(base_url=rms_url or "",
                                                   timeout=timeout_seconds)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._retries = retries
        self._backoff = backoff_seconds

    async def ack(self, message_id: str, created_at: str | None = None) -> Ack:
        """An HTTP ack is authenticated with the app's API key when it is made, so
        ``created_at`` is not needed (it cannot be replayed from a log)."""
        failure = "not attempted"
        for attempt in range(self._retries + 1):
            if attempt:
                await asyncio.sleep(self._backoff * 2 ** (attempt - 1))
            try:
                response = await http.send(self._client, "POST",
                                           f"/v1/messages/{message_id}/ack",
                                           headers=self._headers | _trace_headers())
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
                continue
            if response.is_success:
                return Ack(message_id, AckResult.ACKED, response.status_code)
            failure = _problem_detail(response)
            if response.status_code != 429 and response.status_code < 500:
                return Ack(message_id, AckResult.REFUSED, response.status_code, failure)
        return Ack(message_id, AckResult.FAILED, None, failure)

    async def close(self) -> None:
        if self._owned:
            await self._client.aclose()

    async def app_of_key(self) -> str | None:
        """The name of the app this acker's API key acts as; None when RMS cannot tell
        (unreachable, or a release without ``GET /v1/apps/me``). :class:`WrongApp` when RMS
        knows no such key (401)."""
        return await app_of_key(self._client, self._headers)


class TopicAcker:
    """A record ``{"message_id", "consumer", "created_at"}`` on the ack topic (design section
    6), signed with the consumer app's signing secret (the ``whsec_`` secret shown when the app
    was created): RMS applies only acks signed by the app they name, and only to the instance of
    the id created at ``created_at`` (the acknowledged record's ``rms-created-at``), so a
    replayed or late record never finishes a newer message that reuses the id. RMS checks the
    ack asynchronously: ``ACKED`` means the broker holds it.

    ``security`` is how to reach a cluster that requires TLS or SASL, e.g.
    ``KafkaSecurity("SASL_SSL", ssl_cafile="ca.pem", sasl_mechanism="SCRAM-SHA-512",
    sasl_username="points-service", sasl_password=...)``; the cluster's ACLs should let this
    principal write the ack topic and nothing else RMS reads."""

    def __init__(self, bootstrap_servers: str, consumer_app: str, *, signing_secret: str,
                 ack_topic: str = "rms.acks", producer: AIOKafkaProducer | None = None,
                 security: KafkaSecurity | None = None, rms_url: str | None = None,
                 api_key: str | None = None) -> None:
        """``rms_url`` and ``api_key`` (the app's API key) are optional: with them the
        consumer checks at start that ``consumer_app`` is the app of that key."""
        secret_key(signing_secret)  # a malformed secret fails here, not at the first ack
        self._secret = signing_secret
        self.consumer_app = consumer_app
        self._topic = ack_topic
        self._owned = producer is None
        options = (security or KafkaSecurity()).client_options()
        self._producer = producer or AIOKafkaProducer(bootstrap_servers=bootstrap_servers,
                                                      enable_idempotence=False, **options)
        self._started = not self._owned
        self._whoami = (rms_url, api_key)

    async def app_of_key(self) -> str | None:
        """With ``rms_url`` and ``api_key``: as :meth:`HttpAcker.app_of_key`; else None."""
        rms_url, api_key = self._whoami
        if rms_url is None or api_key is None:
            return None
        async with httpx.AsyncClient(base_url=rms_url, timeout=10.0) as client:
            return await app_of_key(client, {"Authorization": f"Bearer {api_key}"})

    async def ack(self, message_id: str, created_at: str | None = None) -> Ack:
        """Refused without ``created_at``: RMS applies no ack record that names no instance."""
        if not created_at:
            return Ack(message_id, AckResult.REFUSED, None, "an ack record needs the "
                       "acknowledged record's rms-created-at header; ack this one over HTTP")
        value = ack_value(message_id, self.consumer_app, created_at)
        headers = signed_ack_headers([self._secret], value)
        headers += [(name, text.encode()) for name, text in _trace_headers().items()]
        try:
            if not self._started:
                await self._producer.start()
                self._started = True
            await self._producer.send_and_wait(self._topic, value, key=message_id.encode(),
                                               headers=headers)
        except (KafkaError, OSError) as exc:
            return Ack(message_id, AckResult.FAILED, None, f"{type(exc).__name__}: {exc}")
        return Ack(message_id, AckResult.ACKED)

    async def close(self) -> None:
        if self._owned and self._started:
            with contextlib.suppress(KafkaError, OSError):
                await self._producer.stop()


def make_acker(mode: str, *, rms_url: str | None = None, api_key: str | None = None,
               bootstrap_servers: str | None = None, consumer_app: str | None = None,
               signing_secret: str | None = None, ack_topic: str = "rms.acks",
               security: KafkaSecurity | None = None) -> Acker:
    """``mode`` ``http`` (needs ``rms_url`` and ``api_key``) or ``topic`` (needs
    ``bootstrap_servers``, ``consumer_app``, the app name RMS knows the consumer by, and that
    app's ``signing_secret``; ``security`` for a cluster with TLS or SASL; ``rms_url`` and
    ``api_key``, when given, let the consumer check ``consumer_app`` at start)."""
    if mode == "http":
        return HttpAcker(rms_url, api_key)
    if mode == "topic":
        if not bootstrap_servers or not consumer_app or not signing_secret:
            raise ValueError("topic acks need bootstrap_servers, consumer_app and the app's "
                             "signing_secret")
        return TopicAcker(bootstrap_servers, consumer_app, signing_secret=signing_secret,
                          ack_topic=ack_topic, security=security, rms_url=rms_url,
                          api_key=api_key)
    raise ValueError(f"ack mode must be 'http' or 'topic', not {mode!r}")


async def app_of_key(client: httpx.AsyncClient, headers: dict[str, str]) -> str | None:
    """``GET /v1/apps/me``: the app name of the API key in ``headers``. None when RMS cannot
    be asked (unreachable, 404 from a release without the endpoint, any other answer but
    401); :class:`WrongApp` on 401, a key RMS does not know."""
    try:
        response = await http.send(client, "GET", WHOAMI_PATH, headers=headers)
    except httpx.HTTPError:
        return None
    if response.status_code == 401:
        raise WrongApp(f"RMS does not know this consumer's API key: {_problem_detail(response)}")
    if not response.is_success:
        return None
    try:
        name = response.json()["name"]
    except (ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


def _trace_headers() -> dict[str, str]:
    """The W3C headers of the ack span the consumer made current (none outside one)."""
    trace = tracing.current_context()
    return {} if trace is None else trace.headers()


def _problem_detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail") or response.text[:200])
    except ValueError:
        return response.text[:200]
