"""The CLI reference, from the commands' own parsers (:func:`rms.cli.parser_for`): each
command's description, its options and their help, its sub-commands."""

from __future__ import annotations

import argparse
from typing import Any

from docs_gen.markdown import code, table
from rms.cli import COMMANDS, parser_for

_FORMATTER = argparse.HelpFormatter("rms")


def anchor(prog: str) -> str:
    """The heading id of a command (``rms dead list`` → ``rms-dead-list``)."""
    return prog.replace(" ", "-")


def expanded_help(action: argparse.Action, prog: str) -> str:
    """The action's help with its ``%(default)s``-style fields filled in, as argparse does."""
    params: dict[str, Any] = dict(vars(action), prog=prog)
    for name, value in list(params.items()):
        if value is argparse.SUPPRESS:
            del params[name]
        elif hasattr(value, "__name__"):
            params[name] = value.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(choice) for choice in params["choices"])
    return str(action.help or "") % params


def invocation(action: argparse.Action) -> str:
    """How the option is written: ``--out DIR``, ``--json``, ``TOPIC [TOPIC ...]``."""
    if not action.option_strings:
        return _FORMATTER._format_args(action, action.dest)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    arguments = _FORMATTER._format_args(action, action.dest.upper())
    return ", ".join(action.option_strings) + " " + arguments


def _meaning(action: argparse.Action, prog: str) -> str:
    text = expanded_help(action, prog)
    extras = []
    if action.choices is not None and "%(choices)" not in str(action.help or ""):
        extras.append("one of " + ", ".join(code(choice) for choice in action.choices))
    if action.required and action.option_strings:
        extras.append("required")
    return "; ".join(part for part in [text, *extras] if part)


def _listed(action: argparse.Action) -> bool:
    return (action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)
            and not isinstance(action, argparse._SubParsersAction))


def _groups(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for group in parser._action_groups:
        actions = [action for action in group._group_actions if _listed(action)]
        if not actions:
            continue
        title = str(group.title or "options")
        if title not in {"options", "optional arguments", "positional arguments"}:
            lines += [f"*{title}*", ""]
        lines += table(["argument", "meaning"], [
            (code(invocation(action)), _meaning(action, parser.prog)) for action in actions])
        lines.append("")
    return lines


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser,
                                                                  str]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            found += [(name, sub, str(helps.get(name) or sub.description or ""))
                      for name, sub in action.choices.items()]
    return found


def _command(parser: argparse.ArgumentParser, level: int, summary: str) -> list[str]:
    lines = [f"{'#' * level} `{parser.prog}` {{#{anchor(parser.prog)}}}", ""]
    description = parser.description or summary
    if description:
        lines += [description[:1].upper() + description[1:] + ".", ""]
    lines += _groups(parser)
    if parser.epilog:
        lines += [parser.epilog, ""]
    for _name, sub, help_text in _subcommands(parser):
        lines += _command(sub, level + 1, help_text)
    return lines


def render() -> str:
    """The page."""
    lines = [
        "# Command line",
        "",
        "Every process and operator task of RMS is a sub-command of `rms` "
        "(`.venv/bin/rms` after `make install`; `rms --version` prints the release). This page "
        "is generated from the commands' own parsers (`python -m docs_gen`), so it says what "
        "`rms <command> --help` says. Settings come from the environment "
        "([configuration](configuration.md)); an option named here overrides its setting. "
        "`rms serve` (uvicorn with uvloop and httptools) and both workers run as any number of "
        "processes against one PostgreSQL ([processes](../operations/processes.md)); "
        "`rms migrate` runs before new code does ([upgrading](../operations/upgrading.md)).",
        "",
    ]
    lines += table(["command", "what it does"], [
        (f"[`rms {name}`](#{anchor('rms ' + name)})", summary)
        for name, (_, summary) in COMMANDS.items()])
    lines.append("")
    for name, (_, summary) in COMMANDS.items():
        lines += _command(parser_for(name), 2, summary)
    return "\n".join(lines).rstrip("\n") + "\n"
