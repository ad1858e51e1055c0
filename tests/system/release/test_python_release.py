"""The Python artifacts as a user installs them ("Installing a release" in docs/getting-started.md): RMS's
own distributions from dist/ only (``--no-index``), third-party ones from the index, in a fresh
virtual environment outside the repository; then used against a live RMS."""

from __future__ import annotations

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


def install(root: Path, distribution: str, *extras: str) -> Path:
    """The guide's two steps in a new virtual environment: RMS's distributions from dist/
    alone, then what they need from the index. Returns the environment's python."""
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    env = clean_env(root)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run([*pip, "--no-index", "--find-links", str(DIST), "--no-deps",
         f"{distribution}=={VERSION}", f"rms-client=={VERSION}"], root, env)
    run([*pip, "--find-links", str(DIST), f"{distribution}=={VERSION}", *extras], root, env)
    return python


def test_the_client_wheel_produces_and_answers_check_backs_against_a_live_rms(
        tmp_path: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    artifact(f"rms_client-{VERSION}-py3-none-any.whl")
    python = install(tmp_path, "rms-client", f"rms-client[sqlalchemy]=={VERSION}", "asyncpg",
                     "uvicorn")
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


def test_a_public_package_of_the_clients_name_cannot_take_its_place(tmp_path: Path) -> None:
    """An index that offers its own rms-client 0.2.0 and 9.9.9 (what a name squatter would
    publish): the two steps still install the client from dist/; a plain install from that
    index alone would take the squatter's, which is why the first step exists."""
    server_wheel = artifact(f"rms_server-{VERSION}-py3-none-any.whl")
    index = tmp_path / "index" / "rms-client"
    index.mkdir(parents=True)
    wheels = [f"rms_client-{version}-py3-none-any.whl" for version in (VERSION, "9.9.9")]
    for wheel, version in zip(wheels, (VERSION, "9.9.9"), strict=True):
        squatter(index / wheel, version)
    # a PEP 503 simple index: one page per project, linking its files
    (index / "index.html").write_text("".join(f'<a href="{wheel}">{wheel}</a>\n' for wheel in wheels))
    (index.parent / "index.html").write_text('<a href="rms-client/">rms-client</a>\n')
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    env = clean_env(tmp_path, PIP_EXTRA_INDEX_URL=(tmp_path / "index").as_uri())
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
    run([*pip, "--no-index", "--find-links", str(DIST), f"rms-server=={VERSION}",
         f"rms-client=={VERSION}"], tmp_path, env)
    run([*pip, "--find-links", str(DIST), f"rms-server=={VERSION}", f"rms-client=={VERSION}"],
        tmp_path, env)
    assert run([python, "-c", "import rms_client; print(hasattr(rms_client, 'SQUATTER'))"],
               tmp_path, env).strip() == "False"
    squatted = tmp_path / "squatted"
    venv.create(squatted, with_pip=True)
    run([str(squatted / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
         "--index-url", (tmp_path / "index").as_uri(), "rms-client"], tmp_path, env)
    assert run([str(squatted / "bin" / "python"), "-c",
                "import rms_client; print(hasattr(rms_client, 'SQUATTER'))"],
               tmp_path, env).strip() == "True"
    requires = zipfile.ZipFile(server_wheel).read(f"rms_server-{VERSION}.dist-info/METADATA")
    assert f"Requires-Dist: rms-client=={VERSION}".encode() in requires


def squatter(wheel: Path, version: str) -> None:
    """A wheel named rms-client whose package says it is not RMS's."""
    info = f"rms_client-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("rms_client/__init__.py", "SQUATTER = True\n")
        archive.writestr(f"{info}/METADATA",
                         f"Metadata-Version: 2.1\nName: rms-client\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                          "Root-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")


def _python_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sys; print(f'{sys.version_info[0]}."
                           "{sys.version_info[1]}')"], capture_output=True, text=True,
                          check=True).stdout.strip()


pytestmark = pytest.mark.timeout(900)
