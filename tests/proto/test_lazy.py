"""The lazy face of boxmaker.proto.wire (boxmaker/proto/_lazy.py): one table of who gives
what, held equal to the static imports mypy reads and to ``__all__``; a room imported
when one of its names is first read, and only that room (and what it imports)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import boxmaker.proto.wire as face
from boxmaker.proto._lazy import lazy_face

FACE = Path(face.__file__)


def _static_imports() -> dict[str, set[str]]:
    """The names imported under ``if TYPE_CHECKING:`` in the face, by room."""
    tree = ast.parse(FACE.read_text())
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for inner in node.body:
                assert isinstance(inner, ast.ImportFrom) and inner.level == 1
                found["." + str(inner.module)] = {alias.name for alias in inner.names}
    return found


def test_the_table_the_static_imports_and_all_agree() -> None:
    rooms = {room: set(names) for room, names in face._ROOMS.items()}
    assert _static_imports() == rooms
    named = [name for names in face._ROOMS.values() for name in names]
    assert len(named) == len(set(named))
    assert sorted(face.__all__) == sorted(named)
    assert len(face.__all__) == len(set(face.__all__))


def test_every_name_is_its_rooms_own_object() -> None:
    for room, names in face._ROOMS.items():
        module = importlib.import_module(room, face.__name__)
        for name in names:
            assert getattr(face, name) is getattr(module, name), name


def test_dir_lists_every_name_and_an_unknown_name_is_an_attribute_error() -> None:
    assert set(face.__all__) <= set(dir(face))
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        face.Nothing  # noqa: B018 - the read is the test
    assert not hasattr(face, "Nothing")


def _rooms_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\n"
         "print(' '.join(m for m in sys.modules if m.startswith('boxmaker.proto.wire.')))"],
        capture_output=True, text=True, timeout=60, check=True)
    return set(done.stdout.split())


def test_a_room_is_imported_when_one_of_its_names_is_read() -> None:
    assert _rooms_after("import boxmaker.proto.wire") == set()
    admin = _rooms_after("from boxmaker.proto.wire import Status")
    assert "boxmaker.proto.wire._wire_admin" in admin
    assert not admin & {"boxmaker.proto.wire._wire_loop", "boxmaker.proto.wire._wire_broker"}
    loop = _rooms_after("from boxmaker.proto.wire import TextEvent")
    assert "boxmaker.proto.wire._wire_loop" in loop
    assert not loop & {"boxmaker.proto.wire._wire_admin", "boxmaker.proto.wire._wire_passkey"}
    everything = _rooms_after("from boxmaker.proto.wire import *")
    assert everything == {f"boxmaker.proto.wire.{room[1:]}" for room in face._ROOMS}


def test_a_name_given_by_two_rooms_is_refused() -> None:
    with pytest.raises(ValueError, match=r"given by \._a and \._b"):
        lazy_face("pkg", {}, {"._a": ("X",), "._b": ("X",)})
