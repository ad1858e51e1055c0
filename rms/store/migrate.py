"""``rms migrate``: apply the Alembic migrations shipped inside the package."""

from __future__ import annotations

import argparse
from pathlib import Path

from alembic import command
from alembic.config import Config

from rms.store.database import normalise_url

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", normalise_url(database_url).replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--revision", default="head", help="target revision (default: head)")
    parser.add_argument("--database-url", default=None, help="overrides RMS_DATABASE_URL")


def run(args: argparse.Namespace) -> int:
    import os

    url = args.database_url or os.environ.get("RMS_DATABASE_URL")
    if not url:
        print("rms migrate: set RMS_DATABASE_URL or pass --database-url")
        return 2
    upgrade(url, args.revision)
    print(f"rms migrate: database at revision {args.revision}")
    return 0
