"""Check-back servers on Python stacks: ``http.server`` (HTTP/1.1 and HTTP/1.0), aiohttp and
uvicorn. Each verifies RMS's signature with PyPI ``standardwebhooks`` and answers
``committed`` in the framing its path names; ``python -m ... STACK`` listens on ``$PORT``,
prints ``LISTENING <port>`` once ready and appends one line per call to ``$CALLS_FILE``.

Framings: ``content-length``, ``chunked``, ``close`` (no length, the body ends when the server
closes), ``continue`` (``100 Continue`` first) and ``connection-close``."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

BODY = b'{"status": "committed"}'
WEBHOOK = Webhook(os.environ["SIGNING_SECRET"])


def verified(body: bytes, headers: dict[str, str]) -> bool:
    with open(os.environ["CALLS_FILE"], "a") as calls:
        calls.write("call\n")
    try:
        WEBHOOK.verify(body, headers)
    except WebhookVerificationError:
        return False
    return True


def http_server(version: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = version

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            if not verified(body, {k.lower(): v for k, v in self.headers.items()}):
                self.send_response(401)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            self._answer(self.path.strip("/"))

        def _answer(self, mode: str) -> None:
            out = self.wfile
            if mode == "continue":
                out.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            if mode == "chunked" and version == "HTTP/1.1":
                out.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                          b"5\r\n" + BODY[:5] + b"\r\n12\r\n" + BODY[5:] + b"\r\n0\r\n\r\n")
            elif mode == "close" or version == "HTTP/1.0":
                out.write(f"{version} 200 OK\r\ncontent-type: application/json\r\n\r\n".encode()
                          + BODY)
                self.close_connection = True
            else:
                close = b"connection: close\r\n" if mode == "connection-close" else b""
                out.write(b"HTTP/1.1 200 OK\r\ncontent-length: 23\r\n" + close + b"\r\n" + BODY)
                self.close_connection = mode == "connection-close"
            out.flush()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler)
    print(f"LISTENING {server.server_address[1]}", flush=True)
    server.serve_forever()


def aiohttp_server() -> None:
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if not verified(body, {k.lower(): v for k, v in request.headers.items()}):
            return web.Response(status=401)
        mode = request.path.strip("/")
        if mode == "continue":
            assert request.transport is not None
            request.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if mode == "chunked":
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            await response.write(BODY[:5])
            await response.write(BODY[5:])
            await response.write_eof()
            return response
        response = web.Response(body=BODY, content_type="application/json")
        if mode == "connection-close":
            response.force_close()
        return response

    app = web.Application()
    app.router.add_post("/{mode}", handle)
    sock = _socket()
    print(f"LISTENING {sock.getsockname()[1]}", flush=True)
    web.run_app(app, sock=sock, print=None)


def uvicorn_server() -> None:
    import uvicorn

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if not verified(body, headers):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        mode = scope["path"].strip("/")
        if mode == "chunked":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": BODY[:5], "more_body": True})
            await send({"type": "http.response.body", "body": BODY[5:]})
            return
        extra = [(b"connection", b"close")] if mode == "connection-close" else []
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"23"), *extra]})
        await send({"type": "http.response.body", "body": BODY})

    sock = _socket()
    print(f"LISTENING {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="error", loop="uvloop", http="httptools")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def _socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", int(os.environ["PORT"])))
    sock.listen(64)
    return sock


if __name__ == "__main__":
    stack = sys.argv[1]
    if stack == "http.server-1.1":
        http_server("HTTP/1.1")
    elif stack == "http.server-1.0":
        http_server("HTTP/1.0")
    elif stack == "aiohttp":
        aiohttp_server()
    else:
        uvicorn_server()
