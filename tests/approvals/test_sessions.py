"""The approval page's browser sessions (boxmaker/approvals/_sessions.py), with a
given clock: rotation at login, expiry, CSRF, a flood that cannot log the owner out."""

from __future__ import annotations

import pytest

from boxmaker.approvals._sessions import (
    COOKIE,
    IDLE_SECONDS,
    LOGIN_SECONDS,
    MAX_SESSIONS,
    Sessions,
    cookie_header,
    cookie_value,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_new_sessions_are_unguessable_and_found_by_id() -> None:
    sessions = Sessions(Clock())
    made = [sessions.new() for _ in range(50)]
    assert len({s.id for s in made}) == 50 and len({s.csrf for s in made}) == 50
    assert all(len(s.id) >= 40 for s in made)
    assert sessions.get(made[0].id) is made[0]
    assert sessions.get("made-up") is None and sessions.get(None) is None


def test_login_rotates_the_id_and_lasts_login_seconds() -> None:
    clock = Clock()
    sessions = Sessions(clock)
    visitor = sessions.new()
    challenge = sessions.login_challenge(visitor)
    assert len(challenge) == 32
    assert sessions.take_login_challenge(visitor) == challenge
    assert sessions.take_login_challenge(visitor) is None  # used once
    owner = sessions.log_in(visitor, "Y3JlZA")
    assert owner.id != visitor.id and owner.csrf != visitor.csrf
    assert sessions.get(visitor.id) is None  # a fixed session is worth nothing now
    assert owner.logged_in(clock.now) and owner.credential == "Y3JlZA"
    clock.now += LOGIN_SECONDS - 1
    assert sessions.get(owner.id) is owner and owner.logged_in(clock.now)
    clock.now += 1
    assert not owner.logged_in(clock.now)


def test_idle_sessions_expire() -> None:
    clock = Clock()
    sessions = Sessions(clock)
    session = sessions.new()
    clock.now += IDLE_SECONDS
    assert sessions.get(session.id) is session  # seen just now again
    clock.now += IDLE_SECONDS + 0.001
    assert sessions.get(session.id) is None


def test_a_flood_of_visitors_does_not_log_the_owner_out() -> None:
    clock = Clock()
    sessions = Sessions(clock)
    owner = sessions.log_in(sessions.new(), "b3duZXI")
    for _ in range(MAX_SESSIONS * 3):
        sessions.new()
    assert sessions.get(owner.id) is owner
    assert len(sessions._by_id) <= MAX_SESSIONS


def test_csrf_is_compared_whole() -> None:
    session = Sessions(Clock()).new()
    assert Sessions.csrf_ok(session, session.csrf)
    for wrong in (None, "", session.csrf[:-1], session.csrf + "x", session.csrf.upper()):
        if wrong != session.csrf:
            assert not Sessions.csrf_ok(session, wrong)


def test_cookie_header_and_value() -> None:
    session = Sessions(Clock()).new()
    header = cookie_header(session)
    assert header == f"{COOKIE}={session.id}; Path=/; HttpOnly; SameSite=Strict; Secure"
    assert "Secure" not in cookie_header(session, secure=False)
    assert cookie_value(f"other=1; {COOKIE}={session.id}; x=y") == session.id
    assert cookie_value(f"{COOKIE}x=evil") is None
    assert cookie_value(None) is None and cookie_value("") is None


@pytest.mark.parametrize(("header", "value"), [
    ("bx_session", ""), ("bx_session=", ""), ("a=b;bx_session=v", "v"),
    ("bx_session=first; bx_session=second", "first"),
])
def test_cookie_value_edge_cases(header: str, value: str) -> None:
    assert cookie_value(header) == value
