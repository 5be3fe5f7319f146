"""A whole small exchange on the h11 client (06-loopd): health, props, slots, slot actions.

`fetch` sends one request on a new connection and reads the whole answer, any
status, bounded; `read_error` reads a non-200 answer's body into its typed
error.
"""

from __future__ import annotations

from typing import Final

import trio

from ._connection import HttpConnection
from ._endpoint import Endpoint, HttpResponse, ResponseHead, deadline_after
from ._error_answers import (
    MAX_ERROR_BODY,
    content_length,
    error_too_large,
    http_error,
    timeout_error,
)
from ._errors import BodyTooLarge, InferenceHTTPError

MAX_BODY: Final = 8 * 1024 * 1024


async def read_error(conn: HttpConnection, head: ResponseHead) -> InferenceHTTPError:
    """Read a non-200 answer's body (at most MAX_ERROR_BODY) into its error."""
    length = content_length(head)
    if length is not None and length > MAX_ERROR_BODY:
        return error_too_large(conn.endpoint, head, length)
    try:
        body = await conn.read_body(MAX_ERROR_BODY)
    except BodyTooLarge:
        return error_too_large(conn.endpoint, head, None)
    return http_error(conn.endpoint, head, body)


async def fetch(
    endpoint: Endpoint,
    method: str,
    target: str,
    *,
    body: bytes | None = None,
    content_type: str = "application/json",
    timeout_s: float | None = 30.0,
    connect_timeout_s: float | None = 10.0,
    max_body: int = MAX_BODY,
) -> HttpResponse:
    """One request on a new connection; the whole answer, any status.

    A 200 body may have up to `max_body` bytes, any other at most
    MAX_ERROR_BODY.  The whole exchange, connecting included, takes at most
    `timeout_s`.
    """
    deadline = deadline_after(trio.current_time(), timeout_s)
    with trio.CancelScope(deadline=deadline) as scope:
        conn = await HttpConnection.open(endpoint, timeout_s=connect_timeout_s)
        async with conn:
            headers: list[tuple[str | bytes, str | bytes]] = [
                ("Accept", "application/json"),
                ("Connection", "close"),
            ]
            if body is not None:
                headers.append(("Content-Type", content_type))
            await conn.send_request(method, target, headers=headers, body=body)
            head = await conn.receive_head()
            if head.status == 200:
                data = await conn.read_body(max_body)
            else:
                length = content_length(head)
                if length is not None and length > MAX_ERROR_BODY:
                    raise error_too_large(conn.endpoint, head, length)
                try:
                    data = await conn.read_body(MAX_ERROR_BODY)
                except BodyTooLarge as exc:
                    raise error_too_large(conn.endpoint, head, None) from exc
            return HttpResponse(head=head, body=data)
    assert scope.cancelled_caught
    raise timeout_error(endpoint, "total", timeout_s)
