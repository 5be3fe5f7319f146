"""The one error root and the one error table (issue 12, item 4).

Every exception class defined under boxmaker/ descends from BoxmakerError
through one fault class; every class the table names exists and is one of
ours; every pointer of the table names an anchor of docs/runbook.md; the table
covers every wire error code and denial code of 02-wire.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import boxmaker
from boxmaker import _error_table
from boxmaker._errors import FAULT_CLASSES, BoxmakerError, PeerError
from boxmaker.proto._wire import DENIAL_CODES, ERROR_CODES
from tests.conftest import REPO

ANCHOR = re.compile(r"^##\s+([a-z0-9][a-z0-9-]*)\s*$", re.MULTILINE)
POINTER = re.compile(r"docs/runbook\.md#([a-z0-9][a-z0-9-]*)")

# The toolkit runs alone inside the tools image (scripts/build-tools-image
# copies only boxmaker/toolkit/), so it imports nothing else of boxmaker; its
# ToolError never leaves the container as an exception, only as JSON.
STANDS_ALONE = "boxmaker/toolkit/"


def _modules() -> Iterator[str]:
    # The bxctl entry point first: its subcommand modules import it back.
    yield "boxmaker.bxctl._cli"
    for info in pkgutil.walk_packages(boxmaker.__path__, "boxmaker."):
        if not info.name.endswith("__main__"):
            yield info.name


def exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == name):
                found[_error_table.class_name(value)] = value
    return sorted(found.values(), key=_error_table.class_name)


def source_of(cls: type) -> str:
    path = Path(inspect.getfile(cls)).resolve()
    return path.relative_to(REPO).as_posix()


def test_there_are_many_classes_to_check() -> None:
    classes = exception_classes()
    assert len(classes) > 60
    assert _error_table.class_name(BoxmakerError) in {_error_table.class_name(c) for c in classes}


def test_every_exception_class_descends_from_the_root_through_one_fault() -> None:
    strays = []
    for cls in exception_classes():
        if cls is BoxmakerError or cls in FAULT_CLASSES:
            continue
        if source_of(cls).startswith(STANDS_ALONE):
            assert not issubclass(cls, BoxmakerError)
            continue
        faults = [fault for fault in FAULT_CLASSES if issubclass(cls, fault)]
        if len(faults) != 1:
            strays.append(f"{_error_table.class_name(cls)}: {[f.__name__ for f in faults]}")
    assert strays == []


def _base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def test_no_exception_class_defined_inside_a_function_escapes_the_check() -> None:
    """exception_classes sees module-level classes; no exception class hides in a def."""
    known = {cls.__name__ for cls in exception_classes()} | {
        name for name in dir(builtins) if name.endswith(("Error", "Exception"))}
    nested = []
    for path in sorted((REPO / "boxmaker").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                nested += [f"{path.name}:{inner.lineno}" for inner in ast.walk(node)
                           if isinstance(inner, ast.ClassDef)
                           and (_base_names(inner) & known
                                or any(n.endswith(("Error", "Exception"))
                                       for n in _base_names(inner)))]
    assert nested == []


def test_the_fault_classes_are_the_roots_only_children() -> None:
    assert all(fault.__bases__ == (BoxmakerError,) for fault in FAULT_CLASSES)
    assert BoxmakerError.__bases__ == (Exception,)


def test_every_class_of_the_table_exists_and_is_an_exception() -> None:
    for name in _error_table.CLASS_ENTRIES:
        module_name, _, attribute = name.rpartition(".")
        cls = getattr(importlib.import_module(module_name), attribute)
        assert inspect.isclass(cls) and issubclass(cls, BaseException), name
        assert _error_table.class_name(cls) == name
    for name, _daemon in _error_table.SHOWN_BY:
        assert name in _error_table.CLASS_ENTRIES


def runbook_anchors() -> set[str]:
    return set(ANCHOR.findall((REPO / "docs" / "runbook.md").read_text(encoding="utf-8")))


def every_pointer() -> list[str]:
    entries = _error_table.CLASS_ENTRIES.values()
    return [
        *(p for p in _error_table.ERROR_RUNBOOKS.values() if p is not None),
        *(p for p in _error_table.DENIAL_RUNBOOKS.values() if p is not None),
        *(entry.runbook for entry in entries if entry.runbook is not None),
        *_error_table.SHOWN_BY.values(),
        *_error_table.CONDITIONS.values(),
    ]


def test_every_pointer_of_the_table_names_an_existing_anchor() -> None:
    anchors = runbook_anchors()
    for pointer in every_pointer():
        match = POINTER.fullmatch(pointer)
        assert match is not None, pointer
        assert match.group(1) in anchors, pointer


def test_the_table_covers_every_wire_code() -> None:
    assert set(_error_table.ERROR_RUNBOOKS) == set(ERROR_CODES)
    assert set(_error_table.DENIAL_RUNBOOKS) == set(DENIAL_CODES)
    codes = {entry.code for entry in _error_table.CLASS_ENTRIES.values()}
    assert codes <= {*ERROR_CODES, None}


def test_a_class_with_a_code_agrees_with_the_code_table_where_the_wire_says() -> None:
    """A class whose pointer is the code's own: what the wire answer carries."""
    for name, entry in _error_table.CLASS_ENTRIES.items():
        if entry.code is None or _error_table.ERROR_RUNBOOKS[entry.code] is None:
            continue
        assert entry.runbook is not None, name


def test_a_subclass_takes_its_nearest_entry() -> None:
    from boxmaker.proto._errors import FrameError
    from boxmaker.proto._wire import BadVersion

    assert _error_table.pointer_of(FrameError) == "docs/runbook.md#bad-frame"
    assert _error_table.entry_of(FrameError("x")) == _error_table.Entry(
        "bad_frame", "docs/runbook.md#bad-frame")
    assert _error_table.entry_of(BadVersion("x", id=None)) == _error_table.Entry(
        "bad_version", "docs/runbook.md#bad-frame")
    assert issubclass(FrameError, PeerError)


def test_a_class_without_a_pointer_is_a_key_error() -> None:
    from boxmaker.brokerd._ledger import NoSuchApproval

    with pytest.raises(KeyError, match="no runbook pointer"):
        _error_table.pointer_of(NoSuchApproval)
    with pytest.raises(KeyError):
        _error_table.pointer_of(ValueError)


def test_a_shared_class_names_the_daemon_that_shows_it() -> None:
    from boxmaker._unix import ListenerLost

    assert _error_table.pointer_of(ListenerLost) == "docs/runbook.md#brokerd-listener-lost"
    assert (_error_table.pointer_of(ListenerLost, shown_by="inferproxy")
            == "docs/runbook.md#inferproxy-listener-lost")
    assert _error_table.see(ListenerLost()) == "See docs/runbook.md#brokerd-listener-lost"


def test_the_table_module_imports_nothing_of_boxmaker() -> None:
    tree = ast.parse(Path(_error_table.__file__).read_text(encoding="utf-8"))
    imported = [node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names]
    assert not any(name.startswith(("boxmaker", ".")) for name in imported if name)
    assert all(node.level == 0 for node in ast.walk(tree) if isinstance(node, ast.ImportFrom))
    assert "trio" not in imported


def test_pointers_are_written_only_in_the_table() -> None:
    """No message carries a pasted pointer: the place that shows it asks the table."""
    pasted = []
    for path in sorted((REPO / "boxmaker").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "boxmaker/_error_table.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "runbook.md#" in line:
                pasted.append(f"{rel}:{number}")
    assert pasted == []
