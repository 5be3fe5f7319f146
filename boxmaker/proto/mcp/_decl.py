"""`sources/*.toml` to a `SourceSet`: rules S1..S14 of 12 "Rules", every problem reported.

Pure: the files' names and bytes come in (`SourceFile`), a complete valid
`SourceSet` or an `InvalidSourceSet` with the full problem list comes out, as
03-policy's grant loading does.  Each message says what was expected and what
was found.  The per-tool tables (S12) are `_decl_tool.py`'s; reading the
directory is for the file layer.

Steps, for each file in sorted name order:

1. S1: UTF-8 TOML holding only `mcp_server`, an array of tables.
2. For each table: S3 id, S2 fields (unknown, or of 12b), S4 words and the
   image, S5 command, S6 label and booleans, S7 hosts, S10 env, S11 limits and
   sizes, S12 tool tables, S14 pin_ignore; `tools` and `note` types are S2.
3. Across files: S3 an id used twice (both places named).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, cast

import attrs

from .._grammar import path_problem
from .._taint import LABELS, Label
from ._decl_tool import ToolTable, check_host_pattern, check_tool_tables, q, type_word
from ._names import SERVER_ID

Rule = Literal["S1", "S2", "S3", "S4", "S5", "S6", "S7", "S10", "S11", "S12", "S14"]
Protocol = Literal["auto", "2026-07-28", "2025-11-25", "2025-06-18"]
PROTOCOLS: Final[tuple[Protocol, ...]] = ("auto", "2026-07-28", "2025-11-25", "2025-06-18")
LATER_FIELDS: Final = ("mounts", "secrets", "idle_ms", "session_max_ms", "max_inflight", "url",
                       "headers")
IMAGE_ID: Final = re.compile(r"sha256:[0-9a-f]{64}")
ENV_NAME: Final = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
SIZE: Final = re.compile(r"[1-9][0-9]{0,12}[bkmg]?")
RESERVED_ENV: Final = frozenset({
    "HOME", "LANG", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY",
    "all_proxy", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY"})
PIN_IGNORABLE: Final = ("_meta", "icons")
MAX_ENV: Final = 256
MAX_HOSTS: Final = 256
MAX_TOOLS_FILTER: Final = 1024
MAX_NOTE_BYTES: Final = 4096
INT_LIMITS: Final[dict[str, tuple[int, int, int]]] = {
    # name: (low, high, default)
    "pids": (1, 65_536, 128),
    "start_timeout_ms": (1, 600_000, 20_000),
    "call_timeout_ms": (1, 3_600_000, 60_000),
    "max_connections": (0, 1024, 32),
    "output_max_bytes": (4096, -1, 2_097_152),  # -1: [runner] output_max_bytes
}
SIZES: Final[dict[str, str]] = {"memory": "512m", "tmp": "64m"}
CPUS_RANGE: Final = (0.01, 1024.0)
KNOWN_FIELDS: Final = frozenset({
    "id", "transport", "lifecycle", "image", "command", "env", "label", "untrusted", "protocol",
    "hosts", "private_network", "tools", "pin_ignore", "cpus", "note", "tool",
    *INT_LIMITS, *SIZES})


@attrs.frozen(kw_only=True)
class SourceFile:
    """One `*.toml` entry of the sources directory, as read."""

    name: str
    name_bytes: bytes
    content: bytes
    error: str | None = None


@attrs.frozen(kw_only=True)
class SourceProblem:
    file: str
    index: int | None
    server: str | None
    rule: Rule
    message: str


@attrs.frozen(kw_only=True)
class SourcesReport:
    """``{"ok", "count", "digest", "problems"}``, the grants report's shape."""

    ok: bool
    count: int
    digest: str
    problems: tuple[SourceProblem, ...]


@attrs.frozen(kw_only=True)
class ServerDecl:
    """One valid `[[mcp_server]]` table, defaults filled."""

    id: str
    file: str
    index: int
    image: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    label: Label
    untrusted: bool
    protocol: Protocol
    hosts: tuple[str, ...]
    private_network: bool
    tools: tuple[str, ...]
    pin_ignore: tuple[str, ...]
    """As declared (the pin's `source` sorts it)."""
    memory: str
    pids: int
    cpus: float
    tmp: str
    start_timeout_ms: int
    call_timeout_ms: int
    max_connections: int
    output_max_bytes: int
    note: str | None
    tool_tables: Mapping[str, ToolTable]
    transport: Literal["stdio"] = "stdio"
    lifecycle: Literal["per_call"] = "per_call"


@attrs.frozen(kw_only=True)
class SourceSet:
    servers: Mapping[str, ServerDecl]
    digest: str

    @property
    def report(self) -> SourcesReport:
        return SourcesReport(ok=True, count=len(self.servers), digest=self.digest, problems=())


@attrs.frozen(kw_only=True)
class InvalidSourceSet:
    report: SourcesReport


SourceState = SourceSet | InvalidSourceSet


def sources_digest(files: Iterable[SourceFile]) -> str:
    """As the grants digest: per file in name order, 8-byte name length, name,
    8-byte content length, content."""
    digest = hashlib.sha256()
    for item in sorted(files, key=lambda f: f.name_bytes):
        digest.update(len(item.name_bytes).to_bytes(8, "big"))
        digest.update(item.name_bytes)
        digest.update(len(item.content).to_bytes(8, "big"))
        digest.update(item.content)
    return digest.hexdigest()


class _ServerCheck:
    """Checks one `[[mcp_server]]` table; collects its problems."""

    def __init__(self, file: str, index: int, table: Mapping[str, Any],
                 runner_output_max: int) -> None:
        self.file = file
        self.index = index
        self.table = table
        self.runner_output_max = runner_output_max
        self.problems: list[SourceProblem] = []
        self.server_id: str | None = None

    def problem(self, rule: str, message: str) -> None:
        self.problems.append(SourceProblem(file=self.file, index=self.index,
                                           server=self.server_id, rule=cast(Rule, rule),
                                           message=message))

    def check(self) -> ServerDecl | None:
        t = self.table
        server_id = self._id()
        self._fields()
        self._word("transport", ("stdio",))
        self._word("lifecycle", ("per_call",))
        protocol = self._word("protocol", PROTOCOLS) or "auto"
        image = self._image()
        command = self._command()
        label = self._label()
        untrusted = self._bool("untrusted", True)
        private_network = self._bool("private_network", False)
        hosts = self._hosts()
        env = self._env()
        limits = {name: self._int_limit(name, *bounds) for name, bounds in INT_LIMITS.items()}
        sizes = {name: self._size(name, default) for name, default in SIZES.items()}
        cpus = self._cpus()
        pin_ignore = self._pin_ignore()
        tools = self._tools_filter()
        note = self._note()
        tool_tables: dict[str, ToolTable] = {}
        if "tool" in t:
            tool_tables, problems = check_tool_tables(t["tool"], has_hosts=bool(hosts))
            for message in problems:
                self.problem("S12", message)
        if self.problems or server_id is None or image is None or command is None \
                or label is None:
            return None
        return ServerDecl(
            id=server_id, file=self.file, index=self.index, image=image, command=command,
            env=env, label=label, untrusted=untrusted, protocol=cast(Protocol, protocol),
            hosts=hosts, private_network=private_network, tools=tools, pin_ignore=pin_ignore,
            memory=sizes["memory"], pids=limits["pids"], cpus=cpus, tmp=sizes["tmp"],
            start_timeout_ms=limits["start_timeout_ms"],
            call_timeout_ms=limits["call_timeout_ms"],
            max_connections=limits["max_connections"],
            output_max_bytes=limits["output_max_bytes"], note=note, tool_tables=tool_tables)

    def _id(self) -> str | None:
        if "id" not in self.table:
            self.problem("S3", "id: expected a server id, found none")
            return None
        value = self.table["id"]
        if type(value) is not str or SERVER_ID.fullmatch(value) is None:
            self.problem("S3", f"id: expected [a-z][a-z0-9-]{{0,30}}, found {q(value)}")
            return None
        self.server_id = value
        return value

    def _fields(self) -> None:
        for name in self.table:
            if name in LATER_FIELDS:
                self.problem("S2", f"field {q(name)}: expected a field of this part, found one "
                                   "of a later part (12b)")
            elif name not in KNOWN_FIELDS:
                self.problem("S2", f"field {q(name)}: expected one of "
                                   f"{', '.join(sorted(KNOWN_FIELDS))}, found an unknown field")

    def _word(self, name: str, words: tuple[str, ...]) -> str | None:
        if name not in self.table:
            return None
        value = self.table[name]
        if type(value) is not str or value not in words:
            self.problem("S4", f"{name}: expected {' or '.join(q(w) for w in words)}, "
                               f"found {q(value)}")
            return None
        return value

    def _image(self) -> str | None:
        if "image" not in self.table:
            self.problem("S4", "image: expected an image id (sha256: and 64 hex digits), "
                               "found none")
            return None
        value = self.table["image"]
        if type(value) is not str or IMAGE_ID.fullmatch(value) is None:
            self.problem("S4", "image: expected an image id (sha256: and 64 hex digits), "
                               f"found {q(value)}")
            return None
        return value

    def _command(self) -> tuple[str, ...] | None:
        if "command" not in self.table:
            self.problem("S4", "command: expected an argv array, found none")
            return None
        value = self.table["command"]
        if type(value) is not list or not value:
            found = "an empty array" if value == [] else q(value)
            self.problem("S5", f"command: expected a non-empty array of strings, found {found}")
            return None
        ok = True
        for position, item in enumerate(value):
            if type(item) is not str:
                self.problem("S5", f"command[{position}]: expected a string, found {q(item)}")
                ok = False
            elif "\x00" in item:
                self.problem("S5", f"command[{position}]: expected no NUL byte, found one")
                ok = False
        if ok:
            problem = path_problem(value[0])
            if problem is not None:
                self.problem("S5", f"command[0]: expected an absolute path of the path "
                                   f"grammar, found {q(value[0])} ({problem})")
                return None
        return tuple(value) if ok else None

    def _label(self) -> Label | None:
        value = self.table.get("label")
        if type(value) is not str or value not in LABELS:
            found = "none" if "label" not in self.table else q(value)
            self.problem("S6", f"label: expected {' or '.join(LABELS)}, found {found}")
            return None
        return value

    def _bool(self, name: str, default: bool) -> bool:
        value = self.table.get(name, default)
        if type(value) is not bool:
            self.problem("S6", f"{name}: expected true or false, found {q(value)}")
            return default
        return value

    def _hosts(self) -> tuple[str, ...]:
        value = self.table.get("hosts", [])
        if type(value) is not list or len(value) > MAX_HOSTS:
            self.problem("S7", f"hosts: expected an array of at most {MAX_HOSTS} host patterns, "
                               f"found {q(value) if type(value) is not list else len(value)}")
            return ()
        out: list[str] = []
        for position, item in enumerate(value):
            problem = check_host_pattern(item)
            if problem is not None:
                self.problem("S7", f"hosts[{position}]: expected a host pattern, found "
                                   f"{q(item)} ({problem})")
            else:
                out.append(item)
        return tuple(out)

    def _env(self) -> Mapping[str, str]:
        value = self.table.get("env", {})
        if type(value) is not dict or len(value) > MAX_ENV:
            self.problem("S10", f"env: expected a table of at most {MAX_ENV} strings, "
                                f"found {q(value) if type(value) is not dict else len(value)}")
            return {}
        for name, item in value.items():
            if name in RESERVED_ENV:
                self.problem("S10", f"env name: expected a name boxmaker does not set, found "
                                    f"the reserved {q(name)}")
            elif ENV_NAME.fullmatch(name) is None:
                self.problem("S10", f"env name: expected [A-Z_][A-Z0-9_]{{0,63}}, found {q(name)}")
            if type(item) is not str:
                self.problem("S10", f"env.{name}: expected a string, found {q(item)}")
            elif "\x00" in item:
                self.problem("S10", f"env.{name}: expected no NUL byte, found one")
        return dict(value)

    def _int_limit(self, name: str, low: int, high: int, default: int) -> int:
        if high == -1:
            high = self.runner_output_max
        value = self.table.get(name, default)
        if type(value) is not int or not low <= value <= high:
            self.problem("S11", f"{name}: expected an integer in {low}..{high}, found {q(value)}")
            return default
        return value

    def _size(self, name: str, default: str) -> str:
        value = self.table.get(name, default)
        if type(value) is not str or SIZE.fullmatch(value) is None:
            self.problem("S11", f"{name}: expected a size of podman's form "
                                f"[1-9][0-9]{{0,12}}[bkmg]?, found {q(value)}")
            return default
        return value

    def _cpus(self) -> float:
        value = self.table.get("cpus", 1.0)
        low, high = CPUS_RANGE
        if type(value) not in (int, float) or not low <= value <= high:
            self.problem("S11", f"cpus: expected a number in {low}..{high:g}, found {q(value)}")
            return 1.0
        return float(value)

    def _pin_ignore(self) -> tuple[str, ...]:
        value = self.table.get("pin_ignore", [])
        if type(value) is not list:
            self.problem("S14", f"pin_ignore: expected an array of \"_meta\" or \"icons\", "
                                f"found {q(value)}")
            return ()
        seen: set[str] = set()
        for position, item in enumerate(value):
            if item not in PIN_IGNORABLE or type(item) is not str:
                self.problem("S14", f"pin_ignore[{position}]: expected \"_meta\" or \"icons\", "
                                    f"found {q(item)}")
            elif item in seen:
                self.problem("S14", f"pin_ignore[{position}]: expected each name once, found "
                                    f"{q(item)} twice")
            if type(item) is str:
                seen.add(item)
        return tuple(item for item in value if type(item) is str)

    def _tools_filter(self) -> tuple[str, ...]:
        value = self.table.get("tools", [])
        if type(value) is not list or len(value) > MAX_TOOLS_FILTER or any(
                type(item) is not str for item in value):
            self.problem("S2", f"tools: expected an array of at most {MAX_TOOLS_FILTER} MCP "
                               f"tool names (strings), found {q(value)}")
            return ()
        return tuple(value)

    def _note(self) -> str | None:
        value = self.table.get("note")
        if value is None:
            return None
        if type(value) is not str or len(value.encode("utf-8", "replace")) > MAX_NOTE_BYTES:
            self.problem("S2", f"note: expected a string of at most {MAX_NOTE_BYTES} bytes, "
                               f"found {q(value)}")
            return None
        return value


@attrs.frozen(kw_only=True)
class ToolSourcesConfig:
    """brokerd.toml's `[tool_sources]` table."""

    dir: str = "sources"
    """Relative to the home, or absolute; a missing directory means no servers."""


TOOL_SOURCES_LATER: Final = ("max_containers",)


def parse_tool_sources(value: Any) -> tuple[ToolSourcesConfig, list[str]]:
    """The `[tool_sources]` table (absent: pass ``{}``) -> the config and its problems."""
    if type(value) is not dict:
        return ToolSourcesConfig(), [f"tool_sources: expected a table, found {q(value)}"]
    problems: list[str] = []
    for name in value:
        if name in TOOL_SOURCES_LATER:
            problems.append(f"tool_sources.{name}: expected a field of this part, found one of "
                            "a later part (12b)")
        elif name != "dir":
            problems.append(f"tool_sources.{name}: expected only dir, found an unknown field")
    directory = value.get("dir", "sources")
    if type(directory) is not str or _dir_problem(directory) is not None:
        why = _dir_problem(directory) if type(directory) is str else "not a string"
        problems.append("tool_sources.dir: expected a relative path without empty, . or .. "
                        f"components, or an absolute path, found {q(directory)} ({why})")
        directory = "sources"
    return ToolSourcesConfig(dir=directory), problems


def _dir_problem(text: str) -> str | None:
    if text.startswith("/"):
        return path_problem(text)
    if not text or "\x00" in text or not text.isprintable():
        return "empty, or a NUL or control character"
    if any(part in ("", ".", "..") for part in text.split("/")):
        return "an empty, . or .. component"
    return None


def _whole(item: SourceFile, message: str) -> SourceProblem:
    return SourceProblem(file=item.name, index=None, server=None, rule="S1", message=message)


def _check_file(item: SourceFile, runner_output_max: int
                ) -> tuple[list[ServerDecl], list[SourceProblem], list[tuple[int, str]]]:
    if item.error is not None:
        return [], [_whole(item, f"expected a readable file, found: {item.error}")], []
    try:
        data = tomllib.loads(item.content.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return [], [_whole(item, f"expected UTF-8, found a bad byte at {exc.start}")], []
    except tomllib.TOMLDecodeError as exc:
        return [], [_whole(item, f"expected valid TOML, found: {exc}")], []
    except RecursionError:
        return [], [_whole(item, "expected valid TOML, found values nested too deeply")], []
    problems = [_whole(item, f"key {q(key)}: expected only [[mcp_server]] tables, found "
                             "another key") for key in data if key != "mcp_server"]
    tables = data.get("mcp_server", [])
    if type(tables) is not list:
        problems.append(_whole(item, "mcp_server: expected an array of tables ([[mcp_server]]), "
                                     f"found {type_word(tables)}"))
        return [], problems, []
    servers: list[ServerDecl] = []
    ids: list[tuple[int, str]] = []
    for index, table in enumerate(tables):
        if type(table) is not dict:
            problems.append(SourceProblem(
                file=item.name, index=index, server=None, rule="S1",
                message=f"mcp_server[{index}]: expected a table, found {type_word(table)}"))
            continue
        check = _ServerCheck(item.name, index, table, runner_output_max)
        server = check.check()
        problems.extend(check.problems)
        if check.server_id is not None:
            ids.append((index, check.server_id))
        if server is not None:
            servers.append(server)
    return servers, problems, ids


def parse_source_files(files: Iterable[SourceFile], *,
                       runner_output_max: int = 2_097_152) -> SourceState:
    """Every `*.toml` file of the sources directory -> a SourceSet, or every problem.

    `runner_output_max` is `[runner] output_max_bytes`, the bound of S11's
    `output_max_bytes`.
    """
    ordered = sorted(files, key=lambda f: f.name_bytes)
    digest = sources_digest(ordered)
    servers: dict[str, ServerDecl] = {}
    problems: list[SourceProblem] = []
    first: dict[str, tuple[str, int]] = {}
    for item in ordered:
        found, file_problems, ids = _check_file(item, runner_output_max)
        for index, server_id in ids:
            if server_id in first:
                where, at = first[server_id]
                file_problems.append(SourceProblem(
                    file=item.name, index=index, server=server_id, rule="S3",
                    message=f"id {q(server_id)}: expected unique, found in {where} "
                            f"mcp_server {at} and {item.name} mcp_server {index}"))
            else:
                first[server_id] = (item.name, index)
        file_problems.sort(key=lambda p: (-1 if p.index is None else p.index, int(p.rule[1:])))
        problems.extend(file_problems)
        for server in found:
            servers.setdefault(server.id, server)
    if problems:
        return InvalidSourceSet(report=SourcesReport(ok=False, count=0, digest=digest,
                                                     problems=tuple(problems)))
    return SourceSet(servers=dict(sorted(servers.items())), digest=digest)


def parse_source_texts(files: Mapping[str, str | bytes], **options: int) -> SourceState:
    """For tests and docs: ``{"name.toml": text}`` -> a source state."""
    return parse_source_files(
        (SourceFile(name=name, name_bytes=name.encode("utf-8"),
                    content=content.encode("utf-8") if isinstance(content, str) else content)
         for name, content in files.items()), **options)
