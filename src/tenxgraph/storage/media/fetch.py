"""Safe fetching of media by URL (issue 21): `fetch_media(url, policy=...)`.

A URL in a message comes from a user or a model, so fetching it must not let them reach what
only the server can reach (server-side request forgery). `fetch_media` refuses, with
`UnsafeURLError` (FETCH_001) and before anything is sent:

* a scheme other than those in `FetchPolicy.allowed_schemes` (http and https by default):
  ``file:``, ``ftp:``, ``data:``, ``gopher:`` ... would read local files or speak other
  protocols;
* credentials in the URL (``https://user:pass@host/``): they would be sent on, and logged;
* a host any of whose resolved addresses is not a public one: loopback (127/8, ::1), private
  (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16 with the cloud metadata
  address 169.254.169.254, fe80::/10), carrier-grade NAT (100.64/10), multicast,
  unspecified (0.0.0.0, ::), reserved and other non-global ranges, and the known metadata
  address fd00:ec2::254. IPv6 forms that embed an IPv4 address (IPv4-mapped ::ffff:a.b.c.d,
  NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by that IPv4 address. A name is resolved
  here (`resolve`, with the event loop's ``getaddrinfo``) and every address it resolves to is
  checked: one private address among public ones is enough to refuse. `FetchPolicy.allow_hosts`
  lifts this refusal for the host names and IP networks it lists (an internal CDN, say).

DNS rebinding (a name that resolves to a public address when checked and to a private one
when connected) cannot bypass the check: the request is sent to the checked IP itself. The
URL's host is replaced by that IP; the ``Host`` header carries the original name and port, and
for https the TLS server name (SNI) and the certificate check use the original name
(httpx's ``sni_hostname`` request extension). Nothing else resolves the name again. Each hop
gets a fresh connection pool, so a TLS connection checked for one name is never reused for
another. Proxies from the environment are ignored (`trust_env=False`): a proxy would resolve
the name itself.

Redirects are followed here, not by httpx: each ``Location`` is checked again as above
(scheme, credentials, resolution), at most `FetchPolicy.max_redirects` times (FETCH_006).

Other limits raise `FetchError`: a body above `max_bytes` (FETCH_002: a ``Content-Length``
above it is refused before the body is read, and a streamed body is cut off as soon as it
passes it; the count is of decoded bytes, and ``identity`` encoding is asked for), the whole
fetch, redirects included, taking longer than `timeout` seconds (FETCH_003), a
``Content-Type`` (parameters stripped) not in `allowed_mime_types` (FETCH_004), and an HTTP
error status or a host that cannot be reached (FETCH_005).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ipaddress
import socket
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from tenxgraph.core.exceptions import FetchError, UnsafeURLError
from tenxgraph.core.state.message import Message, Role, generate_id, media_block
from tenxgraph.core.state.message_block import MediaRef, TextBlock

if TYPE_CHECKING:
    import httpx

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

MiB = 1024 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

#: refused even where the `ipaddress` flags would not say so (they do today; kept explicit)
_BLOCKED_NETWORKS: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("100.64.0.0/10"),  # carrier-grade NAT (Alibaba's metadata is in it)
    ipaddress.ip_network("169.254.0.0/16"),  # link-local, with 169.254.169.254 (metadata)
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS metadata over IPv6
    ipaddress.ip_network("fc00::/7"),  # unique local
    ipaddress.ip_network("fe80::/10"),  # link-local
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class FetchPolicy:
    """What `fetch_media` accepts.

    `allowed_mime_types`: ``None`` for any; otherwise exact types (``"application/pdf"``) or
    prefixes ending in ``/`` or ``/*`` (``"image/"``, ``"image/*"``). `allow_hosts`: host
    names (``"cdn.internal"``) and IP addresses or networks (``"10.1.0.0/16"``) whose
    non-public addresses are allowed; the address is still pinned and the scheme still
    checked.
    """

    max_bytes: int = 20 * MiB
    timeout: float = 20.0
    allowed_schemes: Collection[str] = frozenset({"https", "http"})
    allowed_mime_types: Collection[str] | None = None
    allow_hosts: Collection[str | IPNetwork] = ()
    max_redirects: int = 5
    _names: frozenset[str] = field(init=False, repr=False, compare=False)
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # lists are accepted for convenience and kept as tuples (the policy stays hashable)
        set_ = object.__setattr__
        set_(self, "allowed_schemes", frozenset(s.lower() for s in self.allowed_schemes))
        if self.allowed_mime_types is not None:
            set_(self, "allowed_mime_types", tuple(m.lower() for m in self.allowed_mime_types))
        set_(self, "allow_hosts", tuple(self.allow_hosts))
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in self.allow_hosts:
            if isinstance(entry, ipaddress.IPv4Network | ipaddress.IPv6Network):
                networks.append(entry)
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                names.add(entry.lower().rstrip("."))
        set_(self, "_names", frozenset(names))
        set_(self, "_networks", tuple(networks))
        if self.max_bytes <= 0 or self.timeout <= 0 or self.max_redirects < 0:
            raise ValueError(
                "FetchPolicy: max_bytes and timeout must be positive, max_redirects >= 0"
            )

    def allows_name(self, host: str) -> bool:
        """Whether `host` is in `allow_hosts` by name."""
        return host.lower().rstrip(".") in self._names

    def allows_address(self, address: IPAddress) -> bool:
        """Whether `address` is in one of the `allow_hosts` networks."""
        plain = _embedded_ipv4(address) or address
        return any(plain in net or address in net for net in self._networks)

    def allows_mime_type(self, mime_type: str) -> bool:
        if self.allowed_mime_types is None:
            return True
        for allowed in self.allowed_mime_types:
            prefix = allowed[:-1] if allowed.endswith("/*") else allowed
            if mime_type == allowed or (prefix.endswith("/") and mime_type.startswith(prefix)):
                return True
        return False


@dataclass(frozen=True)
class Fetched:
    """A fetched body: its bytes, its mime type (``Content-Type`` without parameters,
    ``application/octet-stream`` when missing) and the final URL, after redirects."""

    data: bytes
    mime_type: str
    url: str


async def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, as the event loop's resolver says (tests replace
    this function to play DNS)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (IPv4-mapped, NAT64, 6to4), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def unsafe_reason(address: IPAddress) -> str | None:
    """Why connecting to `address` is refused, or None for a public address."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        reason = unsafe_reason(embedded)
        return None if reason is None else f"{reason} (embedded in {address})"
    checks = [
        (address.is_loopback, "a loopback address"),
        (address.is_unspecified, "the unspecified address"),
        (address.is_link_local, "a link-local address (cloud metadata lives there)"),
        (address.is_multicast, "a multicast address"),
        (address.is_private, "a private address"),
        (address.is_reserved, "a reserved address"),
        (any(address in net for net in _BLOCKED_NETWORKS), "a non-public address"),
        (not address.is_global, "a non-public address"),
    ]
    return next((why for bad, why in checks if bad), None)


def _shown(url: httpx.URL) -> str:
    """The URL without its credentials, for messages."""
    return str(url.copy_with(userinfo=b"")) if url.userinfo else str(url)


def _display(url: str) -> str:
    """`url` without its credentials, for messages, also when it does not parse."""
    import httpx

    try:
        return _shown(httpx.URL(url))
    except httpx.InvalidURL:
        return "(an invalid URL)"


def _check_url(url: httpx.URL, policy: FetchPolicy) -> None:
    shown = _shown(url)
    if url.scheme not in policy.allowed_schemes:
        raise UnsafeURLError(
            f"Refusing to fetch {shown}: the scheme {url.scheme or '(none)'!r} is not allowed "
            f"(allowed: {sorted(policy.allowed_schemes)}). Give an http(s) URL, or pass the "
            "content itself instead of a URL.",
            context={"url": shown, "reason": "scheme"},
        )
    if url.userinfo:
        raise UnsafeURLError(
            f"Refusing to fetch {shown}: the URL carries credentials (user:password@). "
            "Remove them; URLs with credentials are never fetched.",
            context={"url": shown, "reason": "credentials"},
        )
    if not url.host:
        raise UnsafeURLError(
            f"Refusing to fetch {shown}: the URL has no host.",
            context={"url": shown, "reason": "host"},
        )


async def _checked_addresses(url: httpx.URL, policy: FetchPolicy) -> list[str]:
    """The addresses to connect to for `url`, each checked; raises if any is not allowed."""
    host = url.raw_host.decode("ascii")
    shown = _shown(url)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        found = [str(literal)]
    else:
        try:
            found = await resolve(host, url.port or (443 if url.scheme == "https" else 80))
        except OSError as err:
            raise FetchError(
                f"Could not fetch {shown}: the host {host!r} does not resolve ({err}). "
                "Check the URL.",
                "FETCH_005",
                context={"url": shown, "host": host},
            ) from err
    if not found:
        raise FetchError(
            f"Could not fetch {shown}: the host {host!r} resolves to no address.",
            "FETCH_005",
            context={"url": shown, "host": host},
        )
    if policy.allows_name(host):
        return found
    for text in found:
        address = ipaddress.ip_address(text)
        reason = unsafe_reason(address)
        if reason is not None and not policy.allows_address(address):
            raise UnsafeURLError(
                f"Refusing to fetch {shown}: the host {host!r} resolves to {text}, {reason}. "
                "Only public addresses are fetched; to fetch from an internal host you "
                "trust, add it to FetchPolicy(allow_hosts=[...]).",
                context={"url": shown, "host": host, "address": text, "reason": "address"},
            )
    return found


def pinned_request(url: httpx.URL, address: str) -> httpx.Request:
    """A GET of `url` sent to `address`: the URL's host replaced by the address, the
    ``Host`` header and (for https) the TLS server name set to the URL's host."""
    import httpx

    host = url.raw_host.decode("ascii")
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    headers = {
        "Host": url.netloc.decode("ascii"),
        "Accept-Encoding": "identity",
        "User-Agent": "tenxgraph-fetch",
    }
    return httpx.Request("GET", url.copy_with(host=address), headers=headers, extensions=extensions)


def _mime_type(response: httpx.Response) -> str:
    value = response.headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower() or "application/octet-stream"


async def _read_body(response: httpx.Response, shown: str, policy: FetchPolicy) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > policy.max_bytes:
        raise FetchError(
            f"Refusing {shown}: its Content-Length is {int(declared)} bytes, above the limit "
            f"of {policy.max_bytes}. Raise FetchPolicy(max_bytes=...) if it is expected.",
            "FETCH_002",
            context={"url": shown, "content_length": int(declared), "max_bytes": policy.max_bytes},
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > policy.max_bytes:
            raise FetchError(
                f"Refusing {shown}: its body passed the limit of {policy.max_bytes} bytes "
                "(reading stopped there). Raise FetchPolicy(max_bytes=...) if it is expected.",
                "FETCH_002",
                context={"url": shown, "max_bytes": policy.max_bytes},
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def _send(url: httpx.URL, addresses: list[str], policy: FetchPolicy) -> Fetched | str:
    """One hop: the fetched body, or the URL a redirect points to."""
    import httpx

    shown = _shown(url)
    last: Exception | None = None
    for address in addresses:  # each one checked; the next one only if this one is down
        async with httpx.AsyncClient(
            follow_redirects=False, trust_env=False, timeout=policy.timeout
        ) as client:
            try:
                response = await client.send(pinned_request(url, address), stream=True)
            except httpx.ConnectError as err:
                last = err
                continue
            try:
                return await _handle(response, url, shown, policy)
            finally:
                await response.aclose()
    raise FetchError(
        f"Could not fetch {shown}: connecting to {', '.join(addresses)} failed ({last}).",
        "FETCH_005",
        context={"url": shown, "addresses": addresses},
    ) from last


async def _handle(
    response: httpx.Response, url: httpx.URL, shown: str, policy: FetchPolicy
) -> Fetched | str:
    location = response.headers.get("location")
    if response.status_code in _REDIRECTS and location:
        return str(url.join(location))
    if not 200 <= response.status_code < 300:
        raise FetchError(
            f"Could not fetch {shown}: the server answered HTTP {response.status_code}.",
            "FETCH_005",
            context={"url": shown, "status_code": response.status_code},
        )
    mime_type = _mime_type(response)
    if not policy.allows_mime_type(mime_type):
        raise FetchError(
            f"Refusing {shown}: its type is {mime_type!r}, not one of "
            f"{list(policy.allowed_mime_types or ())}. Fetch a URL of an allowed type, or "
            "widen FetchPolicy(allowed_mime_types=...).",
            "FETCH_004",
            context={"url": shown, "mime_type": mime_type},
        )
    data = await _read_body(response, shown, policy)
    return Fetched(data=data, mime_type=mime_type, url=shown)


async def _fetch(url: str, policy: FetchPolicy) -> Fetched:
    import httpx

    try:
        current = httpx.URL(url)
    except httpx.InvalidURL as err:
        raise UnsafeURLError(
            f"Refusing to fetch {_display(url)}: it is not a valid URL ({err}).",
            context={"reason": "invalid"},
        ) from err
    for hop in range(policy.max_redirects + 1):
        _check_url(current, policy)
        addresses = await _checked_addresses(current, policy)
        result = await _send(current, addresses, policy)
        if isinstance(result, Fetched):
            return result
        try:
            current = httpx.URL(result)
        except httpx.InvalidURL as err:
            raise UnsafeURLError(
                f"Refusing the redirect of {_shown(current)} (hop {hop + 1}): its Location "
                f"is not a valid URL ({err}).",
                context={"url": _shown(current), "reason": "invalid"},
            ) from err
    raise FetchError(
        f"Could not fetch {_display(url)}: more than {policy.max_redirects} redirects (the last to "
        f"{_shown(current)}). Give the final URL, or raise FetchPolicy(max_redirects=...).",
        "FETCH_006",
        context={"url": _shown(current), "max_redirects": policy.max_redirects},
    )


async def fetch_media(url: str, *, policy: FetchPolicy | None = None) -> Fetched:
    """The body of `url`, fetched under `policy` (`FetchPolicy()` by default): refuses unsafe
    URLs with `UnsafeURLError` and raises `FetchError` for size, time, type and HTTP failures
    (see the module's docstring for what is refused and why)."""
    import httpx

    policy = policy or FetchPolicy()
    try:
        async with asyncio.timeout(policy.timeout):
            return await _fetch(url, policy)
    except (TimeoutError, httpx.TimeoutException) as err:
        raise FetchError(
            f"Fetching {_display(url)} took longer than {policy.timeout} s and was stopped. "
            "Try again, or raise FetchPolicy(timeout=...).",
            "FETCH_003",
            context={"timeout": policy.timeout},
        ) from err
    except httpx.HTTPError as err:
        raise FetchError(
            f"Could not fetch {_display(url)}: {type(err).__name__}: {err}.",
            "FETCH_005",
        ) from err


async def message_from_url(
    url: str,
    *,
    policy: FetchPolicy | None = None,
    store: Any = None,
    text: str | None = None,
    role: Role = "user",
    message_id: str | int | None = None,
) -> Message:
    """A message holding what `url` serves, fetched safely (`fetch_media` under `policy`): an
    image, audio, video or document block by its MIME type, after `text` if given. The bytes
    go into `store` (a media store: the message names them) when one is given, else inline."""
    fetched = await fetch_media(url, policy=policy)
    if store is not None:
        media = await store.aput(fetched.data, fetched.mime_type)
    else:
        media = MediaRef(
            kind="data",
            data_base64=base64.b64encode(fetched.data).decode("ascii"),
            mime_type=fetched.mime_type,
            size_bytes=len(fetched.data),
            sha256=hashlib.sha256(fetched.data).hexdigest(),
        )
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    blocks.append(media_block(fetched.mime_type.split("/", 1)[0], media))
    return Message(message_id=generate_id(message_id), role=role, content=blocks)


__all__ = [
    "FetchError",
    "FetchPolicy",
    "Fetched",
    "UnsafeURLError",
    "fetch_media",
    "message_from_url",
    "resolve",
]
