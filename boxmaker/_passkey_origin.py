"""The WebAuthn RP id and origins (11-approvals-web), shared by brokerd and the page.

WebAuthn needs a secure context and a DNS name as RP id: an origin is
``https://NAME[:PORT]`` whose NAME is the RP id or under it, or
``http://localhost[:PORT]`` (a secure context in every browser) with RP id
``localhost``.  Never an IP literal.  Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_DNS_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*", re.ASCII)
MAX_ORIGINS = 8


def rp_id_problem(rp_id: str) -> str | None:
    if len(rp_id) > 253 or _DNS_NAME.fullmatch(rp_id) is None:
        return f"approvals.rp_id: {rp_id!r} is not a lowercase DNS name"
    try:
        ipaddress.ip_address(rp_id)
    except ValueError:
        return None
    return f"approvals.rp_id: {rp_id!r} is an IP address; WebAuthn needs a DNS name"


def origin_problem(origin: str, rp_id: str | None) -> str | None:
    """Why `origin` cannot serve passkeys for `rp_id`, or None."""
    parts = urlsplit(origin)
    try:
        port = parts.port
    except ValueError:
        return f"approvals.origins: {origin!r} has a port that is not a number 1..65535"
    host = parts.hostname or ""
    if (parts.path, parts.query, parts.fragment, parts.username, parts.password) != (
            "", "", "", None, None) or origin != origin.strip() or port == 0:
        return (f"approvals.origins: {origin!r} is not an origin "
                "(scheme://host[:port], nothing more)")
    expected = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    if origin != expected:
        return f"approvals.origins: {origin!r} is not written as {expected!r}"
    if parts.scheme == "http":
        if host != "localhost":
            return (f"approvals.origins: {origin!r}: plain http only as http://localhost; "
                    "on the LAN use https with a certificate the phone trusts")
    elif parts.scheme != "https":
        return f"approvals.origins: {origin!r}: the scheme must be https (or http for localhost)"
    if rp_id is not None and host != rp_id and not host.endswith("." + rp_id):
        return f"approvals.origins: {origin!r} is not at or under the rp_id {rp_id!r}"
    return None


def check_passkey_settings(rp_id: str | None, origins: list[str], *,
                           require: bool) -> str | None:
    """The first problem of brokerd.toml's passkey settings, or None."""
    if rp_id is not None:
        problem = rp_id_problem(rp_id)
        if problem is not None:
            return problem
    if len(origins) > MAX_ORIGINS:
        return f"approvals.origins: at most {MAX_ORIGINS} origins"
    for origin in origins:
        problem = origin_problem(origin, rp_id)
        if problem is not None:
            return problem
    if (rp_id is None) != (not origins):
        return "approvals: rp_id and origins go together (set both, or neither)"
    if require and rp_id is None:
        return ("approvals.require_passkey: needs rp_id and origins (the approval page "
                "that passkeys sign for)")
    return None
