"""The address table (issue 11 item 5): every row of the IANA special-purpose
registries, each embedding of an IPv4 address, and what private_network lifts.

The expectations are written out here by hand from the registries, not derived
from the table under test; `test_every_row_has_a_case` makes sure no row of the
table goes untested.
"""

from __future__ import annotations

import ipaddress

import pytest

from boxmaker.brokerd.runner._addresses import (
    IPV4_ROWS,
    IPV6_ROWS,
    address_problem,
    embedded_ipv4,
    row_of,
    vet_addresses,
)

ip = ipaddress.ip_address

NEVER = "never"  # refused with or without private_network
LIFTED = "lifted"  # refused unless the grant says private_network = true
PASSES = "passes"  # a global address

CASES: list[tuple[str, str]] = [
    # IPv4 Special-Purpose Address Registry
    ("0.1.2.3", NEVER),  # 0.0.0.0/8 this network
    ("0.0.0.0", NEVER),  # 0.0.0.0/32 this host
    ("10.1.2.3", LIFTED),
    ("100.64.0.1", LIFTED),
    ("100.127.255.254", LIFTED),
    ("127.0.0.1", LIFTED),
    ("127.255.0.9", LIFTED),
    ("169.254.169.254", LIFTED),  # cloud metadata lives here
    ("172.16.0.1", LIFTED),
    ("172.31.255.254", LIFTED),
    ("192.0.0.77", NEVER),  # 192.0.0.0/24 IETF protocol assignments
    ("192.0.0.1", NEVER),  # 192.0.0.0/29 service continuity
    ("192.0.0.8", NEVER),
    ("192.0.0.9", NEVER),  # PCP anycast: usually the owner's own router
    ("192.0.0.10", NEVER),
    ("192.0.0.170", NEVER),
    ("192.0.0.171", NEVER),
    ("192.0.2.1", NEVER),
    ("192.31.196.1", NEVER),
    ("192.52.193.1", NEVER),
    ("192.88.99.1", NEVER),
    ("192.168.1.1", LIFTED),
    ("192.175.48.6", NEVER),
    ("198.18.0.1", NEVER),
    ("198.19.255.1", NEVER),
    ("198.51.100.1", NEVER),
    ("203.0.113.1", NEVER),
    ("240.0.0.1", NEVER),
    ("255.255.255.255", NEVER),
    ("224.0.0.1", NEVER),
    ("239.255.255.250", NEVER),
    # global IPv4 next to the rows
    ("93.184.216.34", PASSES),
    ("1.1.1.1", PASSES),
    ("100.63.255.255", PASSES),
    ("100.128.0.0", PASSES),
    ("172.15.255.255", PASSES),
    ("172.32.0.0", PASSES),
    ("192.0.1.1", PASSES),
    ("198.20.0.1", PASSES),
    ("223.255.255.255", PASSES),
    # IPv6 Special-Purpose Address Registry
    ("::1", LIFTED),
    ("::", NEVER),
    ("::ffff:127.0.0.1", LIFTED),  # IPv4-mapped: the embedded address decides
    ("::ffff:10.0.0.1", LIFTED),
    ("::ffff:192.0.0.9", NEVER),
    ("::ffff:0.0.0.0", NEVER),
    ("::ffff:224.0.0.1", NEVER),
    ("::ffff:93.184.216.34", PASSES),
    ("64:ff9b::7f00:1", LIFTED),  # NAT64 well-known prefix around 127.0.0.1
    ("64:ff9b::a00:1", LIFTED),
    ("64:ff9b::c000:0009", NEVER),
    ("64:ff9b::e000:1", NEVER),
    ("64:ff9b::5db8:d822", PASSES),
    ("64:ff9b:1::7f00:1", NEVER),  # local-use NAT64: refused whole
    ("64:ff9b:1::5db8:d822", NEVER),
    ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", NEVER),
    ("100::1", NEVER),
    ("100:0:0:1::1", NEVER),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", LIFTED),  # Teredo, client 10.0.0.1
    ("2001:0:5db8:d822::a2ff:fefe", PASSES),  # Teredo, server and client global
    ("2001:0:7f00:1::a2ff:fefe", LIFTED),  # Teredo, server 127.0.0.1
    ("2001:1::1", NEVER),
    ("2001:1::2", NEVER),
    ("2001:1::3", NEVER),
    ("2001:1::4", NEVER),  # the rest of 2001::/23
    ("2001:2::1", NEVER),
    ("2001:3::1", NEVER),
    ("2001:4:112::1", NEVER),
    ("2001:10::1", NEVER),
    ("2001:20::1", NEVER),
    ("2001:30::1", NEVER),
    ("2001:1ff::1", NEVER),
    ("2001:db8::1", NEVER),
    ("2002:7f00:1::1", LIFTED),  # 6to4 around 127.0.0.1
    ("2002:0a00:0001::1", LIFTED),
    ("2002:c000:0201::1", NEVER),  # 6to4 around 192.0.2.1
    ("2002:5db8:d822::1", PASSES),
    ("2620:4f:8000::1", NEVER),
    ("3fff::1", NEVER),
    ("3fff:fff::1", NEVER),
    ("5f00::1", NEVER),
    ("fc00::1", LIFTED),
    ("fd12:3456::1", LIFTED),
    ("fe80::1", LIFTED),
    ("febf::1", LIFTED),
    # IPv6 address space: not global unicast
    ("::127.0.0.1", NEVER),  # IPv4-compatible
    ("::7f00:1", NEVER),
    ("::93.184.216.34", NEVER),
    ("::ffff:0:7f00:1", NEVER),  # SIIT
    ("::ffff:0:5db8:d822", NEVER),
    ("::1:0:0:1", NEVER),  # the rest of ::/8
    ("fec0::1", NEVER),
    ("feff::1", NEVER),
    ("ff02::1", NEVER),
    ("ff0e::1", NEVER),
    ("4000::1", NEVER),  # outside 2000::/3
    ("e000::1", NEVER),
    ("200::1", NEVER),
    # global IPv6
    ("2606:2800:220:1:248:1893:25c8:1946", PASSES),
    ("2a00:1450:4001::200e", PASSES),
    ("2001:200::1", PASSES),  # just past 2001::/23
    ("3ffe::1", PASSES),
    ("2620:4f:8001::1", PASSES),
]


@pytest.mark.parametrize(("address", "expected"), CASES)
def test_every_row(address: str, expected: str) -> None:
    without = address_problem(ip(address), private_network=False)
    lifted = address_problem(ip(address), private_network=True)
    if expected == PASSES:
        assert without is None and lifted is None
    elif expected == LIFTED:
        assert without is not None and "private_network" in without
        assert lifted is None
    else:
        assert without is not None and lifted is not None


def test_every_row_has_a_case() -> None:
    covered = {row_of(ip(address)) for address, _ in CASES}
    for row in (*IPV4_ROWS, *IPV6_ROWS):
        assert row in covered, f"no case for {row.network} ({row.name})"


def test_the_message_names_the_row() -> None:
    problem = address_problem(ip("64:ff9b:1::7f00:1"), private_network=True)
    assert problem is not None and "64:ff9b:1::/48" in problem and "RFC 8215" in problem
    nested = address_problem(ip("::ffff:169.254.169.254"), private_network=False)
    assert nested is not None and "169.254.0.0/16" in nested


def test_embedded_ipv4_is_found() -> None:
    assert embedded_ipv4(ip("64:ff9b::a00:1")) == [ip("10.0.0.1")]
    assert embedded_ipv4(ip("::7f00:1")) == [ip("127.0.0.1")]
    assert embedded_ipv4(ip("::ffff:0:7f00:1")) == [ip("127.0.0.1")]
    assert embedded_ipv4(ip("::ffff:127.0.0.1")) == [ip("127.0.0.1")]
    assert ip("10.0.0.1") in embedded_ipv4(ip("2002:0a00:0001::1"))
    assert set(embedded_ipv4(ip("2001:0:4136:e378:8000:63bf:f5ff:fffe"))) == {
        ip("65.54.227.120"), ip("10.0.0.1")}
    assert embedded_ipv4(ip("1.2.3.4")) == []
    assert embedded_ipv4(ip("2606:2800:220:1:248:1893:25c8:1946")) == []


def test_every_address_of_a_set_must_pass() -> None:
    assert vet_addresses([ip("93.184.216.34"), ip("::ffff:0:7f00:1")], private_network=True)
    assert vet_addresses([], private_network=True) == "the name has no addresses"
    assert vet_addresses([ip("93.184.216.34"), ip("2a00:1450:4001::200e")],
                         private_network=False) is None
