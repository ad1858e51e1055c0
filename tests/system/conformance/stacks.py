"""The producer stacks of the check-back conformance matrix: how each is built (once, cached
under RMS's cache folder by a hash of its sources) and started, and which framings it can
produce. Toolchains (Node.js, Go, Java, Maven) are expected on the machine: a missing one is a
clear failure, never a skip."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rms.devstack.kafka_broker.install import cache_dir

HERE = Path(__file__).resolve().parent
ALL_MODES = frozenset({"content-length", "chunked", "close", "continue", "connection-close"})
# the JDK server and the ASGI/aiohttp servers frame every answer themselves (a length or
# chunks) and send interim answers only on their own
FRAMED_ONLY = frozenset({"content-length", "chunked", "connection-close"})


class ToolMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class Stack:
    name: str
    command: list[str]
    modes: frozenset[str]
    verifier: str  # the library that checks RMS's signature


def _tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ToolMissing(f"the conformance matrix needs {name} (Debian: apt-get install "
                          f"{package})")
    return found


def _build_dir(kind: str, *sources: Path) -> Path:
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    return cache_dir() / "conformance" / f"{kind}-{digest}"


def _run(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def node_stack() -> Stack:
    node, npm = _tool("node", "nodejs"), _tool("npm", "npm")
    sources = [HERE / "node" / "server.js", HERE / "node" / "package.json"]
    build = _build_dir("node", *sources)
    if not (build / "node_modules" / "standardwebhooks").exists():
        build.mkdir(parents=True, exist_ok=True)
        for source in sources:
            shutil.copy(source, build / source.name)
        _run([npm, "install", "--no-audit", "--no-fund", "--silent"], build)
    return Stack("node-http", [node, str(build / "server.js")], ALL_MODES, "npm standardwebhooks")


def go_stack() -> Stack:
    go = _tool("go", "golang")
    sources = [HERE / "go" / "main.go", HERE / "go" / "go.mod", HERE / "go" / "go.sum"]
    binary = _build_dir("go", *sources) / "checkserver"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        _run([go, "build", "-o", str(binary), "."], HERE / "go")
    return Stack("go-net/http", [str(binary)], ALL_MODES,
                 "github.com/standard-webhooks/standard-webhooks/libraries/go")


def java_stack() -> Stack:
    java, javac, mvn = (_tool("java", "openjdk-17-jdk-headless"),
                        _tool("javac", "openjdk-17-jdk-headless"), _tool("mvn", "maven"))
    sources = [HERE / "java" / "CheckServer.java", HERE / "java" / "pom.xml"]
    build = _build_dir("java", *sources)
    classpath_file = build / "classpath.txt"
    if not (build / "classes" / "CheckServer.class").exists():
        build.mkdir(parents=True, exist_ok=True)
        _run([mvn, "-q", "-B", "dependency:build-classpath",
              f"-Dmdep.outputFile={classpath_file}"], HERE / "java")
        _run([javac, "-d", str(build / "classes"), "-cp", classpath_file.read_text().strip(),
              str(HERE / "java" / "CheckServer.java")], HERE / "java")
    classpath = f"{build / 'classes'}:{classpath_file.read_text().strip()}"
    return Stack("jdk-httpserver", [java, "-Xmx64m", "-cp", classpath, "CheckServer"],
                 FRAMED_ONLY, "Maven com.standardwebhooks:standardwebhooks")


def python_stacks() -> list[Stack]:
    module = [sys.executable, "-m", "tests.system.conformance.python_servers"]
    verifier = "PyPI standardwebhooks"
    return [Stack("python-http.server-1.1", [*module, "http.server-1.1"], ALL_MODES, verifier),
            Stack("python-http.server-1.0", [*module, "http.server-1.0"], ALL_MODES, verifier),
            Stack("aiohttp", [*module, "aiohttp"], FRAMED_ONLY | {"continue"}, verifier),
            Stack("uvicorn", [*module, "uvicorn"], FRAMED_ONLY, verifier)]


def every_stack() -> list[Stack]:
    return [*python_stacks(), node_stack(), go_stack(), java_stack()]
