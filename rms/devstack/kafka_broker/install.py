"""Resolving the pinned Apache Kafka with Maven into the per-user cache.

The first start runs ``mvn dependency:build-classpath`` on ``pom.xml`` beside this file, which
downloads Kafka and its dependencies into the user's Maven repository (``~/.m2``) and writes the
class path into RMS's cache folder. Later starts read that file and touch no network.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
_INSTALL_HINT = "install Java 17+ and Maven (Debian: apt-get install openjdk-17-jre-headless maven)"


class KafkaUnavailable(RuntimeError):
    """The embedded Kafka broker cannot be started on this machine."""


def kafka_version() -> str:
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", POM.read_text())
    if match is None:  # pragma: no cover - the pom is part of the package
        raise KafkaUnavailable(f"{POM} names no kafka.version")
    return match.group(1)


def cache_dir() -> Path:
    """``$RMS_CACHE_DIR``, else ``$XDG_CACHE_HOME/rms``, else ``~/.cache/rms``."""
    if explicit := os.environ.get("RMS_CACHE_DIR"):
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rms"


def java_binary() -> str:
    java = shutil.which("java", path=_java_path())
    if java is None:
        raise KafkaUnavailable(f"the embedded Kafka broker needs Java: {_INSTALL_HINT}")
    return java


def kafka_classpath() -> str:
    """The broker's class path, resolved once with Maven and cached afterwards."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    cached = cache_dir() / f"kafka-{kafka_version()}-{digest}" / "classpath.txt"
    if cached.exists():
        classpath = cached.read_text().strip()
        if all(Path(jar).exists() for jar in classpath.split(os.pathsep)):
            return classpath
    return _resolve(cached)


def _resolve(target: Path) -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable(f"resolving Apache Kafka {kafka_version()} needs Maven: {_INSTALL_HINT}")
    java_binary()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    result = subprocess.run(
        [mvn, "-B", "-q", "-f", str(POM), "dependency:build-classpath",
         f"-Dmdep.outputFile={partial}"],
        capture_output=True, text=True, check=False, timeout=900,
    )
    if result.returncode != 0 or not partial.exists():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise KafkaUnavailable(f"mvn could not resolve Apache Kafka {kafka_version()}:\n{tail}")
    partial.replace(target)
    return target.read_text().strip()


def _java_path() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.pathsep.join([str(Path(home) / "bin"), os.environ.get("PATH", "")])
    return None
