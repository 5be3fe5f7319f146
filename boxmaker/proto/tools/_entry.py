"""What the catalogue says of one tool: the value types of an entry, pure.

A `Tool` is data: its name, its argument grammar (`Arg`, each of a `kind`),
its result's fields, the runtime kind that runs it (`runs_on`), how its
approval block is shown, its default taint, what its grants are matched on,
and what the model is told.  Nothing here names a tool; the entries are in
`_catalogue.py`, the one module that does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal

import attrs

ArgKind = Literal["path", "write_path", "url", "host", "text", "enum", "argv"]
"""What a string argument means to boxmaker (12-tool-sources "Kinds"): `path` is
mounted read-only, `write_path` read-write, `url` and `host` are of their
grammars and matched against a grant's `hosts`, `text` is only bounded, `enum`
one of its words, `argv` a list of strings exec'd as it is (run_command)."""

TARGET_KINDS: Final[frozenset[str]] = frozenset({"path", "write_path", "url"})
"""The kinds of the argument a built-in tool's grants are matched on (its target)."""

RunsOn = Literal["files", "fetch", "commands", "test", "mcp"]
"""The runtime kind that runs a tool, distinct from `[runner] kind` (podman,
refusing, echo), which says how those runtimes are made: `files` (the toolkit's
file tools in a container), `fetch` (the toolkit's fetch through the egress
proxy), `commands` (one program in the commands image), `test` (brokerd's own
in-process test runtime), `mcp` (an MCP server's container, every `mcp.<id>.<local>`
tool; not a catalogue entry's)."""

ApprovalBlock = Literal["args", "command"]
"""How the owner is shown a call waiting for approval: `args`, one row per
argument in key order; `command`, argv one token per line, the cwd, every
mount with ro/rw and "network: none" (12-tool-sources, run_command)."""

GrantEntries = Literal["paths", "hosts"]
"""What a grant of the tool lists, and its calls are matched on (03-policy G6)."""

Offer = Literal["default", "named", "test"]
"""Whether loopd offers the tool when `[loop] tools` is not set (`default`), only
when it is named there (`named`: a production tool the owner turns on, run_command),
or only when named and never to a production model (`test`: tests and benchmarks)."""

NAME_GRAMMAR: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""A built-in tool's name: no `.` (tool sources' names are `mcp.<id>.<local>`),
and of the model-name grammar `[a-zA-Z0-9_-]{1,64}` (12-tool-sources "Tool names")."""


@attrs.frozen(kw_only=True)
class Arg:
    """One argument of a tool: its name, kind and bounds, and what the model is told."""

    name: str
    kind: ArgKind
    required: bool = True
    default: str | None = None
    """The value an absent optional argument takes."""
    words: tuple[str, ...] = ()
    """The words of an `enum` argument."""
    max_bytes: int | None = None
    """At most this many UTF-8 bytes (a `text` argument)."""
    description: str | None = None
    """Shown to the model in the tool's schema."""

    def __attrs_post_init__(self) -> None:
        if (self.kind == "enum") != bool(self.words):
            raise ValueError(f"argument {self.name}: an enum has words, and only an enum")
        if self.required and self.default is not None:
            raise ValueError(f"argument {self.name}: a default only for an optional one")
        if self.default is not None and self.words and self.default not in self.words:
            raise ValueError(f"argument {self.name}: the default is not one of its words")

    def schema(self) -> dict[str, Any]:
        """The argument's JSON schema as the model sees it."""
        out: dict[str, Any]
        if self.kind == "argv":
            out = {"type": "array", "items": {"type": "string"}}
        else:
            out = {"type": "string"}
        if self.description is not None:
            out["description"] = self.description
        if self.words:
            out["enum"] = list(self.words)
        return out


@attrs.frozen(kw_only=True)
class ResultField:
    """One field of a tool's `ok` output (03-policy "Tools and their arguments")."""

    name: str
    shape: str
    """Its JSON shape in the spec's words (`str`, `n`, `bool`, `"utf-8" | "base64"`)."""


@attrs.frozen(kw_only=True)
class Verbs:
    """How the chat's banner says what a grant of the tool lets the agent do."""

    alone: str
    """A grant of this tool alone (`reads ~/notes`)."""
    joined: str
    """Beside other tools' verbs, and for `never` (`reads and writes to ~/notes`)."""
    gerund: str
    """For `asks before` (`asks before writing to ~/notes`)."""


@attrs.frozen(kw_only=True)
class Tool:
    """One entry of the catalogue."""

    name: str
    summary: str
    """One line: what the tool does (docs, `bxctl` help)."""
    args: tuple[Arg, ...]
    args_class: type[Any] | None
    """The strict class the converter structures the arguments into (None while
    the tool is not yet available, or when `parser` does the work)."""
    parser: Callable[[Mapping[str, Any]], Any] | None = None
    """A parser of its own, used instead of the converter: the arguments' JSON object
    to its typed value, or `ArgsError` (run_command's argv rules)."""
    result: tuple[ResultField, ...]
    runs_on: RunsOn
    approval: ApprovalBlock
    entries: GrantEntries | None
    """What its grants list: `paths`, `hosts`, or nothing (a grant covers every call)."""
    reads: bool
    """Its output reaches the model with a label: its grants take `label` and `untrusted`."""
    untrusted: bool
    """The default taint: a grant's `untrusted` when the grant does not say."""
    url_options: bool = False
    """Its grants take `http` and `private_network` (a fetch)."""
    verbs: Verbs | None = None
    """None: the banner says `uses NAME`."""
    description: str
    """What the model is told the tool does."""
    offer: Offer = "default"
    available: bool = True
    """False: described here so that its pieces can be built, but neither offered to
    the model nor accepted by brokerd (decided `unknown_tool`, a grant for it G4)."""

    def __attrs_post_init__(self) -> None:
        if NAME_GRAMMAR.fullmatch(self.name) is None:
            raise ValueError(f"tool name {self.name!r} is not of [a-z][a-z0-9_]{{0,63}}")
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: an argument is named twice")
        if self.available and self.args_class is None and self.parser is None:
            raise ValueError(f"{self.name}: an available tool has its argument class")
        if len([a for a in self.args if a.kind in TARGET_KINDS]) > 1:
            raise ValueError(f"{self.name}: at most one target argument")

    @property
    def target(self) -> Arg | None:
        """The argument its grants are matched on (a path, a write path or a URL)."""
        for arg in self.args:
            if arg.kind in TARGET_KINDS:
                return arg
        return None

    @property
    def writes(self) -> bool:
        """It writes where its target is: the target is mounted read-write."""
        return any(a.kind == "write_path" for a in self.args)

    def arg(self, name: str) -> Arg | None:
        for arg in self.args:
            if arg.name == name:
                return arg
        return None

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of its arguments, as the model sees it."""
        return {
            "type": "object",
            "properties": {a.name: a.schema() for a in self.args},
            "required": [a.name for a in self.args if a.required],
            "additionalProperties": False,
        }

    def model_schema(self) -> dict[str, Any]:
        """The tool as loopd offers it to the model (OpenAI's function shape)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            },
        }


class Catalogue:
    """The tools, in their order, and the sets the readers look up (built once).

    `get` and iteration give the available tools only; a tool not yet available
    is found by `planned`, never by `get`."""

    def __init__(self, tools: tuple[Tool, ...], planned: tuple[Tool, ...] = ()) -> None:
        names = [t.name for t in (*tools, *planned)]
        if len(set(names)) != len(names):
            raise ValueError("a tool is named twice in the catalogue")
        if any(not t.available for t in tools) or any(t.available for t in planned):
            raise ValueError("the planned tools, and only they, are not available")
        self.tools = tools
        self.names: tuple[str, ...] = tuple(t.name for t in tools)
        """The available tools' names, in the catalogue's order (messages list them so)."""
        self._by_name = {t.name: t for t in tools}
        self._planned = {t.name: t for t in planned}
        self.every_name: frozenset[str] = frozenset(names)
        """Every name the catalogue holds, planned ones included."""
        self.command_tools: frozenset[str] = frozenset(
            t.name for t in tools if any(a.kind == "argv" for a in t.args))
        """The tools whose calls carry an argv (run_command): their grants list paths and
        command prefixes, and are matched on both (`policy/_commands.py`)."""
        self.path_tools: frozenset[str] = frozenset(
            t.name for t in tools if t.entries == "paths" and t.name not in self.command_tools)
        """The tools whose grants list paths and whose calls name one (the file tools)."""
        self.host_tools: tuple[str, ...] = tuple(t.name for t in tools if t.entries == "hosts")
        """The tools whose grants list host patterns and whose calls name a URL."""
        self.read_tools: frozenset[str] = frozenset(t.name for t in tools if t.reads)
        """The tools whose output reaches the model with a label."""
        self.url_option_tools: tuple[str, ...] = tuple(t.name for t in tools if t.url_options)
        self.default_offer: tuple[str, ...] = tuple(
            t.name for t in tools if t.offer == "default")
        """What loopd offers the model when `[loop] tools` is not set."""

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._by_name

    def get(self, name: str) -> Tool | None:
        """The available tool of that name, or None (D1: `unknown_tool`)."""
        return self._by_name.get(name)

    def __getitem__(self, name: str) -> Tool:
        return self._by_name[name]

    def planned(self, name: str) -> Tool | None:
        """A tool described but not yet available, or None."""
        return self._planned.get(name)

    def running_on(self, runs_on: RunsOn) -> tuple[Tool, ...]:
        """The available tools a runtime kind runs."""
        return tuple(t for t in self.tools if t.runs_on == runs_on)
