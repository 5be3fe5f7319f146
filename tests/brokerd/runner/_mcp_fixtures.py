"""The MCP server declarations of the tests (the runner's, the integration tests that
run the fixture server or the reference servers, the grants tests' git server in
tests/policy/_mcp_git): one builder of `[[mcp_server]]` text, its parse into a
`ServerDecl`, the fixture server's command, and a pin of the fixture server's tools
as if the owner had pinned them (no probe)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from boxmaker.proto.mcp import (
    Pin,
    ServerDecl,
    SourceSet,
    make_pin,
    parse_source_texts,
    pin_source,
    pin_tools,
)
from tests.fakes.mcp_stdio_server import tools as fake_tools

FAKE = Path(__file__).resolve().parents[2] / "fakes" / "mcp_stdio_server.py"
"""The hand-written fixture server (tests/fakes/mcp_stdio_server.py)."""

PINNED_AT = "2026-12-02T10:00:00.000000Z"


def fake_command(*behaviours: str, inline: bool = False) -> list[str]:
    """The fixture server with `behaviours`, by its path (a test mounts its directory),
    or `inline`, its source given to ``python3 -c`` (nothing of the repository mounted)."""
    script = ["-c", FAKE.read_text()] if inline else [str(FAKE)]
    return ["/usr/bin/python3", "-I", *script, json.dumps({"behaviours": list(behaviours)})]


def server_toml(image: str, command: Sequence[str], *, server: str = "fake",
                protocol: str | None = "2026-07-28", label: str = "private",
                untrusted: bool | None = None, env: Mapping[str, str] | None = None,
                start_timeout_ms: int | None = 120000, extra: str = "",
                tools: Mapping[str, Mapping[str, str]] | None = None,
                egress: Mapping[str, str] | None = None) -> str:
    """One `[[mcp_server]]` table: `tools` maps a tool to its argument kinds
    (`{"look": {"path": "path"}}`), `egress` a tool to its egress word; `extra` is
    more lines of the server's table, as written; `untrusted`, `env`, `protocol` and
    `start_timeout_ms` are left out when None (the defaults of 12)."""
    lines = ["[[mcp_server]]", f'id = "{server}"', f'image = "{image}"',
             f"command = {json.dumps(list(command))}"]
    if env is not None:
        pairs = ", ".join(f"{name} = {json.dumps(value)}" for name, value in env.items())
        lines.append(f"env = {{ {pairs} }}")
    lines += [f'label = "{label}"']
    if untrusted is not None:
        lines.append(f"untrusted = {json.dumps(untrusted)}")
    if protocol is not None:
        lines.append(f'protocol = "{protocol}"')
    if start_timeout_ms is not None:
        lines.append(f"start_timeout_ms = {start_timeout_ms}")
    text = "\n".join(lines) + "\n" + extra
    for tool, kinds in (tools or {}).items():
        args = ", ".join(f'{name} = "{kind}"' for name, kind in kinds.items())
        text += f"\n[mcp_server.tool.{tool}]\nargs = {{ {args} }}\n"
        if egress and tool in egress:
            text += f'egress = "{egress[tool]}"\n'
    return text


def server_decl(text: str, server: str = "fake") -> ServerDecl:
    """The declaration of `server` in `text`, which must be valid."""
    state = parse_source_texts({f"{server}.toml": text})
    assert isinstance(state, SourceSet), state
    return state.servers[server]


def fake_pin(decl: ServerDecl, behaviours: Sequence[str] = (), *,
             protocol: str = "2026-07-28") -> Pin:
    """A pin of `decl` serving the fixture server's tools for `behaviours`."""
    return make_pin(server=decl.id, protocol=protocol,  # type: ignore[arg-type]
                    source=pin_source(decl), tools=pin_tools(fake_tools(set(behaviours)), ()),
                    server_info=None, instructions=None, pinned_at=PINNED_AT, by=0)
