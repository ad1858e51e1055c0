"""Resolving and starting the embedded Apache Kafka: a missing Java or Maven is one clear line
naming what to install; once resolved, the cached class path starts the broker with no Maven."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rms.devstack.kafka_broker import EmbeddedKafka, KafkaUnavailable, kafka_classpath
from rms.devstack.kafka_broker.install import cache_dir

HINT = "apt-get install openjdk-17-jre-headless maven"


def _path_with(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only ``tools`` (symlinks to the real ones)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found is not None, f"{tool} is needed for this test"
        (folder / tool).symlink_to(found)
    return str(folder)


def test_missing_java_names_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, "mvn"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("RMS_CACHE_DIR", str(tmp_path / "cache"))

    with pytest.raises(KafkaUnavailable) as raised:
        EmbeddedKafka(tmp_path / "kafka").start()

    assert str(raised.value).splitlines() == [
        f"the embedded Kafka broker needs Java: install Java 17+ and Maven (Debian: {HINT})"]


def test_missing_maven_names_what_to_install(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, "java"))
    monkeypatch.setenv("RMS_CACHE_DIR", str(tmp_path / "cache"))

    with pytest.raises(KafkaUnavailable) as raised:
        kafka_classpath()

    assert len(str(raised.value).splitlines()) == 1
    assert "needs Maven" in str(raised.value) and HINT in str(raised.value)


@pytest.mark.timeout(120)
def test_a_cached_class_path_starts_the_broker_without_maven(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kafka_classpath()  # resolved (and cached) with Maven as usual
    cached = list(cache_dir().glob("kafka-*/classpath.txt"))
    assert cached, f"no cached class path under {cache_dir()}"
    monkeypatch.setenv("PATH", _path_with(tmp_path, "java"))  # no mvn from here on

    broker = EmbeddedKafka(tmp_path / "kafka")
    broker.start()
    try:
        assert broker.nodes[0].running()
    finally:
        broker.stop()
    assert os.environ["PATH"] == str(tmp_path / "bin")
