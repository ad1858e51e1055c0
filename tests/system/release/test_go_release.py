"""The Go module from dist/'s module-proxy layout, in a fresh module outside the repository:
the README's install lines run as written (the file proxy first, then this machine's own
proxy for third-party modules), and the module's quickstart run against a live RMS."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.system.clients.fixtures import LiveRms, require_tool
from tests.system.release.conftest import DIST, ROOT, VERSION, artifact, clean_env, create_app, run

MODULE = "github.com/rms-dev/rms/clients/go"
README = ROOT / "clients" / "go" / "README.md"


def readme_install() -> tuple[dict[str, str], list[str]]:
    """The install block's exported variables (dist/ where it says /path/to/dist) and its
    ``go get`` line."""
    (block,) = re.findall(r"## Install\n.*?```sh\n(.*?)```", README.read_text(), re.DOTALL)
    exports = dict(re.findall(r"^export (\w+)=(\S+)$", block, re.MULTILINE))
    (get,) = [line.split() for line in block.splitlines() if line.startswith("go get")]
    return {name: value.replace("/path/to/dist", str(DIST)) for name, value in exports.items()}, get


@pytest.mark.timeout(900)
def test_the_module_resolves_from_the_proxy_layout_and_runs_against_a_live_rms(
        tmp_path: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    artifact(f"goproxy/{MODULE}/@v/v{VERSION}.zip")
    go = require_tool("go")
    exports, get = readme_install()
    host_proxy = subprocess.run([go, "env", "GOPROXY"], capture_output=True, text=True,
                                check=True).stdout.strip()
    # the README's public proxy stands for whichever proxy this machine reaches
    exports["GOPROXY"] = exports["GOPROXY"].replace("https://proxy.golang.org,direct", host_proxy)
    project = tmp_path / "orders"
    project.mkdir()
    env = clean_env(tmp_path, **exports, GOMODCACHE=str(tmp_path / "gomodcache"),
                    GOFLAGS="-modcacherw", GOCACHE=str(Path.home() / ".cache" / "go-build"),
                    GOTOOLCHAIN="local")
    run([go, "mod", "init", "example.com/orders"], project, env)
    run([go, *get[1:]], project, env)
    assert f"{MODULE} v{VERSION}" in (project / "go.mod").read_text()
    shutil.copyfile(tmp_path / "gomodcache" / f"{MODULE}@v{VERSION}" / "examples" / "quickstart" /
                    "main.go", project / "main.go")
    topic = f"go.{client_env['RMS_TEST_PREFIX']}"
    app = create_app(live_rms.url, client_env["RMS_ADMIN_TOKEN"], f"{client_env['RMS_TEST_PREFIX']}-gomod",
                     produce_topics=[topic], check_url_prefixes=["http://127.0.0.1:9/"])
    out = run([go, "run", "."], project, {
        **env, "RMS_URL": live_rms.url, "RMS_API_KEY": app["api_key"],
        "RMS_TOPIC": topic, "RMS_CHECK_URL": "http://127.0.0.1:9/rms/check"}, timeout=600)
    assert re.fullmatch(r"prepared (\S+): pending-send\nconfirmed \1: sent, delivery 1\n"
                        r"cancel refused: 409, current state sent\n", out), out
