"""What "pure" means in this house, read from the source with ast (issue 24 item 4).

One meaning, held by tests/test_house_rules.py (rule 2) and by the layer
column of docs/design.md (tests/test_docs_design.py):

- *pure*: the module does no I/O, and none of the boxmaker code it uses does;
  it is fed values or bytes and returns values;
- *files*: it does blocking I/O (files, the environment, the terminal,
  processes, sockets), itself or through boxmaker code it uses, and no trio;
- *trio*: it imports trio or awaits.

`io_of(module)` lists the I/O a module reaches; the module is pure when the
list is empty.  A module is read in *units*: each top-level function, each
top-level class (all its methods together) and the module's own statements.
A unit does I/O when its code does one of these (rules 1 to 5):

1. uses a name bound to a module whose business is I/O, processes, threads or
   logging (`IO_MODULES`: trio, socket, ssl, subprocess, signal, shutil,
   tempfile, threading, logging, click, ...), or a name imported from one;
2. calls the built-ins `open`, `print` or `input`;
3. uses `os` other than its value helpers (`PURE_OS`: `os.fspath`, `os.sep`,
   the `O_*` flags, ...) or `os.path` other than its string functions
   (`PURE_OS_PATH`: `join`, `normpath`, `basename`, ...), written
   `os.stat(...)` or imported (`from os import stat`); so `os.environ` and
   `os.getuid()` count: the environment and the process's ids come from
   outside the arguments;
4. uses `sys.stdin`, `sys.stdout`, `sys.stderr`, `sys.exit` or `sys.argv`;
5. calls a method whose name is one of pathlib's file-system methods
   (`PATH_IO`: `read_text`, `write_bytes`, `open`, `exists`, `is_file`,
   `stat`, `iterdir`, `glob`, `mkdir`, `unlink`, `resolve`, ...) on any
   object, or `Path.home()`/`Path.cwd()`.  A `Path` is a value until one of
   these is called on it.

A unit also does I/O when it names (calls, subclasses, annotates with, passes
on) a unit that does: a function or class of its own module, or one imported
from another boxmaker module (`from ._files import read_all`), followed to
any depth.  A module-level variable counts as the module's own statements
(`LOG = logging.getLogger(...)` makes every function that names `LOG` do I/O).
A name in the module's `__all__` counts as named (a re-export hands its unit
on).  Merely importing a module is not I/O: only what the code names is
followed.

Not I/O here: the clock (`time`, `datetime`), random numbers, `pathlib`,
`io` (in-memory buffers) and `importlib` by themselves.  The rules are by
name: a method of our own called `exists` or `resolve` counts (name it
otherwise); `Path.rename`/`Path.replace` are not in `PATH_IO` (the names are
also `str.replace`'s; `os.rename`/`os.replace` are rule 3); a method called on
an object handed in (a stream, a file) is not followed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import boxmaker

ROOT = Path(boxmaker.__file__).resolve().parent

IO_MODULES = frozenset({
    "trio", "asyncio", "socket", "ssl", "select", "selectors", "subprocess", "signal",
    "shutil", "tempfile", "fcntl", "termios", "tty", "pty", "mmap", "multiprocessing",
    "concurrent", "threading", "logging", "click", "pwd", "grp", "resource", "getpass",
    "webbrowser", "sqlite3", "urllib.request", "http.client", "http.server",
    "socketserver", "pyfuse3", "atheris",
})
"""Modules used only to do I/O, run processes or threads, or log (rule 1)."""

PURE_OS = frozenset({
    "fspath", "fsencode", "fsdecode", "sep", "altsep", "extsep", "curdir", "pardir",
    "linesep", "PathLike", "path", "strerror", "name", "SEEK_SET", "SEEK_CUR",
    "SEEK_END", "WIFEXITED", "WEXITSTATUS", "WIFSIGNALED", "WTERMSIG",
})
"""`os` names that are values or pure functions (rule 3); every `O_*` flag too."""

PURE_OS_PATH = frozenset({
    "join", "normpath", "basename", "dirname", "split", "splitext", "isabs",
    "commonpath", "commonprefix", "normcase", "sep",
})
"""`os.path` functions that only work on the string (rule 3)."""

SYS_IO = frozenset({"stdin", "stdout", "stderr", "exit", "argv", "__stdin__",
                    "__stdout__", "__stderr__"})
"""`sys` names that reach outside the program (rule 4)."""

PATH_IO = frozenset({
    "read_text", "read_bytes", "write_text", "write_bytes", "open", "exists", "is_file",
    "is_dir", "is_symlink", "is_socket", "is_fifo", "is_block_device", "is_char_device",
    "is_mount", "stat", "lstat", "iterdir", "glob", "rglob", "mkdir", "rmdir", "unlink",
    "touch", "chmod", "lchmod", "symlink_to", "hardlink_to", "readlink", "samefile",
    "expanduser", "absolute", "resolve",
})
"""pathlib's file-system methods, by name, on any object (rule 5)."""

BUILTIN_IO = frozenset({"open", "print", "input"})
"""Built-ins that read or write outside the program (rule 2)."""

MODULE_UNIT = "<module>"


def _pure_os(name: str) -> bool:
    return name in PURE_OS or name.startswith("O_")


def _io_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in IO_MODULES or ".".join(parts[:2]) in IO_MODULES


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name (``boxmaker.proto._json``) -> file, for every module under `root`."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


class _Module:
    """One module read into units, its bindings and each unit's own I/O and names used."""

    def __init__(self, name: str, path: Path, modules: frozenset[str]) -> None:
        self.name = name
        tree = ast.parse(path.read_bytes(), filename=str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.io_names: dict[str, str] = {}  # local name -> what it is (rule 1, 3, 4)
        self.os_names: set[str] = set()
        self.os_path_names: set[str] = set()
        self.sys_names: set[str] = set()
        self.imported: dict[str, tuple[str, str | None]] = {}  # name -> (module, name or None)
        self.own_import_io: list[str] = []  # `from os import stat` and the like
        for node in ast.walk(tree):
            self._bind(node, package, modules)
        self.units: dict[str, list[ast.AST]] = {MODULE_UNIT: []}
        self.module_vars: set[str] = set()
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.units[stmt.name] = [stmt]
            else:
                self.units[MODULE_UNIT].append(stmt)
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        self.module_vars.add(node.id)
        self.own: dict[str, list[str]] = {}
        self.uses: dict[str, set[tuple[str, str]]] = {}
        for unit, nodes in self.units.items():
            self.own[unit], self.uses[unit] = self._read(unit, nodes, modules)
        for exported in _all_of(tree):  # a re-export hands its unit on
            if exported in self.imported and self.imported[exported][1] is not None:
                module, target = self.imported[exported]
                self.uses[MODULE_UNIT].add((module, target or exported))
            elif exported in self.units:
                self.uses[MODULE_UNIT].add((self.name, exported))

    def _bind(self, node: ast.AST, package: str, modules: frozenset[str]) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                if _io_module(alias.name):
                    self.io_names[bound] = alias.name
                elif alias.name == "os" or (alias.name == "os.path" and not alias.asname):
                    self.os_names.add(bound)
                elif alias.name == "os.path":
                    self.os_path_names.add(bound)
                elif alias.name == "sys":
                    self.sys_names.add(bound)
                elif alias.asname and alias.name in modules:
                    self.imported[alias.asname] = (alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                bound = alias.asname or alias.name
                if _io_module(source):
                    self.io_names[bound] = f"{source}.{alias.name}"
                elif source == "os":
                    if alias.name == "path":
                        self.os_path_names.add(bound)
                    elif not _pure_os(alias.name):
                        self.io_names[bound] = f"os.{alias.name}"
                elif source == "os.path" and alias.name not in PURE_OS_PATH:
                    self.io_names[bound] = f"os.path.{alias.name}"
                elif source == "sys" and alias.name in SYS_IO:
                    self.io_names[bound] = f"sys.{alias.name}"
                elif f"{source}.{alias.name}" in modules:
                    self.imported[bound] = (f"{source}.{alias.name}", None)
                elif source in modules:
                    self.imported[bound] = (source, alias.name)

    def _read(self, unit: str, nodes: list[ast.AST],
              modules: frozenset[str]) -> tuple[list[str], set[tuple[str, str]]]:
        own: list[str] = []
        uses: set[tuple[str, str]] = set()
        for top in nodes:
            for node in ast.walk(top):
                line = getattr(node, "lineno", 0)
                if isinstance(node, ast.Name):
                    if node.id in self.io_names:
                        own.append(f"line {line}: {self.io_names[node.id]}")
                    elif node.id in self.imported:
                        module, name = self.imported[node.id]
                        if name is not None:
                            uses.add((module, name))
                    elif node.id in self.units and node.id != unit:
                        uses.add((self.name, node.id))
                    elif (node.id in self.module_vars and unit != MODULE_UNIT
                          and isinstance(node.ctx, ast.Load)):
                        uses.add((self.name, MODULE_UNIT))
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    base, attr = node.value.id, node.attr
                    if base in self.os_names and not _pure_os(attr):
                        own.append(f"line {line}: os.{attr}")
                    elif base in self.os_path_names and attr not in PURE_OS_PATH:
                        own.append(f"line {line}: os.path.{attr}")
                    elif base in self.sys_names and attr in SYS_IO:
                        own.append(f"line {line}: sys.{attr}")
                    elif base == "Path" and attr in ("home", "cwd"):
                        own.append(f"line {line}: Path.{attr}()")
                    elif base in self.imported and self.imported[base][1] is None:
                        uses.add((self.imported[base][0], attr))
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                        and isinstance(node.value.value, ast.Name)
                        and node.value.value.id in self.os_names
                        and node.value.attr == "path" and node.attr not in PURE_OS_PATH):
                    own.append(f"line {line}: os.path.{node.attr}")
                if isinstance(node, ast.Call):
                    func = node.func
                    if isinstance(func, ast.Name) and func.id in BUILTIN_IO:
                        own.append(f"line {line}: {func.id}()")
                    elif (isinstance(func, ast.Attribute) and func.attr in PATH_IO
                          and not self._is_os(func.value)):
                        own.append(f"line {line}: .{func.attr}()")
        return sorted(set(own), key=_line_order), uses


    def _is_os(self, node: ast.expr) -> bool:
        """`os` or `os.path` (their functions are rule 3's, not rule 5's)."""
        if isinstance(node, ast.Name):
            return node.id in self.os_names or node.id in self.os_path_names
        return (isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id in self.os_names)


def _all_of(tree: ast.Module) -> list[str]:
    """The names of the module's ``__all__``, when it is a literal list or tuple."""
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets)
                and isinstance(stmt.value, ast.List | ast.Tuple)):
            return [e.value for e in stmt.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _line_order(finding: str) -> tuple[int, str]:
    return int(finding.split()[1].rstrip(":")), finding


@functools.cache
def _modules(root: Path = ROOT) -> dict[str, _Module]:
    names = module_names(root)
    known = frozenset(names)
    return {name: _Module(name, path, known) for name, path in names.items()}


def _unit_of(modules: dict[str, _Module], module: str, name: str) -> tuple[str, str] | None:
    """The unit a name of `module` stands for, following re-exports."""
    seen: set[tuple[str, str]] = set()
    while (module, name) not in seen:
        seen.add((module, name))
        found = modules.get(module)
        if found is None:
            return None
        if name in found.units:
            return module, name
        if name in found.imported:
            module, target = found.imported[name]
            if target is None:
                return None  # a module, not a unit
            name = target
            continue
        if name in found.module_vars:
            return module, MODULE_UNIT
        if f"{module}.{name}" in modules:
            return None
        return module, MODULE_UNIT
    return None


def io_of(module: str, root: Path = ROOT) -> list[str]:
    """The I/O `module` reaches: its own ("line N: ..."), then what the code it names does
    ("through boxmaker.x.f: line N: ...").  Empty: the module is pure."""
    modules = _modules(root)
    found = modules[module]
    own = sorted({f for unit in found.units for f in found.own[unit]}, key=_line_order)
    through: list[str] = []
    seen: set[tuple[str, str]] = {(module, unit) for unit in found.units}
    stack = [use for unit in found.units for use in sorted(found.uses[unit])]
    while stack:
        unit_ref = _unit_of(modules, *stack.pop())
        if unit_ref is None or unit_ref in seen:
            continue
        seen.add(unit_ref)
        other = modules[unit_ref[0]]
        if other.own[unit_ref[1]]:
            label = unit_ref[0] if unit_ref[1] == MODULE_UNIT else ".".join(unit_ref)
            through.append(f"through {label}: {other.own[unit_ref[1]][0]}")
        stack.extend(sorted(other.uses[unit_ref[1]]))
    return own + sorted(through)
