"""The SSRF guard (apps/toolkit/ssrf.py) against real local servers.

Layout: a "public" server on 127.0.0.2, allowed through the test seam (``allow_nets``) and nothing else;
"internal" servers on 127.0.0.1 and [::1] that are never allowed. Blocked requests must raise
``SSRFBlocked`` (a refused connection would raise ``ConnectError`` instead) and must leave the internal
servers without a single hit.
"""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from apps.toolkit.ssrf import (
    AddressPolicy,
    FetchLimits,
    GuardedNetworkBackend,
    SSRFBlocked,
    blocked_reason,
    fetch,
    guarded_async_client,
    guarded_client,
    parse_allow_nets,
    parse_ipv4_loose,
)
from tests.local_http import Handler, LocalServer, serving

PUBLIC_IP = "127.0.0.2"
ALLOW_PUBLIC = parse_allow_nets(f"{PUBLIC_IP}/32")


def _no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"no DNS lookup expected, got one for {host!r}")


@pytest.fixture
def policy() -> AddressPolicy:
    """Only the public test server is allowed; names must not be looked up unless a test says so."""
    return AddressPolicy(allow_nets=ALLOW_PUBLIC, resolver=_no_dns)


@pytest.fixture
def public() -> Iterator[LocalServer]:
    with serving(PUBLIC_IP) as server:

        @server.route("/")
        def index(h: Handler) -> None:
            h.reply(200, b"public", extra_host=h.headers.get("Host", ""))

        yield server


@pytest.fixture
def internal(public: LocalServer) -> Iterator[LocalServer]:
    """A loopback server on the SAME port as the public one: a request that went to the wrong address
    would land here, not fail with "connection refused"."""
    with serving("127.0.0.1", public.port) as server:

        @server.route("/")
        def index(h: Handler) -> None:
            h.reply(200, b"internal secret")

        yield server


@pytest.fixture
def internal6() -> Iterator[LocalServer]:
    with serving("::1") as server:

        @server.route("/")
        def index(h: Handler) -> None:
            h.reply(200, b"internal v6 secret")

        yield server


# ---------------------------------------------------------------------------------------------------
# Literal addresses, names and schemes refused before any connection (each case asserted)

BLOCKED_URLS = [
    # seed 003 ranges
    ("http://127.0.0.1/", "127.0.0.1"),
    ("http://127.255.255.254/", "127.0.0.0/8"),
    ("http://10.0.0.1/", "10.0.0.0/8"),
    ("http://172.16.5.4/", "172.16.0.0/12"),
    ("http://172.31.255.255/", "172.16.0.0/12"),
    ("http://192.168.1.1/", "192.168.0.0/16"),
    ("http://169.254.1.1/", "169.254.0.0/16"),
    ("http://0.0.0.0/", "0.0.0.0/8"),
    ("http://0.1.2.3/", "0.0.0.0/8"),
    ("http://100.64.0.1/", "100.64.0.0/10"),
    ("http://198.18.0.1/", "198.18.0.0/15"),
    ("http://[::1]/", "::1"),
    ("http://[fc00::1]/", "fc00::/7"),
    ("http://[fd12:3456::1]/", "fc00::/7"),
    ("http://[fe80::1]/", "fe80::/10"),
    # everything else non-public
    ("http://[::]/", "::"),
    ("http://224.0.0.1/", "224.0.0.0/4"),
    ("http://239.255.255.250/", "224.0.0.0/4"),
    ("http://240.0.0.1/", "240.0.0.0/4"),
    ("http://255.255.255.255/", "240.0.0.0/4"),
    ("http://192.0.2.1/", "192.0.2.0/24"),
    ("http://[ff02::1]/", "ff00::/8"),
    ("http://[2001:db8::1]/", "2001:db8::/32"),
    ("http://[fe80::1%25eth0]/", "zone"),
    # metadata addresses
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://[fd00:ec2::254]/", "metadata"),
    ("http://169.254.170.2/v2/credentials", "metadata"),
    # IPv6 forms that carry a blocked IPv4 address
    ("http://[::ffff:127.0.0.1]/", "127.0.0.1"),
    ("http://[::ffff:7f00:1]/", "127.0.0.1"),
    ("http://[::ffff:a9fe:a9fe]/", "metadata"),
    ("http://[::ffff:10.1.2.3]/", "10.1.2.3"),
    ("http://[::127.0.0.1]/", "127.0.0.1"),
    ("http://[64:ff9b::7f00:1]/", "127.0.0.1"),
    ("http://[64:ff9b::a9fe:a9fe]/", "metadata"),
    ("http://[64:ff9b:1::a00:1]/", "64:ff9b:1::/48"),
    ("http://[2002:7f00:1::]/", "127.0.0.1"),
    ("http://[2002:c0a8:101::1]/", "192.168.1.1"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "2001::/32"),
    # odd IPv4 spellings mean what inet_aton says they mean
    ("http://2130706433/", "127.0.0.1"),
    ("http://0x7f.0.0.1/", "127.0.0.1"),
    ("http://0x7f000001/", "127.0.0.1"),
    ("http://127.1/", "127.0.0.1"),
    ("http://0177.1/", "127.0.0.1"),
    ("http://017700000001/", "127.0.0.1"),
    ("http://0177.0.0.1/", "means 127.0.0.1"),
    ("http://0251.0376.0251.0376/", "means 169.254.169.254"),
    ("http://127.0.0.1./", "127.0.0.1"),
    ("http://3232235777/", "192.168.1.1"),
    ("http://1.2.3.4.5/", "neither a valid IPv4"),
    # metadata and local-only names, without asking DNS
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata host"),
    ("http://metadata.google.com/", "metadata host"),
    ("http://METADATA.Google.Internal./", "metadata host"),
    ("http://metadata/", "metadata host"),
    ("http://instance-data/latest/", "metadata host"),
    ("http://localhost/", "local-only"),
    ("http://admin.localhost/", "local-only"),
    # userinfo tricks
    ("http://evil@127.0.0.1/", "user name"),
    ("http://example.com@127.0.0.1/", "user name"),
    ("http://user:pass@example.com/", "user name"),
    # schemes
    ("file:///etc/passwd", "scheme"),
    ("gopher://127.0.0.1:70/_x", "scheme"),
    ("ftp://example.com/", "scheme"),
    ("dict://127.0.0.1:11211/", "scheme"),
    ("ws://example.com/", "scheme"),
]


@pytest.mark.parametrize(("url", "expected"), BLOCKED_URLS)
def test_blocked_url(policy: AddressPolicy, url: str, expected: str) -> None:
    with pytest.raises(SSRFBlocked, match="blocked") as caught:
        fetch(url, policy=policy)
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    ("host", "meant"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("192.168.257", "192.168.1.1"),
        ("0x7f.1.", "127.0.0.1"),
        ("8.8.8.8", "8.8.8.8"),
    ],
)
def test_loose_ipv4_spellings_mean_what_inet_aton_says(host: str, meant: str) -> None:
    assert parse_ipv4_loose(host) == ipaddress.IPv4Address(meant)


@pytest.mark.parametrize("host", ["example.com", "1.example", "0x7f.example", "a1"])
def test_names_are_not_ipv4(host: str) -> None:
    assert parse_ipv4_loose(host) is None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2002:808:808::1"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) is None


# ---------------------------------------------------------------------------------------------------
# The test seam itself


def test_public_server_reachable_through_the_seam(policy: AddressPolicy, public: LocalServer) -> None:
    result = fetch(public.url(), policy=policy)
    assert (result.status_code, result.body) == (200, b"public")


def test_loopback_blocked_without_the_seam(public: LocalServer) -> None:
    with pytest.raises(SSRFBlocked, match=r"127\.0\.0\.0/8"):
        fetch(public.url(), policy=AddressPolicy(resolver=_no_dns))
    assert public.hits == []


def test_seam_read_from_settings(settings, public: LocalServer) -> None:
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    assert fetch(public.url()).body == b"public"
    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    with pytest.raises(SSRFBlocked):
        fetch(public.url())
    assert len(public.hits) == 1


def test_seam_read_from_environment(settings, monkeypatch: pytest.MonkeyPatch, public: LocalServer) -> None:
    if hasattr(settings, "TOOLGATE_SSRF_ALLOW_NETS"):
        del settings.TOOLGATE_SSRF_ALLOW_NETS
    monkeypatch.setenv("TOOLGATE_SSRF_ALLOW_NETS", f" {PUBLIC_IP}/32 , ")
    assert fetch(public.url()).body == b"public"
    monkeypatch.delenv("TOOLGATE_SSRF_ALLOW_NETS")
    with pytest.raises(SSRFBlocked):
        fetch(public.url())


def test_malformed_seam_is_a_configuration_error() -> None:
    with pytest.raises(ImproperlyConfigured, match="not-a-net"):
        parse_allow_nets("127.0.0.2/32,not-a-net")


def test_seam_never_opens_metadata_addresses() -> None:
    wide = AddressPolicy(allow_nets=parse_allow_nets("169.254.0.0/16,0.0.0.0/0"), resolver=_no_dns)
    with pytest.raises(SSRFBlocked, match="metadata"):
        fetch("http://169.254.169.254/latest/meta-data/", policy=wide)


def test_seam_is_exact_about_family_and_spelling(policy: AddressPolicy, public: LocalServer) -> None:
    # 127.0.0.2 is allowed; its IPv4-mapped IPv6 spelling is not.
    with pytest.raises(SSRFBlocked, match=r"127\.0\.0\.2"):
        fetch(public.url(host="[::ffff:127.0.0.2]"), policy=policy)


@pytest.mark.parametrize("host", ["2130706434", "0x7f.0.0.2", "127.2", "0x7f000002"])
def test_odd_spelling_reaches_the_address_it_means(
    policy: AddressPolicy, public: LocalServer, host: str
) -> None:
    """Not merely "blocked because unresolvable": the spelling is read as the IPv4 address it means."""
    assert fetch(public.url(host=host), policy=policy).body == b"public"


# ---------------------------------------------------------------------------------------------------
# Connect time: the transport and the network backend enforce it, not only the URL pre-check


def test_network_backend_refuses_loopback_on_its_own(internal: LocalServer) -> None:
    backend = GuardedNetworkBackend(AddressPolicy(resolver=_no_dns))
    with pytest.raises(SSRFBlocked, match=r"127\.0\.0\.1"):
        backend.connect_tcp("127.0.0.1", internal.port, timeout=2)
    assert internal.hits == []


def test_transport_refuses_even_with_httpx_following_redirects(
    policy: AddressPolicy, public, internal
) -> None:
    """A caller that turns on httpx's own redirect handling still gets every hop checked."""

    @public.route("/to-internal")
    def to_internal(h: Handler) -> None:
        h.redirect(internal.url())

    with guarded_client(policy=policy) as client:
        with pytest.raises(SSRFBlocked, match=r"127\.0\.0\.1"):
            client.get(public.url("/to-internal"), follow_redirects=True)
        with pytest.raises(SSRFBlocked):
            client.get(internal.url())
    assert internal.hits == []


def test_async_client_is_guarded_too(
    policy: AddressPolicy, public: LocalServer, internal: LocalServer
) -> None:
    import asyncio

    async def run() -> tuple[bytes, str]:
        async with guarded_async_client(policy=policy) as client:
            ok = (await client.get(public.url())).content
            try:
                await client.get(internal.url())
            except SSRFBlocked as exc:
                return ok, str(exc)
            return ok, "not blocked"

    ok, error = asyncio.run(run())
    assert ok == b"public"
    assert "127.0.0.1" in error
    assert internal.hits == []


def test_name_resolving_inside_is_blocked(public: LocalServer, internal: LocalServer) -> None:
    policy = AddressPolicy(allow_nets=ALLOW_PUBLIC, resolver=lambda host, port: ["127.0.0.1"])
    with pytest.raises(SSRFBlocked, match=r"evil\.test resolves to 127\.0\.0\.1"):
        fetch(internal.url(host="evil.test"), policy=policy)
    assert internal.hits == []


def test_name_resolving_to_metadata_is_blocked() -> None:
    policy = AddressPolicy(resolver=lambda host, port: ["169.254.169.254"])
    with pytest.raises(SSRFBlocked, match="metadata"):
        fetch("http://innocent.test/latest/meta-data/", policy=policy)


@pytest.mark.parametrize("answers", [[PUBLIC_IP, "127.0.0.1"], ["127.0.0.1", PUBLIC_IP], [PUBLIC_IP, "::1"]])
def test_name_resolving_public_and_private_is_blocked(
    public: LocalServer, internal: LocalServer, answers: list[str]
) -> None:
    policy = AddressPolicy(allow_nets=ALLOW_PUBLIC, resolver=lambda host, port: answers)
    with pytest.raises(SSRFBlocked, match=r"mixed\.test resolves to"):
        fetch(public.url(host="mixed.test"), policy=policy)
    assert public.hits == []
    assert internal.hits == []


def test_dns_rebinding_second_answer_never_decides(public: LocalServer, internal: LocalServer) -> None:
    """The resolver answers public first, then private. Both servers listen on the same port, so if a
    second lookup picked the target the request would land on the internal one."""
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return [PUBLIC_IP] if len(calls) == 1 else ["127.0.0.1"]

    policy = AddressPolicy(allow_nets=ALLOW_PUBLIC, resolver=rebinding)
    result = fetch(public.url(host="rebind.test"), policy=policy)
    assert result.body == b"public"
    assert calls == ["rebind.test"]  # one lookup, the vetted one
    assert len(public.hits) == 1
    assert internal.hits == []
    # The name is kept for the Host header while the socket went to the vetted IP.
    assert public.hits[0].headers["host"] == f"rebind.test:{public.port}"
    assert result.headers["extra-host"] == f"rebind.test:{public.port}"


def test_unresolvable_name_is_a_connect_error() -> None:
    def nxdomain(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(httpx.ConnectError, match="could not resolve"):
        fetch("http://nowhere.test/", policy=AddressPolicy(resolver=nxdomain))


def _tls_pair(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for ``name``: (server context, client context trusting it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


def test_tls_keeps_sni_and_verification_for_the_name(tmp_path: Path) -> None:
    server_ctx, client_ctx = _tls_pair(tmp_path, "secure.test")
    seen_sni: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: seen_sni.append(name)  # type: ignore[assignment,func-returns-value]
    with serving(PUBLIC_IP, tls=server_ctx) as server:

        @server.route("/")
        def index(h: Handler) -> None:
            h.reply(200, b"tls ok")

        policy = AddressPolicy(allow_nets=ALLOW_PUBLIC, resolver=lambda host, port: [PUBLIC_IP])
        result = fetch(server.url(host="secure.test"), policy=policy, verify=client_ctx)
        assert result.body == b"tls ok"
        assert seen_sni == ["secure.test"]
        assert server.hits[0].headers["host"] == f"secure.test:{server.port}"
        # The certificate is checked against the NAME: another name on the same vetted IP fails.
        with pytest.raises(httpx.ConnectError, match=r"certificate|hostname"):
            fetch(server.url(host="other.test"), policy=policy, verify=client_ctx)


# ---------------------------------------------------------------------------------------------------
# Redirects: re-checked on every hop


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("internal", "127.0.0.1"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("internal6", "::1"),
        ("http://localhost/", "local-only"),
        ("http://metadata.google.internal/", "metadata host"),
        ("http://2130706433/", "127.0.0.1"),
        ("http://x@127.0.0.2/", "user name"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://127.0.0.2/", "scheme"),
    ],
)
def test_redirect_hop_is_checked(
    policy: AddressPolicy,
    public: LocalServer,
    internal: LocalServer,
    internal6: LocalServer,
    target: str,
    expected: str,
) -> None:
    location = {"internal": internal.url(), "internal6": internal6.url()}.get(target, target)

    @public.route("/go")
    def go(h: Handler) -> None:
        h.redirect(location)

    with pytest.raises(SSRFBlocked, match="redirect from") as caught:
        fetch(public.url("/go"), policy=policy)
    assert expected in str(caught.value)
    assert internal.hits == []
    assert internal6.hits == []
    assert [hit.path for hit in public.hits] == ["/go"]


def test_redirect_to_name_resolving_inside_blocked_at_connect(
    public: LocalServer, internal: LocalServer
) -> None:
    @public.route("/go")
    def go(h: Handler) -> None:
        h.redirect(internal.url(host="evil.test"))

    policy = AddressPolicy(allow_nets=ALLOW_PUBLIC, resolver=lambda host, port: ["127.0.0.1"])
    with pytest.raises(SSRFBlocked, match=r"evil\.test resolves to 127\.0\.0\.1"):
        fetch(public.url("/go"), policy=policy)
    assert internal.hits == []


def test_allowed_redirects_are_followed_and_recorded(policy: AddressPolicy, public: LocalServer) -> None:
    @public.route("/a")
    def a(h: Handler) -> None:
        h.redirect("/b", 301)

    @public.route("/b")
    def b(h: Handler) -> None:
        h.redirect(public.url("/"), 307)

    result = fetch(public.url("/a"), policy=policy)
    assert result.body == b"public"
    assert result.redirects == (public.url("/b"), public.url("/"))
    assert result.url == public.url("/")


def test_redirects_are_bounded(policy: AddressPolicy, public: LocalServer) -> None:
    @public.route("/loop")
    def loop(h: Handler) -> None:
        h.redirect("/loop")

    with pytest.raises(httpx.TooManyRedirects, match="more than 5"):
        fetch(public.url("/loop"), policy=policy)
    assert len(public.hits) == 6  # the first request and 5 hops


def test_secrets_do_not_follow_a_cross_origin_redirect(public: LocalServer) -> None:
    with serving("127.0.0.3") as other:

        @other.route("/")
        def index(h: Handler) -> None:
            h.reply(200, b"other")

        @public.route("/go")
        def go(h: Handler) -> None:
            h.redirect(other.url(), 303)

        policy = AddressPolicy(allow_nets=parse_allow_nets("127.0.0.2/32,127.0.0.3/32"), resolver=_no_dns)
        headers = {"X-Subscription-Token": "s3cret", "Authorization": "Bearer s3cret", "Accept": "text/html"}
        result = fetch(public.url("/go"), method="POST", data={"q": "x"}, headers=headers, policy=policy)
        assert result.body == b"other"
        assert public.hits[0].headers["x-subscription-token"] == "s3cret"
        hop = other.hits[0]
        assert hop.method == "GET"  # 303 turns a POST into a GET
        assert "x-subscription-token" not in hop.headers
        assert "authorization" not in hop.headers
        assert hop.headers["accept"] == "text/html"


# ---------------------------------------------------------------------------------------------------
# Size and time caps


def test_oversized_response_cut_at_the_cap(policy: AddressPolicy, public: LocalServer) -> None:
    @public.route("/big")
    def big(h: Handler) -> None:
        h.reply(200, b"x" * (1024 * 1024))

    result = fetch(public.url("/big"), policy=policy, limits=FetchLimits(max_bytes=65536))
    assert result.truncated
    assert len(result.body) == 65536


def test_endless_stream_cut_at_the_cap(policy: AddressPolicy, public: LocalServer) -> None:
    @public.route("/endless")
    def endless(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.end_headers()  # no length: read until the connection closes, which it never would
        for _ in range(100_000):
            h.wfile.write(b"y" * 4096)

    started = time.monotonic()
    result = fetch(public.url("/endless"), policy=policy, limits=FetchLimits(max_bytes=100_000))
    assert result.truncated
    assert len(result.body) == 100_000
    assert time.monotonic() - started < 5


def test_gzip_bomb_cut_at_the_cap(policy: AddressPolicy, public: LocalServer) -> None:
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))

    @public.route("/bomb")
    def serve_bomb(h: Handler) -> None:
        h.reply(200, bomb, Content_Encoding="gzip")

    result = fetch(public.url("/bomb"), policy=policy, limits=FetchLimits(max_bytes=1024 * 1024))
    assert result.truncated
    assert len(result.body) == 1024 * 1024
    assert len(bomb) < 1024 * 1024  # the cap counted decoded bytes, not the small compressed ones


def test_gzip_within_the_cap_is_decoded(policy: AddressPolicy, public: LocalServer) -> None:
    @public.route("/gz")
    def gz(h: Handler) -> None:
        h.reply(200, gzip.compress(b"hello " * 100), Content_Encoding="gzip")

    result = fetch(public.url("/gz"), policy=policy)
    assert result.body == b"hello " * 100
    assert not result.truncated


def test_slow_response_times_out(policy: AddressPolicy, public: LocalServer) -> None:
    @public.route("/slow")
    def slow(h: Handler) -> None:
        time.sleep(3)
        h.reply(200, b"too late")

    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        fetch(public.url("/slow"), policy=policy, limits=FetchLimits(read_timeout=0.5))
    assert time.monotonic() - started < 2


def test_dripping_response_stopped_by_the_total_cap(policy: AddressPolicy, public: LocalServer) -> None:
    """Each byte arrives well within the read timeout; the total cap still ends it."""

    @public.route("/drip")
    def drip(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100")
        h.end_headers()
        for _ in range(100):
            h.wfile.write(b"d")
            h.wfile.flush()
            time.sleep(0.1)

    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout, match="total time cap"):
        fetch(public.url("/drip"), policy=policy, limits=FetchLimits(read_timeout=1, total_timeout=1))
    assert time.monotonic() - started < 3
