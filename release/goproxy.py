"""The Go client as a module-proxy layout (``$GOPROXY/<module>/@v/``: ``list``, ``.info``,
``.mod``, ``.zip``), which ``GOPROXY=file://...`` serves to ``go get`` like any proxy, with
every module it needs in the same layout (the go command's own download cache is one), and
the checksums of all of them as ``go.sum`` lines (``rms-client-go-<version>.go.sum``), so a
user's go command verifies each module it takes from the layout without a checksum database.

The zip follows the module zip rules: every file under the module's root, each named
``<module>@<version>/<path>``, without VCS folders or nested modules.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from datetime import UTC, datetime
from pathlib import Path

SKIPPED_FOLDERS = {".git", "vendor", "node_modules"}


def module_path(module_root: Path) -> str:
    """The ``module`` line of ``go.mod``."""
    match = re.search(r"^module\s+(\S+)", (module_root / "go.mod").read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{module_root / 'go.mod'} names no module")
    return match.group(1)


def module_files(module_root: Path) -> list[Path]:
    """The files of the module: nested modules (a folder with its own go.mod) stay out."""
    nested = {path.parent for path in module_root.rglob("go.mod") if path.parent != module_root}
    return sorted(path for path in module_root.rglob("*")
                  if path.is_file()
                  and not SKIPPED_FOLDERS & set(path.relative_to(module_root).parts)
                  and not any(folder in path.parents for folder in nested))


def write_layout(module_root: Path, version: str, proxy: Path, released: datetime) -> Path:
    """Write ``<proxy>/<module>/@v/`` for ``version`` (``v0.2.0``); return that folder."""
    module = module_path(module_root)
    folder = proxy / module / "@v"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "list").write_text(version + "\n")
    info = {"Version": version, "Time": released.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    (folder / f"{version}.info").write_text(json.dumps(info) + "\n")
    (folder / f"{version}.mod").write_bytes((module_root / "go.mod").read_bytes())
    with zipfile.ZipFile(folder / f"{version}.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for path in module_files(module_root):
            name = f"{module}@{version}/{path.relative_to(module_root).as_posix()}"
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)),
                             path.read_bytes())
    return folder


def _go(arguments: list[str], cwd: Path, env: dict[str, str]) -> str:
    print(f"dist: go {' '.join(arguments)}", flush=True)
    return subprocess.run(["go", *arguments], cwd=cwd, env={**os.environ, **env}, check=True,
                          capture_output=True, text=True).stdout


def add_dependencies(module_root: Path, proxy: Path, work: Path) -> Path:
    """Every module ``module_root`` needs, downloaded into a module cache of its own and copied
    into ``proxy`` in the layout the cache keeps them (without the checksum database's tiles).
    The download runs in a copy of the module (it adds the checksums of the whole build list to
    go.sum, which the repository's copy keeps out); returns that copy's go.sum."""
    cache = work / "gomodcache"
    copy = work / "go-module"
    shutil.copytree(module_root, copy, ignore=shutil.ignore_patterns(*SKIPPED_FOLDERS))
    env = {"GOMODCACHE": str(cache), "GOFLAGS": "-modcacherw", "GOTOOLCHAIN": "local"}
    _go(["mod", "download", "all"], copy, env)
    downloaded = cache / "cache" / "download"
    for path in sorted(downloaded.rglob("*")):
        relative = path.relative_to(downloaded)
        if (not path.is_file() or relative.parts[0] == "sumdb"
                or path.suffix in {".lock", ".partial", ".ziphash"}):
            continue
        target = proxy / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return copy / "go.sum"


def go_sum(module_root: Path, version: str, proxy: Path, work: Path, needed: Path) -> str:
    """``go.sum`` lines of the module (as ``proxy`` serves it) and of every module it needs
    (``needed``: the go.sum of the download)."""
    module = module_path(module_root)
    consumer = work / "go-sum"
    consumer.mkdir(parents=True, exist_ok=True)
    (consumer / "go.mod").write_text("module example.com/sum\n\ngo 1.26\n")
    env = {"GOMODCACHE": str(work / "gomodcache-sum"), "GOFLAGS": "-modcacherw -mod=mod",
           "GOPROXY": proxy.as_uri(), "GONOSUMDB": module, "GOTOOLCHAIN": "local"}
    found = json.loads(_go(["mod", "download", "-json", f"{module}@{version}"], consumer, env))
    own = (f"{module} {version} {found['Sum']}\n{module} {version}/go.mod {found['GoModSum']}\n")
    return own + needed.read_text()
