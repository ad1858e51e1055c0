"""The SSRF guard (design section 5), at prepare time and again at call time: only URLs under
the app's prefixes, http(s) only, and with RMS_ALLOW_PRIVATE_CALLBACKS off only hosts whose
every address is global; the connection goes to the checked address (no DNS rebinding)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator

import httpx
import pytest

from confirm_service.http11 import ConnectError, Http11Pool, RemoteProtocolError, Request
from confirm_service.runtime import checkback_worker
from rms import callback_urls
from rms.callback_urls import CallTarget, IPAddress, is_public
from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.api.helpers import assert_problem
from tests.integration.checkback.helpers import FAST, all_settled, drive, events, message
from tests.integration.checkback.servers import Call, CallbackServer, Reply, callback_server
from tests.support import Api, AppKeys


def private_urls(port: int) -> list[str]:
    """Every spelling of a non-global target the guard must refuse."""
    return [
        f"http://127.0.0.1:{port}/check",
        f"http://localhost:{port}/check",
        f"http://[::1]:{port}/check",
        f"http://2130706433:{port}/check",  # decimal 127.0.0.1
        f"http://0x7f.1:{port}/check",  # hex
        f"http://0177.0.0.1:{port}/check",  # octal
        f"http://127.1:{port}/check",
        "http://0/check",  # 0.0.0.0
        "http://10.1.2.3/check",
        "http://172.16.0.1/check",
        "http://192.168.0.1/check",
        "http://100.64.0.1/check",  # carrier-grade NAT
        "http://169.254.169.254/latest/meta-data",  # cloud metadata
        "http://0251.0376.0251.0376/latest/meta-data",  # metadata, octal
        "https://[fe80::1]/check",
        "https://[fc00::1]/check",
        "https://[::ffff:127.0.0.1]/check",
        "https://[::ffff:169.254.169.254]/check",
        "https://[::127.0.0.1]/check",  # IPv4-compatible
        "https://[64:ff9b::a9fe:a9fe]/check",  # NAT64 of 169.254.169.254
        "https://[2002:7f00:1::]/check",  # 6to4 of 127.0.0.1
        "https://[fec0::1]/check",  # site-local
    ]


def origins(urls: list[str]) -> list[str]:
    return sorted({url.split("/", 3)[0] + "//" + url.split("/", 3)[2] + "/" for url in urls})


@pytest.fixture
async def strict_api(settings: Settings) -> AsyncIterator[Api]:
    """The API with RMS_ALLOW_PRIVATE_CALLBACKS=false (production's default)."""
    from message_service.app import create_app

    strict = settings.model_copy(update={"allow_private_callbacks": False})
    app = create_app(strict)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, ADMIN_TOKEN, strict)


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.0.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
    "255.255.255.255", "192.0.2.1", "::1", "::", "fe80::1", "fc00::1", "::ffff:127.0.0.1",
    "::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b:1::1", "2002:7f00:1::", "2001::1", "ff02::1",
    "fec0::1",
])
def test_non_global_addresses_are_refused(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1", "::ffff:8.8.8.8",
                                     "64:ff9b::808:808"])
def test_global_addresses_pass(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


async def test_refused_at_prepare(strict_api: Api, server: CallbackServer, topic: str,
                                  unique: str) -> None:
    urls = private_urls(server.port)
    app = await strict_api.create_app(f"strict-{unique}", prefixes=origins(urls))
    for url in urls:
        response = await strict_api.prepare(app, topic, check_url=url)
        assert response.status_code == 422, url
        assert_problem(response, 422, contains="refused")


async def test_allowed_at_prepare_when_the_setting_says_so(api: Api, server: CallbackServer,
                                                           topic: str, unique: str) -> None:
    urls = private_urls(server.port)
    app = await api.create_app(f"relaxed-{unique}", prefixes=origins(urls))
    for url in urls:
        response = await api.prepare(app, topic, check_url=url)
        assert response.status_code == 201, (url, response.text)


@pytest.mark.parametrize("url", [
    "ftp://127.0.0.1/check", "file:///etc/passwd", "gopher://127.0.0.1:70/", "http:///nohost",
    "http://user:pw@127.0.0.1:9/check",
])
async def test_bad_schemes_are_refused_even_when_private_is_allowed(
        api: Api, topic: str, unique: str, url: str) -> None:
    app = await api.create_app(f"schemes-{unique}", prefixes=["http://127.0.0.1:9/"])
    assert_problem(await api.prepare(app, topic, check_url=url), 422)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9.evil.example/check", "http://127.0.0.1:10/check",
    "https://127.0.0.1:9/check", "http://127.0.0.1:9@evil.example/check",
    "http://evil.example/?u=http://127.0.0.1:9/check",
])
async def test_urls_outside_the_prefixes_are_refused(api: Api, topic: str, unique: str,
                                                     url: str) -> None:
    app = await api.create_app(f"prefix-{unique}", prefixes=["http://127.0.0.1:9/"])
    assert_problem(await api.prepare(app, topic, check_url=url), 422)


async def _prepare_all(api: Api, app: AppKeys, topic: str, urls: list[str]) -> list[str]:
    return [await api.prepared_id(app, topic, check_url=url, max_checks=1, **FAST)
            for url in urls]


async def test_refused_again_at_call_time(api: Api, server: CallbackServer,
                                          worker_settings: Settings, topic: str,
                                          unique: str) -> None:
    """Stored while private callbacks were allowed; a worker with the guard on never calls."""
    urls = private_urls(server.port)
    app = await api.create_app(f"late-{unique}", prefixes=origins(urls))
    ids = await _prepare_all(api, app, topic, urls)
    strict = worker_settings.model_copy(update={"allow_private_callbacks": False})
    async with checkback_worker(strict) as worker:
        await drive(worker, lambda: all_settled(api, app, ids))
    assert server.calls == []
    for message_id, url in zip(ids, urls, strict=True):
        found = await message(api, app, message_id)
        assert (found["dead"], found["dead_reason"]) == (True, "check-exhausted"), url
        [checked] = [e["detail"] for e in await events(api, app, message_id)
                     if e["event"] == "checked"]
        assert checked["error"].startswith("refused: check_url host"), (url, checked)


async def test_prefix_removed_after_prepare_is_refused_at_call_time(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check",
                                       max_checks=1, **FAST)
    await _set_prefixes(api, producer.name, ["http://127.0.0.1:9/"])
    async with checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, [message_id]))
    assert server.calls == []
    [checked] = [e["detail"] for e in await events(api, producer, message_id)
                 if e["event"] == "checked"]
    assert "does not start with one of the app's check_url_prefixes" in checked["error"]


async def _set_prefixes(api: Api, app: str, prefixes: list[str]) -> None:
    from sqlalchemy import update

    from rms.store.database import create_engine
    from rms.store.schema import apps

    engine = create_engine(api.settings, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(update(apps).where(apps.c.name == app)
                               .values(check_url_prefixes=prefixes))
    finally:
        await engine.dispose()


async def test_private_targets_are_called_when_allowed(api: Api, worker_settings: Settings,
                                                       topic: str, unique: str) -> None:
    async with callback_server("127.0.0.1") as v4, callback_server("::1") as v6:
        async def committed(_call: Call) -> Reply:
            return Reply.answer("committed")

        v4.behaviour = v6.behaviour = committed
        urls = [f"http://127.0.0.1:{v4.port}/a", f"http://localhost:{v4.port}/b",
                f"http://2130706433:{v4.port}/c", f"http://0x7f.1:{v4.port}/d",
                f"http://[::1]:{v6.port}/e"]
        app = await api.create_app(f"allowed-{unique}", prefixes=origins(urls))
        ids = await _prepare_all(api, app, topic, urls)
        async with checkback_worker(worker_settings) as worker:
            await drive(worker, lambda: all_settled(api, app, ids))
    assert sorted(c.path for c in v4.calls + v6.calls) == ["/a", "/b", "/c", "/d", "/e"]
    assert [(await message(api, app, m))["state"] for m in ids] == ["sent"] * len(ids)


# ---- connection pinning -------------------------------------------------------------------

async def test_connection_goes_to_the_checked_address(server: CallbackServer) -> None:
    """The name never resolves: the connect can only have used the pinned address, while the
    request still names the host (Host header, and SNI for https)."""
    pool = Http11Pool(allow_unpinned=False, keepalive_seconds=1.5)
    target = CallTarget("callback.invalid", server.port, ipaddress.ip_address("127.0.0.1"))
    try:
        reply = await pool.post(Request(f"http://callback.invalid:{server.port}/pinned", target,
                                        b"{}", {"content-type": "application/json"}, 65536))
    finally:
        await pool.aclose()
    assert reply.status == 200
    [call] = server.calls
    assert (call.path, call.headers["host"]) == ("/pinned", f"callback.invalid:{server.port}")


async def test_no_connection_without_a_checked_address(server: CallbackServer) -> None:
    """The host, port and address of a connection all come from the checked target (the URL
    gives only the path), so only a target without a checked address could go astray."""
    pool = Http11Pool(allow_unpinned=False, keepalive_seconds=1.5)
    unchecked = CallTarget("127.0.0.1", server.port, None)
    with pytest.raises(ConnectError, match="no checked address"):
        await pool.post(Request(f"http://127.0.0.1:{server.port}/unpinned", unchecked, b"{}",
                                {}, 65536))
    assert server.calls == []


async def test_dns_rebinding_cannot_redirect_the_call(
        api: Api, server: CallbackServer, worker_settings: Settings, topic: str, unique: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard's own lookup decides where the call goes: the worker connects to the address
    it judged (here a stand-in "public" 127.0.0.1 for a name the system cannot resolve), and a
    lookup that now answers a private address stops the call."""
    answers: list[list[IPAddress]] = [[ipaddress.ip_address("127.0.0.1")]]
    judged_public = {ipaddress.ip_address("127.0.0.1")}

    async def fake_resolve(host: str, port: int) -> list[IPAddress]:
        assert host == "rebind.invalid"
        return answers[-1]

    monkeypatch.setattr(callback_urls, "resolve", fake_resolve)
    monkeypatch.setattr(callback_urls, "is_public", lambda a: a in judged_public)
    origin = f"http://rebind.invalid:{server.port}/"
    app = await api.create_app(f"rebind-{unique}", prefixes=[origin])
    first = await api.prepared_id(app, topic, check_url=origin + "first", max_checks=1, **FAST)

    async def committed(_call: Call) -> Reply:
        return Reply.answer("committed")

    server.behaviour = committed
    strict = worker_settings.model_copy(update={"allow_private_callbacks": False})
    async with checkback_worker(strict) as worker:
        await drive(worker, lambda: all_settled(api, app, [first]))
        answers.append([ipaddress.ip_address("10.0.0.7")])  # the name now "rebinds"
        second = await api.prepared_id(app, topic, check_url=origin + "second", max_checks=1,
                                       **FAST)
        await drive(worker, lambda: all_settled(api, app, [second]))
    assert [(c.path, c.headers["host"]) for c in server.calls] == [
        ("/first", f"rebind.invalid:{server.port}")]
    assert (await message(api, app, first))["state"] == "sent"
    assert (await message(api, app, second))["dead"] is True


async def test_an_endless_response_head_is_cut_off() -> None:
    """A server that never ends its headers cannot make the client buffer without bound."""
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\n")
        with contextlib.suppress(ConnectionError):
            for _ in range(200):
                writer.write(b"x-filler: " + b"a" * 1000 + b"\r\n")
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(endless, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Http11Pool(allow_unpinned=True, keepalive_seconds=1.5)
    target = CallTarget("127.0.0.1", port, None)
    async with server:
        with pytest.raises(RemoteProtocolError, match="response head exceeds"):
            await pool.post(Request(f"http://127.0.0.1:{port}/c", target, b"{}", {}, 65536))
    await pool.aclose()
