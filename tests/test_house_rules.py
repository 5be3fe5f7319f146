"""The rules of the house (docs/design.md, issue 12), read from the code with ast.

Every module under boxmaker/ is parsed (not imported); its imports, relative
ones resolved, every one counted wherever it stands (in a function, under
``if TYPE_CHECKING:``), make a graph of files.  The rules:

1. No daemon package imports another's modules (and shared code, outside the
   daemon packages, imports none of them: else a daemon would reach another
   through it).
2. proto/, policy/ and the modules of PURE_MODULES are pure: they do no I/O,
   not even through the boxmaker code they use (tests/purity.py says exactly
   what counts), and import no trio, directly or through any boxmaker module
   they import.  policy/_load.py is the one *files* module of those packages
   (it reads the grants directory); it and the files modules of
   NO_TRIO_FILES do I/O but load no trio either.  "pure" means the same in
   docs/design.md's layer column (tests/test_docs_design.py).
3. No import circle between files.
4. No file over 600 lines.
5. No swallowed broad exception: an ``except`` of ``Exception``,
   ``BaseException`` or nothing (bare) must re-raise (a ``raise`` in its
   body), or use what it caught (``as exc`` and a use of ``exc``), or log it
   (a ``.exception(...)`` call, or a call with ``exc_info=``).
6. Nothing outside proto/ imports a private module of a room of proto/
   (``proto/wire/``, ``proto/audit/``, ``proto/tlog/``, ``proto/tools/``): it
   imports the room's face (issue 24).
7. A daemon's socket client module ends in ``_client``: a module of a daemon
   package that imports the framed client or opens a Unix socket (but in a
   ``*_check`` probe); no module ends in ``_port`` (issue 24).
8. One tool catalogue (issue 25): outside ``boxmaker/proto/tools/_catalogue.py``
   no comparison, dict key or ``match`` case is a string constant equal to a
   tool's name (docstrings are neither).
9. One place chooses each code (issue 24 item 1): outside the error table and
   the error classes (``boxmaker/_error_table.py``, ``boxmaker/_errors.py``, a
   class's ``wire_code``) and the modules that make denials (CODE_OWNERS), no
   comparison, dict key, ``match`` case or ``code=`` argument (or first argument
   of an answer builder) is a string constant equal to a wire error or denial
   code.  ALLOWED_CODES names each exception, with its reason.

A violation another engineer is removing right now is named in ALLOWED below,
with who; the lead empties it after merging.  Nothing else may be added there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import boxmaker
from tests.purity import io_of

# -- exceptions to the rules: none (issue 12 removed the last) ------------------------------
ALLOWED_IMPORTS: frozenset[tuple[str, str]] = frozenset()
"""(importer, imported) pairs that break rule 1, each being removed by the engineer named."""

ALLOWED_LONG: frozenset[str] = frozenset()
"""Files over 600 lines that another engineer is splitting (rule 4)."""

ALLOWED_SWALLOWS: frozenset[tuple[str, int]] = frozenset()
"""(file, line) of broad excepts being reworked elsewhere (rule 5): none."""

# -- the rules' own terms -------------------------------------------------------------------

ROOT = Path(boxmaker.__file__).resolve().parent
DAEMONS = frozenset(
    {"approvals", "brokerd", "bxctl", "inferproxy", "loopd", "stack", "toolkit", "witness"}
)
"""The daemon packages: each meets the others only over their sockets (or as a program)."""

PURE_PACKAGES = ("boxmaker.proto", "boxmaker.policy")
FILES_IN_PURE_PACKAGES = frozenset({"boxmaker.policy._load"})
"""The one module of proto/ and policy/ that does I/O: it reads the grants directory."""
PURE_MODULES = frozenset({
    "boxmaker._errors",  # the exception root
    "boxmaker._passkey_origin",  # the approval page's origin rules
    "boxmaker._passkey_check",  # a kept assertion re-verified
    "boxmaker._qr",  # a QR code as text
    "boxmaker._http._chunked",  # HTTP chunked decoding
    "boxmaker._http._sse",  # server-sent events
    "boxmaker._http._errors",  # the HTTP client's errors
    "boxmaker._http._error_answers",  # error answers of an HTTP peer
    "boxmaker._http._endpoint",  # endpoints, timeouts, response heads
    "boxmaker._http._llama_api",  # llama-server's typed answers
    "boxmaker._http._llama_decode",  # llama-server's strict decoders
    "boxmaker._error_table",  # the one error table
    "boxmaker._commands_config",  # brokerd.toml's [commands]
    "boxmaker.brokerd._lifecycle",  # brokerd's call table
    "boxmaker.brokerd._call_events",  # its events, verdict, replies and steps
})
"""The pure modules outside proto/ and policy/ (rule 2).  A module that moves is renamed here."""

NO_TRIO_FILES = frozenset({
    "boxmaker._toml",  # the owner's TOML files, read strictly
    "boxmaker._paths",  # boxmaker's default locations (the environment, the home)
    "boxmaker._audit_leaves",  # the audit log's lines as leaves (reads the day files)
})
"""files modules that load no trio (rule 2): clients such as `bxctl status` import them."""

MAX_LINES = 600
BROAD = frozenset({"Exception", "BaseException"})


@attrs.frozen
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT.parent).as_posix()

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def _modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        found[name] = Module(name, path, ast.parse(path.read_bytes(), filename=str(path)))
    return found


MODULES = _modules()


def _imports(module: Module) -> Iterator[tuple[str, int]]:
    """(module imported, line) for every import in `module`, boxmaker's or not.

    ``from X import y`` gives X, and X.y too when that is a module of ours."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            named = [f"{target}.{alias.name}" for alias in node.names]
            submodules = [n for n in named if n in MODULES]
            if submodules and node.module is None:
                yield from ((n, node.lineno) for n in submodules)
            else:
                yield target, node.lineno
                yield from ((n, node.lineno) for n in submodules)


def _ours(name: str) -> str | None:
    """The boxmaker module `name` is (a name inside a module: that module)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, module in MODULES.items():
        for target, _line in _imports(module):
            if target.startswith("boxmaker"):
                found = _ours(target)
                if found is not None and found != name:
                    graph[name].add(found)
    return graph


GRAPH = _edges()


def _daemon(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in DAEMONS else None


# -- rule 1 ---------------------------------------------------------------------------------


def test_no_daemon_package_imports_another() -> None:
    """Neither directly, nor through shared code (shared code imports no daemon package)."""
    found = set()
    for name, targets in GRAPH.items():
        for target in targets:
            ours, theirs = _daemon(name), _daemon(target)
            if theirs is not None and ours != theirs:
                found.add((name, target))
    assert sorted(found - ALLOWED_IMPORTS) == []


# -- rule 2 ---------------------------------------------------------------------------------


def _in_pure_packages(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PURE_PACKAGES)


def _pure(name: str) -> bool:
    """Held to no I/O and no trio (rule 2)."""
    return name in PURE_MODULES or (
        _in_pure_packages(name) and name not in FILES_IN_PURE_PACKAGES)


def _no_trio(name: str) -> bool:
    """Held to no trio (rule 2): the pure modules and the files ones named for it."""
    return _pure(name) or name in NO_TRIO_FILES or name in FILES_IN_PURE_PACKAGES


def _parents(name: str) -> set[str]:
    """The packages Python runs before `name` (their ``__init__``)."""
    parts = name.split(".")
    return {".".join(parts[:n]) for n in range(1, len(parts))}


def _trio_path(start: str) -> list[str] | None:
    """The chain of boxmaker modules from `start` to one that imports trio, if any
    (through imports and through the packages' ``__init__`` that importing runs)."""
    seen = {start}
    queue: list[list[str]] = [[start]]
    while queue:
        chain = queue.pop(0)
        module = MODULES[chain[-1]]
        if any(t == "trio" or t.startswith("trio.") for t, _ in _imports(module)):
            return chain
        for target in sorted(GRAPH[chain[-1]] | _parents(chain[-1])):
            if target not in seen:
                seen.add(target)
                queue.append([*chain, target])
    return None


def test_the_pure_modules_are_there() -> None:
    """A module that moved is named again in its list, not dropped."""
    named = PURE_MODULES | NO_TRIO_FILES | FILES_IN_PURE_PACKAGES
    assert sorted(named - set(MODULES)) == []
    assert all(p in MODULES for p in PURE_PACKAGES)


def test_proto_policy_and_the_pure_modules_import_no_trio() -> None:
    found = {name: chain for name in MODULES if _no_trio(name)
             if (chain := _trio_path(name)) is not None}
    assert {n: " -> ".join(c) for n, c in sorted(found.items())} == {}


def test_proto_policy_and_the_pure_modules_do_no_io() -> None:
    """No I/O by tests/purity.py's rules, not even through the code they name."""
    found = {name: io[:3] for name in MODULES if _pure(name) if (io := io_of(name))}
    assert found == {}


def test_the_files_modules_of_rule_2_are_not_pure() -> None:
    """A files module named for rule 2 does I/O; one that stopped belongs in PURE_MODULES."""
    assert [n for n in sorted(NO_TRIO_FILES | FILES_IN_PURE_PACKAGES) if not io_of(n)] == []


# -- rule 3 ---------------------------------------------------------------------------------


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


def test_no_import_circle_between_files() -> None:
    assert _circles(GRAPH) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


# -- rule 4 ---------------------------------------------------------------------------------


def test_no_file_over_600_lines() -> None:
    long = {m.rel: n for m in MODULES.values()
            if (n := len(m.path.read_bytes().splitlines())) > MAX_LINES}
    assert {rel: n for rel, n in sorted(long.items()) if rel not in ALLOWED_LONG} == {}


# -- rule 5 ---------------------------------------------------------------------------------


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(
        (isinstance(k, ast.Name) and k.id in BROAD)
        or (isinstance(k, ast.Attribute) and k.attr in BROAD)
        for k in kinds
    )


def _handles(handler: ast.ExceptHandler) -> bool:
    """It re-raises, uses what it caught, or logs it."""
    for node in (n for stmt in handler.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Raise):
            return True
        if handler.name and isinstance(node, ast.Name) and node.id == handler.name:
            return True
        if isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "exception")
            or any(k.arg == "exc_info" for k in node.keywords)
        ):
            return True
    return False


def _swallows(tree: ast.AST) -> list[int]:
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.ExceptHandler) and _is_broad(node)
                  and not _handles(node))


def test_no_swallowed_broad_exception() -> None:
    found = {(m.rel, line) for m in MODULES.values() for line in _swallows(m.tree)}
    assert sorted(found - ALLOWED_SWALLOWS) == []


@pytest.mark.parametrize(
    ("source", "swallowed"),
    [
        ("try:\n    f()\nexcept Exception:\n    pass\n", True),
        ("try:\n    f()\nexcept:\n    return None\n", True),
        ("try:\n    f()\nexcept (ValueError, BaseException) as exc:\n    g()\n", True),
        ("try:\n    f()\nexcept BaseException:\n    close()\n    raise\n", False),
        ("try:\n    f()\nexcept Exception as exc:\n    log.warning('%s', exc)\n", False),
        ("try:\n    f()\nexcept Exception:\n    log.exception('failed')\n", False),
        ("try:\n    f()\nexcept ValueError:\n    pass\n", False),
    ],
)
def test_the_swallow_rule_is_the_one_written_down(source: str, swallowed: bool) -> None:
    assert bool(_swallows(ast.parse(source))) is swallowed


# -- the reader itself ------------------------------------------------------------------------


def test_relative_imports_are_resolved() -> None:
    """A sample of known edges, so that a reader that finds nothing cannot pass."""
    assert "boxmaker.proto._json" in GRAPH["boxmaker.proto._convert"]
    assert "boxmaker.proto._errors" in GRAPH["boxmaker.proto._convert"]
    assert any(t.startswith("boxmaker.brokerd.") for t in GRAPH["boxmaker.brokerd._serve"])
    assert "boxmaker._protected" in GRAPH["boxmaker.brokerd.runner._mounts"]
    assert len(MODULES) > 100
    assert _trio_path("boxmaker._sockets._streams") == ["boxmaker._sockets._streams"]
    chain = _trio_path("boxmaker.bxctl._grants_all")  # through its subcommands
    assert chain is not None and len(chain) > 1
    assert _trio_path("boxmaker.bxctl._cli") is None  # lazy: its subcommands are not imported
    assert _daemon("boxmaker.brokerd.runner._podman") == "brokerd"
    assert _daemon("boxmaker._brokerd_config") is None


# -- rule 6 ---------------------------------------------------------------------------------

ROOMS = ("boxmaker.proto.wire", "boxmaker.proto.audit", "boxmaker.proto.tlog",
         "boxmaker.proto.tools", "boxmaker.proto.mcp")


def _private_room_module(name: str) -> bool:
    """`boxmaker.proto.wire._wire_broker` is; the face `boxmaker.proto.wire` is not."""
    room, _, leaf = name.rpartition(".")
    return room in ROOMS and leaf.startswith("_")


def _reaches_into_rooms(module: Module) -> list[str]:
    found: list[str] = []
    for target, line in _imports(module):
        ours = _ours(target) if target.startswith("boxmaker") else None
        if ours is not None and _private_room_module(ours):
            found.append(f"{module.rel}:{line} {ours}")
    return found


def test_nothing_outside_proto_reaches_into_a_room() -> None:
    """Daemons and shared modules import a room of proto/ through its face (issue 24)."""
    found = [hit for name in MODULES if not name.startswith("boxmaker.proto.")
             for hit in _reaches_into_rooms(MODULES[name])]
    assert found == []


def test_the_room_rule_sees_a_reach() -> None:
    assert _private_room_module("boxmaker.proto.wire._wire_broker")
    assert not _private_room_module("boxmaker.proto.wire")
    assert not _private_room_module("boxmaker.proto._convert")
    assert GRAPH["boxmaker.proto.wire"] <= {n for n in MODULES
                                            if n.startswith("boxmaker.proto.")}
    assert any(t == "boxmaker.proto.wire" for t in GRAPH["boxmaker.brokerd._broker"])
    doctored = Module("boxmaker.brokerd._doctored", ROOT / "brokerd" / "_doctored.py",
                      ast.parse("from ..proto.wire._wire import format_ts\n"
                                "from ..proto.wire import Call\n"))
    assert _reaches_into_rooms(doctored) == [
        "boxmaker/brokerd/_doctored.py:1 boxmaker.proto.wire._wire"]


# -- rule 7 ---------------------------------------------------------------------------------


def _opens_a_socket(module: Module) -> list[int]:
    """Lines where `module` is a socket client: it imports the framed client, or calls
    ``open_unix_socket`` outside a function whose name says it only checks (``*_check``)."""
    lines = [line for target, line in _imports(module)
             if target == "boxmaker._sockets._framed_client"]

    def visit(node: ast.AST, checking: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            checking = node.name.endswith("_check")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "open_unix_socket" and not checking):
            lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, checking)

    visit(module.tree, False)
    return lines


def test_socket_clients_end_in_client() -> None:
    """One suffix for a daemon's socket client (issue 24): `_broker_client`, `_admin_client`.

    Shared transports (`boxmaker._sockets`, `boxmaker._http`) are not a daemon's client."""
    found = [f"{m.rel}:{line}" for name, m in MODULES.items()
             if _daemon(name) is not None
             and not name.rpartition(".")[2].endswith("_client")
             for line in _opens_a_socket(m)]
    assert found == []
    assert not [m.rel for m in MODULES.values() if m.path.stem.endswith("_port")]


def test_the_client_rule_sees_the_clients() -> None:
    clients = {name for name, m in MODULES.items() if _opens_a_socket(m)}
    assert {"boxmaker.loopd._broker_client", "boxmaker.approvals._admin_client",
            "boxmaker.bxctl._admin_client", "boxmaker.bxctl._loop_client"} <= clients
    assert "boxmaker.loopd._serve" not in clients  # its broker check only probes


# -- rule 8: one tool catalogue (issue 25) ----------------------------------------------------

CATALOGUE_MODULE = "boxmaker.proto.tools._catalogue"
"""The one module that names a tool."""

ALLOWED_TOOL_NAMES: frozenset[tuple[str, int]] = frozenset()
"""(file, line) of tool names spelled outside the catalogue: none."""


def _tool_name_uses(tree: ast.AST, names: frozenset[str]) -> list[int]:
    """Lines where a string constant equal to a tool name is compared with (an operand
    of a comparison, or an item of a literal tuple, list or set, or of ``frozenset(...)``,
    ``set(...)`` or ``tuple(...)`` of one, compared with), a dict
    key, a keyword of ``dict(...)`` or a ``match`` case.  Docstrings are not looked at:
    they are neither."""

    def named(node: ast.AST | None) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and node.value in names
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(named(item) for item in node.elts)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("frozenset", "set", "tuple") and node.args:
            return named(node.args[0])
        return False

    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(named(side) for side in (node.left, *node.comparators)):
                found.add(node.lineno)
        elif isinstance(node, ast.Dict):
            found.update(key.lineno for key in node.keys if key is not None and named(key))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "dict":
            if any(k.arg in names for k in node.keywords):
                found.add(node.lineno)
        elif isinstance(node, ast.MatchValue | ast.MatchSingleton):
            if named(getattr(node, "value", None)):
                found.add(node.lineno)
        elif isinstance(node, ast.MatchMapping):
            found.update(key.lineno for key in node.keys if named(key))
    return sorted(found)


def test_no_module_but_the_catalogue_names_a_tool() -> None:
    """Adding a tool is one catalogue entry: no other module branches on a tool's name."""
    from boxmaker.proto.tools import CATALOGUE

    names = CATALOGUE.every_name
    assert CATALOGUE_MODULE in MODULES
    found = {(m.rel, line) for name, m in MODULES.items() if name != CATALOGUE_MODULE
             for line in _tool_name_uses(m.tree, names)}
    assert sorted(found - ALLOWED_TOOL_NAMES) == []


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ('if tool == "read_file":\n    pass\n', [1]),
        ('ok = "echo" != kind\n', [1]),
        ('ok = tool in ("read_file", "list_dir")\n', [1]),
        ('ok = tool not in {"http_fetch"}\n', [1]),
        ('ok = tool in frozenset({"list_dir"})\n', [1]),
        ('VERBS = {\n    "write_file": "writes",\n}\n', [2]),
        ('VERBS = dict(list_dir="lists")\n', [1]),
        ('match tool:\n    case "http_fetch":\n        pass\n', [2]),
        ('match tool:\n    case "a" | "echo":\n        pass\n', [2]),
        ('match args:\n    case {"read_file": x}:\n        pass\n', [2]),
        ('"""read_file, list_dir and echo."""\n', []),
        ('def f():\n    """Runs http_fetch."""\n', []),
        ('message = "unknown tool read_file"\n', []),
        ('TOOLS = ("read_file", "echo")\n', []),
        ('ok = kind == "podman"\n', []),
    ],
)
def test_the_tool_name_rule_is_the_one_written_down(source: str, lines: list[int]) -> None:
    names = frozenset({"read_file", "list_dir", "write_file", "http_fetch", "echo"})
    assert _tool_name_uses(ast.parse(source), names) == lines


# -- rule 9: one place chooses each code (issue 24 item 1) -----------------------------------

ERROR_TABLE_MODULES = frozenset({"boxmaker._errors", "boxmaker._error_table"})
"""The error classes' root and the one error table: where the codes are written."""

CODE_OWNERS = frozenset({
    "boxmaker.policy._verdict",  # D0..D8 choose the policy's denial codes
    "boxmaker.policy._decide",  # a policy denial's words, by code; `changed` at redecide
    "boxmaker.policy._decision",  # `grants_invalid`'s runbook pointer on a Decision
    "boxmaker.brokerd._lifecycle",  # the call table: the ends of an approval, a run's result
    "boxmaker.brokerd._call_events",  # brokerd's own denials (too long, no approval room)
})
"""The modules that make denials: each denial code is chosen where its rule is."""

ANSWER_BUILDERS = frozenset({"error_answer", "error_frame", "ErrorAnswer", "Denied", "denied",
                             "refusal", "OutcomeDenied"})

ALLOWED_CODES: dict[tuple[str, str], str] = {}
"""(file, code) spelled outside the table and the owners, each with why: empty.  A word
of another vocabulary spelled as a code is (an `approval` record's ``refused``, a pin's
``changed`` tools) is named once in its own home (a constant, a property), and a framed
client's failed step is ``undecodable``, not the wire's ``bad_frame``."""


def _code_uses(tree: ast.AST, codes: frozenset[str]) -> dict[int, set[str]]:
    """Line -> the codes spelled there: rule 8's places (a comparison, a dict key, a
    match case), a ``code=`` argument, and the first argument of an answer builder."""
    found: dict[int, set[str]] = {}
    for line in _tool_name_uses(tree, codes):
        found[line] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else "")
        spelled = [k.value for k in node.keywords if k.arg == "code"]
        if name in ANSWER_BUILDERS:
            spelled += node.args[:1]
        for value in spelled:
            if isinstance(value, ast.Constant) and value.value in codes:
                found.setdefault(node.lineno, set())
    lines = {line: set() for line in found}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value in codes and node.lineno in lines:
            lines[node.lineno].add(node.value)
    return {line: spelled for line, spelled in lines.items() if spelled}


def _codes() -> frozenset[str]:
    from typing import get_args

    from boxmaker._error_table import DenialCode
    from boxmaker._errors import ErrorCode

    return frozenset(get_args(ErrorCode)) | frozenset(get_args(DenialCode))


def test_no_literal_code_outside_the_table_and_its_owners() -> None:
    """A wire error code is its class's (``wire_code``, answered by `answer_of`); a
    denial code is chosen by the rule that denies.  Nowhere else is one spelled."""
    codes = _codes()
    assert set(MODULES) >= CODE_OWNERS and set(MODULES) >= ERROR_TABLE_MODULES
    found = {(m.rel, code, line) for name, m in MODULES.items()
             if name not in ERROR_TABLE_MODULES | CODE_OWNERS
             for line, spelled in _code_uses(m.tree, codes).items() for code in spelled}
    assert sorted(f for f in found if (f[0], f[1]) not in ALLOWED_CODES) == []
    stale = set(ALLOWED_CODES) - {(rel, code) for rel, code, _ in found}
    assert stale == set(), f"allowed but no longer spelled: {sorted(stale)}"
    assert all(reason for reason in ALLOWED_CODES.values())


@pytest.mark.parametrize(
    ("source", "spelled"),
    [
        ('if answer.code == "no_such_approval":\n    pass\n', {1: {"no_such_approval"}}),
        ('STATUS = {\n    "busy": 503,\n}\n', {2: {"busy"}}),
        ('answer = error_answer("busy", "m", None)\n', {1: {"busy"}}),
        ('answer = Denied(code="no_grant", reason="r", grant=None, runbook=None)\n',
         {1: {"no_grant"}}),
        ('answer = denied("expired", "r", None)\n', {1: {"expired"}}),
        ('class Busy(PeerError):\n    """busy."""\n', {}),
        ('message = "the broker is busy"\n', {}),
        ('log.info("busy")\n', {}),
    ],
)
def test_the_code_rule_is_the_one_written_down(source: str,
                                               spelled: dict[int, set[str]]) -> None:
    assert _code_uses(ast.parse(source), frozenset({"busy", "no_grant", "expired",
                                                    "no_such_approval"})) == spelled
