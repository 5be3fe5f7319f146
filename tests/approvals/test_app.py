"""The approval page's ASGI app (boxmaker/approvals/_app.py): the request body
bound, strict JSON, the host and origin gates for any header value, and
brokerd being away shown as 503 through the real admin.sock client.
(Logins, approvals and escaping are in test_page_app.py; the browser in
test_page_browser.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.approvals._admin_client import AdminPort
from boxmaker.approvals._app import MAX_BODY, PageApp
from boxmaker.proto.wire._wire import error_answer
from boxmaker.proto.wire._wire_admin import AdminAnswer, AdminRequestBody

ORIGIN = "https://box.example.net:8443"
HOST = "box.example.net:8443"


async def unreachable_brokerd(body: AdminRequestBody) -> AdminAnswer:
    return error_answer("internal", "not used")


def make_app(ask: Any = unreachable_brokerd) -> PageApp:
    return PageApp(origin=ORIGIN, ask=ask, clock=trio.current_time)


async def call(app: PageApp, method: str, path: str, headers: dict[str, str],
               chunks: list[bytes] | None = None, *, disconnect: bool = False
               ) -> tuple[int, dict[str, str], bytes]:
    sent: list[dict[str, Any]] = []
    parts = list(chunks or [b""])

    async def receive() -> dict[str, Any]:
        if not parts:
            return {"type": "http.disconnect"}
        chunk = parts.pop(0)
        more = bool(parts) or disconnect
        return {"type": "http.request", "body": chunk, "more_body": more}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]}
    await app(scope, receive, send)
    start, content = sent
    return (start["status"], {k.decode(): v.decode() for k, v in start["headers"]},
            content["body"])


async def page_session(app: PageApp) -> dict[str, str]:
    status, headers, body = await call(app, "GET", "/api/state", {"host": HOST})
    assert status == 200
    return {"host": HOST, "origin": ORIGIN, "cookie": headers["set-cookie"].split(";")[0],
            "x-csrf-token": json.loads(body)["csrf"], "content-type": "application/json"}


def error_code(body: bytes) -> str:
    code: str = json.loads(body)["error"]["code"]
    return code


async def test_a_body_over_the_bound_is_413_in_any_chunking() -> None:
    app = make_app()
    headers = await page_session(app)
    big = b'{"a":"' + b"x" * MAX_BODY + b'"}'
    for size in (65536, 1000, len(big)):
        chunks = [big[i:i + size] for i in range(0, len(big), size)]
        status, _, body = await call(app, "POST", "/api/logout", headers, chunks)
        assert (status, error_code(body)) == (413, "too_large")


@pytest.mark.parametrize(("raw", "code"), [
    (b'{"a": NaN}', "json"), (b'{"a": Infinity}', "json"), (b"[1]", "json"),
    (b"not json", "json"), (b"[" * 100_000 + b"]" * 100_000, "json"),
])
async def test_only_strict_json_objects(raw: bytes, code: str) -> None:
    app = make_app()
    headers = await page_session(app)
    status, _, body = await call(app, "POST", "/api/logout", headers, [raw])
    assert status == 400 and error_code(body) == code


async def test_a_request_that_ends_early() -> None:
    app = make_app()
    headers = await page_session(app)
    status, _, body = await call(app, "POST", "/api/logout", headers, [b'{"a"'],
                                 disconnect=True)
    assert (status, error_code(body)) == (400, "disconnect")


@settings(max_examples=60, deadline=None)
@given(host=st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=30))
def test_any_other_host_is_refused(host: str) -> None:
    async def main() -> tuple[int, bytes]:
        status, _, body = await call(make_app(), "GET", "/", {"host": host})
        return status, body

    status, body = trio.run(main)
    if host == HOST:
        assert status == 200
    else:
        assert (status, error_code(body)) == (421, "wrong_host")


@settings(max_examples=60, deadline=None)
@given(origin=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40))
def test_a_post_from_any_other_origin_is_refused(origin: str) -> None:
    async def main() -> tuple[int, bytes]:
        app = make_app()
        headers = await page_session(app)
        headers["origin"] = origin
        status, _, body = await call(app, "POST", "/api/logout", headers, [b"{}"])
        return status, body

    status, body = trio.run(main)
    if origin != ORIGIN:
        assert (status, error_code(body)) == (403, "cross_origin")


async def test_brokerd_away_is_503_through_the_real_client(tmp_path: Path) -> None:
    port = AdminPort(tmp_path / "absent.sock", brokerd_uid=0)
    app = make_app(port.ask)
    headers = await page_session(app)
    status, _, body = await call(app, "POST", "/api/login/options", headers, [b"{}"])
    assert (status, error_code(body)) == (503, "brokerd_unreachable")
    assert "cannot reach brokerd" in json.loads(body)["error"]["message"]


async def test_lifespan_and_other_scopes() -> None:
    app = make_app()
    events = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return events.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete",
                                         "lifespan.shutdown.complete"]
    await app({"type": "websocket"}, receive, send)
    assert len(sent) == 2  # nothing answered on a websocket
