"""The approval page as an ASGI application (served over h11 by `_serve.py`).

GET never changes anything.  Every POST must come from the page's own origin
(`Origin`), name the configured host (`Host`, against DNS rebinding), carry
the session's CSRF token (`X-CSRF-Token`), be JSON and at most `MAX_BODY`
bytes.  Approving needs a passkey assertion over the approval's challenge,
which brokerd itself verifies (and so does a pin, on `/pin`: a one-time link of
`bxctl mcp pin` under require_passkey); the page's login (an assertion over a challenge
of its own) only lets the browser see the pending list and refuse.  Every
answer carries the CSP of 11-approvals-web and no external resource exists.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from .._error_table import PAGE_STATUS, PAGE_WORDS
from .._errors import PeerError
from ..proto._convert import U64, JsonObject, structure, unstructure
from ..proto._errors import DecodeError
from ..proto._escape import escape_line
from ..proto.tools import CATALOGUE
from ..proto.wire import (
    AdminAnswer,
    AdminRequestBody,
    Approval,
    ApprovalList,
    ApprovalsRequest,
    ApproveRequest,
    Assertion,
    ErrorAnswer,
    McpPinOptions,
    McpPinOptionsRequest,
    McpPinRequest,
    Ok,
    PasskeyAddRequest,
    PasskeyList,
    PasskeyOptions,
    PasskeyOptionsRequest,
    PasskeyRemoveRequest,
    PasskeysRequest,
    PasskeyVerified,
    PasskeyVerifyRequest,
    RefuseRequest,
    b64url,
)
from ._admin_client import AdminUnreachable
from ._history import TaintHistory
from ._pin_view import pin_view
from ._sessions import Session, Sessions, cookie_header, cookie_value
from ._views import approval_view

log = logging.getLogger("boxmaker.approvals")

MAX_BODY = 256 * 1024
MAX_REASON = 1000
CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
_STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
_PAGES = {"/": "index.html", "/enrol": "enrol.html", "/pin": "pin.html"}

Ask = Callable[[AdminRequestBody], Awaitable[AdminAnswer]]


class HttpError(PeerError):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _static_files() -> dict[str, tuple[bytes, str]]:
    files: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files(__package__).joinpath("static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in _STATIC_TYPES:
            files[entry.name] = (entry.read_bytes(), _STATIC_TYPES[suffix])
    return files


class PageApp:
    def __init__(self, *, origin: str, ask: Ask, clock: Callable[[], float],
                 wall_now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
                 history: TaintHistory | None = None,
                 refresh_history: Callable[[], Awaitable[None]] | None = None,
                 mounts_of: Callable[[str], Awaitable[list[tuple[str, bool]] | None]]
                 | None = None) -> None:
        self.origin = origin
        parts = urlsplit(origin)
        self.host = parts.netloc
        self.secure = parts.scheme == "https"
        self.ask = ask
        self.sessions = Sessions(clock)
        self.clock = clock
        self.wall_now = wall_now
        self.history = history or TaintHistory()
        self.refresh_history = refresh_history
        self.mounts_of = mounts_of
        """A run_command ask grant's mounts, from the grant files (`_grant_mounts`)."""
        self.static = _static_files()

    # -- ASGI

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        extra: list[tuple[bytes, bytes]] = []
        try:
            status, content_type, body = await self._handle(scope, headers, receive, extra)
        except HttpError as exc:
            status, content_type = exc.status, "application/json"
            body = json.dumps({"error": {"code": exc.code, "message": exc.message}},
                              ensure_ascii=True).encode()
        except AdminUnreachable as exc:
            status, content_type = 503, "application/json"
            body = json.dumps({"error": {"code": "brokerd_unreachable", "message": str(exc)}},
                              ensure_ascii=True).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [*self._headers(content_type, len(body)), *extra]})
        await send({"type": "http.response.body", "body": body})

    def _headers(self, content_type: str, length: int) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"content-type", content_type.encode()), (b"content-length", str(length).encode()),
            (b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer"),
            (b"cache-control", b"no-store"), (b"cross-origin-opener-policy", b"same-origin"),
        ]
        if self.secure:
            headers.append((b"strict-transport-security", b"max-age=31536000"))
        return headers

    # -- requests

    async def _handle(self, scope: dict[str, Any], headers: dict[str, str], receive: Any,
                      extra: list[tuple[bytes, bytes]]) -> tuple[int, str, bytes]:
        if headers.get("host") != self.host:
            raise HttpError(421, "wrong_host", f"this page answers only for {self.host}")
        method, path = scope["method"], scope["path"]
        session = self.sessions.get(cookie_value(headers.get("cookie")))
        if method in ("GET", "HEAD"):
            if path in _PAGES or path.startswith("/static/"):
                name = _PAGES.get(path) or path.removeprefix("/static/")
                found = self.static.get(name)
                if found is None:
                    raise HttpError(404, "not_found", "no such page")
                return 200, found[1], found[0]
            if path == "/api/state":
                if session is None:
                    session = self.sessions.new()
                    extra.append((b"set-cookie", cookie_header(session,
                                                               secure=self.secure).encode()))
                return self._json({"csrf": session.csrf,
                                   "logged_in": session.logged_in(self.clock()),
                                   "origin": self.origin})
            if path == "/api/pending":
                return self._json(await self._pending(self._logged_in(session)))
            raise HttpError(404, "not_found", "no such page")
        if method != "POST":
            raise HttpError(405, "method", "GET or POST only")
        if headers.get("origin") != self.origin:
            raise HttpError(403, "cross_origin", "a POST must come from the page itself")
        if session is None or not Sessions.csrf_ok(session, headers.get("x-csrf-token")):
            raise HttpError(403, "csrf", "the page's CSRF token is missing or stale; reload")
        if headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise HttpError(415, "json", "POST bodies are JSON")
        document = await self._read_json(receive)
        handler = _POSTS.get(path)
        if handler is None:
            raise HttpError(404, "not_found", "no such action")
        result = await handler(self, session, document, extra)
        return self._json(result)

    def _json(self, value: Any) -> tuple[int, str, bytes]:
        return 200, "application/json", json.dumps(value, ensure_ascii=True).encode()

    async def _read_json(self, receive: Any) -> dict[str, Any]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "disconnect", "the request ended early")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                raise HttpError(413, "too_large", f"a request body has at most {MAX_BODY} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        try:  # strict JSON: NaN and Infinity are refused here, not by brokerd's encoder
            value = json.loads(b"".join(chunks), parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise HttpError(400, "json", "the body is not JSON") from None
        if type(value) is not dict:
            raise HttpError(400, "json", "the body is a JSON object")
        return value

    def _logged_in(self, session: Session | None) -> Session:
        if session is None or not session.logged_in(self.clock()):
            raise HttpError(401, "login", "log in with your passkey")
        return session

    async def _pending(self, session: Session) -> dict[str, Any]:
        answer = await self.ask(ApprovalsRequest())
        if not isinstance(answer, ApprovalList):
            raise _from_brokerd(answer)
        if self.refresh_history is not None:
            await self.refresh_history()
        now = self.wall_now()
        items = [approval_view(a, self.history.of(a.session), now,
                               mounts=await self._mounts(a))
                 for a in reversed(answer.items)]
        return {"items": items, "credential": session.credential}


    async def _mounts(self, approval: Approval) -> list[tuple[str, bool]] | None:
        entry = CATALOGUE.get(approval.tool)
        if self.mounts_of is None or entry is None or entry.approval != "command":
            return None
        return await self.mounts_of(approval.grant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _from_brokerd(answer: AdminAnswer) -> HttpError:
    if isinstance(answer, ErrorAnswer):
        status = PAGE_STATUS.get(answer.code, 400)
        message = escape_line(answer.message)
        words = PAGE_WORDS.get(answer.code)
        if words is not None:
            message = words + " (" + message + ")"
        return HttpError(status, answer.code, message)
    return HttpError(502, "brokerd", f"brokerd answered {type(answer).__name__}")


def _field(document: dict[str, Any], name: str, kind: type) -> Any:
    value = document.get(name)
    if type(value) is not kind:
        raise HttpError(400, "bad_request", f"{name} must be a {kind.__name__}")
    return value


def _assertion(value: Any) -> Assertion:
    try:
        return structure(value, Assertion)
    except DecodeError as exc:
        raise HttpError(400, "bad_assertion", f"the assertion is not well formed: {exc}") from None


def _approval_id(document: dict[str, Any]) -> U64:
    value = _field(document, "approval_id", int)
    if not 0 <= value < 2**64:
        raise HttpError(400, "bad_request", "approval_id is a u64")
    return U64(value)


async def _login_options(app: PageApp, session: Session, _: dict[str, Any],
                         __: list[tuple[bytes, bytes]]) -> Any:
    listed = await app.ask(PasskeysRequest())
    if not isinstance(listed, PasskeyList):
        raise _from_brokerd(listed)
    if not listed.items:
        raise HttpError(409, "no_passkey", "no passkey is enrolled: run bxctl passkey add")
    challenge = app.sessions.login_challenge(session)
    return {"challenge": b64url(challenge), "rp_id": listed.rp_id,
            "allow_credentials": [p.credential_id for p in listed.items]}


async def _login(app: PageApp, session: Session, document: dict[str, Any],
                 extra: list[tuple[bytes, bytes]]) -> Any:
    challenge = app.sessions.take_login_challenge(session)
    if challenge is None:
        raise HttpError(400, "login", "ask for a login challenge first")
    answer = await app.ask(PasskeyVerifyRequest(challenge=b64url(challenge),
                                                assertion=_assertion(document.get("assertion"))))
    if not isinstance(answer, PasskeyVerified):
        raise _from_brokerd(answer)
    fresh = app.sessions.log_in(session, answer.credential_id)
    extra.append((b"set-cookie", cookie_header(fresh, secure=app.secure).encode()))
    return {"csrf": fresh.csrf, "name": escape_line(answer.name)}


async def _approve(app: PageApp, session: Session, document: dict[str, Any],
                   _: list[tuple[bytes, bytes]]) -> Any:
    app._logged_in(session)
    answer = await app.ask(ApproveRequest(approval_id=_approval_id(document),
                                          assertion=_assertion(document.get("assertion"))))
    if not isinstance(answer, Ok):
        raise _from_brokerd(answer)
    return {"done": "approved"}


async def _refuse(app: PageApp, session: Session, document: dict[str, Any],
                  _: list[tuple[bytes, bytes]]) -> Any:
    app._logged_in(session)
    reason = document.get("reason")
    if reason is not None and (type(reason) is not str or len(reason) > MAX_REASON):
        raise HttpError(400, "bad_request", f"reason is text of at most {MAX_REASON} characters")
    answer = await app.ask(RefuseRequest(approval_id=_approval_id(document),
                                         reason=reason or None))
    if not isinstance(answer, Ok):
        raise _from_brokerd(answer)
    return {"done": "refused"}


async def _enrol_options(app: PageApp, _: Session, document: dict[str, Any],
                         __: list[tuple[bytes, bytes]]) -> Any:
    token = _field(document, "token", str)
    try:
        answer = await app.ask(PasskeyOptionsRequest(token=token))
    except (DecodeError, ValueError) as exc:
        raise HttpError(400, "bad_request", f"not an enrolment token: {exc}") from None
    if not isinstance(answer, PasskeyOptions):
        raise _from_brokerd(answer)
    shown = unstructure(answer)
    shown["name"] = escape_line(answer.name)
    return shown


async def _enrol_finish(app: PageApp, _: Session, document: dict[str, Any],
                        __: list[tuple[bytes, bytes]]) -> Any:
    token = _field(document, "token", str)
    raw_assertion = document.get("assertion")
    assertion = None if raw_assertion is None else _assertion(raw_assertion)
    body: AdminRequestBody
    try:
        if document.get("action") == "add":
            credential = _field(document, "credential", dict)
            body = PasskeyAddRequest(token=token, credential=JsonObject(credential),
                                     assertion=assertion)
        elif document.get("action") == "remove":
            body = PasskeyRemoveRequest(token=token, assertion=assertion)
        else:
            raise HttpError(400, "bad_request", "action is add or remove")
    except (DecodeError, ValueError) as exc:
        raise HttpError(400, "bad_request", f"not an enrolment token: {exc}") from None
    answer = await app.ask(body)
    if not isinstance(answer, Ok):
        raise _from_brokerd(answer)
    return {"done": document["action"]}


async def _pin_options_of(app: PageApp, document: dict[str, Any]) -> McpPinOptions:
    token = _field(document, "token", str)
    try:
        answer = await app.ask(McpPinOptionsRequest(token=token))
    except (DecodeError, ValueError) as exc:
        raise HttpError(400, "bad_request", f"not a pin link token: {exc}") from None
    if not isinstance(answer, McpPinOptions):
        raise _from_brokerd(answer)
    return answer


async def _pin_options(app: PageApp, _: Session, document: dict[str, Any],
                       __: list[tuple[bytes, bytes]]) -> Any:
    """A pin link's probe, as bxctl showed it, and the challenge its pin signs."""
    return pin_view(await _pin_options_of(app, document), app.wall_now())


async def _pin_finish(app: PageApp, _: Session, document: dict[str, Any],
                      __: list[tuple[bytes, bytes]]) -> Any:
    """The signed pin: brokerd's `mcp_pin` of the link's probe (brokerd's own fields,
    never the browser's), with the browser's assertion, verified by brokerd."""
    assertion = _assertion(document.get("assertion"))
    probe = (await _pin_options_of(app, document)).probe
    answer = await app.ask(McpPinRequest(server=probe.server, probe_id=probe.probe_id,
                                         digest=probe.digest, invalidates=probe.invalidates,
                                         assertion=assertion))
    if not isinstance(answer, Ok):
        raise _from_brokerd(answer)
    return {"done": "pinned", "server": probe.server, "digest": probe.digest}


async def _logout(app: PageApp, session: Session, _: dict[str, Any],
                  extra: list[tuple[bytes, bytes]]) -> Any:
    session.credential = None
    session.logged_in_until = 0.0
    return {"done": "logged out"}


_POSTS: dict[str, Callable[[PageApp, Session, dict[str, Any], list[tuple[bytes, bytes]]],
                           Awaitable[Any]]] = {
    "/api/login/options": _login_options,
    "/api/login": _login,
    "/api/approve": _approve,
    "/api/refuse": _refuse,
    "/api/enrol/options": _enrol_options,
    "/api/enrol/finish": _enrol_finish,
    "/api/pin/options": _pin_options,
    "/api/pin/finish": _pin_finish,
    "/api/logout": _logout,
}
