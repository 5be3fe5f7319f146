"""Which addresses an http_fetch may reach (08-runner "http_fetch and egress", issue 11).

An explicit table instead of `ipaddress.is_global` (whose answer changes
between Python versions and has gaps in 3.11): every row of the IANA IPv4 and
IPv6 Special-Purpose Address Registries, plus the rows of the address-space
registries that are not global unicast (multicast, site-local, everything
outside 2000::/3).  The most specific row that holds an address decides:

- `refuse`: never reached, whatever the grant says;
- `private`: reached only with a grant's `private_network = true`: the
  loopback, private-use, shared (CGNAT), link-local and unique-local rows;
- `unwrap`: the address carries an IPv4 address that is where the connection
  really goes (IPv4-mapped, NAT64 64:ff9b::/96, 6to4, Teredo's server and
  client); each embedded address is judged by the IPv4 table instead.

Addresses in no row are global unicast and pass.  Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Literal

import attrs

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
RowKind = Literal["refuse", "private", "unwrap"]


@attrs.frozen
class Row:
    """One row of the table: a prefix, what it is, and what it means for a fetch."""

    network: IPNetwork
    name: str
    kind: RowKind


def _row(prefix: str, name: str, kind: RowKind) -> Row:
    return Row(ipaddress.ip_network(prefix), name, kind)


IPV4_ROWS: tuple[Row, ...] = (
    # IANA IPv4 Special-Purpose Address Registry
    _row("0.0.0.0/8", '"this network" (RFC 791)', "refuse"),
    _row("0.0.0.0/32", '"this host on this network" (RFC 1122)', "refuse"),
    _row("10.0.0.0/8", "private-use (RFC 1918)", "private"),
    _row("100.64.0.0/10", "shared address space, CGNAT and tailnets (RFC 6598)", "private"),
    _row("127.0.0.0/8", "loopback (RFC 1122)", "private"),
    _row("169.254.0.0/16", "link-local (RFC 3927)", "private"),
    _row("172.16.0.0/12", "private-use (RFC 1918)", "private"),
    _row("192.0.0.0/24", "IETF protocol assignments (RFC 6890)", "refuse"),
    _row("192.0.0.0/29", "IPv4 service continuity prefix (RFC 7335)", "refuse"),
    _row("192.0.0.8/32", "IPv4 dummy address (RFC 7600)", "refuse"),
    _row("192.0.0.9/32", "port control protocol anycast (RFC 7723)", "refuse"),
    _row("192.0.0.10/32", "TURN anycast (RFC 8155)", "refuse"),
    _row("192.0.0.170/32", "NAT64/DNS64 discovery (RFC 8880)", "refuse"),
    _row("192.0.0.171/32", "NAT64/DNS64 discovery (RFC 8880)", "refuse"),
    _row("192.0.2.0/24", "documentation, TEST-NET-1 (RFC 5737)", "refuse"),
    _row("192.31.196.0/24", "AS112-v4 anycast (RFC 7535)", "refuse"),
    _row("192.52.193.0/24", "AMT anycast (RFC 7450)", "refuse"),
    _row("192.88.99.0/24", "deprecated 6to4 relay anycast (RFC 7526)", "refuse"),
    _row("192.168.0.0/16", "private-use (RFC 1918)", "private"),
    _row("192.175.48.0/24", "direct delegation AS112 service (RFC 7534)", "refuse"),
    _row("198.18.0.0/15", "benchmarking (RFC 2544)", "refuse"),
    _row("198.51.100.0/24", "documentation, TEST-NET-2 (RFC 5737)", "refuse"),
    _row("203.0.113.0/24", "documentation, TEST-NET-3 (RFC 5737)", "refuse"),
    _row("240.0.0.0/4", "reserved (RFC 1112)", "refuse"),
    _row("255.255.255.255/32", "limited broadcast (RFC 919)", "refuse"),
    # IANA IPv4 Multicast Address Space Registry
    _row("224.0.0.0/4", "multicast (RFC 5771)", "refuse"),
)

IPV6_ROWS: tuple[Row, ...] = (
    # IANA IPv6 Special-Purpose Address Registry
    _row("::1/128", "loopback (RFC 4291)", "private"),
    _row("::/128", "unspecified (RFC 4291)", "refuse"),
    _row("::ffff:0:0/96", "IPv4-mapped (RFC 4291)", "unwrap"),
    _row("64:ff9b::/96", "IPv4-IPv6 translation, the NAT64 well-known prefix (RFC 6052)",
         "unwrap"),
    _row("64:ff9b:1::/48", "local-use IPv4-IPv6 translation (RFC 8215); where the IPv4 "
         "address sits depends on a prefix length that cannot be known", "refuse"),
    _row("100::/64", "discard-only (RFC 6666)", "refuse"),
    _row("100:0:0:1::/64", "dummy IPv6 prefix (RFC 9780)", "refuse"),
    _row("2001::/23", "IETF protocol assignments (RFC 2928)", "refuse"),
    _row("2001::/32", "Teredo (RFC 4380)", "unwrap"),
    _row("2001:1::1/128", "port control protocol anycast (RFC 7723)", "refuse"),
    _row("2001:1::2/128", "TURN anycast (RFC 8155)", "refuse"),
    _row("2001:1::3/128", "DNS-SD service registration protocol anycast (RFC 9665)", "refuse"),
    _row("2001:2::/48", "benchmarking (RFC 5180)", "refuse"),
    _row("2001:3::/32", "AMT (RFC 7450)", "refuse"),
    _row("2001:4:112::/48", "AS112-v6 (RFC 7535)", "refuse"),
    _row("2001:10::/28", "deprecated ORCHID (RFC 4843)", "refuse"),
    _row("2001:20::/28", "ORCHIDv2 (RFC 7343)", "refuse"),
    _row("2001:30::/28", "drone remote ID entity tags (RFC 9374)", "refuse"),
    _row("2001:db8::/32", "documentation (RFC 3849)", "refuse"),
    _row("2002::/16", "6to4 (RFC 3056)", "unwrap"),
    _row("2620:4f:8000::/48", "direct delegation AS112 service (RFC 7534)", "refuse"),
    _row("3fff::/20", "documentation (RFC 9637)", "refuse"),
    _row("5f00::/16", "segment routing SIDs (RFC 9602)", "refuse"),
    _row("fc00::/7", "unique-local (RFC 4193)", "private"),
    _row("fe80::/10", "link-local unicast (RFC 4291)", "private"),
    # IANA IPv6 Address Space: what is not global unicast
    _row("::/8", "reserved by the IETF (RFC 4291)", "refuse"),
    _row("::/96", "IPv4-compatible, deprecated (RFC 4291)", "refuse"),
    _row("::ffff:0:0:0/96", "IPv4-translated, SIIT (RFC 2765)", "refuse"),
    _row("fec0::/10", "site-local, deprecated (RFC 3879)", "refuse"),
    _row("ff00::/8", "multicast (RFC 4291)", "refuse"),
)

GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
"""IPv6 global unicast (RFC 4291); an address outside it and in no row is refused."""


def _by_specificity(rows: Sequence[Row]) -> tuple[Row, ...]:
    return tuple(sorted(rows, key=lambda row: row.network.prefixlen, reverse=True))


_V4 = _by_specificity(IPV4_ROWS)
_V6 = _by_specificity(IPV6_ROWS)


def row_of(address: IPAddress) -> Row | None:
    """The most specific row holding `address`, or None (global unicast)."""
    rows = _V4 if isinstance(address, ipaddress.IPv4Address) else _V6
    for row in rows:
        if address in row.network:
            return row
    if isinstance(address, ipaddress.IPv6Address) and address not in GLOBAL_UNICAST_V6:
        return Row(ipaddress.IPv6Network("::/0"), "not IPv6 global unicast (outside 2000::/3)",
                   "refuse")
    return None


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, SIIT, NAT64,
    6to4, Teredo's server and client), whether or not its row unwraps them."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    elif (address in ipaddress.IPv6Network("::/96")
          or address in ipaddress.IPv6Network("::ffff:0:0:0/96")
          or address in ipaddress.IPv6Network("64:ff9b::/96")):
        found.append(low32)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def address_problem(address: IPAddress, private_network: bool) -> str | None:
    """Why `address` may not be reached, or None when it may.

    `private_network` (the grant's) lifts only the `private` rows.
    """
    row = row_of(address)
    if row is None:
        return None
    if row.kind == "unwrap":
        for inner in embedded_ipv4(address):
            problem = address_problem(inner, private_network)
            if problem is not None:
                return f"{address} carries {problem}"
        return None
    if row.kind == "private" and private_network:
        return None
    lift = " without private_network = true" if row.kind == "private" else ""
    return f"{address} is in {row.network} ({row.name}){lift}"


def vet_addresses(addresses: Sequence[IPAddress], private_network: bool) -> str | None:
    """Why the set may not be reached (every address must pass), or None."""
    if not addresses:
        return "the name has no addresses"
    for address in addresses:
        problem = address_problem(address, private_network)
        if problem is not None:
            return problem
    return None
