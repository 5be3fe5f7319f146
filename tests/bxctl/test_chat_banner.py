"""The chat's first screen: the grants in one line, the model, the runner, /help."""

from __future__ import annotations

from pathlib import Path

import attrs

from boxmaker.bxctl._chat_banner import (
    HELP,
    SUMMARY_MAX,
    banner_lines,
    grants_summary,
    help_text,
)
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.proto.wire._wire_admin import (
    AuditStatus,
    CheckpointsStatus,
    GrantsStatus,
    RunnerStatus,
    SourcesStatus,
    Status,
)
from boxmaker.proto.wire._wire_loop import (
    BrokerLinkStatus,
    InferenceStatus,
    LoopStatus,
    McpToolShown,
)
from boxmaker.stack._home import write_starter_home


def _starter_grants(tmp_path: Path) -> GrantSet:
    user = tmp_path / "user"
    home = tmp_path / "home"
    write_starter_home(home, upstream="http://127.0.0.1:1",
                       demo_notes=user / "boxmaker-demo" / "notes")
    state = parse_grant_texts({"examples.toml": (home / "grants" / "examples.toml").read_text()})
    assert isinstance(state, GrantSet)
    return state


def test_the_starter_grants_in_one_line(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    state = _starter_grants(tmp_path)
    assert grants_summary(state.grants, tmp_path / "user") == (
        "reads and lists ~/boxmaker-demo/notes; runs commands in ~/boxmaker-demo; "
        "asks before fetching from docs.python.org; never reads or lists ~/.ssh")


def test_a_tool_without_a_verb_is_named() -> None:
    state = parse_grant_texts({"x.toml": '[[grant]]\nid = "e"\ntool = "echo"\nmode = "ask"\n'})
    assert isinstance(state, GrantSet)
    assert grants_summary(state.grants, Path("/home/x")) == "asks before using echo"


def test_no_grants_and_long_grants() -> None:
    assert grants_summary([], Path("/home/x")).startswith("no grants")
    many = "\n".join(
        f'[[grant]]\nid = "g{n}"\ntool = "read_file"\nmode = "allow"\npaths = ["/srv/d{n}"]\n'
        for n in range(60))
    state = parse_grant_texts({"many.toml": many})
    assert isinstance(state, GrantSet)
    line = grants_summary(state.grants, Path("/home/x"))
    assert len(line) < SUMMARY_MAX + 60 and line.endswith("(60 grants: bxctl grants check)")


def _status(kind: str, ok: bool, reason: str | None) -> Status:
    return Status(version="0.1.0", audit=AuditStatus(ok=True, head_seq=1, head_hash="0" * 64),
                  grants=GrantsStatus(ok=True, count=5, digest="0" * 64), pending=0, sessions=0,
                  runner=RunnerStatus(kind=kind, ok=ok, image=None, reason=reason),  # type: ignore[arg-type]
                  checkpoints=CheckpointsStatus(size=None, signed_at=None, witnesses=[]),
                  sources=SourcesStatus(ok=True, count=0, digest="0" * 64, pinned=0, unpinned=0),  # type: ignore[arg-type]
                  warnings=[])  # type: ignore[arg-type]


def _loop(model: str) -> LoopStatus:
    return LoopStatus(version="0.1.0", busy=False,
                      inference=InferenceStatus(ok=True, model=model, n_ctx_per_slot=4096,  # type: ignore[arg-type]
                                                slots=2, slot=0, reason=None),  # type: ignore[arg-type]
                      broker=BrokerLinkStatus(ok=True, reason=None))


def test_banner_names_model_runner_and_grants() -> None:
    lines = banner_lines(loop=_loop("/c/SmolLM2-135M-Instruct.Q4_1.gguf\x1b[2J"),
                         broker=_status("podman", True, None), summary="reads ~/n")
    assert lines == [
        "model: SmolLM2-135M-Instruct.Q4_1.gguf\\u{001B}[2J",
        "tools: run in throw-away podman containers with no network",
        "grants: reads ~/n",
        "type /help for what you can type",
    ]
    refusing = banner_lines(loop=None, broker=_status("refusing", False, "no runner configured"),
                            summary=None)
    assert refusing[0].startswith("model: loopd does not answer")
    assert refusing[1].startswith("tools cannot run here (no runner configured)")
    assert "/help" in HELP and "Ctrl-D" in HELP and "bxctl audit show" in HELP


def _with_mcp(*tools: tuple[str, str]) -> LoopStatus:
    return attrs.evolve(_loop("m.gguf"), mcp_tools=[
        McpToolShown(name=name, model_name=name.replace(".", "__"), description=description)
        for name, description in tools])


def test_the_offered_mcp_tools_in_the_banner_and_help_escaped() -> None:
    loop = _with_mcp(("mcp.time.get_current_time", "Now.\nSecond line \x1b[2J."),
                     ("mcp.time.convert_time", "Convert\u202e a time\u200b. " + "x" * 300))
    lines = banner_lines(loop=loop, broker=_status("podman", True, None), summary=None)
    assert lines[2] == "MCP tools: mcp.time.get_current_time, mcp.time.convert_time"
    text = help_text(loop)
    assert text.startswith(HELP)
    added = text[len(HELP):].splitlines()
    assert added[0].startswith("MCP tools the agent may ask for")
    assert added[1] == "  mcp.time.get_current_time  Now."  # the first line only
    assert added[2].startswith("  mcp.time.convert_time  Convert\\u{202E} a time\\u{200B}. xx")
    assert added[2].endswith("…") and len(added) == 3
    assert "\x1b" not in text and "\u202e" not in text and "\u200b" not in text


def test_no_mcp_tools_no_line_and_the_plain_help() -> None:
    for loop in (_loop("m.gguf"), _with_mcp(), None):
        lines = banner_lines(loop=loop, broker=_status("podman", True, None), summary=None)
        assert not any(line.startswith("MCP tools") for line in lines)
        assert help_text(loop) == HELP
    many = _with_mcp(*((f"mcp.s.tool_{n:03}", "") for n in range(40)))
    (line,) = [x for x in banner_lines(loop=many, broker=None, summary=None)
               if x.startswith("MCP tools: ")]
    assert line.endswith("… (40 tools: /help)")
