"""The approval page's ASGI app, driven directly: the checks every request passes.

brokerd is replaced by a table of answers (the page is what is under test).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from boxmaker.approvals._app import CSP, MAX_BODY, PageApp
from boxmaker.proto._convert import U64
from boxmaker.proto._taint import NEW_SESSION
from boxmaker.proto.wire._wire import Ok, error_answer
from boxmaker.proto.wire._wire_admin import (
    AdminAnswer,
    AdminRequestBody,
    Approval,
    ApprovalList,
    ApprovalsRequest,
    RefuseRequest,
)

ORIGIN = "https://box.example.net:8443"
HOST = "box.example.net:8443"


class Brokerd:
    def __init__(self) -> None:
        self.asked: list[AdminRequestBody] = []

    async def ask(self, body: AdminRequestBody) -> AdminAnswer:
        self.asked.append(body)
        if isinstance(body, ApprovalsRequest):
            return ApprovalList(items=[Approval(
                approval_id=U64(482913), call=U64(7), session="s1", tool="echo\u202e",
                args={"text": "<b>x</b>\x1b[2J"}, grant="g", state=NEW_SESSION,
                requested_at="2026-11-29T07:00:00.000000Z",
                expires_at="2026-11-29T07:10:00.000000Z", challenge="AAAA")])
        if isinstance(body, RefuseRequest):
            return Ok() if body.approval_id == 482913 else error_answer(
                "no_such_approval", "no pending approval has the id 1")
        return error_answer("passkey_required", "no")


async def call(app: PageApp, method: str, path: str, *, headers: dict[str, str] | None = None,
               body: bytes = b"") -> tuple[int, dict[str, str], Any]:
    sent: list[dict[str, Any]] = []
    chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)] or [b""]

    async def receive() -> dict[str, Any]:
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    all_headers = {"host": HOST, **(headers or {})}
    scope = {"type": "http", "method": method, "path": path,
             "headers": [(k.encode(), v.encode()) for k, v in all_headers.items()]}
    await app(scope, receive, send)
    start, content = sent
    got = {k.decode(): v.decode() for k, v in start["headers"]}
    data = content["body"]
    return start["status"], got, json.loads(data) if got["content-type"] == (
        "application/json") else data


@pytest.fixture
def app() -> tuple[PageApp, Brokerd]:
    brokerd = Brokerd()
    return PageApp(origin=ORIGIN, ask=brokerd.ask, clock=trio.current_time), brokerd


async def session(app: PageApp) -> tuple[str, str]:
    status, headers, body = await call(app, "GET", "/api/state")
    assert status == 200 and body["logged_in"] is False
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" in cookie
    return cookie.split(";")[0], body["csrf"]


async def test_every_answer_has_the_headers_and_pages_are_static(app: Any) -> None:
    page, _ = app
    for path in ("/", "/enrol", "/static/app.js", "/static/style.css", "/api/state"):
        status, headers, _ = await call(page, "GET", path)
        assert status == 200, path
        assert headers["content-security-policy"] == CSP
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cache-control"] == "no-store"
        assert headers["strict-transport-security"].startswith("max-age=")
    status, _, _body = await call(page, "GET", "/static/../_app.py")
    assert status == 404
    html = (await call(page, "GET", "/"))[2]
    assert b"<script>" not in html and b"style=" not in html and b"http" not in html


async def test_a_foreign_host_is_refused(app: Any) -> None:
    page, _ = app
    status, _, body = await call(page, "GET", "/", headers={"host": "evil.example:8443"})
    assert status == 421 and body["error"]["code"] == "wrong_host"


async def test_pending_needs_a_login(app: Any) -> None:
    page, brokerd = app
    cookie, _ = await session(page)
    status, _, _body = await call(page, "GET", "/api/pending", headers={"cookie": cookie})
    assert status == 401 and brokerd.asked == []


async def test_a_post_needs_the_origin_the_token_and_json(app: Any) -> None:
    page, brokerd = app
    cookie, csrf = await session(page)
    good = {"cookie": cookie, "origin": ORIGIN, "x-csrf-token": csrf,
            "content-type": "application/json"}
    body = json.dumps({"approval_id": 482913}).encode()
    cases = [
        ({**good, "origin": "https://evil.example"}, 403, "cross_origin"),
        ({k: v for k, v in good.items() if k != "origin"}, 403, "cross_origin"),
        ({**good, "x-csrf-token": "x" * 43}, 403, "csrf"),
        ({k: v for k, v in good.items() if k != "cookie"}, 403, "csrf"),
        ({**good, "content-type": "text/plain"}, 415, "json"),
    ]
    for headers, status, code in cases:
        found = await call(page, "POST", "/api/refuse", headers=headers, body=body)
        assert (found[0], found[2]["error"]["code"]) == (status, code), headers
    assert brokerd.asked == []
    status, _, found = await call(page, "POST", "/api/refuse", headers=good, body=body)
    assert (status, found["error"]["code"]) == (401, "login")  # refusing needs a login
    big = b'{"a": "' + b"x" * MAX_BODY + b'"}'
    status, _, found = await call(page, "POST", "/api/refuse", headers=good, body=big)
    assert status == 413


async def test_logged_in_pending_is_escaped(app: Any) -> None:
    page, _brokerd = app
    cookie, csrf = await session(page)
    current = page.sessions.get(cookie.split("=", 1)[1])
    assert current is not None
    fresh = page.sessions.log_in(current, "cred")
    assert page.sessions.get(current.id) is None  # the old id is gone (no fixation)
    headers = {"cookie": f"bx_session={fresh.id}"}
    status, _, body = await call(page, "GET", "/api/pending", headers=headers)
    assert status == 200
    (item,) = body["items"]
    assert item["tool"] == "echo\\u{202E}"
    assert item["args"] == [["text", "<b>x</b>\\u{001B}[2J"]]
    assert item["challenge"] == "AAAA" and body["credential"] == "cred"
    post = {"cookie": f"bx_session={fresh.id}", "origin": ORIGIN, "x-csrf-token": fresh.csrf,
            "content-type": "application/json"}
    ok = await call(page, "POST", "/api/refuse", headers=post,
                    body=json.dumps({"approval_id": 482913, "reason": "no"}).encode())
    assert ok[0] == 200 and ok[2] == {"done": "refused"}
    gone = await call(page, "POST", "/api/refuse", headers=post,
                      body=json.dumps({"approval_id": 1}).encode())
    assert gone[0] == 409 and "already answered or expired" in gone[2]["error"]["message"]
    bad = await call(page, "POST", "/api/approve", headers=post,
                     body=json.dumps({"approval_id": 1, "assertion": {"x": 1}}).encode())
    assert bad[0] == 400 and bad[2]["error"]["code"] == "bad_assertion"
    assert csrf != fresh.csrf


GIT_ASK = ('[[grant]]\nid = "git-ask"\ntool = "run_command"\nmode = "ask"\n'
           'paths = ["/home/me/src", "/home/me/notes"]\ncommands = [["git", "log"]]\n'
           'rest = "any"\n')


async def test_a_run_command_approval_shows_each_mount_of_its_grant(tmp_path: Any) -> None:
    """issue 25: the block shows every mount with ro/rw, read from the grant files."""
    from boxmaker._grant_mounts import command_mounts

    grants = tmp_path / "grants"
    grants.mkdir()
    (grants / "git.toml").write_text(GIT_ASK)
    looked_up: list[str] = []

    async def mounts_of(grant: str) -> list[tuple[str, bool]] | None:
        looked_up.append(grant)
        return command_mounts(grants, grant)

    async def ask(body: AdminRequestBody) -> AdminAnswer:
        assert isinstance(body, ApprovalsRequest)
        return ApprovalList(items=[Approval(
            approval_id=U64(9), call=U64(8), session="s1", tool="run_command",
            args={"argv": ["git", "log"], "cwd": "/home/me/src"}, grant="git-ask",
            state=NEW_SESSION, requested_at="2026-11-29T07:00:00.000000Z",
            expires_at="2026-11-29T07:10:00.000000Z", challenge="AAAA"), Approval(
            approval_id=U64(10), call=U64(9), session="s1", tool="echo",
            args={"text": "x"}, grant="g", state=NEW_SESSION,
            requested_at="2026-11-29T07:00:00.000000Z",
            expires_at="2026-11-29T07:10:00.000000Z", challenge="AAAA")])

    page = PageApp(origin=ORIGIN, ask=ask, clock=trio.current_time, mounts_of=mounts_of)
    cookie, _csrf = await session(page)
    current = page.sessions.get(cookie.split("=", 1)[1])
    assert current is not None
    fresh = page.sessions.log_in(current, "cred")
    status, _, body = await call(page, "GET", "/api/pending",
                                 headers={"cookie": f"bx_session={fresh.id}"})
    assert status == 200
    echo, command = body["items"]  # newest first
    assert command["block"] == "command" and echo["block"] == "args"
    assert [row for row in command["args"] if row[0] == "mount"] == [
        ["mount", "/home/me/src (ro)"], ["mount", "/home/me/notes (ro)"]]
    assert looked_up == ["git-ask"]  # only a run_command approval reads the grants
