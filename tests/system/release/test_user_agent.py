"""The Python client names itself and its release in every request's ``User-Agent``, over real
HTTP to a server that records what it received: the producer's calls and the HTTP acker's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from release.version import release
from rms_client import HttpAcker, RmsProducer
from rms_client.producer import RmsNotFound


class Recorder(BaseHTTPRequestHandler):
    agents: list[str | None] = []

    def answer(self) -> None:
        Recorder.agents.append(self.headers.get("User-Agent"))
        body = b'{"type":"about:blank","title":"Not Found","status":404,"detail":"no such message"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads what was recorded."""


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.agents = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_producer_and_acker_send_the_release_as_user_agent(recorder: str) -> None:
    async with RmsProducer(recorder, "key") as producer:
        with pytest.raises(RmsNotFound):
            await producer.get("order-1-paid")
    acker = HttpAcker(recorder, "key", retries=0)
    await acker.ack("order-1-paid")
    await acker.close()
    assert Recorder.agents == [f"rms-client-python/{release()}"] * 2


async def test_a_callers_own_user_agent_wins(recorder: str) -> None:
    async with httpx.AsyncClient(base_url=recorder, headers={"User-Agent": "orders/7"}) as client:
        await HttpAcker(client=client, retries=0).ack("order-1-paid")
        async with RmsProducer(client=client, api_key="key") as producer:
            with pytest.raises(RmsNotFound):
                await producer.get("order-1-paid")
    assert Recorder.agents == ["orders/7"] * 2
