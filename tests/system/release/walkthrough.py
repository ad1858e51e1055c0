"""The README's five-minute walkthrough, run against any running ``rms serve``: the requests
are read from the walkthrough's own text (the block between its snippet markers, which the
site's getting-started page includes), sent as written, and each answer is compared with the
answer the text shows. The check that a server (from the tree, a wheel, the image) behaves as
the walkthrough says, and that the walkthrough says what the server does.

The walkthrough runs against ``make dev``'s demo apps; here each run registers its own apps
and uses its own message ids and topic, and the shown answers are read with those names."""

from __future__ import annotations

import json
import re
import shlex
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

README = Path(__file__).resolve().parents[3] / "README.md"
START, END = "<!-- --8<-- [start:walkthrough] -->", "<!-- --8<-- [end:walkthrough] -->"
# a "key":value pair of a shown answer whose value is a JSON scalar
_PAIR = re.compile(r'"([A-Za-z_-]+)":("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)')
_ELIDED = ("...", "…", "<")  # a shown value that stands for one the text does not spell out
_SHOWN = "# →"
_CONTINUED = re.compile(r"^#\s{6,}\S")  # the next line of a shown answer (not a remark)


@dataclass(frozen=True)
class Step:
    """One request of the walkthrough and the answer its text shows."""

    method: str
    path: str
    caller: str  # the shell variable holding its Authorization header (ORDERS, ADMIN, ...)
    body: Any
    status: int | None
    shown: str


def walkthrough_block(text: str | None = None) -> str:
    """The shell block between the walkthrough's snippet markers."""
    text = README.read_text() if text is None else text
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block.startswith("```sh\n") and block.endswith("\n```"), "the walkthrough's block"
    return block.removeprefix("```sh\n").removesuffix("\n```")


def _commands(lines: list[str]) -> Iterator[tuple[str, list[str]]]:
    """Each ``curl`` command (its continuation lines joined) with the comment lines after it."""
    index = 0
    while index < len(lines):
        if not lines[index].startswith("curl "):
            index += 1
            continue
        command = lines[index]
        index += 1
        while command.endswith("\\") or not _complete(command):
            command = command.removesuffix("\\") + "\n" + lines[index]
            index += 1
        comments = []
        while index < len(lines) and lines[index].startswith("#"):
            comments.append(lines[index])
            index += 1
        yield command, comments


def _complete(command: str) -> bool:
    try:
        shlex.split(command, comments=True)
    except ValueError:  # a quotation still open: the command goes on
        return False
    return True


def _shown(comments: list[str]) -> str:
    """The answer the comments show: the ``# →`` line and the lines that continue it."""
    for start, line in enumerate(comments):
        if line.startswith(_SHOWN):
            shown = [line.removeprefix(_SHOWN)]
            for more in comments[start + 1:]:
                if not _CONTINUED.match(more):
                    break
                shown.append(more.removeprefix("#"))
            return " ".join(part.strip() for part in shown)
    return ""


def _step(command: str, comments: list[str]) -> Step:
    tokens = shlex.split(command, comments=True)[1:]
    method, path, caller, body = "", "", "", None
    arguments = iter(tokens)
    for token in arguments:
        if token == "-X":
            method = next(arguments)
        elif token == "-H":
            header = next(arguments)
            if header.startswith("$"):
                caller = header.removeprefix("$")
        elif token == "-d":
            body = json.loads(next(arguments))
        elif token.startswith("$API"):
            path = token.removeprefix("$API")
    shown = _shown(comments)
    status = re.match(r"(\d{3})\b", shown)
    return Step(method or ("POST" if body is not None else "GET"), path, caller, body,
                int(status.group(1)) if status else None, shown)


def steps(block: str | None = None) -> list[Step]:
    """The walkthrough's requests, in order."""
    lines = (walkthrough_block() if block is None else block).splitlines()
    return [_step(command, comments) for command, comments in _commands(lines)]


def shown_values(shown: str) -> dict[str, list[Any]]:
    """Every ``"key":value`` of a shown answer whose value the text spells out, by key, in
    the order shown."""
    values: dict[str, list[Any]] = {}
    for key, value in _PAIR.findall(shown):
        if not any(mark in value for mark in _ELIDED):
            values.setdefault(key, []).append(json.loads(value))
    return values


def answered_values(answer: Any) -> dict[str, list[Any]]:
    """Every key of an answer with its values, in the answer's order, at any depth."""
    values: dict[str, list[Any]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                values.setdefault(key, []).append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(answer)
    return values


def _in_order(expected: list[Any], actual: list[Any]) -> bool:
    remaining = iter(actual)
    return all(any(value == found for found in remaining) for value in expected)


def mismatches(shown: str, answer: Any) -> list[str]:
    """What the shown answer says that the real one does not (empty: they agree)."""
    actual = answered_values(answer)
    return [f'"{key}": shown {values}, answered {actual.get(key)}'
            for key, values in shown_values(shown).items()
            if not _in_order(values, actual.get(key, []))]


def register(api: httpx.Client, admin: dict[str, str], name: str, **topics: list[str]) -> str:
    """A new app; its API key."""
    created = api.post("/v1/admin/apps", headers=admin, json={
        "name": name, "check_url_prefixes": ["http://127.0.0.1:8001/"], **topics})
    assert created.status_code == 201, created.text
    return str(created.json()["api_key"])


def _renamed(text: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        text = text.replace(old, new)
    return text


def walkthrough(url: str, admin_token: str, topic: str) -> None:
    """Every request of the walkthrough, each answer compared with the one it shows."""
    suffix = uuid.uuid4().hex[:8]
    admin = {"Authorization": f"Bearer {admin_token}"}
    names = {'"orders.paid"': json.dumps(topic)}
    names |= {f'"{prefix}{app}"': f'"{prefix}{app}-{suffix}"'
              for app in ("orders", "points", "billing") for prefix in ("", "app:")}
    names |= {f"order-{n}-paid": f"order-{n}-paid-{suffix}" for n in (1, 2)}
    with httpx.Client(base_url=url, timeout=30) as api:
        callers = {"ADMIN": admin, "ORDERS": {"Authorization": "Bearer " + register(
            api, admin, f"orders-{suffix}", produce_topics=[topic])},
            "POINTS": {"Authorization": "Bearer " + register(
                api, admin, f"points-{suffix}", consume_topics=[topic])}}
        walked = steps()
        assert len(walked) >= 9, "the walkthrough's requests"
        for step in walked:
            body = None if step.body is None else json.loads(
                _renamed(json.dumps(step.body), names))
            answer = api.request(step.method, _renamed(step.path, names),
                                 headers=callers[step.caller], json=body)
            where = f"{step.method} {step.path}"
            if step.status is not None:
                assert answer.status_code == step.status, f"{where}: {answer.text}"
            wrong = mismatches(_renamed(step.shown, names), answer.json())
            assert not wrong, f"{where}: {wrong}"
