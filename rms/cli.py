"""The ``rms`` command. Each sub-command lives beside the code it runs and is imported only
when chosen, so ``rms dead list`` never pays for importing Spark.

A command module exposes ``configure(parser: argparse.ArgumentParser) -> None`` and
``run(args: argparse.Namespace) -> int`` (the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Protocol, cast

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("message_service.cli", "run the HTTP API (message service)"),
    "confirm-worker": ("confirm_service.cli", "run a check-back worker (confirm service)"),
    "recovery-worker": ("recovery_service.cli", "run a re-delivery worker (recovery service)"),
    "migrate": ("rms.store.migrate", "apply database migrations (Alembic) and exit"),
    "dev": ("rms.devstack.dev", "start everything on embedded PostgreSQL and Kafka, with a demo"),
    "dead": ("recovery_service.dead_cli", "list and resend dead letters"),
    "topics": ("rms.commands.topics", "create the ack topic and the apps' topics on Kafka"),
    "export": ("history.export_cli", "export message history to Parquet"),
    "report": ("spark.cli", "build the SLA report with Spark"),
    "retention": ("history.retention_cli", "archive and delete finished messages past their age"),
    "bench": ("bench.cli", "run the benchmark suite"),
}

EXIT_USAGE = 2


class CommandModule(Protocol):
    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _usage() -> str:
    lines = ["usage: rms <command> [options]", "", "commands:"]
    lines += [f"  {name:<16} {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", "Run 'rms <command> --help' for a command's options; 'rms --version' for the "
              "version."]
    return "\n".join(lines)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rms-server")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


def _load(name: str) -> CommandModule:
    module_name = COMMANDS[name][0]
    return cast(CommandModule, importlib.import_module(module_name))


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0 if arguments else EXIT_USAGE
    if arguments[0] in {"-V", "--version"}:
        print(f"rms {_version()}")
        return 0
    name, rest = arguments[0], arguments[1:]
    if name not in COMMANDS:
        print(f"rms: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return EXIT_USAGE
    module = _load(name)
    return module.run(parser_for(name, module).parse_args(rest))


def parser_for(name: str, module: CommandModule | None = None) -> argparse.ArgumentParser:
    """The parser of ``rms NAME``, as the command configures it (the CLI reference is made
    from these parsers)."""
    parser = argparse.ArgumentParser(prog=f"rms {name}", description=COMMANDS[name][1])
    (module or _load(name)).configure(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main())
