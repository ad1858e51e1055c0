"""A TCP proxy that plays a server closing an idle keep-alive connection just as a client
reuses it: the second request on a client connection is dropped unanswered (the connection is
closed without a byte), ``drops`` times in all."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from rms.devstack.embedded import free_port


@dataclass
class DroppingProxy:
    upstream: str
    drops: int
    dropped: int = 0
    requests: int = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    answered: list[bool]) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                answered[0] = True
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _serve(self, client_r: asyncio.StreamReader,
                     client_w: asyncio.StreamWriter) -> None:
        parts = urlsplit(self.upstream)
        up_r, up_w = await asyncio.open_connection(parts.hostname, parts.port)
        answered = [True]
        back = asyncio.create_task(self._pipe(up_r, client_w, answered))
        on_connection = 0
        try:
            while data := await client_r.read(65536):
                if answered[0]:  # the first bytes of a new request
                    answered[0] = False
                    on_connection += 1
                    self.requests += 1
                    if on_connection == 2 and self.dropped < self.drops:
                        self.dropped += 1
                        break
                up_w.write(data)
                await up_w.drain()
        except ConnectionError:
            pass
        finally:
            client_w.close()
            up_w.close()
            back.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await back

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        port = free_port()
        server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.close()
            await server.wait_closed()
