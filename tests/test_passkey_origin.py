"""WebAuthn RP id and origins (boxmaker/_passkey_origin.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker._passkey_origin import (
    MAX_ORIGINS,
    check_passkey_settings,
    origin_problem,
    rp_id_problem,
)


@pytest.mark.parametrize("rp_id", ["localhost", "box.example", "a-b.c0.example", "x" * 63])
def test_good_rp_ids(rp_id: str) -> None:
    assert rp_id_problem(rp_id) is None


@pytest.mark.parametrize(("rp_id", "why"), [
    ("Box.Example", "lowercase DNS name"),
    ("-box.example", "lowercase DNS name"),
    ("box-.example", "lowercase DNS name"),
    ("box..example", "lowercase DNS name"),
    ("", "lowercase DNS name"),
    ("x" * 64, "lowercase DNS name"),
    (".".join(["a" * 63] * 4) + ".a", "lowercase DNS name"),
    ("bøx.example", "lowercase DNS name"),
    ("box.example:443", "lowercase DNS name"),
    ("192.168.1.2", "IP address"),
])
def test_bad_rp_ids(rp_id: str, why: str) -> None:
    problem = rp_id_problem(rp_id)
    assert problem is not None and why in problem and repr(rp_id) in problem


@pytest.mark.parametrize(("origin", "rp_id"), [
    ("https://box.example", "box.example"),
    ("https://box.example:8443", "box.example"),
    ("https://phone.box.example", "box.example"),
    ("http://localhost:8080", "localhost"),
    ("http://localhost", None),
    ("https://anything.example", None),
])
def test_good_origins(origin: str, rp_id: str | None) -> None:
    assert origin_problem(origin, rp_id) is None


@pytest.mark.parametrize(("origin", "rp_id", "why"), [
    ("https://box.example/", "box.example", "not an origin"),
    ("https://box.example/approve", "box.example", "not an origin"),
    ("https://box.example?x=1", "box.example", "not an origin"),
    ("https://box.example#f", "box.example", "not an origin"),
    ("https://u:p@box.example", "box.example", "not an origin"),
    (" https://box.example", "box.example", "not an origin"),
    ("https://box.example:0", "box.example", "not an origin"),
    ("https://box.example:99999", "box.example", "port"),
    ("https://box.example:x", "box.example", "port"),
    ("https://BOX.example", "box.example", "not written as"),
    ("https://box.example:443x", "box.example", "port"),
    ("http://box.example", "box.example", "plain http only"),
    ("http://127.0.0.1:8080", None, "plain http only"),
    ("ftp://box.example", "box.example", "scheme must be https"),
    ("https://evilbox.example", "box.example", "not at or under"),
    ("https://box.example.evil", "box.example", "not at or under"),
])
def test_bad_origins(origin: str, rp_id: str | None, why: str) -> None:
    problem = origin_problem(origin, rp_id)
    assert problem is not None and why in problem


@given(host=st.from_regex(r"[a-z]{1,10}(\.[a-z]{1,10}){0,2}", fullmatch=True),
       rp=st.from_regex(r"[a-z]{1,10}(\.[a-z]{1,10}){0,2}", fullmatch=True))
def test_an_origin_is_accepted_exactly_when_its_host_is_at_or_under_the_rp_id(
        host: str, rp: str) -> None:
    accepted = origin_problem(f"https://{host}", rp) is None
    assert accepted == (host == rp or host.endswith("." + rp))


def test_settings_go_together() -> None:
    assert check_passkey_settings(None, [], require=False) is None
    assert check_passkey_settings("box.example", ["https://box.example"], require=True) is None
    assert "go together" in str(check_passkey_settings("box.example", [], require=False))
    assert "go together" in str(check_passkey_settings(None, ["https://box.example"],
                                                       require=False))
    assert "require_passkey" in str(check_passkey_settings(None, [], require=True))


def test_settings_report_the_first_problem() -> None:
    assert "IP address" in str(check_passkey_settings("10.0.0.1", ["https://x"], require=False))
    problem = check_passkey_settings("box.example", ["https://box.example", "http://box.example"],
                                     require=False)
    assert problem is not None and "'http://box.example'" in problem
    many = [f"https://h{i}.box.example" for i in range(MAX_ORIGINS + 1)]
    assert "at most" in str(check_passkey_settings("box.example", many, require=False))
    assert check_passkey_settings("box.example", many[:MAX_ORIGINS], require=False) is None
