"""`bxctl mcp draft SERVER` (12-tool-sources "bxctl"): commented grant stubs, pure.

One stub per offered tool of the pinned server, every line a TOML comment:

- `## ` lines say what the tool and each argument are; they stay comments when
  the stub is uncommented (a `# ` removed);
- `# ` lines are the grant itself: uncommented, and each `FILL IN` replaced,
  they load as a valid grant (`mode = "ask"`; a constraint for every `path`,
  `write_path`, `url` and `host` argument, G13; none for an opaque tool, G14).
  Left as `FILL IN`, a placeholder is of no path or host grammar (G12): the
  grant is dormant, it allows nothing.

Everything that came from the server (descriptions, tool and argument names)
is escaped (`escape_line`: a newline is `\\n`) and argument names are written
as TOML strings of ASCII only (`json.dumps`), so nothing the server wrote can
end a comment and become a grant line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Final

from .._escape import escape_line
from ._arguments import ToolGrammar
from ._grant_args import REQUIRED_KEY, _allowed
from ._nodes import ArrayNode, Node, NullableNode, ObjectNode
from ._tool_view import ToolVerdict

PLACEHOLDER: Final = "FILL IN"
"""Of no path or host grammar: an unfilled stub is dormant (G12), never a grant."""
MAX_SHOWN: Final = 200
_BARE: Final = re.compile(r"[A-Za-z0-9_-]+")
_ID: Final = re.compile(r"[^a-z0-9-]+")


def _key(dotted: str) -> str:
    """`args.<name>` as TOML: a bare key, else an ASCII basic string (a dotted name is one
    key: `args."opts.depth"`)."""
    return f"args.{dotted}" if _BARE.fullmatch(dotted) else f"args.{json.dumps(dotted)}"


def _shown(text: str) -> str:
    line = escape_line(text)
    return line if len(line) <= MAX_SHOWN else line[:MAX_SHOWN] + "..."


def _leaves(node: ObjectNode, prefix: str = "") -> Iterator[tuple[str, Node, bool]]:
    """Every constrainable argument: (dotted name, node, required); an object's
    properties one by one; a name with a `.` cannot be named in a grant (left out)."""
    for name in sorted(node.properties):
        if "." in name:
            continue
        child = node.properties[name]
        dotted = f"{prefix}{name}"
        inner = child.inner if isinstance(child, NullableNode) else child
        if isinstance(inner, ObjectNode):
            yield from _leaves(inner, dotted + ".")
        else:
            yield dotted, child, name in node.required


def grant_id(server: str, local: str, taken: set[str]) -> str:
    """A grant id of the grammar (`[a-z0-9][a-z0-9-]{0,63}`), unique among `taken`."""
    base = _ID.sub("-", f"{server}-{local}".lower()).strip("-")[:60].rstrip("-") or "mcp"
    made, n = base, 2
    while made in taken:
        made, n = f"{base}-{n}", n + 1
    taken.add(made)
    return made


def _argument_lines(grammar: ToolGrammar) -> list[str]:
    assert grammar.root is not None
    lines: list[str] = []
    for dotted, node, required in _leaves(grammar.root):
        kind = grammar.kinds.get(dotted, "text")
        keys, word = _allowed(node, kind)
        inner = node.inner if isinstance(node, NullableNode) else node
        need = REQUIRED_KEY.get(kind)
        what = f"an array of {word}" if isinstance(inner, ArrayNode) else word
        what += ", required" if required else ""
        what += ", with a default" if node.has_default else ""
        lines.append(f"## {_shown(_key(dotted))}: {what}; keys {', '.join(sorted(keys))}")
        if need is not None:
            lines.append(f"# {_key(dotted)} = {{ {need} = [{json.dumps(PLACEHOLDER)}] }}")
    return lines


def grant_stubs(server: str, digest: str, verdicts: Mapping[str, ToolVerdict]) -> str:
    """The stubs of every offered tool of `server` (pinned as `digest`), by local name."""
    out = [f"## grant stubs for the MCP server {server}, pin {digest}",
           "## uncomment a stub (remove one '# ' per line), replace each FILL IN, pick the",
           "## mode (allow, ask, deny); descriptions below are the server's words, escaped",
           ""]
    taken: set[str] = set()
    offered = sorted((v for v in verdicts.values() if v.status == "offered"
                      and v.local is not None and v.grammar is not None),
                     key=lambda v: v.local or "")
    for verdict in offered:
        assert verdict.local is not None and verdict.grammar is not None
        tool = f"mcp.{server}.{verdict.local}"
        out.append(f"## {tool}" + (f" (MCP name {_shown(verdict.mcp_name)})"
                                   if verdict.mcp_name != verdict.local else ""))
        if verdict.view is not None and verdict.view.description:
            out.append(f"## the server says: {_shown(verdict.view.description)}")
        if verdict.grammar.opaque is not None:
            out.append(f"## opaque ({_shown(verdict.grammar.opaque)}): only ask or deny, "
                       "no args (G14)")
        out += ["# [[grant]]", f"# id = {json.dumps(grant_id(server, verdict.local, taken))}",
                f"# tool = {json.dumps(tool)}", '# mode = "ask"']
        if verdict.grammar.root is not None:
            out += _argument_lines(verdict.grammar)
        out.append("")
    if not offered:
        out.append("## the pin offers no tool")
    return "\n".join(out) + "\n"
