"""The approval page's browser sessions: cookies, CSRF tokens, login challenges.

Every visitor gets a session (an unguessable id in a `Secure; HttpOnly;
SameSite=Strict` cookie) holding a CSRF token that every POST must carry in
`X-CSRF-Token`.  Logging in (a passkey assertion over a challenge this
session was given, used once) makes a new session id, so a session fixed
before login is worth nothing after it; a login lasts `LOGIN_SECONDS`.
Pure: the clock is given, no I/O.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable

import attrs

COOKIE = "bx_session"
LOGIN_SECONDS = 15 * 60.0
IDLE_SECONDS = 30 * 60.0
MAX_SESSIONS = 256


@attrs.define(kw_only=True)
class Session:
    id: str
    csrf: str
    created: float
    login_challenge: bytes | None = None
    credential: str | None = None
    """The credential that logged in (base64url), or None."""
    logged_in_until: float = 0.0
    seen: float = 0.0

    def logged_in(self, now: float) -> bool:
        return self.credential is not None and now < self.logged_in_until


class Sessions:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._by_id: dict[str, Session] = {}

    def _drop_old(self, now: float) -> None:
        for key in [k for k, s in self._by_id.items() if now - s.seen > IDLE_SECONDS]:
            del self._by_id[key]
        while len(self._by_id) >= MAX_SESSIONS:
            # A session that logged in goes last: visitors cost nothing to make,
            # and a flood of them must not log the owner out.
            victim = next((k for k, s in self._by_id.items() if not s.logged_in(now)),
                          next(iter(self._by_id)))
            del self._by_id[victim]

    def get(self, session_id: str | None) -> Session | None:
        now = self._clock()
        found = self._by_id.get(session_id) if session_id else None
        if found is None or now - found.seen > IDLE_SECONDS:
            return None
        found.seen = now
        return found

    def new(self) -> Session:
        now = self._clock()
        self._drop_old(now)
        session = Session(id=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32),
                          created=now, seen=now)
        self._by_id[session.id] = session
        return session

    def login_challenge(self, session: Session) -> bytes:
        session.login_challenge = secrets.token_bytes(32)
        return session.login_challenge

    def take_login_challenge(self, session: Session) -> bytes | None:
        challenge, session.login_challenge = session.login_challenge, None
        return challenge

    def log_in(self, session: Session, credential: str) -> Session:
        """A new session (new id and CSRF token) that is logged in; the old one ends."""
        self._by_id.pop(session.id, None)
        fresh = self.new()
        fresh.credential = credential
        fresh.logged_in_until = self._clock() + LOGIN_SECONDS
        return fresh

    @staticmethod
    def csrf_ok(session: Session, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(session.csrf.encode(), token.encode())


def cookie_header(session: Session, *, secure: bool = True) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={session.id}; Path=/; HttpOnly; SameSite=Strict{flags}"


def cookie_value(header: str | None) -> str | None:
    if not header:
        return None
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None
