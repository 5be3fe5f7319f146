"""docs/design.md matches the tree (issue 12): it cannot name a file that moved.

The page's module tables sit under headings that name one directory of the
package (``### `boxmaker/brokerd/` ...``); the first cell of each row names
files of that directory (``_ledger.py``).  Held here:

- every directory of boxmaker/ that holds a ``.py`` file has exactly one table,
  and every ``.py`` file in it is named in that table exactly once;
- every file a table names exists;
- a row's layer (second cell) is one of *pure*, *files*, *trio*, with the one
  meaning of tests/purity.py (the house rules' rule 2 holds the same word): a
  *pure* module does no I/O, not even through the boxmaker code it names; a
  *files* module does some (`io_of` finds it); neither imports trio nor
  defines a coroutine (but in a `Protocol`); a *trio* module imports trio,
  defines a coroutine, or imports a module whose row says *trio*; and every
  module the house rules hold pure is *pure* here;
- no code span in a table row holds a bare ``|`` (Markdown would split the
  cell there: ``serve|check`` must be written ``serve\\|check``);
- everywhere else on the page, every repository path in backticks
  (``boxmaker/...``, ``tests/...``, ``scripts/...``, ``docs/...``,
  ``fixtures/...``) exists, every bare ``_name.py`` is a file somewhere under
  boxmaker/, and every dotted ``boxmaker.x.y`` name is a module, or a module
  and a name it defines.

The checks are functions of the page's text and the tree, so the tests at the
end can show each of them failing on a doctored copy of the real page.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import attrs

import boxmaker
from tests.purity import io_of
from tests.test_house_rules import FILES_IN_PURE_PACKAGES, PURE_MODULES, PURE_PACKAGES

REPO = Path(boxmaker.__file__).resolve().parent.parent
PACKAGE = REPO / "boxmaker"
DESIGN = REPO / "docs" / "design.md"

_TABLE_HEADING = re.compile(r"^### `(boxmaker/(?:[\w/]+/)?)`")
_OTHER_HEADING = re.compile(r"^#{1,3} ")
_TICKED = re.compile(r"`([^`\n]+)`")
_REPO_PATH = re.compile(r"^(?:boxmaker|tests|scripts|docs|fixtures)/[\w./-]*$")
_BARE_MODULE = re.compile(r"^\w+\.py$")
_DOTTED = re.compile(r"^boxmaker(?:\.\w+)+$")


@attrs.frozen
class Page:
    tables: dict[str, list[tuple[int, str]]]
    """Directory (``boxmaker/brokerd/``) -> (line number, file name) of each first-cell name."""
    layers: dict[str, tuple[int, str]]
    """File (``boxmaker/brokerd/_ledger.py``) -> (line number, the layer its row gives)."""
    others: list[tuple[int, str]]
    """(line number, text) of every other backticked token of the page."""
    duplicate_tables: list[str]


def read_page(text: str) -> Page:
    tables: dict[str, list[tuple[int, str]]] = {}
    layers: dict[str, tuple[int, str]] = {}
    others: list[tuple[int, str]] = []
    duplicates: list[str] = []
    current: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        heading = _TABLE_HEADING.match(line)
        if heading:
            current = heading.group(1)
            if current in tables:
                duplicates.append(current)
            tables.setdefault(current, [])
            continue
        if _OTHER_HEADING.match(line):
            current = None
        rest = line
        if current is not None and line.startswith("| ") and not line.startswith("| module"):
            first, _, rest = line[2:].partition(" | ")
            layer, _, rest = rest.partition(" | ")
            for name in _TICKED.findall(first):
                tables[current].append((number, name))
                layers[current + name] = (number, layer)
        others.extend((number, token) for token in _TICKED.findall(rest))
    return Page(tables=tables, layers=layers, others=others, duplicate_tables=duplicates)


def tree_modules(package: Path) -> dict[str, list[str]]:
    """Directory (``boxmaker/brokerd/``) -> its ``.py`` files, for every directory holding one."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        directory = path.parent.relative_to(package.parent).as_posix() + "/"
        found.setdefault(directory, []).append(path.name)
    return found


def table_problems(page: Page, package: Path) -> list[str]:
    problems = [f"two tables for {d}" for d in page.duplicate_tables]
    tree = tree_modules(package)
    for directory, files in tree.items():
        if directory not in page.tables:
            problems.append(f"no table for {directory} (it holds {', '.join(files)})")
            continue
        named = [name for _, name in page.tables[directory]]
        for name in files:
            count = named.count(name)
            if count != 1:
                problems.append(f"{directory}{name} is named {count} times in its table")
    for directory, rows in page.tables.items():
        for number, name in rows:
            if not (package.parent / directory / name).is_file():
                problems.append(f"line {number}: {directory}{name} does not exist")
    return problems


LAYERS = ("pure", "files", "trio")


def _module_file(name: str, package: Path) -> str | None:
    """``boxmaker.x.y`` -> ``boxmaker/x/y.py`` (or its ``__init__.py``), if it is a file."""
    base = package.parent / name.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.relative_to(package.parent).as_posix()
    return None


@attrs.frozen
class Shape:
    imports_trio: bool
    coroutines: bool
    """A coroutine function outside a `Protocol` class."""
    imported: frozenset[str]
    """Files of boxmaker/ that it imports (relative imports, resolved)."""


def module_shape(path: Path, package: Path) -> Shape:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    dotted = path.relative_to(package.parent).with_suffix("").as_posix().replace("/", ".")
    here = dotted.split(".")[:-1]
    trio_seen = False
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            trio_seen |= any(alias.name.partition(".")[0] == "trio" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                trio_seen |= (node.module or "").partition(".")[0] == "trio"
                continue
            parent = here[:len(here) - node.level + 1]
            base = ".".join(parent + ([node.module] if node.module else []))
            for name in [base] + [f"{base}.{alias.name}" for alias in node.names]:
                found = _module_file(name, package)
                if found is not None:
                    imported.add(found)
    protocol_bodies = {
        id(item) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)
        for item in node.body}
    coroutines = any(isinstance(node, ast.AsyncFunctionDef) and id(node) not in protocol_bodies
                     for node in ast.walk(tree))
    return Shape(imports_trio=trio_seen, coroutines=coroutines, imported=frozenset(imported))


def layer_problems(page: Page, package: Path) -> list[str]:
    problems = []
    for file, (number, layer) in sorted(page.layers.items()):
        path = package.parent / file
        if not path.is_file():
            continue  # table_problems names it
        if layer not in LAYERS:
            problems.append(f"line {number}: {file}'s layer {layer!r} is not one of {LAYERS}")
            continue
        shape = module_shape(path, package)
        is_async = shape.imports_trio or shape.coroutines
        if layer != "trio" and is_async:
            problems.append(
                f"line {number}: {file} is {layer} but imports trio or defines a coroutine")
        elif layer == "trio" and not is_async and not any(
                page.layers.get(other, (0, ""))[1] == "trio" for other in shape.imported):
            problems.append(f"line {number}: {file} is trio but neither awaits nor imports trio")
        elif layer != "trio":
            io = io_of(dotted_name(file), package)
            if layer == "pure" and io:
                problems.append(f"line {number}: {file} is pure but does I/O ({io[0]})")
            elif layer == "files" and not io:
                problems.append(f"line {number}: {file} is files but does no I/O: pure")
    return problems


def dotted_name(file: str) -> str:
    """``boxmaker/proto/_json.py`` -> ``boxmaker.proto._json`` (a package: its name)."""
    parts = file.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _dotted_exists(token: str) -> bool:
    parts = token.split(".")
    for cut in (len(parts), len(parts) - 1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        return cut == len(parts) or hasattr(module, parts[-1])
    return False


def reference_problems(page: Page, repo: Path) -> list[str]:
    package = repo / "boxmaker"
    bare = {path.name for path in package.rglob("*.py")}
    problems = []
    for number, token in page.others:
        if "<" in token or "*" in token:
            continue  # a pattern (tests/<package>/test_<module>.py), not a path
        if _REPO_PATH.match(token):
            if not (repo / token.rstrip("/")).exists():
                problems.append(f"line {number}: {token} does not exist")
        elif _BARE_MODULE.match(token):
            if token not in bare:
                problems.append(f"line {number}: no {token} under boxmaker/")
        elif _DOTTED.match(token) and not _dotted_exists(token):
            problems.append(f"line {number}: {token} is not a module or a name in one")
    return problems


def design_text() -> str:
    return DESIGN.read_text(encoding="utf-8")


def test_every_module_of_the_tree_is_in_its_table_once() -> None:
    assert table_problems(read_page(design_text()), PACKAGE) == []


def test_every_path_and_module_the_page_names_exists() -> None:
    assert reference_problems(read_page(design_text()), REPO) == []


def test_every_row_gives_the_layer_its_module_is_in() -> None:
    assert layer_problems(read_page(design_text()), PACKAGE) == []


def test_what_the_house_rules_hold_pure_is_pure_on_the_page() -> None:
    """One word: rule 2's pure modules are the page's *pure* ones (and policy/_load files)."""
    page = read_page(design_text())
    layer_of = {dotted_name(file): layer for file, (_, layer) in page.layers.items()}
    held = {name for name in layer_of
            if name in PURE_MODULES or any(name == p or name.startswith(p + ".")
                                           for p in PURE_PACKAGES)}
    assert sorted(PURE_MODULES - held) == []
    assert {name: layer_of[name] for name in sorted(held)
            if layer_of[name] != ("files" if name in FILES_IN_PURE_PACKAGES else "pure")} == {}


def pipe_problems(text: str) -> list[str]:
    """Table rows whose code spans hold a bare ``|`` (Markdown splits the cell there)."""
    return [f"line {number}: {span}" for number, line in enumerate(text.splitlines(), start=1)
            if line.startswith("| ")
            for span in _TICKED.findall(line) if re.search(r"(?<!\\)\|", span)]


def test_no_table_cell_is_split_by_a_pipe() -> None:
    assert pipe_problems(design_text()) == []
    assert pipe_problems("| `a` | pure | `bxctl audit verify|head` |\n") == [
        "line 1: bxctl audit verify|head"]


def test_the_page_has_a_table_for_each_package() -> None:
    page = read_page(design_text())
    assert {"boxmaker/", "boxmaker/brokerd/", "boxmaker/brokerd/runner/", "boxmaker/_http/",
            "boxmaker/proto/", "boxmaker/policy/"} <= set(page.tables)
    assert sum(len(rows) for rows in page.tables.values()) >= 150


# -- each check fails on a doctored page ----------------------------------------------------


def _without_row(text: str, name: str) -> str:
    lines = text.splitlines()
    [row] = [line for line in lines if line.startswith(f"| `{name}` |")]
    return "\n".join(line for line in lines if line != row)


def test_a_module_missing_from_its_table_is_found() -> None:
    text = _without_row(design_text(), "_audit_writer.py")
    assert table_problems(read_page(text), PACKAGE) == [
        "boxmaker/brokerd/log/_audit_writer.py is named 0 times in its table"]


def test_a_module_named_twice_is_found() -> None:
    text = design_text().replace("| `_audit_writer.py` |",
                                 "| `_audit_writer.py`, `_audit_writer.py` |", 1)
    assert table_problems(read_page(text), PACKAGE) == [
        "boxmaker/brokerd/log/_audit_writer.py is named 2 times in its table"]


def test_a_table_row_for_a_file_that_moved_is_found() -> None:
    text = design_text().replace("| `_audit_writer.py` |",
                                 "| `_audit_writer.py`, `_sockets.py` |", 1)
    [problem] = table_problems(read_page(text), PACKAGE)
    assert problem.endswith("boxmaker/brokerd/log/_sockets.py does not exist")


def test_a_missing_table_is_found() -> None:
    text = design_text().replace("### `boxmaker/witness/`", "### witness", 1)
    [problem] = table_problems(read_page(text), PACKAGE)
    assert problem.startswith("no table for boxmaker/witness/")


def test_a_path_or_module_that_moved_is_found_in_the_text() -> None:
    text = design_text() + (
        "\n\nSee `boxmaker/loopd/_http.py`, `_llama.py`, `tests/test_gone.py`,"
        " `boxmaker.loopd._llama`, `boxmaker._error_table.no_such_name`"
        " and `boxmaker._error_table.pointer_of`.\n")
    problems = reference_problems(read_page(text), REPO)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "boxmaker/loopd/_http.py does not exist",
        "no _llama.py under boxmaker/",
        "tests/test_gone.py does not exist",
        "boxmaker.loopd._llama is not a module or a name in one",
        "boxmaker._error_table.no_such_name is not a module or a name in one",
    ]


def test_a_wrong_layer_is_found() -> None:
    text = design_text().replace("| `_audit_writer.py` | trio |",
                                 "| `_audit_writer.py` | pure |", 1)
    text = text.replace("| `_grants.py` | pure |", "| `_grants.py` | trio |", 1)
    text = text.replace("| `_taint.py` | pure |", "| `_taint.py` | sans-IO |", 1)
    text = text.replace("| `_toml.py` | files |", "| `_toml.py` | pure |", 1)
    text = text.replace("| `_tools.py` | pure |", "| `_tools.py` | files |", 1)  # loopd's
    problems = [re.sub(r"\(line \d+: ", "(", p.split(": ", 1)[1])
                for p in layer_problems(read_page(text), PACKAGE)]
    assert problems == [
        "boxmaker/_toml.py is pure but does I/O (.read_bytes())",
        "boxmaker/brokerd/log/_audit_writer.py is pure but imports trio or defines a coroutine",
        "boxmaker/loopd/_tools.py is files but does no I/O: pure",
        "boxmaker/policy/_grants.py is trio but neither awaits nor imports trio",
        "boxmaker/proto/_taint.py's layer 'sans-IO' is not one of ('pure', 'files', 'trio')",
    ]
