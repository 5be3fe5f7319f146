"""The one error root (issue 12, item 4): boxmaker/_errors.py.

Every exception class defined under boxmaker/ descends from BoxmakerError
through one fault class.  The error table (boxmaker/_error_table.py) has its
own test module, tests/test_error_table.py.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import boxmaker
from boxmaker import _error_table
from boxmaker._errors import FAULT_CLASSES, BoxmakerError
from tests.conftest import REPO

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


def test_one_start_failed_and_one_config_error_carrying_the_daemon_s_name() -> None:
    """Issue 24 item 1: one class each; the daemon's name chooses its runbook section."""
    from boxmaker._errors import ConfigError, StartFailed

    names = [_error_table.class_name(cls) for cls in exception_classes()]
    assert [n for n in names if n.endswith(".StartFailed")] == ["boxmaker._errors.StartFailed"]
    assert [n for n in names if n.endswith("ConfigError") and "Checkpoints" not in n] == [
        "boxmaker._errors.ConfigError"]
    failed = StartFailed("loopd", "loopd: the socket is taken")
    assert (str(failed), failed.daemon) == ("loopd: the socket is taken", "loopd")
    assert _error_table.pointer_of(failed) == "docs/runbook.md#loopd-start-failed"
    assert (_error_table.pointer_of(StartFailed, shown_by="inferproxy")
            == "docs/runbook.md#inferproxy-start-failed")
    bad = ConfigError("witness", "listen: not address:port")
    assert _error_table.see(bad) == "See docs/runbook.md#witness-start-failed"
    assert _error_table.pointer_of(ConfigError("brokerd", "x")).endswith("#brokerd-start-failed")
    with pytest.raises(KeyError):
        _error_table.pointer_of(ConfigError("bxctl", "bxctl.toml: x"))
