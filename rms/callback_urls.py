"""Check-back URL rules (design section 5): the URL must fall under one of the app's allowed
prefixes, be http(s), and (unless the deployment allows private callbacks) resolve only to
global addresses. Used at prepare time and again at call time by the confirm service, which
connects to the address checked here (no DNS rebinding)."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
import string
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit

from rms.domain.errors import Invalid

MAX_URL_LENGTH = 2048
URL_CACHE_SIZE = 1024  # URLs remembered parsed and normalised (each at most MAX_URL_LENGTH)
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> ParsedUrl:
        return _parsed(url)


@functools.lru_cache(maxsize=URL_CACHE_SIZE)
def _parsed(url: str) -> ParsedUrl:
    """:meth:`ParsedUrl.parse`, remembered: a prepare parses its check URL and its app's
    prefixes, which are the same few strings request after request (a refusal is raised
    again each time, not remembered)."""
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
    return ParsedUrl(parts.scheme, parts.hostname.lower(), port or default_port, parts.path or "/")


_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
_SLASHES = re.compile(r"/{2,}")


def normalize_url(url: str) -> str:
    """:func:`_normalized`, remembered for a URL of at most MAX_URL_LENGTH characters (a
    prepare normalises its check URL and its app's prefixes: the same few strings request
    after request; a refusal is raised again each time, not remembered)."""
    return _normalized(url) if len(url) > MAX_URL_LENGTH else _normalized_short(url)


def _normalized(url: str) -> str:
    """The one spelling of ``url`` that RMS matches, stores and calls (RFC 3986 section 6):
    scheme and host in lower case, percent-encoded unreserved characters decoded (``%2e`` is
    ``.``), repeated slashes merged, dot segments removed, no fragment. Refused: whitespace and
    control characters (CR/LF would split the request line), backslashes and encoded slashes,
    which servers may read as path separators after the prefix check."""
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise Invalid("check_url must not contain spaces or control characters (CR, LF, tab)")
    if "\\" in url:
        raise Invalid(f"check_url {url!r} must not contain a backslash")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise Invalid(f"check_url {url!r} is not a valid URL: {exc}") from exc
    # empty segments merged as many servers do (nginx's merge_slashes): "a//.." would climb
    # one level less for RMS than for such a server
    path = _SLASHES.sub("/", _PERCENT.sub(_decoded_if_unreserved, parts.path))
    if _ENCODED_SEPARATOR.search(path):
        raise Invalid(f"check_url {url!r} must not contain an encoded slash or backslash")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(),
                       _remove_dot_segments(path) or "/", parts.query, ""))


_normalized_short = functools.lru_cache(maxsize=URL_CACHE_SIZE)(_normalized)


def _decoded_if_unreserved(match: re.Match[str]) -> str:
    character = chr(int(match.group(1), 16))
    return character if character in _UNRESERVED else "%" + match.group(1).upper()


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, on a path whose unreserved characters are decoded."""
    output: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if not path.startswith("/"):
        return path
    trailing = "/" if output and path.endswith(("/.", "/..")) else ""
    return "/" + "/".join(output) + trailing


def validate_prefix(prefix: str) -> str:
    """App registration: every allowed prefix is a valid http(s) URL; returns its normalised
    form (:func:`normalize_url`), which is what is stored."""
    normalized = normalize_url(prefix)
    ParsedUrl.parse(normalized)
    return normalized


def matches_prefix(url: str, prefixes: Iterable[str]) -> bool:
    """Same scheme, host and port as a prefix, and a path under the prefix's path (so
    ``https://a.example`` never admits ``https://a.example.evil.net``), both normalised: dot
    segments cannot climb out of the prefix."""
    target = ParsedUrl.parse(normalize_url(url))
    for prefix in prefixes:
        allowed = ParsedUrl.parse(normalize_url(prefix))
        same_origin = (allowed.scheme, allowed.host, allowed.port) == (
            target.scheme, target.host, target.port)
        if same_origin and target.path.startswith(allowed.path):
            return True
    return False


# IPv6 ranges Python 3.11's ``is_global`` still calls global: IPv4-compatible ``::a.b.c.d``
# (routed as IPv4 by some stacks), deprecated site-local, and local-use NAT64 (RFC 8215).
_NON_GLOBAL_V6 = tuple(ipaddress.IPv6Network(net) for net in ("::/96", "fec0::/10", "64:ff9b:1::/48"))
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 spelling carries (mapped, 6to4, Teredo client, NAT64)."""
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)


def is_public(address: IPAddress) -> bool:
    """Global unicast only: refuses loopback, private, link-local (cloud metadata
    169.254.169.254), CGNAT, multicast, reserved, and IPv6 spellings of those (IPv4-mapped,
    IPv4-compatible, 6to4, Teredo, NAT64, site-local)."""
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in _NON_GLOBAL_V6):
            return False
        embedded = _embedded_ipv4(address)
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


@dataclass(frozen=True, slots=True)
class CallTarget:
    """Where a check-back call may connect: ``address`` is the checked address (the connection
    must go there, never to a fresh DNS answer), None when private callbacks are allowed."""

    host: str
    port: int
    address: IPAddress | None


async def call_target(url: str, prefixes: Iterable[str], *, allow_private: bool) -> CallTarget:
    """Prefix, scheme and SSRF guard for ``url``; raises Invalid. Run at prepare time and again
    at call time (the app's prefixes may have changed, and DNS may answer differently now)."""
    if not matches_prefix(url, prefixes):
        raise Invalid(f"check_url {url!r} does not start with one of the app's "
                      "check_url_prefixes")
    parsed = ParsedUrl.parse(url)
    return CallTarget(parsed.host, parsed.port,
                      await checked_address(url, allow_private=allow_private))


class PassedHosts:
    """Hosts whose addresses passed the SSRF guard recently, so a prepare does not resolve DNS
    each time. Only the prepare-time check uses it: it gives the producer an early, clear 422,
    while the confirm service checks again and pins the address at every call."""

    def __init__(self, ttl_seconds: float = 30.0, capacity: int = 10_000) -> None:
        self._ttl = ttl_seconds
        self._capacity = capacity
        self._expiry: dict[tuple[str, int], float] = {}

    def fresh(self, host: str, port: int) -> bool:
        return self._expiry.get((host, port), 0.0) > time.monotonic()

    def add(self, host: str, port: int) -> None:
        if len(self._expiry) >= self._capacity:
            self._expiry.clear()
        self._expiry[(host, port)] = time.monotonic() + self._ttl


async def validate_check_url(url: str, prefixes: Iterable[str], *, allow_private: bool,
                             passed: PassedHosts | None = None) -> str:
    """Prepare-time check: prefix, scheme, and the SSRF guard (skipping resolution for a host
    in ``passed``). Returns the normalised URL, the one to store."""
    url = normalize_url(url)
    if not matches_prefix(url, prefixes):
        raise Invalid(f"check_url {url!r} does not start with one of the app's "
                      "check_url_prefixes")
    parsed = ParsedUrl.parse(url)
    if allow_private or (passed is not None and passed.fresh(parsed.host, parsed.port)):
        return url
    await checked_address(url, allow_private=False)
    if passed is not None:
        passed.add(parsed.host, parsed.port)
    return url
