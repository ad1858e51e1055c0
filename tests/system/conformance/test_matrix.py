"""Check-back conformance: the real confirm worker calls real producer servers in Python
(http.server HTTP/1.1 and HTTP/1.0, aiohttp, uvicorn), Node.js (http), Go (net/http) and Java
(the JDK's HttpServer). Each server verifies RMS's signature with its ecosystem's official
Standard Webhooks library and answers ``committed`` with Content-Length, chunked, a body ended
by the close, ``100 Continue`` first, or ``Connection: close``. Every message must be
confirmed by exactly one call."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.devstack.embedded import free_port
from tests.integration.checkback.helpers import FAST, all_settled, drive, message
from tests.support import Api
from tests.system.conformance.stacks import ToolMissing, every_stack

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@contextlib.contextmanager
def _server(command: list[str], port: int, secret: str, calls: Path) -> Iterator[None]:
    env = os.environ | {"PORT": str(port), "SIGNING_SECRET": secret, "CALLS_FILE": str(calls)}
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 60)
        line = process.stdout.readline().decode() if ready else ""
        assert line.startswith("LISTENING"), f"{command} did not start: {line!r}"
        yield
    finally:
        process.terminate()
        process.wait(10)


async def test_every_stack_and_framing_confirms_with_one_call(
        api: Api, worker_settings: Settings, topic: str, tmp_path: Path) -> None:
    try:
        stacks = every_stack()
    except ToolMissing as exc:
        pytest.fail(str(exc))
    ports = {stack.name: free_port() for stack in stacks}
    producer = await api.create_app(
        "producer", prefixes=[f"http://127.0.0.1:{port}/" for port in ports.values()])
    with contextlib.ExitStack() as servers:
        for stack in stacks:
            servers.enter_context(_server(stack.command, ports[stack.name],
                                          producer.signing_secret, _calls(tmp_path, stack.name)))
        cases = {(stack.name, mode): await api.prepared_id(
                     producer, topic, check_url=f"http://127.0.0.1:{ports[stack.name]}/{mode}",
                     max_checks=1, **FAST)
                 for stack in stacks for mode in sorted(stack.modes)}
        async with checkback_worker(worker_settings) as worker:
            await drive(worker, lambda: all_settled(api, producer, list(cases.values())),
                        timeout=60)

    results = {case: (await message(api, producer, message_id))["state"]
               for case, message_id in cases.items()}
    assert {case for case, state in results.items() if state != "sent"} == set(), results
    for stack in stacks:  # one call per message: nothing was asked twice
        calls = _calls(tmp_path, stack.name).read_text().count("call")
        assert calls == len(stack.modes), (stack.name, calls)
    assert len(cases) == sum(len(stack.modes) for stack in stacks) >= 30


def _calls(folder: Path, stack: str) -> Path:
    return folder / f"{stack.replace('/', '-')}.calls"
