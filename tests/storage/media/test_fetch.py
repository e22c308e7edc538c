"""Safe fetching (issue 21): what `fetch_media` refuses, and that it fetches what it should.

A real HTTP server on loopback serves the fetches (no network). Loopback is refused by
default, so fetches from it pass `allow_hosts=["127.0.0.1"]`; names are resolved by a fake
`resolve` (the module's resolver, patched), so no DNS is asked either.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import functools
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tenxgraph.core.exceptions import FetchError, GraphError, UnsafeURLError
from tenxgraph.storage.media import fetch
from tenxgraph.storage.media.fetch import Fetched, FetchPolicy, fetch_media, unsafe_reason

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels" * 10
LOCAL = FetchPolicy(allow_hosts=["127.0.0.1"])


@dataclass
class Server:
    """A loopback HTTP/1.1 server; `routes` maps a path to a handler writing the response."""

    port: int = 0
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    never: asyncio.Event = field(default_factory=asyncio.Event)  # set by no one

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


Route = Callable[[Server, asyncio.StreamWriter], Awaitable[None]]


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


def _reply(
    body: bytes, content_type: str = "image/png", status: str = "200 OK", **extra: str
) -> Route:
    async def route(server: Server, writer: asyncio.StreamWriter) -> None:
        headers = {"Content-Type": content_type, "Content-Length": str(len(body)), **extra}
        writer.write(_head(status, headers) + body)

    return route


def _redirect(location: str | Callable[[Server], str]) -> Route:
    async def route(server: Server, writer: asyncio.StreamWriter) -> None:
        where = location(server) if callable(location) else location
        writer.write(_head("302 Found", {"Location": where, "Content-Length": "0"}))

    return route


async def _streamed(server: Server, writer: asyncio.StreamWriter) -> None:
    """1000 bytes in chunks, with no Content-Length."""
    headers = {"Content-Type": "image/png", "Transfer-Encoding": "chunked"}
    writer.write(_head("200 OK", headers))
    for _ in range(10):
        writer.write(b"64\r\n" + b"x" * 100 + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")


async def _lying_length(server: Server, writer: asyncio.StreamWriter) -> None:
    headers = {"Content-Type": "image/png", "Content-Length": "1000000"}
    writer.write(_head("200 OK", headers) + b"x" * 10)


async def _stalls_before_answering(server: Server, writer: asyncio.StreamWriter) -> None:
    await server.never.wait()


async def _stalls_mid_body(server: Server, writer: asyncio.StreamWriter) -> None:
    writer.write(_head("200 OK", {"Content-Type": "image/png", "Content-Length": "100"}) + b"x")
    await writer.drain()
    await server.never.wait()


async def _echo_host(server: Server, writer: asyncio.StreamWriter) -> None:
    host = server.requests[-1][1].get("host", "")
    await _reply(host.encode(), "text/plain; charset=utf-8")(server, writer)


ROUTES: dict[str, Route] = {
    "/image.png": _reply(PNG, "image/png; charset=binary"),
    "/page.html": _reply(b"<html></html>", "text/html; charset=utf-8"),
    "/missing": _reply(b"no", "text/plain", "404 Not Found"),
    "/big": _lying_length,
    "/streamed": _streamed,
    "/slow": _stalls_before_answering,
    "/slow-body": _stalls_mid_body,
    "/host": _echo_host,
    "/to-image": _redirect("/image.png"),
    "/to-private": _redirect("http://internal.example/secret"),
    "/to-metadata": _redirect("http://169.254.169.254/latest/meta-data/"),
    "/to-file": _redirect("file:///etc/passwd"),
    "/loop": _redirect("/loop"),
}


@contextlib.asynccontextmanager
async def _serving(tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    """A `Server` on 127.0.0.1 (with TLS when given a context) until the block ends."""
    state = Server()
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1]
            headers = {}
            for line in head[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            state.requests.append((path, headers))
            await ROUTES[path](state, writer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up: what a refused body looks like from here
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    state.port = listener.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        for task in handlers:
            task.cancel()
        listener.close()
        await asyncio.gather(*handlers, return_exceptions=True)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with _serving() as state:
        yield state


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Fake DNS: names map to address lists; an unknown name fails as a real resolver does."""
    table: dict[str, list[str]] = {}

    async def fake_resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]

    monkeypatch.setattr(fetch, "resolve", fake_resolve)
    return table


# --- a normal fetch ----------------------------------------------------------------------


async def test_a_normal_fetch_returns_the_bytes_the_mime_type_and_the_url(server: Server) -> None:
    url = f"{server.base}/image.png"
    got = await fetch_media(url, policy=LOCAL)
    assert got == Fetched(data=PNG, mime_type="image/png", url=url)


async def test_redirects_are_followed_and_the_final_url_is_returned(server: Server) -> None:
    got = await fetch_media(f"{server.base}/to-image", policy=LOCAL)
    assert got.url == f"{server.base}/image.png"
    assert got.data == PNG
    assert [path for path, _ in server.requests] == ["/to-image", "/image.png"]


async def test_the_request_goes_to_the_checked_address_with_the_name_in_host(
    server: Server, dns: dict[str, list[str]]
) -> None:
    # the name resolves once (here, to the server); the connection is made to that address,
    # and the name travels in the Host header, so a second resolution can not redirect it
    calls: list[str] = []
    table_resolve = fetch.resolve

    async def counting(host: str, port: int) -> list[str]:
        calls.append(host)
        return await table_resolve(host, port)

    dns["media.example"] = ["127.0.0.1"]
    policy = FetchPolicy(allow_hosts=["media.example"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fetch, "resolve", counting)
        got = await fetch_media(f"http://media.example:{server.port}/host", policy=policy)
    assert got.data == f"media.example:{server.port}".encode()
    assert got.mime_type == "text/plain"
    assert calls == ["media.example"]


def _certificate(name: str) -> tuple[bytes, bytes]:
    """A self-signed certificate for `name` and its key, in PEM."""
    crypto = pytest.importorskip("cryptography")
    del crypto
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
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


async def test_https_connects_to_the_checked_address_and_verifies_the_name(
    dns: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert_pem, key_pem = _certificate("media.example")
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    names: list[str | None] = []
    tls.sni_callback = lambda _sock, name, _ctx: names.append(name)
    # the client trusts this certificate alone (the test's only change to how httpx connects)
    trusted = ssl.create_default_context(cadata=cert_pem.decode())
    monkeypatch.setattr(httpx, "AsyncClient", functools.partial(httpx.AsyncClient, verify=trusted))
    dns["media.example"] = ["127.0.0.1"]
    dns["other.example"] = ["127.0.0.1"]
    policy = FetchPolicy(allow_hosts=["127.0.0.1"])
    async with _serving(tls) as server:
        got = await fetch_media(f"https://media.example:{server.port}/host", policy=policy)
        assert got.data == f"media.example:{server.port}".encode()
        assert names == ["media.example"]  # SNI: the name, though the connection is to the IP
        # the certificate is checked against the name asked for, not the address connected to
        with pytest.raises(FetchError, match="certificate") as caught:
            await fetch_media(f"https://other.example:{server.port}/host", policy=policy)
        assert caught.value.error_code == "FETCH_005"


def test_https_is_pinned_with_the_name_as_tls_server_name_and_host() -> None:
    request = fetch.pinned_request(httpx.URL("https://cdn.example/a.png?x=1"), "93.184.216.34")
    assert request.url == httpx.URL("https://93.184.216.34/a.png?x=1")
    assert request.headers["host"] == "cdn.example"
    assert request.extensions["sni_hostname"] == "cdn.example"
    v6 = fetch.pinned_request(httpx.URL("http://cdn.example:8080/a"), "2606:2800:220:1::1")
    assert str(v6.url) == "http://[2606:2800:220:1::1]:8080/a"
    assert v6.headers["host"] == "cdn.example:8080"
    assert "sni_hostname" not in v6.extensions


async def test_allow_hosts_takes_networks_too(server: Server) -> None:
    policy = FetchPolicy(allow_hosts=["127.0.0.0/8"])
    assert (await fetch_media(f"{server.base}/image.png", policy=policy)).data == PNG


# --- refused addresses -------------------------------------------------------------------


async def test_loopback_is_refused_without_allow_hosts(server: Server) -> None:
    with pytest.raises(UnsafeURLError, match=r"127\.0\.0\.1, a loopback address") as caught:
        await fetch_media(f"{server.base}/image.png")
    assert caught.value.error_code == "FETCH_001"
    assert "allow_hosts" in caught.value.message
    assert server.requests == []  # nothing was sent


@pytest.mark.parametrize(
    ("addresses", "why"),
    [
        (["10.0.0.1"], "a private address"),
        (["169.254.169.254"], "a link-local address"),
        (["::1"], "a loopback address"),
        (["::ffff:127.0.0.1"], r"a loopback address \(embedded in ::ffff:7f00:1\)"),
        (["93.184.216.34", "192.168.1.5"], "192.168.1.5, a private address"),
        (["fd00:ec2::254"], "a private address"),
        (["100.64.0.1"], "a non-public address"),
        (["0.0.0.0"], "the unspecified address"),
    ],
)
async def test_a_public_looking_name_resolving_to_a_non_public_address_is_refused(
    dns: dict[str, list[str]], addresses: list[str], why: str
) -> None:
    dns["images.example.com"] = addresses
    with pytest.raises(UnsafeURLError, match=why) as caught:
        await fetch_media("https://images.example.com/cat.png")
    assert caught.value.context["host"] == "images.example.com"
    assert isinstance(caught.value, GraphError)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.0.1",
        "169.254.169.254",
        "100.100.100.200",
        "224.0.0.1",
        "0.0.0.0",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "ff02::1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    ],
)
def test_non_public_addresses_have_a_reason(address: str) -> None:
    assert unsafe_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:2800:220:1::1"])
def test_public_addresses_have_none(address: str) -> None:
    assert unsafe_reason(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/", "http://[::1]/", "http://169.254.169.254/latest/meta-data/"],
)
async def test_literal_non_public_addresses_are_refused(url: str) -> None:
    with pytest.raises(UnsafeURLError):
        await fetch_media(url)


async def test_a_redirect_to_a_private_address_is_refused_at_the_hop(
    server: Server, dns: dict[str, list[str]]
) -> None:
    dns["internal.example"] = ["10.0.0.1"]
    with pytest.raises(UnsafeURLError, match=r"internal\.example.*10\.0\.0\.1"):
        await fetch_media(f"{server.base}/to-private", policy=LOCAL)
    with pytest.raises(UnsafeURLError, match=r"169\.254\.169\.254"):
        await fetch_media(f"{server.base}/to-metadata", policy=LOCAL)
    with pytest.raises(UnsafeURLError, match="scheme 'file'"):
        await fetch_media(f"{server.base}/to-file", policy=LOCAL)
    assert [path for path, _ in server.requests] == ["/to-private", "/to-metadata", "/to-file"]


async def test_redirects_are_capped(server: Server) -> None:
    policy = FetchPolicy(allow_hosts=["127.0.0.1"], max_redirects=3)
    with pytest.raises(FetchError, match="more than 3 redirects") as caught:
        await fetch_media(f"{server.base}/loop", policy=policy)
    assert caught.value.error_code == "FETCH_006"
    assert len(server.requests) == 4


# --- refused URLs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://files.example.com/a.png",
        "data:image/png;base64,iVBORw0KGgo=",
        "gopher://example.com/",
    ],
)
async def test_other_schemes_are_refused(url: str) -> None:
    with pytest.raises(UnsafeURLError, match=r"scheme .* is not allowed"):
        await fetch_media(url)


async def test_urls_with_credentials_are_refused_and_the_password_not_repeated(
    dns: dict[str, list[str]],
) -> None:
    dns["images.example.com"] = ["93.184.216.34"]
    with pytest.raises(UnsafeURLError, match="credentials") as caught:
        await fetch_media("https://user:hunter2@images.example.com/cat.png")
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(caught.value.context)


# --- size, time, type --------------------------------------------------------------------


async def test_a_content_length_above_the_limit_is_refused_before_reading(server: Server) -> None:
    policy = FetchPolicy(allow_hosts=["127.0.0.1"], max_bytes=1000)
    with pytest.raises(FetchError, match="Content-Length is 1000000") as caught:
        await fetch_media(f"{server.base}/big", policy=policy)
    assert caught.value.error_code == "FETCH_002"


async def test_a_streamed_body_is_cut_off_at_the_limit(server: Server) -> None:
    policy = FetchPolicy(allow_hosts=["127.0.0.1"], max_bytes=250)
    with pytest.raises(FetchError, match="passed the limit of 250 bytes") as caught:
        await fetch_media(f"{server.base}/streamed", policy=policy)
    assert caught.value.error_code == "FETCH_002"
    bigger = FetchPolicy(allow_hosts=["127.0.0.1"], max_bytes=1000)
    assert len((await fetch_media(f"{server.base}/streamed", policy=bigger)).data) == 1000


@pytest.mark.parametrize("path", ["/slow", "/slow-body"])
async def test_a_server_too_slow_is_given_up_on(server: Server, path: str) -> None:
    policy = FetchPolicy(allow_hosts=["127.0.0.1"], timeout=0.2)
    with pytest.raises(FetchError, match=r"longer than 0\.2 s") as caught:
        await fetch_media(f"{server.base}{path}", policy=policy)
    assert caught.value.error_code == "FETCH_003"


async def test_a_type_not_allowed_is_refused(server: Server) -> None:
    images = FetchPolicy(allow_hosts=["127.0.0.1"], allowed_mime_types=["image/"])
    with pytest.raises(FetchError, match="'text/html'") as caught:
        await fetch_media(f"{server.base}/page.html", policy=images)
    assert caught.value.error_code == "FETCH_004"
    assert (await fetch_media(f"{server.base}/image.png", policy=images)).data == PNG
    exact = FetchPolicy(allow_hosts=["127.0.0.1"], allowed_mime_types=["image/*", "text/html"])
    assert (await fetch_media(f"{server.base}/page.html", policy=exact)).mime_type == "text/html"


async def test_an_http_error_status_is_a_fetch_error(server: Server) -> None:
    with pytest.raises(FetchError, match="HTTP 404") as caught:
        await fetch_media(f"{server.base}/missing", policy=LOCAL)
    assert caught.value.error_code == "FETCH_005"


async def test_a_name_that_does_not_resolve_is_a_fetch_error(dns: dict[str, list[str]]) -> None:
    with pytest.raises(FetchError, match="does not resolve") as caught:
        await fetch_media("https://nowhere.example/")
    assert not isinstance(caught.value, UnsafeURLError)


def test_the_policy_is_frozen_and_hashable() -> None:
    policy = FetchPolicy(allow_hosts=["cdn.internal", "10.0.0.0/8"], allowed_mime_types=["image/"])
    assert hash(policy) == hash(
        FetchPolicy(allow_hosts=("cdn.internal", "10.0.0.0/8"), allowed_mime_types=("image/",))
    )
    with pytest.raises(AttributeError):
        policy.max_bytes = 1  # type: ignore[misc]
    assert policy.allows_name("CDN.internal.")
    assert policy.allows_address(ipaddress.ip_address("::ffff:10.9.9.9"))
    with pytest.raises(ValueError, match="max_bytes"):
        FetchPolicy(max_bytes=0)


# --- a message from a URL --------------------------------------------------------------------


async def test_a_message_from_a_url_holds_what_it_serves(server: Server) -> None:
    from tenxgraph.storage.media import InMemoryMediaStore
    from tenxgraph.storage.media.fetch import message_from_url

    url = f"{server.base}/image.png"
    inline = await message_from_url(url, policy=LOCAL, text="what is this?")
    assert [b.type for b in inline.content] == ["text", "image"]
    assert base64.b64decode(str(inline.content[1].media.data_base64)) == PNG
    store = InMemoryMediaStore()
    stored = await message_from_url(url, policy=LOCAL, store=store)
    ref = stored.content[0].media
    assert await store.aget(str(ref.sha256)) == PNG


async def test_a_message_from_a_private_url_is_refused(server: Server) -> None:
    from tenxgraph.storage.media.fetch import message_from_url

    with pytest.raises(UnsafeURLError):
        await message_from_url(f"{server.base}/image.png")  # loopback, without allow_hosts
