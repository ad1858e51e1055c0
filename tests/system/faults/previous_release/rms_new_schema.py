"""A pytest plugin for the previous release's own test run (``-p rms_new_schema``): the
schema its fixtures build comes from this release's migrations, run by this release's
``rms migrate`` (the command in ``NEW_RELEASE_MIGRATE``), instead of its own. Its tests then
prove the rule "a release's migrations keep the previous release's code working"."""

from __future__ import annotations

import os
import shlex
import subprocess

import rms.store.migrate  # the previous release's: its conftest imports ``upgrade`` from here


def new_release_upgrade(database_url: str, revision: str = "head") -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    command = [*shlex.split(os.environ["NEW_RELEASE_MIGRATE"]), "migrate", "--revision", revision]
    subprocess.run(command, env=env | {"RMS_DATABASE_URL": database_url}, check=True)


rms.store.migrate.upgrade = new_release_upgrade
