"""The first screen of `bxctl chat`: what the agent can reach, and what can be typed.

The banner names the model (from loopd's status), whether tools run in
containers (from brokerd's status), the MCP servers' tools loopd offers (from
loopd's status, `mcp_tools`) and sums the grants up in one line ("reads and
lists ~/boxmaker-demo/notes; asks before fetching from docs.python.org; never
reads or lists ~/.ssh").  `/help` lists the MCP tools again with their
descriptions.  Pure: the callers fetch.  Everything shown is escaped (a model
name comes from the inference server, a tool's description from its server).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from ..policy._model import Grant
from ..proto._escape import escape_line
from ..proto.tools import CATALOGUE
from ..proto.wire import LoopStatus, Status

SUMMARY_MAX = 240


HELP = """\
What you can type:
  a message          the agent answers; its tool calls show as they happen
  ID (a number)      when a call waits for approval: approve it (the number shown)
  r                  when a call waits for approval: refuse it
  Enter              when a call waits for approval: leave it pending (bxctl approvals)
  /help              this list
  Ctrl-C             cancel the turn that is running
  Ctrl-D             leave (boxmaker up then stops everything)
Elsewhere: bxctl audit show (what happened), bxctl grants explain (what a call would get).
"""


DESCRIPTION_MAX = 120


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def mcp_tools_line(loop: LoopStatus | None) -> str | None:
    """The MCP tools offered, in one line (escaped); None when there are none."""
    tools = loop.mcp_tools if loop is not None else None
    if not tools:
        return None
    line = escape_line(", ".join(t.name for t in tools))
    if len(line) > SUMMARY_MAX:
        line = line[:SUMMARY_MAX] + f"… ({len(tools)} tools: /help)"
    return line


def help_text(loop: LoopStatus | None) -> str:
    """`/help`: what can be typed, then each MCP tool offered with its description
    (the first line, escaped and cut: the server's words, not boxmaker's)."""
    tools = loop.mcp_tools if loop is not None else None
    if not tools:
        return HELP
    lines = ["MCP tools the agent may ask for (descriptions are their servers' words):"]
    for tool in tools:
        first = tool.description.strip().split("\n", 1)[0]
        lines.append(f"  {escape_line(tool.name)}  {_cut(escape_line(first), DESCRIPTION_MAX)}"
                     .rstrip())
    return HELP + "\n".join(lines) + "\n"


def _verb(form: Literal["alone", "joined", "gerund"], tool: str) -> str:
    """The tool's verb (its catalogue entry's); a tool without one is named ("uses echo")."""
    entry = CATALOGUE.get(tool)
    if entry is None or entry.verbs is None:
        return f"{'using' if form == 'gerund' else 'uses'} {tool}"
    verbs = entry.verbs
    return verbs.alone if form == "alone" else verbs.joined if form == "joined" else verbs.gerund


def _shown_path(path: str, user_home: Path) -> str:
    home = str(user_home).rstrip("/")
    if home and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home):]
    return path


def _targets(grant: Grant, user_home: Path) -> list[str]:
    entry = CATALOGUE.get(grant.tool)
    if entry is not None and entry.entries == "hosts":
        return [h.text for h in grant.hosts] or ["any host"]
    if grant.paths:
        return [_shown_path(p, user_home) for p in grant.paths]
    # a tool without verbs (echo) takes no paths: it is only named
    return ["anywhere"] if entry is not None and entry.verbs is not None else [""]


def _join(words: Sequence[str], last: str) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {last} " + words[-1]


def grants_summary(grants: Sequence[Grant], user_home: Path) -> str:
    """One line: what is allowed, what asks first, what never happens."""
    # (mode, target) -> the tools, in the grants' order
    seen: dict[tuple[str, str], list[str]] = {}
    for grant in grants:
        for target in _targets(grant, user_home):
            tools = seen.setdefault((grant.mode, target), [])
            if grant.tool not in tools:
                tools.append(grant.tool)
    parts = []
    for mode in ("allow", "ask", "deny"):
        for (each_mode, target), tools in seen.items():
            if each_mode != mode:
                continue
            if mode == "allow":
                verbs = [_verb("joined" if len(tools) > 1 else "alone", t) for t in tools]
                parts.append(f"{_join(verbs, 'and')} {target}")
            elif mode == "ask":
                gerunds = [_verb("gerund", t) for t in tools]
                parts.append(f"asks before {_join(gerunds, 'or')} {target}")
            else:
                parts.append(f"never {_join([_verb('joined', t) for t in tools], 'or')} {target}")
    if not parts:
        return "no grants: every tool call is refused (docs/grants.md)"
    line = escape_line("; ".join(part.strip() for part in parts))
    if len(line) > SUMMARY_MAX:
        line = line[:SUMMARY_MAX] + f"… ({len(grants)} grants: bxctl grants check)"
    return line


Part = tuple[str, bool]
"""(text, untrusted): boxmaker's own words, or an escaped field (`_screen.wrap_own`)."""


def banner_parts(*, loop: LoopStatus | None, broker: Status | None,
                 summary: str | None, warnings: Sequence[str] = ()) -> list[list[Part]]:
    """The banner's lines, each as parts: boxmaker's words wrap at spaces with their
    own indent, the fields (escaped) behind the gutter (issue 22 item 16c)."""
    lines: list[list[Part]] = []
    if loop is None:
        lines.append([("model: loopd does not answer its status request", False)])
    else:
        # llama-server names its model by the file's path: the file's name says enough
        model = escape_line(loop.inference.model.rsplit("/", 1)[-1]) or "unknown"
        line: list[Part] = [("model: ", False), (model, True)]
        if not loop.inference.ok:
            line += [(" (not ready: ", False),
                     (escape_line(loop.inference.reason or "unknown"), True), (")", False)]
        lines.append(line)
    if broker is None:
        lines.append([("brokerd does not answer: every tool call will be refused", False)])
    elif broker.runner.ok and broker.runner.kind == "podman":
        lines.append([("tools: run in throw-away podman containers with no network", False)])
    else:
        reason = escape_line(broker.runner.reason or "no runner")
        lines.append([("tools cannot run here (", False), (reason, True),
                      ("): allowed calls are answered runner_unavailable", False)])
    mcp_line = mcp_tools_line(loop)
    if mcp_line is not None:
        lines.append([("MCP tools: ", False), (mcp_line, True)])
    if summary is not None:
        lines.append([("grants: ", False), (summary, True)])
    lines += [[("warning: ", False), (escape_line(w), True)] for w in warnings]
    lines.append([("type /help for what you can type", False)])
    return lines


def banner_lines(*, loop: LoopStatus | None, broker: Status | None,
                 summary: str | None) -> list[str]:
    """The banner's lines, unwrapped."""
    return ["".join(text for text, _ in line)
            for line in banner_parts(loop=loop, broker=broker, summary=summary)]
