"""The Go client as a module-proxy layout (``$GOPROXY/<module>/@v/``: ``list``, ``.info``,
``.mod``, ``.zip``), which ``GOPROXY=file://...`` serves to ``go get`` like any proxy.

The zip follows the module zip rules: every file under the module's root, each named
``<module>@<version>/<path>``, without VCS folders or nested modules.
"""

from __future__ import annotations

import json
import re
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
