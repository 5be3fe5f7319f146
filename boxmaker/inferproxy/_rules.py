"""What inferproxy forwards and how it rewrites headers (06-loopd).  Pure: no I/O.

Forwarded, exactly (the request target as sent, compared byte for byte; no
percent-decoding, no other query strings, no absolute-form targets)::

    GET  /health
    GET  /props
    GET  /slots
    POST /v1/chat/completions
    POST /slots/{n}?action=save|restore|erase      n: 0 or a decimal without leading zeros
    POST /tokenize
    POST /detokenize
    POST /apply-template

Headers: hop-by-hop headers (Connection, Keep-Alive, Proxy-*, TE, Trailer,
Transfer-Encoding, Upgrade and every name listed in Connection) are dropped in
both directions.  Toward the server, the client's Authorization, Host,
Content-Length and Expect are dropped too; inferproxy sets Host, the framing,
``Connection: close`` and, with a key, ``Authorization: Bearer <key>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from ..proto._json import dumps

Header = tuple[bytes, bytes]

_EXACT: Final = frozenset({
    (b"GET", b"/health"),
    (b"GET", b"/props"),
    (b"GET", b"/slots"),
    (b"POST", b"/v1/chat/completions"),
    (b"POST", b"/tokenize"),
    (b"POST", b"/detokenize"),
    (b"POST", b"/apply-template"),
})
_SLOT_ACTION: Final = re.compile(rb"/slots/(?:0|[1-9][0-9]{0,8})\?action=(?:save|restore|erase)")

HOP_BY_HOP: Final = frozenset({
    b"connection", b"keep-alive", b"te", b"trailer", b"trailers", b"transfer-encoding",
    b"upgrade", b"proxy-connection", b"proxy-authenticate", b"proxy-authorization",
})
"""Always dropped (besides every ``proxy-*`` header and the names listed in Connection)."""

_DROPPED_TOWARD_SERVER: Final = frozenset({
    b"authorization", b"host", b"content-length", b"expect",
})


def is_forwarded(method: bytes, target: bytes) -> bool:
    """True when `method` `target` is one of the requests inferproxy forwards."""
    if (method, target) in _EXACT:
        return True
    return method == b"POST" and _SLOT_ACTION.fullmatch(target) is not None


def connection_tokens(headers: Iterable[Header]) -> frozenset[bytes]:
    """The header names listed in every Connection header (lower case)."""
    tokens: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            for item in value.split(b","):
                token = item.strip().lower()
                if token:
                    tokens.add(token)
    return frozenset(tokens)


def is_hop_by_hop(name: bytes, listed: frozenset[bytes]) -> bool:
    lower = name.lower()
    return lower in HOP_BY_HOP or lower.startswith(b"proxy-") or lower in listed


def end_to_end(headers: Sequence[Header]) -> list[Header]:
    """`headers` without the hop-by-hop ones (names kept as given)."""
    listed = connection_tokens(headers)
    return [(name, value) for name, value in headers if not is_hop_by_hop(name, listed)]


def upstream_request_headers(
    client_headers: Sequence[Header],
    *,
    host: bytes,
    api_key: str | None,
    content_length: int | None,
    chunked: bool,
) -> list[Header]:
    """The headers sent to the server for a request that came with `client_headers`."""
    out: list[Header] = [(b"Host", host)]
    for name, value in end_to_end(client_headers):
        if name.lower() not in _DROPPED_TOWARD_SERVER:
            out.append((name, value))
    if content_length is not None:
        out.append((b"Content-Length", b"%d" % content_length))
    elif chunked:
        out.append((b"Transfer-Encoding", b"chunked"))
    out.append((b"Connection", b"close"))
    if api_key is not None:
        out.append((b"Authorization", b"Bearer " + api_key.encode("ascii")))
    return out


def downstream_response_headers(server_headers: Sequence[Header]) -> list[Header]:
    """The headers sent to the client for an answer that came with `server_headers`."""
    out = end_to_end(server_headers)
    out.append((b"Connection", b"close"))
    return out


def error_body(status: int, kind: str, message: str) -> bytes:
    """A JSON error body in llama-server's shape: ``{"error": {"code", "message", "type"}}``."""
    return dumps({"error": {"code": status, "message": message, "type": kind}},
                 ascii_only=True).encode("ascii")
