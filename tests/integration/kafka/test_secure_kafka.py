"""RMS against a Kafka cluster as production runs one: a SASL_SSL listener (SCRAM users, a
certificate authority made at test time), a mutual-TLS listener, and StandardAuthorizer ACLs
set with the operations guide's own ``kafka-acls.sh`` commands. One broker for the module."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError

from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka, kafka_classpath
from rms.devstack.kafka_broker.install import java_binary
from rms.kafka.publisher import KafkaPublisher
from rms.kafka.records import OutgoingRecord, header
from rms.kafka.security import login_problem
from rms_client.consumer import AckResult, TopicAcker
from rms_client.kafka_security import KafkaSecurity
from tests.conftest import ADMIN_TOKEN
from tests.support import Api, eventually, read_topic
from tests.tls_support import Authority, Issued

OPERATIONS = Path(__file__).parents[3] / "docs" / "operations" / "security.md"
ACL_HEADING = "### The ACLs RMS needs"
ACK_TOPIC, ACK_GROUP = "rms.acks", "rms-ack-consumer"
PASSWORDS = {"admin": "admin-secret", "rms": "rms-secret", "points-service": "points-secret"}
pytestmark = pytest.mark.timeout(180)


@dataclass
class SecureKafka:
    broker: EmbeddedKafka
    authority: Authority
    stranger_ca: Path  # a CA that signed nothing the broker shows
    rms_cert: Issued  # CN=rms, for the mutual-TLS listener

    @property
    def servers(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def mtls_servers(self) -> str:
        return self.broker.listener_servers("MTLS")

    def scram(self, user: str, password: str | None = None,
              mechanism: str = "SCRAM-SHA-512") -> KafkaSecurity:
        return KafkaSecurity("SASL_SSL", ssl_cafile=str(self.authority.cafile),
                             sasl_mechanism=mechanism,  # type: ignore[arg-type]
                             sasl_username=user, sasl_password=password or PASSWORDS[user])

    def options(self, user: str) -> dict[str, object]:
        return self.scram(user).client_options()

    def environment(self, user: str, password_file: Path) -> dict[str, str]:
        """``RMS_KAFKA_*`` as an operator sets them, the password in a file."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
        return base | {
            "RMS_KAFKA_BOOTSTRAP_SERVERS": self.servers,
            "RMS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "RMS_KAFKA_SSL_CAFILE": str(self.authority.cafile),
            "RMS_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "RMS_KAFKA_SASL_USERNAME": user,
            "RMS_KAFKA_SASL_PASSWORD_FILE": str(password_file),
        }


def _broker_settings(folder: Path, server: Issued, cafile: Path) -> dict[str, str]:
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # the plaintext loopback listeners between broker and controller run as ANONYMOUS
        "super.users": "User:ANONYMOUS;User:admin",
        "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.client.scram-sha-512.sasl.jaas.config": scram,
        "listener.name.client.scram-sha-256.sasl.jaas.config": scram,
        "listener.name.client.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_plainuser="plain-secret";',
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.bundle),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(cafile),
        "listener.name.mtls.ssl.client.auth": "required",
        # a certificate CN=rms is the principal User:rms, as the SCRAM user rms is
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
    }


def _scram_users() -> list[str]:
    users = [f"SCRAM-SHA-512=[name={name},password={password}]" for name, password in PASSWORDS.items()]
    users.append("SCRAM-SHA-256=[name=rms256,password=rms256-secret]")
    return [arg for user in users for arg in ("--add-scram", user)]


def documented_acl_commands() -> list[list[str]]:
    """The ``kafka-acls.sh`` commands of the operations guide's ACL section, as arguments."""
    text = OPERATIONS.read_text()
    block = text[text.index(ACL_HEADING):].split("```sh\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    commands = [shlex.split(line) for line in joined.splitlines()
                if line.strip().startswith("kafka-acls.sh")]
    assert len(commands) >= 4, "the guide lists RMS's and a consumer's ACLs"
    return [command[1:] for command in commands]


def _apply_acls(broker: EmbeddedKafka, folder: Path, cafile: Path) -> None:
    admin = folder / "admin.properties"
    admin.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{PASSWORDS["admin"]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={cafile}\n")
    replaced = {"--bootstrap-server": broker.bootstrap_servers, "--command-config": str(admin)}
    runs = []
    for args in documented_acl_commands():
        args = [replaced.get(before, arg) for before, arg in zip(["", *args], args, strict=False)]
        runs.append(subprocess.Popen(
            [java_binary(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
             kafka_classpath(), "org.apache.kafka.tools.AclCommand", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for run in runs:
        output, _ = run.communicate(timeout=90)
        assert run.returncode == 0, output


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    folder = tmp_path_factory.mktemp("secure-kafka")
    authority = Authority(folder / "ca")
    stranger = Authority(folder / "stranger", name="Some other CA")
    broker = EmbeddedKafka(folder / "broker", auto_create_topics=False, client_protocol="SASL_SSL",
                           extra_listeners={"MTLS": "SSL"}, format_args=_scram_users(),
                           extra_settings=_broker_settings(folder, authority.server("kafka"),
                                                           authority.cafile))
    broker.start()
    try:
        _apply_acls(broker, folder, authority.cafile)
        yield SecureKafka(broker, authority, stranger.cafile, authority.client("rms"))
    finally:
        broker.stop()


def _rms(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rms.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def _password_file(tmp_path: Path, password: str) -> Path:
    path = tmp_path / "kafka-password"
    path.write_text(password + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
async def secure_api(settings: Settings, secure_kafka: SecureKafka, tmp_path: Path,
                     unique: str) -> AsyncIterator[Api]:
    """The API as RMS's principal over SASL_SSL, its topics made by ``rms topics create`` as the
    cluster's admin."""
    from message_service.app import create_app

    created = _rms(["topics", "create", "--no-apps", f"orders.{unique}"],
                   secure_kafka.environment("admin", _password_file(tmp_path, PASSWORDS["admin"]))
                   | {"RMS_ACK_TOPIC": ACK_TOPIC}, tmp_path)
    assert created.returncode == 0, created.stderr
    assert f"orders.{unique}" in created.stdout
    security = secure_kafka.scram("rms")
    local = settings.model_copy(update={
        "kafka_bootstrap_servers": secure_kafka.servers,
        "kafka_security_protocol": security.security_protocol,
        "kafka_ssl_cafile": security.ssl_cafile,
        "kafka_sasl_mechanism": security.sasl_mechanism,
        "kafka_sasl_username": "rms", "kafka_sasl_password": security.sasl_password,
        "ack_topic": ACK_TOPIC, "ack_consumer_group": ACK_GROUP,
        "kafka_publish_timeout_seconds": 5.0, "publish_retry_seconds": 0.5})
    app = create_app(local)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="http://rms.test") as client):
        yield Api(client, ADMIN_TOKEN, local)


async def test_the_walkthrough_runs_over_sasl_ssl_with_acls(
        secure_api: Api, secure_kafka: SecureKafka, topic: str) -> None:
    api = secure_api
    orders = await api.create_app("orders", produce=["orders.*"], consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await api.prepared_id(orders, topic, payload={"order": 7})
    confirmed = await api.post(orders, f"/v1/messages/{message_id}/confirm")
    assert confirmed.json()["state"] == "sent"

    # the consumer app's principal reads the record over SASL_SSL ...
    (record,) = await read_topic(secure_kafka.servers, topic, expect=1,
                                 options=secure_kafka.options("points-service"))
    assert header(list(record.headers), "rms-message-id") == message_id
    assert orjson.loads(record.value) == {"order": 7}

    # ... and acks it on the ack topic, signed, through the SDK with the same options
    acker = TopicAcker(secure_kafka.servers, "points", signing_secret=points.signing_secret,
                       ack_topic=ACK_TOPIC, security=secure_kafka.scram("points-service"))
    try:
        created_at = header(list(record.headers), "rms-created-at")
        assert (await acker.ack(message_id, created_at)).result is AckResult.ACKED
    finally:
        await acker.close()

    async def done() -> bool:
        found = await api.client.get(f"/v1/messages/{message_id}", headers=orders.headers)
        return bool(found.json()["state"] == "done")

    await eventually(done, timeout=30, interval=0.2)


async def _write(secure_kafka: SecureKafka, user: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=secure_kafka.servers, enable_idempotence=False,
                                request_timeout_ms=5000, **secure_kafka.options(user))
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"{}")
    finally:
        await producer.stop()


async def test_each_principal_writes_only_what_its_acls_allow(
        secure_api: Api, secure_kafka: SecureKafka, topic: str) -> None:
    # the topic exists (secure_api made it); the consumer's principal may not write to it
    with pytest.raises(TopicAuthorizationFailedError):
        await _write(secure_kafka, "points-service", topic)
    # RMS's principal may not write the ack topic: no app can forge acks through RMS's account
    with pytest.raises(TopicAuthorizationFailedError):
        await _write(secure_kafka, "rms", ACK_TOPIC)
    # RMS publishing outside its ACLs: the publish fails as not-authorized, the message stays
    orders = await secure_api.create_app("orders", produce=["*"], consume=["none"])
    message_id = await secure_api.prepared_id(orders, "billing.forbidden")
    confirmed = (await secure_api.post(orders, f"/v1/messages/{message_id}/confirm")).json()
    # answered as what happened: no delivery counted, the refusal named
    assert (confirmed["state"], confirmed["delivery_count"], confirmed["publish_failure"]) \
        == ("sent", 0, "not-authorized")
    events = (await secure_api.client.get(f"/v1/messages/{message_id}/events",
                                          headers=orders.headers)).json()["events"]
    failed = [e for e in events if e["event"] == "publish-failed"]
    assert failed and "not-authorized" in orjson.dumps(failed[0]).decode()


async def test_logins_each_mechanism_and_refuses_strangers(secure_kafka: SecureKafka) -> None:
    servers = secure_kafka.servers
    assert await login_problem(servers, secure_kafka.scram("rms")) is None
    assert await login_problem(servers, secure_kafka.scram(
        "rms256", "rms256-secret", "SCRAM-SHA-256")) is None
    assert await login_problem(servers, secure_kafka.scram("plainuser", "plain-secret",
                                                           "PLAIN")) is None
    unknown = await login_problem(servers, secure_kafka.scram("stranger", "guess"))
    assert unknown is not None and "refused the login" in unknown
    untrusted = KafkaSecurity("SASL_SSL", ssl_cafile=str(secure_kafka.stranger_ca),
                              sasl_mechanism="SCRAM-SHA-512", sasl_username="rms",
                              sasl_password=PASSWORDS["rms"])
    problem = await login_problem(servers, untrusted)
    assert problem is not None and "certificate is not trusted" in problem
    # an unreachable cluster is no configuration error: the clients keep trying
    assert await login_problem("127.0.0.1:1", secure_kafka.scram("rms")) is None


async def test_mutual_tls_publishes_as_the_certificates_principal(
        secure_kafka: SecureKafka, settings: Settings, tmp_path: Path, unique: str) -> None:
    topic = f"orders.mtls.{unique}"
    admin = secure_kafka.environment("admin", _password_file(tmp_path, PASSWORDS["admin"]))
    assert _rms(["topics", "create", "--no-apps", topic], admin, tmp_path).returncode == 0
    mutual = settings.model_copy(update={
        "kafka_bootstrap_servers": secure_kafka.mtls_servers, "kafka_security_protocol": "SSL",
        "kafka_ssl_cafile": str(secure_kafka.authority.cafile),
        "kafka_ssl_certfile": str(secure_kafka.rms_cert.cert),
        "kafka_ssl_keyfile": str(secure_kafka.rms_cert.key)})
    publisher = KafkaPublisher(mutual)
    await publisher.start(wait_seconds=10)
    try:
        assert publisher.ready
        await publisher.publish(OutgoingRecord(topic, b"k", b'{"n": 1}', []))
        # CN=rms maps to User:rms, whose ACLs do not cover the ack topic
        failures = await publisher.publish_many([OutgoingRecord(ACK_TOPIC, b"k", b"{}", [])])
        assert failures[0] is not None and failures[0].reason == "not-authorized"
    finally:
        await publisher.stop()
    (record,) = await read_topic(secure_kafka.servers, topic, expect=1,
                                 options=secure_kafka.options("admin"))
    assert record.value == b'{"n": 1}'
    without = KafkaSecurity("SSL", ssl_cafile=str(secure_kafka.authority.cafile))
    problem = await login_problem(secure_kafka.mtls_servers, without)
    assert problem is not None and "refused the client certificate" in problem, problem


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["confirm-worker"],
                                     ["recovery-worker"]])
def test_a_refused_login_stops_start_up_with_one_line(
        secure_kafka: SecureKafka, tmp_path: Path, database_url: str, command: list[str]) -> None:
    env = secure_kafka.environment("rms", _password_file(tmp_path, "wrong-password")) | {
        "RMS_DATABASE_URL": database_url, "RMS_ADMIN_TOKEN": ADMIN_TOKEN}
    _assert_one_line(_rms(command, env, tmp_path), 2, "refused the login")
    untrusted = env | {"RMS_KAFKA_SASL_PASSWORD_FILE": str(_password_file(tmp_path, "rms-secret")),
                       "RMS_KAFKA_SSL_CAFILE": str(secure_kafka.stranger_ca)}
    _assert_one_line(_rms(command, untrusted, tmp_path), 2, "certificate is not trusted")


def test_rms_topics_refuses_a_wrong_password_or_an_untrusted_ca_with_one_line(
        secure_kafka: SecureKafka, tmp_path: Path) -> None:
    env = secure_kafka.environment("admin", _password_file(tmp_path, "wrong-password"))
    _assert_one_line(_rms(["topics", "create", "--no-apps"], env, tmp_path), 1,
                     "refused the login")
    env["RMS_KAFKA_SSL_CAFILE"] = str(secure_kafka.stranger_ca)
    _assert_one_line(_rms(["topics", "create", "--no-apps"], env, tmp_path), 1,
                     "certificate is not trusted")


def _assert_one_line(result: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == code, output
    assert len(output.splitlines()) == 1, output
    assert words in output
    assert "Traceback" not in output and "wrong-password" not in output


def test_the_password_never_shows(secure_kafka: SecureKafka) -> None:
    security = secure_kafka.scram("rms")
    assert PASSWORDS["rms"] not in repr(security)
    settings = Settings(admin_token=ADMIN_TOKEN, kafka_sasl_password=PASSWORDS["rms"])
    assert PASSWORDS["rms"] not in repr(settings) and PASSWORDS["rms"] not in str(
        settings.model_dump())

