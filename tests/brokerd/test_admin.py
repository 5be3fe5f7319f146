"""admin.sock pieces: the approval view, the grants report, the status (02-wire)."""

from __future__ import annotations

from boxmaker.brokerd._admin import approval_view, grants_report, runtime_image
from boxmaker.brokerd._approvals import PendingApproval
from boxmaker.brokerd._call_events import CallRequest, Ticket
from boxmaker.brokerd._lifecycle import CallLifecycle
from boxmaker.brokerd.runner._echo import EchoRuntime
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.proto._convert import unstructure
from boxmaker.proto._taint import NEW_SESSION


def test_approval_view_is_whole() -> None:
    args = {"url": "https://docs.python.org/3/", "method": "GET"}
    call = CallLifecycle(1207, CallRequest(session="s1", tool="http_fetch", args=args,
                                           peer_uid=1, peer_pid=2))
    entry = PendingApproval(
        call=call, args=args, state=NEW_SESSION,
        ticket=Ticket(approval_id=482913, grant="docs-fetch",
                      requested_at="2026-11-29T07:00:00.000000Z",
                      expires_at="2026-11-29T07:10:00.000000Z", deadline=0.0, ttl_s=600.0,
                      challenge=bytes(range(32))),
    )
    assert unstructure(approval_view(entry)) == {
        "approval_id": 482913, "call": 1207, "session": "s1", "tool": "http_fetch",
        "args": {"url": "https://docs.python.org/3/", "method": "GET"}, "grant": "docs-fetch",
        "state": {"label": "public", "untrusted": False},
        "requested_at": "2026-11-29T07:00:00.000000Z",
        "expires_at": "2026-11-29T07:10:00.000000Z",
        "challenge": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
    }


def test_grants_report_of_an_invalid_set() -> None:
    report = grants_report(parse_grant_texts({"a.toml": "[[grant]]\nid = 'x'\n"}))
    assert report.ok is False and report.problems
    assert all(p.file == "a.toml" for p in report.problems)
    assert grants_report(parse_grant_texts({})).ok is True


def test_runtime_image() -> None:
    assert runtime_image(EchoRuntime()) is None
