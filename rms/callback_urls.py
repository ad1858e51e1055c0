"""Check-back URL rules (design section 5): the URL must fall under one of the app's allowed
prefixes, be http(s), and (unless the deployment allows private callbacks) resolve only to
global addresses. Used at prepare time and again at call time by the confirm service, which
connects to the address checked here (no DNS rebinding)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from rms.domain.errors import Invalid

MAX_URL_LENGTH = 2048
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> ParsedUrl:
        if len(url) > MAX_URL_LENGTH:
            raise Invalid(f"check_url is longer than {MAX_URL_LENGTH} characters")
        try:
            parts: SplitResult = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise Invalid(f"check_url {url!r} is not a valid URL: {exc}") from exc
        if parts.scheme not in {"http", "https"}:
            raise Invalid(f"check_url {url!r} must use http or https")
        if not parts.hostname:
            raise Invalid(f"check_url {url!r} has no host")
        if parts.username or parts.password:
            raise Invalid(f"check_url {url!r} must not carry credentials")
        default_port = 443 if parts.scheme == "https" else 80
        return cls(parts.scheme, parts.hostname.lower(), port or default_port, parts.path or "/")


def validate_prefix(prefix: str) -> str:
    """App registration: every allowed prefix is itself a valid http(s) URL."""
    ParsedUrl.parse(prefix)
    return prefix


def matches_prefix(url: str, prefixes: Iterable[str]) -> bool:
    """Same scheme, host and port as a prefix, and a path under the prefix's path (so
    ``https://a.example`` never admits ``https://a.example.evil.net``)."""
    target = ParsedUrl.parse(url)
    for prefix in prefixes:
        allowed = ParsedUrl.parse(prefix)
        same_origin = (allowed.scheme, allowed.host, allowed.port) == (
            target.scheme, target.host, target.port)
        if same_origin and target.path.startswith(allowed.path):
            return True
    return False


def is_public(address: IPAddress) -> bool:
    """Global unicast only: refuses loopback, private, link-local (cloud metadata
    169.254.169.254), CGNAT, multicast, reserved, and IPv4-mapped/6to4 spellings of those."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (
            address.teredo[1] if address.teredo else None)
        if embedded is not None and not is_public(embedded):
            return False
    return bool(address.is_global) and not address.is_multicast


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to. getaddrinfo also decodes decimal/octal/hex IPv4
    spellings (``2130706433``, ``0177.0.0.1``), so they are judged by their real address."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise Invalid(f"check_url host {host!r} does not resolve: {exc.strerror}") from exc
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


async def checked_address(url: str, *, allow_private: bool) -> IPAddress | None:
    """The address to connect to for ``url``; raises Invalid if any resolved address is not
    public. Returns None when private callbacks are allowed (no resolution needed)."""
    parsed = ParsedUrl.parse(url)
    if allow_private:
        return None
    addresses = await resolve(parsed.host, parsed.port)
    refused = [str(a) for a in addresses if not is_public(a)]
    if refused or not addresses:
        raise Invalid(
            f"check_url host {parsed.host!r} resolves to non-public address(es) "
            f"{', '.join(refused) or '(none)'}; refused (RMS_ALLOW_PRIVATE_CALLBACKS is off)"
        )
    return addresses[0]


async def validate_check_url(url: str, prefixes: Iterable[str], *, allow_private: bool) -> None:
    """Prepare-time check: prefix, scheme, and the SSRF guard."""
    if not matches_prefix(url, prefixes):
        raise Invalid(f"check_url {url!r} does not start with one of the app's "
                      "check_url_prefixes")
    await checked_address(url, allow_private=allow_private)
