"""The Python artifacts as a user installs them ("Installing a release" in docs/getting-started.md,
the client's README): the documented lines run as written, in a fresh virtual environment
outside the repository, then used against a live RMS. A same-version squatter with a build tag
(which pip ranks above dist/'s wheel), served beside dist/ as an extra index and as extra find
links, is installed by none of the documented lines, each run on its own."""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

from rms.devstack.embedded import EmbeddedPostgres
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.conftest import ADMIN_TOKEN
from tests.system.clients.fixtures import LiveRms
from tests.system.release.conftest import (
    DIST,
    ROOT,
    VERSION,
    artifact,
    clean_env,
    free_port,
    fresh_database,
    run,
    wait_ready,
)
from tests.system.release.walkthrough import walkthrough

LIVE_CLIENT = Path(__file__).resolve().parents[1] / "clients" / "python" / "live_client.py"
GUIDES = {"rms-server": ROOT / "docs" / "getting-started.md",
          "rms-client": ROOT / "clients" / "python" / "README.md"}


def documented_lines(distribution: str) -> list[list[str]]:
    """The ``pip install`` lines of the guide's install block for ``distribution`` that read
    dist/, with dist/ where they name it."""
    blocks = re.findall(r"```(?:sh|bash)\n(.*?)```", GUIDES[distribution].read_text(), re.DOTALL)
    lines = [shlex.split(line, comments=True) for block in blocks for line in block.splitlines()
             if re.match(r"pip( --[\w-]+)* install ", line) and "dist/" in line]
    assert len(lines) == 2, GUIDES[distribution]  # the third-party line and the hashed one
    return [[part.replace("dist/", f"{DIST}/") for part in line] for line in lines]


def install(root: Path, distribution: str, *extras: str, env: dict[str, str] | None = None,
            lines: list[list[str]] | None = None) -> Path:
    """The guide's lines in a new virtual environment (``extras``: more third-party packages on
    the line that reads the index). Returns the environment's python."""
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    env = env or clean_env(root)
    for line in documented_lines(distribution) if lines is None else lines:
        assert line[0] == "pip", line
        more = list(extras) if "--no-index" not in line else []
        run([str(python), "-m", *line, "--quiet", *more], root, env)
    return python


def test_the_client_wheel_produces_and_answers_check_backs_against_a_live_rms(
        tmp_path: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    artifact(f"rms_client-{VERSION}-py3-none-any.whl")
    python = install(tmp_path, "rms-client", "asyncpg", "uvicorn")
    where = run([str(python), "-c", "import rms_client.version as v; print(v.__file__, v.USER_AGENT)"],
                tmp_path, clean_env(tmp_path)).split()
    assert where == [str(tmp_path / "venv" / "lib" / f"python{_python_version(python)}" /
                         "site-packages" / "rms_client" / "version.py"), f"rms-client-python/{VERSION}"]
    script = shutil.copyfile(LIVE_CLIENT, tmp_path / "producer.py")
    env = {**clean_env(tmp_path), **{k: v for k, v in client_env.items() if k.startswith("RMS_")}}
    run([str(python), str(script)], tmp_path, env, timeout=240)


def test_the_server_wheel_migrates_serves_and_walks_through_the_readme(
        tmp_path: Path, postgres: EmbeddedPostgres, kafka: EmbeddedKafka) -> None:
    artifact(f"rms_server-{VERSION}-py3-none-any.whl")
    python = install(tmp_path, "rms-server")
    rms = str(python.parent / "rms")
    topic = f"orders.paid.{tmp_path.name[-8:]}"
    port = free_port()
    env = clean_env(tmp_path, RMS_DATABASE_URL=fresh_database(postgres),
                    RMS_KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
                    RMS_ADMIN_TOKEN=ADMIN_TOKEN, RMS_ALLOW_PRIVATE_CALLBACKS="true",
                    RMS_ACK_TOPIC=f"rms.acks.{tmp_path.name[-8:]}")
    assert run([rms, "--version"], tmp_path, env).strip() == f"rms {VERSION}"
    run([rms, "migrate"], tmp_path, env)
    run([rms, "topics", "create", topic], tmp_path, env)
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen([rms, "serve", "--port", str(port)], cwd=tmp_path, env=env,
                                  stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, log)
        walkthrough(f"http://127.0.0.1:{port}", ADMIN_TOKEN, topic)
    finally:
        server.terminate()
        server.wait(30)


def squatter(wheel: Path, version: str) -> None:
    """A wheel of RMS's name (``rms_client-...``, ``rms_server-...``) whose package (``rms_client``,
    ``rms``) says it is not RMS's; its .pth file would run code at every start of Python."""
    distribution = wheel.name.split("-")[0]
    package = {"rms_client": "rms_client", "rms_server": "rms"}[distribution]
    info = f"{distribution}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "SQUATTER = True\n")
        archive.writestr(f"{distribution}_squatter.pth", "import sys\n")
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\n"
                         f"Name: {distribution.replace('_', '-')}\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                         "Root-Is-Purelib: true\nBuild: 1\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")


def squatted_index(root: Path) -> Path:
    """A PEP 503 simple index (and ``root/links``, a folder of the same wheels) offering
    rms-server and rms-client at the release's version with a build tag, and at 9.9.9."""
    index, links = root / "index", root / "links"
    links.mkdir()
    for name in ("rms-server", "rms-client"):
        project = index / name
        project.mkdir(parents=True)
        stem = name.replace("-", "_")
        wheels = {f"{stem}-{VERSION}-1-py3-none-any.whl": VERSION,
                  f"{stem}-9.9.9-py3-none-any.whl": "9.9.9"}
        for wheel, version in wheels.items():
            squatter(project / wheel, version)
            shutil.copyfile(project / wheel, links / wheel)
        (project / "index.html").write_text("".join(f'<a href="{w}">{w}</a>\n' for w in wheels))
    (index / "index.html").write_text('<a href="rms-server/">rms-server</a>\n'
                                      '<a href="rms-client/">rms-client</a>\n')
    return index


def _squatter_seen(python: Path, root: Path, env: dict[str, str]) -> list[str]:
    """The RMS distributions of the environment whose files are a squatter's."""
    listed = run([str(python), "-c", "import importlib.util as u\n"
                  "for n in ('rms_client', 'rms'):\n"
                  "    s = u.find_spec(n)\n"
                  "    print(n, 'none' if s is None else open(s.origin).read().startswith('SQUATTER'))"],
                 root, env)
    found = [line.split()[0] for line in listed.splitlines() if line.split()[1] == "True"]
    pth = list((root / "venv").rglob("*_squatter.pth"))
    return found + [path.name for path in pth]


@pytest.mark.parametrize("distribution", ["rms-server", "rms-client"])
def test_no_documented_line_installs_a_squatter_of_the_same_version_with_a_build_tag(
        tmp_path: Path, distribution: str) -> None:
    artifact(f"rms_server-{VERSION}-py3-none-any.whl")
    index = squatted_index(tmp_path)
    env = clean_env(tmp_path, PIP_EXTRA_INDEX_URL=index.as_uri(),
                    PIP_FIND_LINKS=str(tmp_path / "links"))
    third_party, own_wheels = documented_lines(distribution)
    assert "--no-index" in own_wheels and "--no-index" not in third_party
    # the line of RMS's own wheels alone, in an environment of its own
    alone = tmp_path / "own-wheels"
    python = install(alone, distribution, env=env, lines=[own_wheels])
    assert _squatter_seen(python, alone, env) == [], shlex.join(own_wheels)
    # the third-party line alone, then the line of RMS's own wheels after it in the same
    # environment: the two lines together, as the guide runs them
    together = tmp_path / "together"
    python = install(together, distribution, env=env, lines=[third_party])
    assert _squatter_seen(python, together, env) == [], shlex.join(third_party)
    run([str(python), "-m", *own_wheels, "--quiet"], together, env)
    assert _squatter_seen(python, together, env) == []
    own = "rms" if distribution == "rms-server" else "rms_client"
    assert run([str(python), "-c", f"import {own}; print({own}.__file__)"], together,
               env).startswith(str(together / "venv"))
    # the index does offer the squatter: a plain install by name takes it
    plain = tmp_path / "plain"
    python = install(plain, distribution, env=env, lines=[["pip", "install", "--no-deps",
                                                           f"{distribution}=={VERSION}"]])
    assert _squatter_seen(python, plain, env)


def test_the_install_files_pin_rms_own_wheels_by_hash_and_name_none_on_the_index() -> None:
    for distribution, own in (("rms-server", {"rms-server", "rms-client"}),
                              ("rms-client", {"rms-client"})):
        hashed = artifact(f"{distribution}-{VERSION}-requirements.txt").read_text()
        pinned = dict(re.findall(r"^(rms-\w+)==\S+ --hash=sha256:([0-9a-f]{64})$", hashed, re.M))
        assert set(pinned) == own
        for name, digest in pinned.items():
            wheel = DIST / f"{name.replace('-', '_')}-{VERSION}-py3-none-any.whl"
            assert hashlib.sha256(wheel.read_bytes()).hexdigest() == digest
        dependencies = artifact(f"{distribution}-{VERSION}-dependencies.txt").read_text()
        assert "rms" not in re.sub(r"#.*", "", dependencies).lower().replace("rms-", "rms")
    constraints = artifact(f"rms-server-{VERSION}-constraints.txt").read_text()
    assert constraints == (ROOT / "release" / "constraints.txt").read_text()
    requires = zipfile.ZipFile(DIST / f"rms_server-{VERSION}-py3-none-any.whl").read(
        f"rms_server-{VERSION}.dist-info/METADATA")
    assert f"Requires-Dist: rms-client=={VERSION}".encode() in requires


def _python_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sys; print(f'{sys.version_info[0]}."
                           "{sys.version_info[1]}')"], capture_output=True, text=True,
                          check=True).stdout.strip()


pytestmark = pytest.mark.timeout(900)
