"""The Go module from dist/'s module-proxy layout, in a fresh module outside the repository:
the README's install lines run as written (the file proxy alone: every module comes from
dist/, checked against the release's go.sum lines), and the module's quickstart run against a
live RMS; a layout whose module zip was altered is refused."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.system.clients.fixtures import LiveRms, require_tool
from tests.system.release.conftest import DIST, ROOT, VERSION, artifact, clean_env, create_app, run

MODULE = "github.com/rms-dev/rms/clients/go"
README = ROOT / "clients" / "go" / "README.md"


def readme_install() -> tuple[dict[str, str], list[str], list[str]]:
    """The install block's exported variables (dist/ where it says /path/to/dist), the files
    its ``cat ... >> go.sum`` lines append, and its ``go get`` line."""
    (block,) = re.findall(r"## Install\n.*?```sh\n(.*?)```", README.read_text(), re.DOTALL)
    exports = dict(re.findall(r"^export (\w+)=(\S+)$", block, re.MULTILINE))
    sums = re.findall(r"^cat (\S+) >> go\.sum$", block, re.MULTILINE)
    (get,) = [line.split() for line in block.splitlines() if line.startswith("go get")]
    return ({name: value.replace("/path/to/dist", str(DIST)) for name, value in exports.items()},
            [path.replace("/path/to/dist", str(DIST)) for path in sums], get)


def _project(tmp_path: Path, exports: dict[str, str], sums: list[str]) -> tuple[Path, dict[str, str]]:
    """A new module with the README's go.sum lines, and the environment of the README's lines."""
    go = require_tool("go")
    project = tmp_path / "orders"
    project.mkdir()
    env = clean_env(tmp_path, **exports, GOMODCACHE=str(tmp_path / "gomodcache"),
                    GOFLAGS="-modcacherw", GOCACHE=str(Path.home() / ".cache" / "go-build"),
                    GOTOOLCHAIN="local")
    run([go, "mod", "init", "example.com/orders"], project, env)
    with (project / "go.sum").open("a") as lines:
        for path in sums:
            lines.write(Path(path).read_text())
    return project, env


def test_the_readme_asks_the_file_proxy_alone() -> None:
    exports, sums, _ = readme_install()
    assert exports["GOPROXY"] == (DIST / "goproxy").as_uri()  # no fallback to another proxy
    assert sums == [str(DIST / "goproxy" / f"rms-client-go-{VERSION}.go.sum")]


@pytest.mark.timeout(300)
def test_an_altered_module_in_the_layout_is_refused(tmp_path: Path) -> None:
    artifact(f"goproxy/{MODULE}/@v/v{VERSION}.zip")
    exports, sums, get = readme_install()
    altered = tmp_path / "goproxy"
    shutil.copytree(DIST / "goproxy", altered)
    with zipfile.ZipFile(altered / MODULE / "@v" / f"v{VERSION}.zip", "a") as archive:
        archive.writestr(f"{MODULE}@v{VERSION}/squatter.go", "package rms\n")
    exports["GOPROXY"] = altered.as_uri()
    project, env = _project(tmp_path, exports, sums)
    result = subprocess.run([require_tool("go"), *get[1:]], cwd=project, env=env,
                            capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode != 0 and "checksum mismatch" in result.stderr, result.stderr


@pytest.mark.timeout(900)
def test_the_module_resolves_from_the_proxy_layout_and_runs_against_a_live_rms(
        tmp_path: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    artifact(f"goproxy/{MODULE}/@v/v{VERSION}.zip")
    go = require_tool("go")
    exports, sums, get = readme_install()
    project, env = _project(tmp_path, exports, sums)
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
