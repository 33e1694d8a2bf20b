"""The one outbound HTTP client: connections can only reach public addresses (SSRF guard).

SPEC Part A "Web: SSRF guard" and seed 003: every outbound URL (web_fetch, web_search providers, MCP
URLs, model-provider URLs) goes through here. Nothing in Toolgate may talk HTTP to a URL that a tenant,
an agent or a remote page chose except through :func:`fetch`, :func:`guarded_client` or
:func:`guarded_async_client`.

How the guard works, in layers (each would stop most attacks alone; together they leave no gap):

1. URL check (:meth:`AddressPolicy.check_url`): only ``http``/``https``, no userinfo, a host that is
   not a metadata name, and a literal IP (in any spelling: ``2130706433``, ``0x7f.1``, ``[::ffff:…]``)
   that is public. Run before the first request and again on every redirect hop.
2. Connect time (:class:`GuardedNetworkBackend`): httpcore asks its *network backend* for a TCP
   connection to ``(host, port)``. Ours resolves the host ONCE, checks EVERY answer, and opens the socket
   to one of the vetted IP literals. The name is never looked up again, so a DNS answer that changes
   between check and use (DNS rebinding) cannot pick the target. The HTTP ``Host`` header and the TLS
   SNI / certificate check still use the name, because only the socket's destination changes.
3. Redirects are followed by :func:`fetch` itself (bounded), each hop passing 1 and 2 again; a
   :func:`guarded_client` never follows redirects on its own, and even if a caller turns that on, every
   hop is a new request through the same transport and so through the same checks.
4. Caps: connect/read timeouts, a total deadline and a response-size cap (the body is streamed and
   decompressed by us with a bound, so a gzip bomb cannot blow past it).

Environment proxies (``HTTP_PROXY`` …) and ``.netrc`` are ignored on purpose: a proxy would make the
connection to the proxy's address and let *it* resolve the name, which would bypass every check above.

Test seam: ``TOOLGATE_SSRF_ALLOW_NETS`` (Django setting or environment variable, comma-separated
CIDRs, empty by default) lets the tests reach their local servers. It is for tests only; metadata
addresses stay blocked even inside an allowed network. A name resolves through the policy's resolver
(``socket.getaddrinfo`` by default), which tests replace to map ``evil.test`` to ``127.0.0.1``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
import httpcore
import httpx
from django.core.exceptions import ImproperlyConfigured

from apps.tenants import tracing

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# host, port -> the IP addresses (as strings) the name resolves to.
Resolver = Callable[[str, int], Sequence[str]]

ALLOW_NETS_SETTING = "TOOLGATE_SSRF_ALLOW_NETS"

# Seed 003, verbatim: the ranges Nebo's transport refuses.
SEED_BLOCKED_NETS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "0.0.0.0/8",
        "100.64.0.0/10",
        "198.18.0.0/15",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
    )
)

# Everything else that is not a public unicast address. ``ipaddress``'s ``is_global`` is the final
# catch-all below, but it has gaps in 3.11 (224.0.0.0/4 and 192.0.0.8 count as "global"; so do the
# IPv4-compatible ::/96 and 6to4 2002::/16 forms), so the ranges are listed explicitly as well.
EXTRA_BLOCKED_NETS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relay anycast
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, includes 255.255.255.255
        "::/128",  # unspecified
        "::/96",  # IPv4-compatible (deprecated): ::7f00:1 would reach 127.0.0.1 on some stacks
        "::ffff:0:0/96",  # IPv4-mapped: checked through the embedded IPv4 too; never needed as a target
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001::/32",  # Teredo: the client address inside is obfuscated, so refuse the whole prefix
        "2001:db8::/32",  # documentation
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)

# Cloud metadata endpoints (AWS, GCP, Azure, OCI, DigitalOcean: 169.254.169.254; AWS IPv6; Alibaba;
# the ECS task metadata). Blocked even inside TOOLGATE_SSRF_ALLOW_NETS: no test needs them.
METADATA_IPS: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "169.254.169.123")
)
METADATA_HOSTS: frozenset[str] = frozenset(
    {
        "metadata.google.internal",
        "metadata.google.com",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.platformequinix.com",
        "metadata.packet.net",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    }
)
# Names that mean "this machine" whatever DNS says (RFC 6761), refused before any lookup.
LOCAL_HOST_SUFFIXES = ("localhost", ".localhost", ".local", ".internal")

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 15.0
DEFAULT_TOTAL_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_MAX_REDIRECTS = 5
USER_AGENT = "Toolgate/0.1 (+web_fetch)"

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Headers that may follow a redirect to another origin; anything else (Authorization, API-key headers
# such as Brave's X-Subscription-Token, cookies) stays with the origin it was meant for.
CROSS_ORIGIN_SAFE_HEADERS = frozenset({"user-agent", "accept", "accept-language"})


class SSRFBlocked(httpx.RequestError):
    """The URL or an address it resolves to is not allowed. The message says why, for an LLM or a user.

    A subclass of ``httpx.RequestError`` so code that only catches httpx errors still fails closed.
    """


# ---------------------------------------------------------------------------------------------------
# Addresses


_IPV4_PART = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")


def parse_ipv4_loose(host: str) -> ipaddress.IPv4Address | None:
    """Read ``host`` the way ``inet_aton`` and browsers (WHATWG URL) do: 1 to 4 parts, each decimal,
    octal (leading ``0``) or hex (``0x``), the last part filling the remaining bytes. So ``2130706433``,
    ``0177.0.0.1``, ``0x7f.0.0.1`` and ``127.1`` all mean 127.0.0.1. Returns None for anything that is
    not all-numeric (a domain name); raises :class:`SSRFBlocked` for a numeric host that is no valid
    address (``1.2.3.4.5``, ``08.1``, ``256.1.1.1``), because a resolver might still read it somehow.
    """
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]  # one trailing dot, as in an absolute name
    if not parts or not all(_IPV4_PART.match(p) for p in parts):
        return None
    if len(parts) > 4:
        raise SSRFBlocked(f"blocked: the host {host!r} is neither a valid IPv4 address nor a name")
    numbers: list[int] = []
    for part in parts:
        try:
            if part[:2].lower() == "0x":
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part[1:], 8))
            else:
                numbers.append(int(part, 10))
        except ValueError:
            raise SSRFBlocked(f"blocked: the host {host!r} is not a valid IPv4 address") from None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise SSRFBlocked(f"blocked: the host {host!r} is not a valid IPv4 address (a part is out of range)")
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def parse_ip_literal(host: str) -> IPAddress | None:
    """The IP address ``host`` spells (IPv6 with or without brackets, any IPv4 spelling), or None."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in bare:
        try:
            return ipaddress.IPv6Address(bare)
        except ValueError:
            raise SSRFBlocked(f"blocked: the host {host!r} is not a valid IPv6 address") from None
    return parse_ipv4_loose(bare)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and that a translating network would reach."""
    if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d
        return ip.ipv4_mapped
    if ip.sixtofour is not None:  # 2002:AABB:CCDD::/48
        return ip.sixtofour
    packed = ip.packed
    if packed[:12] == bytes(12) and packed[12:] != bytes(4):  # ::a.b.c.d (IPv4-compatible)
        return ipaddress.IPv4Address(packed[12:])
    if ip in _NAT64_WELL_KNOWN:  # 64:ff9b::a.b.c.d
        return ipaddress.IPv4Address(packed[12:])
    return None


_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")


def blocked_reason(ip: IPAddress, allow_nets: Sequence[IPNetwork] = ()) -> str | None:
    """Why ``ip`` may not be contacted, or None when it is a public address (or explicitly allowed)."""
    if ip in METADATA_IPS:
        return f"{ip} is a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return f"{ip} carries a zone index (only link-local addresses do)"
    # The test seam: an explicitly allowed network wins over the ranges below, but only for the exact
    # address family and spelling listed (127.0.0.2/32 does not allow ::ffff:127.0.0.2).
    if any(ip.version == net.version and ip in net for net in allow_nets):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = blocked_reason(embedded, ())
            if inner is not None:
                return f"{ip} embeds {embedded}: {inner}"
    for net in SEED_BLOCKED_NETS + EXTRA_BLOCKED_NETS:
        if ip.version == net.version and ip in net:
            return f"{ip} is in the blocked range {net} (not a public address)"
    if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast:
        return f"{ip} is not a public address"
    if ip.is_reserved or ip.is_unspecified or not ip.is_global:
        return f"{ip} is a reserved or non-global address"
    return None


def _normalise_host(host: str) -> str:
    return host.strip().rstrip(".").lower()


def blocked_host_name(host: str) -> str | None:
    """Why a host *name* is refused before any lookup (metadata and local-only names), or None."""
    name = _normalise_host(host)
    if name in METADATA_HOSTS:
        return f"{name} is a cloud metadata host"
    if any(name == s.lstrip(".") or name.endswith(s) for s in LOCAL_HOST_SUFFIXES):
        return f"{name} is a local-only host name"
    return None


def parse_allow_nets(value: str | Iterable[str] | None) -> tuple[IPNetwork, ...]:
    """``"127.0.0.2/32, ::1/128"`` (or a list) → networks; a malformed entry is a configuration error."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    nets: list[IPNetwork] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{ALLOW_NETS_SETTING}: {item!r} is not a CIDR network ({exc})"
            ) from exc
    return tuple(nets)


def configured_allow_nets() -> tuple[IPNetwork, ...]:
    """The test seam's networks: the Django setting when defined, else the environment variable."""
    from django.conf import settings

    value: Any = None
    if settings.configured:
        value = getattr(settings, ALLOW_NETS_SETTING, None)
    if value is None:
        value = os.environ.get(ALLOW_NETS_SETTING, "")
    return parse_allow_nets(value)


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the operating system (``socket.getaddrinfo``); unique answers in order."""
    answers: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = str(sockaddr[0])
        if address not in answers:
            answers.append(address)
    return answers


@dataclass(frozen=True)
class AddressPolicy:
    """Which URLs and addresses outbound HTTP may reach, and how names are resolved.

    ``allow_nets`` is the test seam (see the module docstring); ``resolver`` maps a name to addresses.
    """

    allow_nets: tuple[IPNetwork, ...] = ()
    resolver: Resolver = system_resolver

    @classmethod
    def from_settings(cls, *, resolver: Resolver | None = None) -> AddressPolicy:
        return cls(allow_nets=configured_allow_nets(), resolver=resolver or system_resolver)

    def check_ip(self, ip: IPAddress) -> None:
        reason = blocked_reason(ip, self.allow_nets)
        if reason is not None:
            raise SSRFBlocked(f"blocked: {reason}")

    def check_url(self, url: str | httpx.URL) -> httpx.URL:
        """The parsed URL if it may be requested; :class:`SSRFBlocked` otherwise. Does no DNS lookup
        (names are resolved and checked once, at connect time, by :class:`GuardedNetworkBackend`)."""
        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
        except (httpx.InvalidURL, ValueError, TypeError) as exc:
            raise SSRFBlocked(_explain_invalid_url(str(url), exc)) from None
        if parsed.scheme not in ("http", "https"):
            raise SSRFBlocked(
                f"blocked: the scheme {parsed.scheme or '(none)'!r} is not allowed; only http and https URLs"
            )
        # Userinfo is how "http://public.example@127.0.0.1/" fools a reader into trusting the wrong
        # host; credentials for the target belong in headers set by Toolgate, never in a URL.
        if parsed.userinfo:
            raise SSRFBlocked("blocked: URLs with a user name or password (user@host) are not allowed")
        host = parsed.host
        if not host:
            raise SSRFBlocked("blocked: the URL has no host")
        reason = blocked_host_name(host)
        if reason is not None:
            raise SSRFBlocked(f"blocked: {reason}")
        literal = parse_ip_literal(_normalise_host(host))
        if literal is not None:
            self.check_ip(literal)
        return parsed

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        """The vetted addresses to connect to for ``host``: a literal as itself, a name through the
        resolver. EVERY answer must pass: a name answering both a public and a private address is
        refused, because which one a client would use is up to whoever controls the DNS."""
        reason = blocked_host_name(host)
        if reason is not None:
            raise SSRFBlocked(f"blocked: {reason}")
        literal = parse_ip_literal(_normalise_host(host))
        if literal is not None:
            self.check_ip(literal)
            return [literal]
        try:
            answers = list(self.resolver(_normalise_host(host), port))
        except OSError as exc:
            raise httpx.ConnectError(f"could not resolve {host!r}: {exc}") from exc
        if not answers:
            raise httpx.ConnectError(f"could not resolve {host!r}: no addresses")
        vetted: list[IPAddress] = []
        for answer in answers:
            try:
                ip = ipaddress.ip_address(answer)
            except ValueError:
                raise SSRFBlocked(f"blocked: {host} resolved to {answer!r}, which is no IP address") from None
            reason = blocked_reason(ip, self.allow_nets)
            if reason is not None:
                raise SSRFBlocked(f"blocked: {host} resolves to {reason}")
            vetted.append(ip)
        return vetted


def _explain_invalid_url(url: str, exc: Exception) -> str:
    """An invalid-URL message that says what an odd IPv4 spelling means (httpx refuses ``0177.0.0.1``)."""
    try:
        host = urlsplit(url).hostname or ""
        meant = parse_ipv4_loose(host) if host else None
    except (ValueError, SSRFBlocked):
        meant = None
    if meant is not None:
        reason = blocked_reason(meant)
        suffix = f"; it means {meant}" + (f", and {reason}" if reason else "")
        return f"blocked: invalid URL {url!r} ({exc}){suffix}"
    return f"blocked: invalid URL {url!r} ({exc})"


# ---------------------------------------------------------------------------------------------------
# Connect-time enforcement


class GuardedNetworkBackend(httpcore.NetworkBackend):
    """httpcore network backend that connects only to vetted addresses (no second lookup).

    httpcore hands ``connect_tcp`` the URL's host name; TLS (SNI and certificate verification) is
    started afterwards on the returned stream with that same name, so swapping the destination for the
    vetted IP literal changes nothing but where the socket goes.
    """

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = self._policy.resolve(host, port)
        options = list(socket_options or ())
        last_error: Exception | None = None
        for ip in addresses:
            try:
                # An IP literal: getaddrinfo inside create_connection parses it, no DNS query.
                return self._inner.connect_tcp(str(ip), port, timeout, local_address, options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise SSRFBlocked("blocked: unix sockets are not reachable through the outbound client")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class AsyncGuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """The async twin of :class:`GuardedNetworkBackend` (anyio; the lookup runs in a worker thread)."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await anyio.to_thread.run_sync(self._policy.resolve, host, port)
        options = list(socket_options or ())
        last_error: Exception | None = None
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(str(ip), port, timeout, local_address, options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise SSRFBlocked("blocked: unix sockets are not reachable through the outbound client")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# httpcore exception → the httpx exception a caller expects (httpx keeps its own mapping private).
_EXCEPTION_MAP: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except SSRFBlocked:
        raise
    except Exception as exc:
        for source, target in _EXCEPTION_MAP:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


def _core_request(request: httpx.Request) -> httpcore.Request:
    return httpcore.Request(
        method=request.method,
        url=httpcore.URL(
            scheme=request.url.raw_scheme,
            host=request.url.raw_host,
            port=request.url.port,
            target=request.url.raw_path,
        ),
        headers=request.headers.raw,
        content=request.stream,  # type: ignore[arg-type]
        extensions=request.extensions,
    )


class _SyncStream(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _mapped_errors():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        aclose = getattr(self._stream, "aclose", None)
        if aclose is not None:
            await aclose()


# The same limits for the sync and the async transport.
_POOL_LIMITS: dict[str, Any] = {
    "max_connections": 20,
    "max_keepalive_connections": 10,
    "keepalive_expiry": 5.0,
}


def _ssl_context(verify: ssl.SSLContext | bool) -> ssl.SSLContext:
    # trust_env=False: SSL_CERT_FILE and friends must not change whom we trust behind our back.
    return httpx.create_ssl_context(verify=verify, trust_env=False)


class GuardedTransport(httpx.BaseTransport):
    """httpx transport: every request passes the URL check, every new connection the address check."""

    def __init__(self, policy: AddressPolicy, *, verify: ssl.SSLContext | bool = True) -> None:
        self.policy = policy
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(verify), network_backend=GuardedNetworkBackend(policy), **_POOL_LIMITS
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.policy.check_url(request.url)
        with _mapped_errors():
            response = self._pool.handle_request(_core_request(request))
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_SyncStream(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self.close()


class AsyncGuardedTransport(httpx.AsyncBaseTransport):
    """The async twin of :class:`GuardedTransport` (for MCP and provider clients built on AsyncClient)."""

    def __init__(self, policy: AddressPolicy, *, verify: ssl.SSLContext | bool = True) -> None:
        self.policy = policy
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(verify),
            network_backend=AsyncGuardedNetworkBackend(policy),
            **_POOL_LIMITS,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.policy.check_url(request.url)
        with _mapped_errors():
            response = await self._pool.handle_async_request(_core_request(request))
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_AsyncStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def _timeout(connect: float, read: float) -> httpx.Timeout:
    return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)


def guarded_client(
    *,
    policy: AddressPolicy | None = None,
    verify: ssl.SSLContext | bool = True,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    headers: Mapping[str, str] | None = None,
) -> httpx.Client:
    """An ``httpx.Client`` that can only reach public addresses. It does not follow redirects (use
    :func:`fetch` for that, or the hops are still checked if a caller enables it) and ignores
    environment proxies and ``.netrc``. Response size is the caller's to cap (see :func:`fetch`)."""
    policy = policy or AddressPolicy.from_settings()
    client = httpx.Client(
        transport=GuardedTransport(policy, verify=verify),
        follow_redirects=False,
        trust_env=False,
        timeout=_timeout(connect_timeout, read_timeout),
        headers={"User-Agent": USER_AGENT, **(headers or {})},
    )
    return tracing.instrument_httpx_client(client)  # type: ignore[no-any-return]


def guarded_async_client(
    *,
    policy: AddressPolicy | None = None,
    verify: ssl.SSLContext | bool = True,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    headers: Mapping[str, str] | None = None,
) -> httpx.AsyncClient:
    """The async twin of :func:`guarded_client`."""
    policy = policy or AddressPolicy.from_settings()
    client = httpx.AsyncClient(
        transport=AsyncGuardedTransport(policy, verify=verify),
        follow_redirects=False,
        trust_env=False,
        timeout=_timeout(connect_timeout, read_timeout),
        headers={"User-Agent": USER_AGENT, **(headers or {})},
    )
    return tracing.instrument_httpx_client(client)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------------
# fetch(): redirects, caps, decoding


@dataclass(frozen=True)
class FetchLimits:
    """Caps for one :func:`fetch` (all hops together for the total time)."""

    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT
    max_bytes: int = DEFAULT_MAX_BYTES
    max_redirects: int = DEFAULT_MAX_REDIRECTS


@dataclass(frozen=True)
class FetchResult:
    """A fetched response with its body read (and decompressed) up to the size cap."""

    url: str  # after redirects
    status_code: int
    headers: httpx.Headers
    body: bytes
    truncated: bool  # the body was cut at FetchLimits.max_bytes
    redirects: tuple[str, ...] = field(default_factory=tuple)

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters ("" when the server sent none)."""
        return str(self.headers.get("content-type", "")).split(";", 1)[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for param in str(self.headers.get("content-type", "")).split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return str(value.strip().strip("\"'"))
        return None

    def text(self) -> str:
        """The body as text: the declared charset, else UTF-8; undecodable bytes become U+FFFD."""
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # an unknown charset name
            return self.body.decode("utf-8", errors="replace")


class _BoundedDecoder:
    """Content-Encoding decoding that never produces more than asked for (gzip bombs stop at the cap)."""

    def __init__(self, encoding: str) -> None:
        encoding = encoding.strip().lower()
        self._identity = encoding in ("", "identity")
        if self._identity:
            self._zlib = None
        elif encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib-wrapped (what servers send)
        else:
            raise httpx.DecodingError(f"unsupported Content-Encoding {encoding!r}")

    def decode(self, data: bytes, limit: int) -> bytes:
        """Up to ``limit`` decoded bytes of ``data`` (more input left over means the cap was hit)."""
        if self._zlib is None:
            return data[:limit]
        try:
            return self._zlib.decompress(data, limit)
        except zlib.error as exc:
            raise httpx.DecodingError(f"could not decode the response body: {exc}") from exc

    def has_pending(self) -> bool:
        return self._zlib is not None and bool(self._zlib.unconsumed_tail)


def _read_capped(response: httpx.Response, max_bytes: int, deadline: float) -> tuple[bytes, bool]:
    """Stream the body, stopping at ``max_bytes`` decoded bytes (truncated=True) or at the deadline."""
    decoder = _BoundedDecoder(response.headers.get("content-encoding", ""))
    body = bytearray()
    raw_total = 0
    for chunk in response.iter_raw():
        # Checked between reads: a server dripping a byte at a time cannot outlast the total cap.
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the total time cap was reached while reading the response")
        raw_total += len(chunk)
        room = max_bytes - len(body)
        decoded = decoder.decode(chunk, room + 1)
        body += decoded
        if len(body) > max_bytes or decoder.has_pending():
            return bytes(body[:max_bytes]), True
        # Compressed input that yields (almost) nothing must still be bounded.
        if raw_total > max_bytes + 65536:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def fetch(
    url: str | httpx.URL,
    *,
    method: str = "GET",
    params: Mapping[str, str | int] | None = None,
    headers: Mapping[str, str] | None = None,
    data: Mapping[str, str] | None = None,
    limits: FetchLimits | None = None,
    policy: AddressPolicy | None = None,
    verify: ssl.SSLContext | bool = True,
) -> FetchResult:
    """Request ``url`` through the guard, following up to ``limits.max_redirects`` redirects (each hop
    checked again), reading at most ``limits.max_bytes`` of body within ``limits.total_timeout``.

    Raises :class:`SSRFBlocked` for a refused URL or address (first request or any hop),
    ``httpx.TooManyRedirects``, or another ``httpx.HTTPError`` (timeouts, connection errors).
    A non-2xx status is returned, not raised.
    """
    limits = limits or FetchLimits()
    policy = policy or AddressPolicy.from_settings()
    deadline = time.monotonic() + limits.total_timeout
    current = policy.check_url(url)
    if params:
        current = current.copy_merge_params(dict(params))
    hop_headers = {"Accept-Encoding": "gzip, deflate", **(headers or {})}
    hop_method = method.upper()
    hop_data = data
    redirects: list[str] = []
    with guarded_client(policy=policy, verify=verify) as client:
        for _hop in range(limits.max_redirects + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise httpx.ConnectTimeout("the total time cap was reached before the request was sent")
            request = client.build_request(
                hop_method,
                current,
                headers=hop_headers,
                data=hop_data,
                timeout=_timeout(min(limits.connect_timeout, remaining), min(limits.read_timeout, remaining)),
            )
            response = client.send(request, stream=True)
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    try:
                        target = current.join(location)
                    except (httpx.InvalidURL, ValueError) as exc:
                        raise SSRFBlocked(f"blocked: the redirect to {location!r} is no valid URL") from exc
                    # Checked here for a clear error naming the hop; the transport checks again.
                    try:
                        target = policy.check_url(target)
                    except SSRFBlocked as exc:
                        raise SSRFBlocked(f"redirect from {current} to {target}: {exc}") from None
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and hop_method not in ("GET", "HEAD")
                    ):
                        hop_method, hop_data = "GET", None  # what browsers do
                    if not _same_origin(current, target):
                        hop_headers = {
                            k: v for k, v in hop_headers.items() if k.lower() in CROSS_ORIGIN_SAFE_HEADERS
                        }
                        hop_headers["Accept-Encoding"] = "gzip, deflate"
                    redirects.append(str(target))
                    current = target
                    continue
                body, truncated = _read_capped(response, limits.max_bytes, deadline)
                return FetchResult(
                    url=str(current),
                    status_code=response.status_code,
                    headers=response.headers,
                    body=body,
                    truncated=truncated,
                    redirects=tuple(redirects),
                )
            finally:
                response.close()
    raise httpx.TooManyRedirects(f"more than {limits.max_redirects} redirects")
