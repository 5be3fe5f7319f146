"""Decision and Ask are built only by the policy (a private construction token)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from boxmaker.policy._decide import decide
from boxmaker.policy._decision import (
    NO_PROTECTED_PATHS,
    Allowed,
    Ask,
    Decision,
    Denied,
    Outcome,
    ProtectedPaths,
    ToolCall,
)
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.proto._convert import structure, unstructure
from boxmaker.proto._taint import NEW_SESSION
from boxmaker.proto.tools import parse_args

STATE = parse_grant_texts({"a.toml": '[[grant]]\nid = "e"\ntool = "echo"\nmode = "allow"\n'
                                     '[[grant]]\nid = "w"\ntool = "write_file"\nmode = "ask"\n'
                                     'paths = ["/srv"]\n'})


def _fields(cls: type) -> dict[str, Any]:
    values: dict[str, Any] = {
        "tool": "echo", "args": None, "outcome": Allowed(), "reason": "made up", "grant": "e",
        "grant_entry": None, "private_network": False, "label": "public", "untrusted": False,
        "state": NEW_SESSION, "matched": ("e",), "applicable": ("e",), "grants_digest": "0",
        "raw_args": {}, "protected": NO_PROTECTED_PATHS, "effective_args": None, "pin": None,
        "sources_digest": None,
    }
    return {a.name: values[a.name] for a in attrs.fields(cls)}


def test_decision_cannot_be_built_elsewhere() -> None:
    with pytest.raises(TypeError, match=r"built only by boxmaker\.policy"):
        Decision(**_fields(Decision))


def test_ask_cannot_be_built_elsewhere() -> None:
    with pytest.raises(TypeError, match=r"built only by boxmaker\.policy"):
        Ask(**_fields(Ask))


def test_evolve_cannot_turn_a_denial_into_an_allow() -> None:
    denied = decide(ToolCall(tool="nope", args={}), NEW_SESSION, STATE, NO_PROTECTED_PATHS)
    assert isinstance(denied, Decision) and not denied.allowed
    with pytest.raises(TypeError):
        attrs.evolve(denied, outcome=Allowed())


def test_an_ask_cannot_be_evolved_either() -> None:
    ask = decide(ToolCall(tool="write_file", args={"path": "/srv/a", "content": "",
                                                   "mode": "create"}),
                 NEW_SESSION, STATE, NO_PROTECTED_PATHS)
    assert isinstance(ask, Ask)
    with pytest.raises(TypeError):
        attrs.evolve(ask, grant="other")


def test_the_converter_cannot_build_one() -> None:
    with pytest.raises(Exception):  # noqa: B017 - whatever the converter wraps it in
        structure(unstructure(_fields(Decision) | {"outcome": {"allowed": {}}}), Decision)


def test_the_policy_builds_them() -> None:
    decision = decide(ToolCall(tool="echo", args={"text": "x"}), NEW_SESSION, STATE,
                      NO_PROTECTED_PATHS)
    assert isinstance(decision, Decision) and decision.allowed


def test_outcome_wire_form() -> None:
    assert unstructure(Allowed(), Outcome) == {"allowed": {}}
    assert unstructure(Denied(code="no_grant", reason="r"), Outcome) == {
        "denied": {"code": "no_grant", "reason": "r"}
    }
    assert structure({"allowed": {}}, Outcome) == Allowed()
    with pytest.raises(Exception):  # noqa: B017
        structure({"allowed": {"x": 1}}, Outcome)


def test_protected_paths_value() -> None:
    assert ProtectedPaths.of(["/b", "/a", "/a/"]).paths == ("/a", "/b")


# The typed arguments of a call D2 took the short way are made when first read (issue 23):
# of a copy of the arguments judged, so a caller that changes its dict afterwards does not
# change what was decided; they equal what the long way (`parse_args`) makes.

READS = parse_grant_texts({"r.toml": '[[grant]]\nid = "r"\ntool = "read_file"\nmode = "allow"\n'
                                     'paths = ["/srv"]\n[[grant]]\nid = "f"\ntool = "http_fetch"\n'
                                     'mode = "ask"\nhosts = ["ex.org"]\n'})


@pytest.mark.parametrize(("tool", "args", "later"), [
    ("read_file", {"path": "/srv/a/notes.md"}, {"path": "/etc/shadow"}),
    ("read_file", {"path": "/etc/passwd"}, {"path": "/srv/ok"}),  # denied: no_grant
    ("write_file", {"path": "/srv/x", "content": "hi", "mode": "create"},
     {"path": "/etc/cron.d/x", "content": "evil", "mode": "replace"}),
    ("http_fetch", {"url": "https://ex.org/a?b=%41", "method": "HEAD"},
     {"url": "https://evil.example/", "method": "GET"}),
])
def test_the_typed_arguments_are_those_judged(tool: str, args: dict[str, Any],
                                              later: dict[str, Any]) -> None:
    expected = parse_args(tool, dict(args))
    decided = decide(ToolCall(tool=tool, args=args), NEW_SESSION, READS, NO_PROTECTED_PATHS)
    assert "args" not in decided.__dict__  # not made yet
    args.clear()
    args.update(later)
    assert decided.args == expected
    assert decided.args is decided.args  # made once, then a plain attribute
    assert decided.args is not None and decided.args.as_json() == expected.as_json()
