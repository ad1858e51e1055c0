"""``rms migrate``: apply the Alembic migrations shipped inside the package."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # env.py connects through rms.store.database.open_engine (the one reading of the URL)
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
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
        print("rms migrate: set RMS_DATABASE_URL or pass --database-url", file=sys.stderr)
        return 2
    from rms.store.database import DatabaseUrlError, connect_failure, database_location

    try:
        database_location(url)
        upgrade(url, args.revision)
    except DatabaseUrlError as exc:
        print(f"rms migrate: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if not _connection_problem(exc):
            raise
        print(f"rms migrate: {connect_failure(url, exc)}", file=sys.stderr)
        return 1
    print(f"rms migrate: database at revision {args.revision}")
    return 0


def _connection_problem(exc: BaseException) -> bool:
    from sqlalchemy.exc import DBAPIError

    from rms.outage import DATABASE_UNAVAILABLE

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (OSError, DBAPIError, TimeoutError, *DATABASE_UNAVAILABLE)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
