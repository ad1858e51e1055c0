"""Runs the server image's own entrypoint without a container runtime: ``podman run`` is refused
in this sandbox (crun cannot set RLIMIT_NPROC), so the image's root file system is mounted by
buildah and its entrypoint run under ``chroot`` in new mount and PID namespaces (``unshare``),
with the image's environment, user and working directory from its configuration. The process
shares the host's network and its ``/etc/hosts``, as ``--network host`` would: it reaches the test
PostgreSQL and Kafka on 127.0.0.1."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class MountedImage:
    container: str
    root: Path
    config: dict[str, Any]

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.config.get("Labels") or {})

    def command(self, arguments: list[str], env: dict[str, str],
                entrypoint: list[str] | None = None) -> list[str]:
        """The command line that runs the entrypoint (the image's, or ``entrypoint``, as a
        health check's ``CMD`` runs) with ``arguments`` (the image's CMD when empty), ``env``
        added to the image's environment."""
        environment = [*self.config.get("Env", []), *(f"{k}={v}" for k, v in env.items())]
        user = self.config.get("User") or "0:0"
        start = self.config["Entrypoint"] if entrypoint is None else entrypoint
        inside = [*start, *(arguments or ([] if entrypoint else self.config.get("Cmd")) or [])]
        workdir = self.config.get("WorkingDir") or "/"
        root = shlex.quote(str(self.root))
        enter = shlex.quote(f'cd {shlex.quote(workdir)} && exec "$@"')
        script = (f"mount --rbind /dev {root}/dev && mount -t proc proc {root}/proc && "
                  f"exec chroot --userspec={shlex.quote(user)} {root} /usr/bin/env -i "
                  f"{shlex.join(environment)} /bin/sh -c {enter} sh {shlex.join(inside)}")
        return ["unshare", "--mount", "--pid", "--fork", "--kill-child", "/bin/sh", "-c", script]


def _buildah(*arguments: str) -> str:
    return subprocess.run(["buildah", *arguments], check=True, capture_output=True, text=True,
                          timeout=600).stdout.strip()


def mount(archive: Path) -> MountedImage:
    """The archive's image, loaded into buildah's storage, as a mounted working container."""
    image = _buildah("pull", "--quiet", f"oci-archive:{archive}")
    config = json.loads(_buildah("inspect", "--type", "image", image))["OCIv1"]["config"]
    container = _buildah("from", "--quiet", image)
    root = Path(_buildah("mount", container))
    # the host's network, with the host's names, as a runtime's host network gives it (the
    # JVM of the report image resolves its own host name)
    shutil.copyfile("/etc/hosts", root / "etc" / "hosts")
    return MountedImage(container, root, config)


def unmount(image: MountedImage) -> None:
    _buildah("umount", image.container)
    _buildah("rm", image.container)
