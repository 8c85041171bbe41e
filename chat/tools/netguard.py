"""Which addresses a server-side fetch may reach, and a transport that connects only to those.

The approach, and why it closes DNS rebinding: the check sits in the httpcore2
*network backend*, the one place where a host name becomes a socket. Its
`connect_tcp(host, port)` resolves the name itself, refuses the whole host when
any address it resolves to is not public, and then opens the socket to one of
the very addresses it checked. There is no second lookup for an attacker's DNS
server to answer differently. The URL, the `Host` header and TLS SNI keep the
name (httpcore passes the origin's name as `server_hostname`), so HTTPS
certificates are verified against the name as usual.

`GuardedTransport` is httpx2's own transport with that backend, HTTP/1.1 only,
and `trust_env` off so that no proxy from the environment is used (a proxy would
make the connection, and the check, somewhere else). `check_url` runs the same
policy on a URL before a request is made, so that a refused redirect target is
refused before any connection and with a readable reason.

Refused: loopback, private (RFC 1918), link-local (incl. 169.254.169.254 cloud
metadata), unique-local and site-local IPv6, multicast, unspecified, carrier-grade
NAT (100.64.0.0/10), reserved and every other non-global range; IPv4 embedded in
IPv6 (IPv4-mapped, 6to4, NAT64) is judged by the IPv4 address. Numeric host
spellings that the C library accepts (2130706433, 0x7f000001, 0177.0.0.1, 127.1)
are decoded the way the resolver would decode them. Operators can allow listed
internal hosts (exact names, or IP addresses and networks) with
AGENT_FETCH_ALLOWED_HOSTS.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpcore2
import httpx2

from chat.agent.tools import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)


class AddressRefused(ToolError):
    """A host or address the fetch policy does not allow."""


def classify(ip: IPAddress) -> str | None:
    """Why this address may not be fetched from, or None when it is public."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            reason = classify(embedded)
            return f"embeds {embedded}, {reason}" if reason else None
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_loopback:
        return "loopback address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_multicast:
        return "multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "carrier-grade NAT address"
    if isinstance(ip, ipaddress.IPv6Address) and ip in ipaddress.ip_network("fc00::/7"):
        return "unique-local address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "site-local address"
    if ip.is_private:
        return "private address"
    if ip.is_reserved:
        return "reserved address"
    if not ip.is_global:
        return "non-public address"
    return None


def parse_ip(host: str) -> IPAddress | None:
    """The address a host string denotes by itself (no DNS), in any spelling libc accepts."""
    text = host.strip("[]")
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        pass
    labels = text.rstrip(".").split(".")
    if labels and all(_NUMERIC_LABEL.fullmatch(label) for label in labels):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text.rstrip(".")))
        except OSError:
            raise AddressRefused(f"host {host!r} is neither a valid address nor a name") from None
    return None


async def resolve(host: str, port: int) -> list[str]:
    """The host's addresses as the system resolver gives them (tests replace this function)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


@dataclass
class FetchPolicy:
    """Operator allow-list: exact host names, or IP addresses / networks, that skip the checks."""

    allowed_hosts: Iterable[str] = ()
    _names: set[str] = field(init=False, default_factory=set)
    _networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        for entry in self.allowed_hosts:
            entry = entry.strip().lower().rstrip(".")
            if not entry:
                continue
            try:
                self._networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                self._names.add(entry)

    def name_allowed(self, host: str) -> bool:
        return host.lower().rstrip(".") in self._names

    def address_allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self._networks)

    def check_address(self, host: str, ip: IPAddress) -> None:
        if self.address_allowed(ip):
            return
        reason = classify(ip)
        if reason:
            shown = host if host.strip("[]") == str(ip) else f"{host} ({ip})"
            raise AddressRefused(f"refused to connect to {shown}: {reason}; fetch_url only reaches public hosts")

    async def addresses(self, host: str, port: int) -> list[str]:
        """The checked addresses to connect to; AddressRefused when any address of the host is refused."""
        if not host:
            raise AddressRefused("the URL has no host")
        literal = parse_ip(host)
        if literal is not None:
            if not self.name_allowed(host):
                self.check_address(host, literal)
            return [str(literal)]
        try:
            found = await resolve(host.rstrip(".") or host, port)
        except (OSError, UnicodeError) as exc:
            raise ToolError(f"cannot resolve host {host!r}: {exc}") from None
        if not found:
            raise ToolError(f"host {host!r} has no address")
        ips = [ipaddress.ip_address(a.split("%", 1)[0]) for a in found]
        if not self.name_allowed(host):
            for ip in ips:  # all of them: a name that also points inside is refused as a whole
                self.check_address(host, ip)
        return [str(ip) for ip in ips]

    async def check_url(self, url: httpx2.URL) -> None:
        """Refuse a URL before any connection: scheme, host, addresses."""
        if url.scheme not in ("http", "https"):
            raise AddressRefused(f"scheme {url.scheme or '(none)'!r} refused: only http and https URLs can be fetched")
        await self.addresses(url.host, url.port or (443 if url.scheme == "https" else 80))


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Resolves and checks at connect time, then connects to the checked address."""

    def __init__(self, policy: FetchPolicy, inner: httpcore2.AsyncNetworkBackend | None = None):
        self.policy = policy
        self.inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = await self.policy.addresses(host, port)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        raise error or httpcore2.ConnectError(f"cannot connect to {host}")

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise AddressRefused("unix sockets are refused")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, policy: FetchPolicy, *, inner_backend: httpcore2.AsyncNetworkBackend | None = None):
        super().__init__(trust_env=False, http1=True, http2=False, retries=0)
        # httpx2 does not take a network backend, so its pool is rebuilt with ours.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=4,
            http1=True,
            http2=False,
            network_backend=GuardedBackend(policy, inner_backend),
        )
