"""The one error table (issue 12, item 4; issue 24 item 1): boxmaker/_error_table.py.

The table's class column is read from the classes (``wire_code``, ``runbook``
on each class); every pointer of the table names an anchor of
docs/runbook.md; the table covers every wire error code and denial code of
02-wire; lookups follow the class hierarchy.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from boxmaker import _error_table
from boxmaker._errors import BoxmakerError, PeerError
from boxmaker.proto.wire._wire import DENIAL_CODES, ERROR_CODES
from tests.conftest import REPO
from tests.test_errors import exception_classes


@pytest.fixture(scope="module")
def class_entries() -> dict[str, _error_table.Entry]:
    """The class column, with every module of boxmaker imported."""
    exception_classes()
    return _error_table.entries()

ANCHOR = re.compile(r"^##\s+([a-z0-9][a-z0-9-]*)\s*$", re.MULTILINE)
POINTER = re.compile(r"docs/runbook\.md#([a-z0-9][a-z0-9-]*)")


def test_every_class_of_the_table_exists_and_is_an_exception(
        class_entries: dict[str, _error_table.Entry]) -> None:
    assert len(class_entries) > 25
    for name, entry in class_entries.items():
        module_name, _, attribute = name.rpartition(".")
        cls = getattr(importlib.import_module(module_name), attribute)
        assert inspect.isclass(cls) and issubclass(cls, BoxmakerError), name
        assert _error_table.class_name(cls) == name
        assert entry == _error_table.Entry(cls.wire_code, cls.runbook)
        assert _error_table.entry_of(cls) == entry


def test_every_class_with_an_attribute_of_its_own_is_in_the_table(
        class_entries: dict[str, _error_table.Entry]) -> None:
    for cls in exception_classes():
        own = vars(cls)
        if cls is not BoxmakerError and ("wire_code" in own or "runbook" in own):
            assert _error_table.class_name(cls) in class_entries, cls


def runbook_anchors() -> set[str]:
    return set(ANCHOR.findall((REPO / "docs" / "runbook.md").read_text(encoding="utf-8")))


def every_pointer(entries: dict[str, _error_table.Entry]) -> list[str]:
    return [
        *(p for p in _error_table.ERROR_RUNBOOKS.values() if p is not None),
        *(p for p in _error_table.DENIAL_RUNBOOKS.values() if p is not None),
        *(entry.runbook for entry in entries.values() if entry.runbook is not None),
        *(p for cls in exception_classes() if issubclass(cls, BoxmakerError)
          for p in cls.runbook_shown_by.values()),
        *_error_table.CONDITIONS.values(),
    ]


def test_every_pointer_of_the_table_names_an_existing_anchor(
        class_entries: dict[str, _error_table.Entry]) -> None:
    anchors = runbook_anchors()
    for pointer in every_pointer(class_entries):
        match = POINTER.fullmatch(pointer)
        assert match is not None, pointer
        assert match.group(1) in anchors, pointer


def test_the_table_covers_every_wire_code(
        class_entries: dict[str, _error_table.Entry]) -> None:
    assert set(_error_table.ERROR_RUNBOOKS) == set(ERROR_CODES)
    assert set(_error_table.DENIAL_RUNBOOKS) == set(DENIAL_CODES)
    codes = {entry.code for entry in class_entries.values()}
    assert codes <= {*ERROR_CODES, None}


def test_a_class_with_a_code_agrees_with_the_code_table_where_the_wire_says(
        class_entries: dict[str, _error_table.Entry]) -> None:
    """A class whose pointer is the code's own: what the wire answer carries."""
    for name, entry in class_entries.items():
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


def test_the_table_module_imports_nothing_of_boxmaker_but_the_error_root() -> None:
    tree = ast.parse(Path(_error_table.__file__).read_text(encoding="utf-8"))
    ours = [(node.level, node.module) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.level > 0 or (node.module or "").startswith("boxmaker"))]
    assert ours == [(1, "_errors")]
    imported = [node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names]
    assert "trio" not in imported


def _class_attribute_lines(tree: ast.Module) -> set[int]:
    """Lines of ``runbook = ...`` / ``runbook_shown_by = ...`` in a class body."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            targets = (statement.targets if isinstance(statement, ast.Assign)
                       else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id in {"runbook", "runbook_shown_by"}
                   for t in targets):
                end = statement.end_lineno or statement.lineno
                lines.update(range(statement.lineno, end + 1))
    return lines


def test_pointers_are_written_only_in_the_table_and_on_their_classes() -> None:
    """No message carries a pasted pointer: the place that shows it asks the table."""
    pasted = []
    for path in sorted((REPO / "boxmaker").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "boxmaker/_error_table.py":
            continue
        source = path.read_text(encoding="utf-8")
        on_a_class = _class_attribute_lines(ast.parse(source))
        for number, line in enumerate(source.splitlines(), 1):
            if "runbook.md#" in line and number not in on_a_class:
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


def test_a_raised_error_is_answered_with_its_class_s_code() -> None:
    from boxmaker.brokerd._ledger import NoSuchApproval
    from boxmaker.brokerd.log._audit_writer import AuditLocked
    from boxmaker.loopd._serve import EventTooLarge
    from boxmaker.proto.wire import answer_of

    answer = answer_of(NoSuchApproval("no pending approval has the id 7"))
    assert answer is not None
    assert (answer.code, answer.message, answer.runbook) == (
        "no_such_approval", "no pending approval has the id 7", None)
    locked = answer_of(AuditLocked("the audit log is locked"))
    assert locked is not None
    assert (locked.code, locked.message, locked.runbook) == (
        "audit_unavailable",
        "the audit log is locked. See docs/runbook.md#audit-locked",
        "docs/runbook.md#audit-unavailable")
    assert answer_of(EventTooLarge("x")) is not None
    from boxmaker._sockets._unix import ListenerLost

    assert answer_of(ListenerLost("x")) is None


def test_a_class_outside_the_table_has_no_entry() -> None:
    assert _error_table.entry_of(ValueError) is None
    assert _error_table.entry_of(KeyError("x")) is None
    assert _error_table.class_name(ValueError) == "builtins.ValueError"
