"""The npm tarball in a fresh npm project outside the repository: installed as its README
says (by its path, its integrity checked against the release's), the README's example compiled
by ``tsc`` as written, and the quickstart the README points to, taken from the installed
package, run against a live RMS, importing the package by its name."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from tests.system.clients.fixtures import LiveRms, require_tool
from tests.system.release.conftest import ROOT, VERSION, artifact, clean_env, create_app, free_port, run

PACKAGE = ROOT / "clients" / "typescript"
TSCONFIG = {"compilerOptions": {"target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
                                "strict": True, "noEmit": True, "skipLibCheck": False},
            "include": ["example.ts"]}


def readme_example() -> str:
    (example,) = re.findall(r"```ts\n(.*?)```", (PACKAGE / "README.md").read_text(), re.DOTALL)
    return str(example)


def readme_install_lines() -> list[list[str]]:
    (block,) = re.findall(r"## Install\n.*?```sh\n(.*?)```", (PACKAGE / "README.md").read_text(),
                          re.DOTALL)
    return [line.split("#")[0].split() for line in block.splitlines() if "express" not in line]


def test_every_file_the_readme_links_to_is_in_the_tarball() -> None:
    tarball = artifact(f"rms-client-{VERSION}.tgz")
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    linked = re.findall(r"\]\(((?!https?:|#|\.\./)[^)#]+)\)", (PACKAGE / "README.md").read_text())
    assert linked
    assert [link for link in linked if f"package/{link}" not in names] == []


@pytest.mark.timeout(900)
def test_the_tarball_installs_compiles_the_readme_example_and_runs_against_a_live_rms(
        tmp_path: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    tarball = artifact(f"rms-client-{VERSION}.tgz")
    npm = require_tool("npm")
    project = tmp_path / "orders"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "orders", "private": True,
                                                      "type": "module"}))
    env = clean_env(tmp_path, npm_config_cache=str(Path.home() / ".npm"))
    lines = readme_install_lines()
    checks = [line for line in lines if line[:1] == ["grep"]]
    assert [line[:1] for line in lines if line not in checks] == [["npm"]] * (len(lines) - len(checks))
    for line in lines:
        if line in checks:
            continue
        assert line[:2] == ["npm", "install"], line
        command = [npm, *line[1:], "--no-audit", "--no-fund"]
        run([str(tarball) if part.endswith(f"rms-client-{VERSION}.tgz") else part
             for part in command], project, env)
    # the README's check: the lock file's integrity of the tarball is the release's
    assert len(checks) == 1 and checks[0][-1] == "package-lock.json"
    integrity = artifact(f"rms-client-{VERSION}.tgz.integrity").read_text().strip()
    lock = json.loads((project / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/rms-client"]["integrity"] == integrity
    installed = json.loads((project / "node_modules" / "rms-client" / "package.json").read_text())
    assert (installed["version"], installed["license"]) == (VERSION, "Apache-2.0")
    (project / "example.ts").write_text(readme_example())
    (project / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    run([str(project / "node_modules" / ".bin" / "tsc"), "-p", "."], project, env)
    quickstart(project, live_rms, client_env, env)


def quickstart(project: Path, live_rms: LiveRms, client_env: dict[str, str],
               env: dict[str, str]) -> None:
    port = free_port()
    topic = f"quick.{client_env['RMS_TEST_PREFIX']}"
    app = create_app(live_rms.url, client_env["RMS_ADMIN_TOKEN"], f"{client_env['RMS_TEST_PREFIX']}-npm",
                     produce_topics=[topic], check_url_prefixes=[f"http://127.0.0.1:{port}/"])
    script = shutil.copyfile(project / "node_modules" / "rms-client" / "examples" / "quickstart.mjs",
                             project / "quickstart.mjs")
    out = run([str(require_tool("node")), str(script)], project, {
        **env, "RMS_URL": live_rms.url, "DATABASE_URL": client_env["RMS_TEST_DATABASE_URL"],
        "RMS_API_KEY": app["api_key"], "RMS_SIGNING_SECRET": app["signing_secret"],
        "CHECK_PORT": str(port), "TOPIC": topic}, timeout=120)
    assert re.fullmatch(r"prepared order-\d+-paid: pending-send\n"
                        r"confirmed order-\d+-paid: sent, delivery 1\n", out), out
