"""The one error table (issue 12, item 4): boxmaker/_error_table.py.

Every class the table names exists and is one of ours; every pointer of the
table names an anchor of docs/runbook.md; the table covers every wire error
code and denial code of 02-wire; lookups follow the class hierarchy.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from boxmaker import _error_table
from boxmaker._errors import PeerError
from boxmaker.proto.wire._wire import DENIAL_CODES, ERROR_CODES
from tests.conftest import REPO

ANCHOR = re.compile(r"^##\s+([a-z0-9][a-z0-9-]*)\s*$", re.MULTILINE)
POINTER = re.compile(r"docs/runbook\.md#([a-z0-9][a-z0-9-]*)")


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
    from boxmaker.proto.wire._wire import BadVersion

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
    from boxmaker._sockets._unix import ListenerLost

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


def test_shown_ends_a_message_with_the_pointer_of_its_class() -> None:
    from boxmaker.proto._errors import FrameError

    assert (_error_table.shown("bad header", FrameError("x"))
            == "bad header. See docs/runbook.md#bad-frame")
    assert (_error_table.shown("bad header", FrameError, joiner=" ")
            == "bad header docs/runbook.md#bad-frame")


def test_shown_and_see_honour_the_daemon_that_shows_a_shared_class() -> None:
    from boxmaker._sockets._unix import ListenerLost

    assert (_error_table.shown("lost", ListenerLost(), shown_by="inferproxy", joiner=": ")
            == "lost: docs/runbook.md#inferproxy-listener-lost")
    assert (_error_table.see(ListenerLost, shown_by="inferproxy")
            == "See docs/runbook.md#inferproxy-listener-lost")
    # a daemon the table does not name for the class falls back to its entry
    assert (_error_table.see(ListenerLost, shown_by="no-such-daemon")
            == _error_table.see(ListenerLost))


def test_shown_refuses_a_class_without_a_pointer() -> None:
    with pytest.raises(KeyError, match=r"builtins\.ValueError"):
        _error_table.shown("message", ValueError("x"))


def test_a_condition_is_looked_up_by_name_and_an_unknown_one_is_refused() -> None:
    for name, pointer in _error_table.CONDITIONS.items():
        assert _error_table.condition(name) == pointer
    assert _error_table.condition("grants_invalid").endswith("#grants-invalid")
    with pytest.raises(KeyError):
        _error_table.condition("no_such_condition")


def test_a_class_outside_the_table_has_no_entry() -> None:
    assert _error_table.entry_of(ValueError) is None
    assert _error_table.entry_of(KeyError("x")) is None
    assert _error_table.class_name(ValueError) == "builtins.ValueError"
