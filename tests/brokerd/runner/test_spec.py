"""A RunSpec is built only by build_run_spec (01-architecture principle 3)."""

from __future__ import annotations

import attrs
import pytest

from boxmaker.brokerd.runner._spec import RunSpec, build_run_spec

FIELDS = {
    "call_id": 1, "session": "s1", "tool": "echo", "args": {"text": "x"}, "grant": "g",
    "grant_entry": None, "private_network": False, "label": "public", "untrusted": False,
}


def test_built_by_the_runner_module() -> None:
    spec = build_run_spec(**FIELDS)  # type: ignore[arg-type]
    assert spec.tool == "echo" and spec.args == {"text": "x"}


def test_other_modules_cannot_construct_one() -> None:
    with pytest.raises(TypeError, match="build_run_spec"):
        RunSpec(**FIELDS, token=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RunSpec(**FIELDS)  # type: ignore[call-arg,arg-type]
    spec = build_run_spec(**FIELDS)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="build_run_spec"):
        attrs.evolve(spec, tool="read_file", token=object())


def test_brokerd_builds_it_only_from_an_allowed_decision() -> None:
    from boxmaker.brokerd._policy_link import PolicyLink
    from boxmaker.policy._decide import decide
    from boxmaker.policy._decision import ProtectedPaths, ToolCall
    from boxmaker.policy._grants import parse_grant_texts
    from boxmaker.proto._taint import NEW_SESSION

    denied = decide(ToolCall(tool="echo", args={"text": "x"}), NEW_SESSION,
                    parse_grant_texts({}), ProtectedPaths.of(["/srv/boxmaker"]))
    assert not denied.allowed
    link = PolicyLink.of(["/srv/boxmaker"])
    with pytest.raises(TypeError, match="allowed Decision"):
        link.run_spec(call_id=1, session="s1", tool="echo", args={"text": "x"},
                      allow=denied)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="allowed Decision"):
        link.run_spec(call_id=1, session="s1", tool="echo", args={"text": "x"},
                      allow="allowed")  # type: ignore[arg-type]
