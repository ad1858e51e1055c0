"""The Java library from dist/'s Maven repository, in fresh Maven projects outside the
repository (Debian's Maven, a local repository of their own): a producer-only service, whose
class path holds no kafka-clients, produces with a check-back handler against a live RMS; a
second service that also declares kafka-clients consumes that message and acknowledges it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.system.clients.fixtures import LiveRms, require_tool
from tests.system.release.conftest import (
    DIST,
    ROOT,
    VERSION,
    artifact,
    clean_env,
    create_app,
    free_port,
    run,
)

README = ROOT / "clients" / "java" / "README.md"
SOURCES = Path(__file__).parent / "java"
# third-party artifacts are kept between runs; RMS's own are always taken from dist/
LOCAL_REPOSITORY = Path.home() / ".cache" / "rms" / "release" / "m2"
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  {repositories}
  <dependencies>{dependencies}</dependencies>
  <build><plugins>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId>
      <version>3.13.0</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId>
      <version>3.8.1</version></plugin>
  </plugins></build>
</project>
"""


def readme_snippets() -> list[str]:
    """The install section's XML: the repository, the library, kafka-clients."""
    section = README.read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    snippets = re.findall(r"```xml\n(.*?)```", section, re.DOTALL)
    return [snippet.replace("file:///path/to/dist/maven", (DIST / "maven").as_uri())
            for snippet in snippets]


def project(root: Path, name: str, main: str, consumes: bool) -> tuple[Path, list[str]]:
    """A Maven project of the README's snippets and one class; built, with its class path."""
    repositories, library, kafka = readme_snippets()
    folder = root / name
    (folder / "src" / "main" / "java").mkdir(parents=True)
    shutil.copyfile(SOURCES / f"{main}.java", folder / "src" / "main" / "java" / f"{main}.java")
    dependencies = library + (kafka if consumes else "")
    (folder / "pom.xml").write_text(POM.format(name=name, repositories=repositories,
                                               dependencies=dependencies))
    mvn = require_tool("mvn")
    run([mvn, "-q", "-B", f"-Dmaven.repo.local={LOCAL_REPOSITORY}", "compile",
         "dependency:build-classpath", "-Dmdep.outputFile=cp.txt"], folder, clean_env(root))
    return folder, [str(folder / "target" / "classes"),
                    *(folder / "cp.txt").read_text().strip().split(":")]


@pytest.mark.timeout(900)
def test_a_producer_and_a_consumer_build_on_the_released_library_against_a_live_rms(
        tmp_path: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    artifact(f"maven/io/github/rms-dev/rms-client/{VERSION}/rms-client-{VERSION}.jar")
    shutil.rmtree(LOCAL_REPOSITORY / "io" / "github" / "rms-dev", ignore_errors=True)
    producer, producer_path = project(tmp_path, "orders", "Producer", consumes=False)
    assert not [jar for jar in producer_path if "kafka-clients" in jar], producer_path
    assert any(jar.endswith(f"rms-client-{VERSION}.jar") and str(LOCAL_REPOSITORY) in jar
               for jar in producer_path)
    consumer, consumer_path = project(tmp_path, "points", "Consumer", consumes=True)
    assert [jar for jar in consumer_path if "kafka-clients" in jar]

    prefix, port = client_env["RMS_TEST_PREFIX"], free_port()
    topic = f"java.{prefix}"
    admin = client_env["RMS_ADMIN_TOKEN"]
    orders = create_app(live_rms.url, admin, f"{prefix}-mvn-orders", produce_topics=[topic],
                        check_url_prefixes=[f"http://127.0.0.1:{port}/"])
    points = create_app(live_rms.url, admin, f"{prefix}-mvn-points", consume_topics=[topic])
    java = require_tool("java")
    env = {**clean_env(tmp_path), "RMS_URL": live_rms.url, "TOPIC": topic}
    sent = run([java, "-cp", ":".join(producer_path), "Producer"], producer, {
        **env, "RMS_API_KEY": orders["api_key"], "RMS_SIGNING_SECRET": orders["signing_secret"],
        "CHECK_PORT": str(port)}, timeout=120).split()
    assert sent[1] == "sent", sent
    acked = run([java, "-cp", ":".join(consumer_path), "Consumer"], consumer, {
        **env, "RMS_CONSUMER_KEY": points["api_key"],
        "RMS_KAFKA_BOOTSTRAP_SERVERS": live_rms.kafka_bootstrap}, timeout=120).split()
    assert acked == [sent[0], "ACKED"], acked

