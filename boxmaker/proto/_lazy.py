"""A package face that imports its rooms when a name is first asked for (PEP 562).

A face (`boxmaker.proto.wire`) re-exports the public names of its private
modules.  Importing every module to import the face costs a short-lived
process (bxctl) what it never uses: `bxctl status` needs admin.sock's
classes, not loop.sock's.  `lazy_face` gives the package a module
``__getattr__`` that imports the one module holding a name the first time
the name is read (``from boxmaker.proto.wire import Status`` reads it), and
keeps it in the package's namespace, so the next read is a plain lookup; and
a ``__dir__`` that lists every public name, imported or not.

The face still names each name statically: under ``TYPE_CHECKING`` it imports
them as before (mypy --strict sees the real types; no ``__getattr__`` is seen
by mypy, so a misspelt name is still an error), and its ``__all__`` lists them.
tests/proto/test_lazy.py holds the three lists (the table, the static imports,
``__all__``) equal.  Pure: importlib only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_face(package: str, namespace: dict[str, Any],
              rooms: Mapping[str, Iterable[str]]) -> tuple[Callable[[str], Any],
                                                          Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of `package`, whose globals are `namespace`.

    `rooms` maps each private module (relative: ``"._wire_admin"``) to the public
    names it gives the face.  A name given by two rooms is our own bug (ValueError).
    """
    where: dict[str, str] = {}
    for room, names in rooms.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}.{name} is given by {where[name]} and {room}")
            where[name] = room

    def __getattr__(name: str) -> Any:
        room = where.get(name)
        if room is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(room, package)
        for other, other_room in where.items():  # the room's every name, at once
            if other_room == room and other not in namespace:
                namespace[other] = getattr(module, other)
        return namespace[name]

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
