"""Grant files to a `GrantSet`: rules G1..G9 of 03-policy, every problem reported.

Pure: the files' names and bytes come in (`GrantFile`), a complete valid
`GrantSet` or an `InvalidGrantSet` with the full problem list comes out.
Reading the directory is `_load.py`'s job.

Steps, for each file in sorted name order:

1. G1: the bytes are UTF-8 TOML holding only the key `grant`, an array of tables.
2. For each table, in order: G3 id, G4 tool, G5 mode, G2 fields unknown or not
   allowed for this tool and mode, G5 words, G2 value types, G6 paths/hosts
   present and non-empty, G7 paths, G8 host patterns, G9 strictness.
3. Across files: G3 an id used twice (the message names both places).

Type errors: a non-string `id` is G3, `tool` G4, a word field G5; `paths` or
`hosts` that is not an array is G6, an entry that is not a string G7/G8;
any other wrong type (booleans, `note`) is G2.  (docs/decisions.md)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, cast

import attrs

from ..proto._grammar import host_problem, path_problem, port_problem
from ..proto._json import type_word
from ..proto._taint import LABELS, Label
from ..proto.tools import CATALOGUE, Tool
from . import _grant_toml as grant_toml
from ._command_grants import (
    COMMAND_DENY_FIELDS,
    COMMAND_FIELDS,
    Reader,
    check_command_table,
    g21_problems,
    g22_problems,
)
from ._commands import CommandGrant
from ._grant_fast import ID_GRAMMAR, PlainGrants
from ._mcp_grants import is_mcp_tool, mcp_args, mcp_fields
from ._model import (
    MODES,
    STRICTNESS,
    Grant,
    GrantProblem,
    GrantSet,
    GrantsReport,
    GrantState,
    HostPattern,
    InvalidGrantSet,
    Mode,
    Rule,
)

KNOWN_FIELDS: Final = frozenset(
    {
        "id",
        "tool",
        "mode",
        "paths",
        "hosts",
        "label",
        "untrusted",
        "max_label",
        "when_untrusted",
        "note",
        "http",
        "private_network",
    }
)
DENY_FIELDS: Final = frozenset({"id", "tool", "mode", "paths", "hosts", "note"})
READ_ONLY_FIELDS: Final = frozenset({"label", "untrusted"})
URL_OPTION_FIELDS: Final = frozenset({"http", "private_network"})
ENTRY_FIELDS: Final = ("paths", "hosts")
BOOL_FIELDS: Final = ("untrusted", "http", "private_network")


@attrs.frozen(kw_only=True)
class GrantFile:
    """One `*.toml` entry of the grants directory, as read."""

    name: str
    """The file name for reports (non-UTF-8 bytes shown as \\x escapes)."""
    name_bytes: bytes
    """The file name's bytes, for the digest and the order."""
    content: bytes
    """The bytes read (empty when `error` is set)."""
    error: str | None = None
    """Why the file could not be read, or None."""


def grant_digest(files: Iterable[GrantFile]) -> str:
    """SHA-256 over each file in name order: 8-byte name length, name, 8-byte length, content."""
    digest = hashlib.sha256()
    for item in sorted(files, key=lambda f: f.name_bytes):
        digest.update(len(item.name_bytes).to_bytes(8, "big"))
        digest.update(item.name_bytes)
        digest.update(len(item.content).to_bytes(8, "big"))
        digest.update(item.content)
    return digest.hexdigest()


def _q(value: object) -> str:
    """Quote a value from a grant file for a message (JSON, ASCII, bounded)."""
    if not isinstance(value, (str, int, float)):
        return f"({_type_word(value)})"
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 200 else text[:197] + "..."


def _type_word(value: object) -> str:
    """TOML's name for a value's type: JSON's, but tables, floats and dates by name."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, (dt.date, dt.time)):
        return "a date or time"
    return type_word(value)


def _article(word: str) -> str:
    return "an" if word[:1] in ("a", "e", "i", "o", "u") else "a"


def _misplaced(entry: Tool, name: str) -> str | None:
    """G2: why a known field is not for a grant of this tool (None: it is)."""
    if name == "hosts" and entry.entries != "hosts":
        return f"{name} is only for {', '.join(CATALOGUE.host_tools)} grants, not {entry.name}"
    if name in URL_OPTION_FIELDS and not entry.url_options:
        return (f"{name} is only for {', '.join(CATALOGUE.url_option_tools)} grants, "
                f"not {entry.name}")
    if name == "paths" and entry.entries != "paths":
        return f"{name} is only for file tools, not {entry.name}"
    if name in READ_ONLY_FIELDS and not entry.reads:
        return f"{name} is only for read tools, not {entry.name}"
    return None


def allowed_fields(tool: str, mode: Mode) -> frozenset[str]:
    """The fields a table of a catalogue tool `tool` (one taking paths or hosts) and
    `mode` may hold without a G2 problem: `_check_fields`'s rules."""
    entry = CATALOGUE[tool]
    return frozenset(name for name in KNOWN_FIELDS
                     if _misplaced(entry, name) is None
                     and (mode != "deny" or name in DENY_FIELDS))


PLAIN: Final = PlainGrants({(tool, mode): allowed_fields(tool, mode)
                            for tool in CATALOGUE.path_tools for mode in MODES})
"""The fast yes for the common file grant (`_grant_fast.py`)."""


class _TableCheck:
    """Checks one `[[grant]]` table; collects its problems."""

    def __init__(self, file: str, index: int, table: Mapping[str, Any]) -> None:
        self.file = file
        self.index = index
        self.table = table
        self.problems: list[GrantProblem] = []
        self.grant_id: str | None = None

    def problem(self, rule: Rule, message: str) -> None:
        self.problems.append(
            GrantProblem(
                file=self.file, index=self.index, grant=self.grant_id, rule=rule, message=message
            )
        )

    def check(self) -> Grant | None:
        table = self.table
        grant_id = self._check_id()
        tool = self._check_tool()
        mode = self._word("mode", MODES, required=True)
        commands = tool is not None and tool in CATALOGUE.command_tools
        mcp = is_mcp_tool(tool)
        allowed = (self._command_fields(mode) if commands
                   else mcp_fields(table, mode, self.problem) if mcp
                   else self._check_fields(tool, mode))
        label = self._word("label", LABELS) if "label" in allowed else None
        max_label = self._word("max_label", LABELS) if "max_label" in allowed else None
        when_untrusted = (
            self._word("when_untrusted", MODES) if "when_untrusted" in allowed else None
        )
        for name in BOOL_FIELDS:
            if name in allowed and type(table[name]) is not bool:
                self.problem("G2", f"{name} must be true or false, not {_type_word(table[name])}")
        if "note" in allowed and type(table["note"]) is not str:
            self.problem("G2", f"note must be a string, not {_type_word(table['note'])}")
        command: CommandGrant | None = None
        args: dict[str, dict[str, Any]] | None = None
        path_values: list[str] = []
        host_values: list[HostPattern] = []
        if mcp:
            args = mcp_args(table, self.problem)
        elif commands:
            # run_command: its own G2, G6, G7, G17..G20 (`_command_grants.py`).
            command = check_command_table(
                table, grant_id=grant_id, mode=mode, when_untrusted=when_untrusted,
                report=self.problem,
            )
            path_values = list(command.paths) if command is not None else []
        else:
            paths = self._check_entries(tool, "paths", allowed)
            hosts = self._check_entries(tool, "hosts", allowed)
            path_values = self._check_paths(paths)
            host_values = self._check_hosts(hosts)
        if (
            mode is not None
            and when_untrusted is not None
            and (STRICTNESS[when_untrusted] < STRICTNESS[mode])
        ):
            self.problem(
                "G9", f"when_untrusted {_q(when_untrusted)} is less strict than mode {_q(mode)}"
            )
        if self.problems or grant_id is None or tool is None or mode is None:
            return None
        note = table.get("note")
        return Grant(
            id=grant_id,
            tool=tool,
            mode=mode,
            paths=tuple(path_values),
            hosts=tuple(host_values),
            label=cast(Label, label or "public"),
            untrusted=bool(table.get("untrusted", False if mcp else CATALOGUE[tool].untrusted)),
            max_label=cast(Label, max_label or "public"),
            when_untrusted="deny" if mode == "deny" else (when_untrusted or mode),
            http=bool(table.get("http", False)),
            private_network=bool(table.get("private_network", False)),
            note=note if isinstance(note, str) else None,
            file=self.file,
            index=self.index,
            command=command,
            args=args,
        )

    def _command_fields(self, mode: Mode | None) -> set[str]:
        """The fields of a run_command table the generic checks read (label, untrusted,
        max_label, when_untrusted, note); its G2 is `check_command_table`'s."""
        fields = COMMAND_DENY_FIELDS if mode == "deny" else COMMAND_FIELDS
        return {name for name in self.table if name in fields} - {"id", "tool", "mode"}

    def _check_id(self) -> str | None:
        if "id" not in self.table:
            self.problem("G3", "id is missing")
            return None
        value = self.table["id"]
        if type(value) is not str:
            self.problem("G3", f"id must be a string, not {_type_word(value)}")
            return None
        if ID_GRAMMAR.fullmatch(value) is None:
            self.problem("G3", f"id {_q(value)} is not of the grammar [a-z0-9][a-z0-9-]{{0,63}}")
            return None
        self.grant_id = value
        return value

    def _check_tool(self) -> str | None:
        if "tool" not in self.table:
            self.problem("G4", "tool is missing")
            return None
        value = self.table["tool"]
        if is_mcp_tool(value):
            return str(value)
        if type(value) is not str or value not in CATALOGUE:
            self.problem("G4", f"unknown tool {_q(value)}; tools are {', '.join(CATALOGUE.names)}"
                               ", or mcp.<server id>.<local name>")
            return None
        return value

    def _word(self, name: str, words: tuple[str, ...], *, required: bool = False) -> Any:
        if name not in self.table:
            if required:
                self.problem("G5", f"{name} is missing")
            return None
        value = self.table[name]
        if type(value) is not str or value not in words:
            self.problem("G5", f"{name} {_q(value)} is not one of {', '.join(words)}")
            return None
        return value

    def _check_fields(self, tool: str | None, mode: Mode | None) -> set[str]:
        """G2: report unknown and misplaced fields; return the fields to check further."""
        allowed: set[str] = set()
        entry = CATALOGUE.get(tool) if tool is not None else None
        for name in self.table:
            if name in ("id", "tool", "mode"):
                continue
            if name not in KNOWN_FIELDS:
                self.problem("G2", f"unknown field {_q(name)}")
                continue
            if entry is not None and entry.entries is None and name in ENTRY_FIELDS:
                allowed.add(name)  # G6 says it: the tool takes neither
                continue
            if entry is not None:
                misplaced = _misplaced(entry, name)
                if misplaced is not None:
                    self.problem("G2", misplaced)
                    continue
            if mode == "deny" and name not in DENY_FIELDS:
                self.problem(
                    "G2",
                    f"{name} is not allowed in a deny grant "
                    "(only id, tool, mode, paths or hosts, note)",
                )
                continue
            allowed.add(name)
        return allowed

    def _check_entries(self, tool: str | None, name: str, allowed: set[str]) -> list[Any]:
        """G6 for `paths`/`hosts`: required where the tool needs it, a non-empty array."""
        entry = CATALOGUE.get(tool) if tool is not None else None
        needs = entry is not None and entry.entries == name
        if name not in self.table:
            if needs:
                self.problem("G6", f"a grant for {tool} needs {name}")
            return []
        if name not in allowed:
            return []
        if entry is not None and entry.entries is None:
            self.problem("G6", f"{_article(entry.name)} {entry.name} grant takes neither paths "
                               f"nor hosts (found {name})")
            return []
        value = self.table[name]
        if type(value) is not list:
            self.problem("G6", f"{name} must be an array, not {_type_word(value)}")
            return []
        if not value:
            self.problem("G6", f"{name} is an empty list")
            return []
        return value

    def _check_paths(self, paths: list[Any]) -> list[str]:
        out: list[str] = []
        for position, path in enumerate(paths):
            if type(path) is not str:
                self.problem("G7", f"paths[{position}] must be a string, not {_type_word(path)}")
                continue
            problem = path_problem(path)
            if problem is not None:
                self.problem("G7", f"paths[{position}] {_q(path)}: {problem}")
                continue
            out.append(path)
        return out

    def _check_hosts(self, hosts: list[Any]) -> list[HostPattern]:
        out: list[HostPattern] = []
        for position, text in enumerate(hosts):
            if type(text) is not str:
                self.problem("G8", f"hosts[{position}] must be a string, not {_type_word(text)}")
                continue
            pattern, problem = parse_host_pattern(text)
            if pattern is None:
                self.problem("G8", f"hosts[{position}] {_q(text)}: {problem}")
                continue
            out.append(pattern)
        return out


def parse_host_pattern(text: str) -> tuple[HostPattern | None, str | None]:
    """A host pattern, or None and why it is not one (G8)."""
    if text.startswith("["):
        return None, "host grammar: an IP literal is never a host"
    rest, colon, port_text = text.partition(":")
    port: int | None = None
    if colon:
        problem = port_problem(port_text)
        if problem is not None:
            return None, problem
        port = int(port_text)
    wildcard = rest.startswith("*.")
    name = rest[2:] if wildcard else rest
    problem = host_problem(name)
    if problem is not None:
        return None, problem
    return HostPattern(text=text, name=name, wildcard=wildcard, port=port), None


Seen = Grant | tuple[int, str]
"""A table's id as seen: its valid grant (which holds its index and id), or the
(index, id) of a table with problems; no object of its own for a valid grant, since
with 100,000 grants a tuple each is megabytes alive until the load ends (issue 23)."""

Checked = tuple[list[Grant], list[GrantProblem], list[Seen]]
"""A file's grants (when valid), problems, and the ids seen in table order."""


def _check_file(item: GrantFile) -> Checked:
    """G1..G9 for one file."""
    problems: list[GrantProblem] = []

    def whole(message: str) -> Checked:
        problems.append(
            GrantProblem(file=item.name, index=None, grant=None, rule="G1", message=message)
        )
        return [], problems, []

    if item.error is not None:
        return whole(f"the file cannot be read: {item.error}")
    try:
        text = item.content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return whole(f"the file is not UTF-8 (byte {exc.start})")
    try:  # the plain shape, table by table (issue 23); any other shape: tomllib
        return _check_tables(item, grant_toml.plain_tables(text), problems)
    except grant_toml.NotPlain:
        problems.clear()  # what the plain reader gave so far is dropped
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return whole(f"not valid TOML: {exc}")
    except RecursionError:
        return whole("not valid TOML here: values nested too deeply")
    for key in data:
        if key != "grant":
            problems.append(
                GrantProblem(
                    file=item.name,
                    index=None,
                    grant=None,
                    rule="G1",
                    message=f"unknown key {_q(key)}; a grant file holds only [[grant]] tables",
                )
            )
    tables = data.get("grant", [])
    if type(tables) is not list:
        problems.append(
            GrantProblem(
                file=item.name,
                index=None,
                grant=None,
                rule="G1",
                message="grant is not an array of tables ([[grant]])",
            )
        )
        return [], problems, []
    return _check_tables(item, tables, problems)


def _check_tables(item: GrantFile, tables: Iterable[Any], problems: list[GrantProblem]
                  ) -> Checked:
    """G1..G9 for each `[[grant]]` table of a file, appending to `problems`."""
    grants: list[Grant] = []
    ids: list[Seen] = []
    for index, table in enumerate(tables):
        if type(table) is not dict:
            problems.append(
                GrantProblem(
                    file=item.name,
                    index=index,
                    grant=None,
                    rule="G1",
                    message=f"grant[{index}] is {_type_word(table)}, not a table",
                )
            )
            continue
        grant = PLAIN.grant(table, item.name, index)  # the common grant, quickly
        if grant is not None:
            grants.append(grant)
            ids.append(grant)
            continue
        check = _TableCheck(item.name, index, table)
        grant = check.check()
        problems.extend(check.problems)
        if grant is not None:
            grants.append(grant)
            ids.append(grant)
        elif check.grant_id is not None:
            ids.append((index, check.grant_id))
    return grants, problems, ids


def _rule_number(problem: GrantProblem) -> int:
    return int(problem.rule[1:])


def _g22(grants: list[Grant]) -> list[GrantProblem]:
    """G22 over the set: a writable run_command grant read back at a lower label.
    (MCP grants' `paths` constraints join the readers when tool sources land.)"""
    commands = [g for g in grants if isinstance(g.command, CommandGrant)]
    if not commands:  # no reader list then: 100,000 file grants would make 100,000 (issue 23)
        return []
    readers = [
        Reader(grant=g.id, paths=g.paths, label=g.label)
        for g in grants
        if g.mode != "deny" and g.paths
        and (g.tool in CATALOGUE.command_tools
             or (g.tool in CATALOGUE.path_tools and CATALOGUE[g.tool].reads))
    ]
    out: list[GrantProblem] = []
    for grant in commands:
        assert isinstance(grant.command, CommandGrant)
        for message in g22_problems(grant.command, grant.label, grant.max_label, readers):
            out.append(GrantProblem(file=grant.file, index=grant.index, grant=grant.id,
                                    rule="G22", message=message))
    return out


def _g21(grants: list[Grant], commands_path: Sequence[str]) -> list[GrantProblem]:
    """G21 over the set: a non-deny run_command grant mounted over `[commands] path`
    (brokerd's `[commands] path`; without it nothing to check)."""
    out: list[GrantProblem] = []
    for grant in grants:
        if isinstance(grant.command, CommandGrant):
            out.extend(GrantProblem(file=grant.file, index=grant.index, grant=grant.id,
                                    rule="G21", message=message)
                       for message in g21_problems(grant.command, commands_path))
    return out


def parse_grant_files(files: Iterable[GrantFile], *,
                      commands_path: Sequence[str] = ()) -> GrantState:
    """Every `*.toml` file of a grants directory -> a GrantSet, or every problem.

    `commands_path` is brokerd's `[commands] path` (G21); empty when brokerd has no
    `[commands]` or the caller does not know it (an offline check without brokerd.toml)."""
    ordered = sorted(files, key=lambda f: f.name_bytes)
    digest = grant_digest(ordered)
    grants: list[Grant] = []
    problems: list[GrantProblem] = []
    first_place: dict[str, Grant | tuple[str, int]] = {}
    for item in ordered:
        file_grants, file_problems, ids = _check_file(item)
        for seen in ids:
            index, grant_id = (seen.index, seen.id) if isinstance(seen, Grant) else seen
            place = first_place.get(grant_id)
            if place is not None:
                where, at = (place.file, place.index) if isinstance(place, Grant) else place
                file_problems.append(
                    GrantProblem(
                        file=item.name,
                        index=index,
                        grant=grant_id,
                        rule="G3",
                        message=f"id {_q(grant_id)} is used twice: {where} grant {at} "
                        f"and {item.name} grant {index}",
                    )
                )
            else:
                first_place[grant_id] = seen if isinstance(seen, Grant) else (item.name, index)
        file_problems.sort(key=lambda p: (-1 if p.index is None else p.index, _rule_number(p)))
        problems.extend(file_problems)
        grants.extend(file_grants)
    problems.extend(_g21(grants, commands_path))
    problems.extend(_g22(grants))
    if problems:
        report = GrantsReport(ok=False, count=0, digest=digest, problems=problems)
        return InvalidGrantSet(report=report)
    return GrantSet.of(grants, digest)


def parse_grant_texts(files: Mapping[str, str | bytes], *,
                      commands_path: Sequence[str] = ()) -> GrantState:
    """Convenience for tests and docs: ``{"name.toml": text}`` -> a grant state."""
    return parse_grant_files(
        (
            GrantFile(
                name=name,
                name_bytes=name.encode("utf-8"),
                content=content.encode("utf-8") if isinstance(content, str) else content,
            )
            for name, content in files.items()
        ),
        commands_path=commands_path,
    )
