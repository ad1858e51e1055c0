"""``rms dead``: dead letters from a terminal, through the HTTP API (so it works against any
deployment): list them, resend them one by one or in bulk, resolve a dead pending-send.

Configuration: ``RMS_URL`` (default ``http://127.0.0.1:8000``), ``RMS_ADMIN_TOKEN`` and
``RMS_OPERATOR`` (default: the login name), each also an option. The operator's name is sent as
``X-RMS-Operator`` and recorded as the actor (``admin:<name>``) of every change.

Exit codes: 0 done, 1 the API refused or could not be reached (its problem detail is printed),
2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import re
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

import httpx
import orjson

from rms.domain.counts import counted
from rms.domain.states import State

EXIT_OK, EXIT_API, EXIT_USAGE = 0, 1, 2
DEFAULT_URL = "http://127.0.0.1:8000"
MAX_BULK = 1000
PAGE = 1000
COLUMNS = ("message_id", "app", "topic", "consumers", "state", "dead_reason", "delivery_count",
           "check_count", "created_at")
FILTERS = ("app", "topic", "consumer")


class ApiError(Exception):
    """The API answered with a problem document, or could not be reached."""


def _bulk_limit(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_BULK:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_BULK}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _action(actions: Any, name: str, text: str) -> argparse.ArgumentParser:
    """A sub-command whose help line also heads its own ``--help``."""
    parser: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
    return parser


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("RMS_URL", DEFAULT_URL),
                        help="the RMS API (env RMS_URL, default %(default)s)")
    parser.add_argument("--token", default=os.environ.get("RMS_ADMIN_TOKEN"),
                        help="the admin token (env RMS_ADMIN_TOKEN)")
    parser.add_argument("--operator", default=os.environ.get("RMS_OPERATOR") or _login(),
                        help="your name, recorded with every change (env RMS_OPERATOR)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = _action(actions, "list", "list dead letters, oldest first")
    _filters(listing)
    listing.add_argument("--reason", choices=["delivery-exhausted", "check-exhausted"])
    listing.add_argument("--limit", type=_positive, default=100, help="default %(default)s")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")

    resend = _action(actions, "resend", "publish dead sent messages again")
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", nargs="+", dest="ids", metavar="ID", help="these messages")
    which.add_argument("--all", action="store_true",
                       help="every dead sent message matching --app/--topic/--consumer, up to "
                            "--limit")
    _filters(resend)
    resend.add_argument("--limit", type=_bulk_limit, default=100,
                        help=f"with --all: at most this many (1-{MAX_BULK}, default %(default)s)")
    resend.add_argument("--dry-run", action="store_true", help="show what would be resent")

    for name, text in (("confirm", "resolve a (dead) pending-send as committed and publish it"),
                       ("cancel", "resolve a (dead) pending-send as rolled back")):
        resolve = _action(actions, name, text)
        resolve.add_argument("message_id", metavar="ID")

    _action(actions, "stats", "counts and oldest ages per app and topic")


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app", help="only this producer app")
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument("--consumer", metavar="NAME",
                        help="only the dead letters this consumer app still owes an ack")


def _login() -> str | None:
    """The login name, when the API would accept it as an operator name."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        return None
    return name if re.fullmatch(r"[A-Za-z0-9._@-]{1,64}", name) else None


def run(args: argparse.Namespace) -> int:
    if not args.token:
        print("rms dead: the admin token is missing: set RMS_ADMIN_TOKEN or pass --token",
              file=sys.stderr)
        return EXIT_USAGE
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    async with httpx.AsyncClient(base_url=args.url, timeout=30.0) as client:
        return await execute(args, client)


async def execute(args: argparse.Namespace, client: httpx.AsyncClient,
                  out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one parsed ``rms dead`` command with ``client`` (tests pass an in-process one)."""
    session = Session(client, args, out or sys.stdout, err or sys.stderr)
    action: Callable[[], Coroutine[Any, Any, int]] = getattr(session, f"do_{args.action}")
    try:
        return await action()
    except ApiError as exc:
        print(f"rms dead: {exc}", file=session.err)
        return EXIT_API


class Session:
    def __init__(self, client: httpx.AsyncClient, args: argparse.Namespace, out: TextIO,
                 err: TextIO) -> None:
        self.client = client
        self.args = args
        self.out = out
        self.err = err
        self.headers = {"Authorization": f"Bearer {args.token}"}
        if args.operator:
            self.headers["X-RMS-Operator"] = args.operator

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self.client.request(method, path, headers=self.headers, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach RMS at {self.client.base_url}: {exc}") from exc
        if response.is_success:
            return response.json()
        raise ApiError(_problem(response))

    def emit(self, line: str = "") -> None:
        print(line, file=self.out)

    # ---- actions -------------------------------------------------------------------------

    async def do_list(self) -> int:
        found = await self._dead_letters()
        if self.args.json:
            self.emit(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        else:
            self._table(found)
            self.emit(counted(len(found), "dead letter"))
        return EXIT_OK

    async def do_resend(self) -> int:
        if self.args.all:
            return await self._resend_bulk()
        failures = 0
        for message_id in self.args.ids:
            try:
                await self._resend_one(message_id)
            except ApiError as exc:
                print(f"rms dead: {message_id}: {exc}", file=self.err)
                failures += 1
        return EXIT_API if failures else EXIT_OK

    async def do_confirm(self) -> int:
        return await self._resolve("confirm")

    async def do_cancel(self) -> int:
        return await self._resolve("cancel")

    async def do_stats(self) -> int:
        body = await self.call("GET", "/v1/admin/stats")
        self.emit("totals: " + ", ".join(f"{k}={v}" for k, v in body["totals"].items()))
        self.emit(f"oldest pending-send: {_age(body['oldest_pending_send_age_seconds'])}, "
                  f"oldest unacked: {_age(body['oldest_unacked_age_seconds'])}")
        for group in body["groups"]:
            counts = ", ".join(f"{k}={v}" for k, v in group["counts"].items())
            self.emit(f"  {group['app']} {group['topic']}: {counts}; oldest pending-send "
                      f"{_age(group['oldest_pending_send_age_seconds'])}, oldest unacked "
                      f"{_age(group['oldest_unacked_age_seconds'])}")
        return EXIT_OK

    # ---- helpers -------------------------------------------------------------------------

    async def _dead_letters(self) -> list[dict[str, Any]]:
        """Page through ``GET /v1/admin/messages?dead=true`` until ``--limit`` matches."""
        params = {"dead": "true", "limit": str(PAGE)} | {
            name: value for name in FILTERS
            if (value := getattr(self.args, name)) is not None}
        found: list[dict[str, Any]] = []
        while len(found) < self.args.limit:
            page = await self.call("GET", "/v1/admin/messages", params=params)
            found += [m for m in page["items"]
                      if self.args.reason in (None, m["dead_reason"])]
            if page["next_cursor"] is None:
                break
            params["cursor"] = page["next_cursor"]
        return found[: self.args.limit]

    async def _resend_one(self, message_id: str) -> None:
        if not self.args.dry_run:
            resent = await self.call("POST", f"/v1/admin/messages/{message_id}/resend")
            self.emit(f"resent {message_id} (delivery {resent['delivery_count']})")
            return
        current = await self.call("GET", f"/v1/admin/messages/{message_id}")
        if current["state"] != State.SENT.value:
            raise ApiError(f"cannot resend: its state is {current['state']!r}")
        self.emit(f"would resend {message_id} (delivery {current['delivery_count'] + 1})")

    async def _resend_bulk(self) -> int:
        body = {"limit": self.args.limit, "dry_run": self.args.dry_run} | {
            name: value for name in FILTERS
            if (value := getattr(self.args, name)) is not None}
        result = await self.call("POST", "/v1/admin/dead-letters/resend", json=body)
        verb = "would resend" if result["dry_run"] else "resent"
        for message in result["messages"]:
            self.emit(f"{verb} {message['message_id']} ({message['app']} {message['topic']})")
        summary = ("would be resent (dry run: nothing changed)" if result["dry_run"]
                   else "resent")
        self.emit(f"{counted(result['count'], 'message')} {summary}")
        return EXIT_OK

    async def _resolve(self, action: str) -> int:
        message_id = self.args.message_id
        resolved = await self.call("POST", f"/v1/admin/messages/{message_id}/{action}")
        self.emit(f"{message_id}: {resolved['state']}")
        return EXIT_OK

    def _table(self, rows: list[dict[str, Any]]) -> None:
        cells = [[_cell(row, c) for c in COLUMNS] for row in rows]
        widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(COLUMNS)]
        for line in [list(COLUMNS), *cells]:
            self.emit("  ".join(cell.ljust(width) for cell, width in zip(line, widths,
                                                                          strict=True)).rstrip())


def _cell(row: dict[str, Any], column: str) -> str:
    """A table cell; ``consumers`` is the consumer apps that still owe the message an ack
    (``-`` under the single-ack rule, where any permitted consumer's ack finishes it)."""
    if column == "consumers":
        owing = [s["app"] for s in row.get("subscribers") or () if s["acked_at"] is None]
        return ",".join(owing) or "-"
    value = row[column]
    return "-" if value is None else str(value)


def _problem(response: httpx.Response) -> str:
    try:
        body = response.json()
        return f"{body['title']} ({body['status']}): {body['detail']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200]}"


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}s"
