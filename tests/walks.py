"""The walk recorder shared by the walk tests (tests/brokerd/test_call_walk.py,
tests/loopd/test_turn_walk.py).

`sys.setprofile(Walks(roles).profile)` records every Python frame entered.
Frames of the modules in `roles` are grouped into *visits*: a visit to a role
starts when a new frame of it is entered through one of its entry points from a
frame of another role, and takes in every frame it calls of its own role.
Frames of any other module are transparent: they neither start nor end a visit.
So is a frame of an entry-restricted role entered other than through its entry
(an attrs validator, a property read, a constructor): reading or building a
value is not a visit.  A resumed coroutine is the same frame, not a new visit.
A frame whose nearest recorded caller is none (a trio task's first frame) starts
a root.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

Roles = Sequence[tuple[str, str, frozenset[str] | None]]
"""(role, module, entry points: None for every function); a role may name several modules."""


@attrs.define(eq=False)
class Visit:
    role: str
    entry: str
    children: list[Visit] = attrs.field(factory=list)

    def shape(self) -> Any:
        """(role, [children's shapes]) or the role alone, for messages."""
        return (self.role, [c.shape() for c in self.children]) if self.children else self.role


class Walks:
    """The visits recorded by a profile function."""

    def __init__(self, roles: Roles) -> None:
        self._files: dict[str, tuple[str, frozenset[str] | None]] = {}
        for role, name, entries in roles:
            module = importlib.import_module(name)
            assert module.__file__ is not None
            self._files[module.__file__] = (role, entries)
        self._seen: dict[int, types.FrameType] = {}
        self._visit_of: dict[int, Visit] = {}
        self.roots: list[Visit] = []

    def profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event != "call" or id(frame) in self._seen:
            return
        found = self._files.get(frame.f_code.co_filename)
        if found is None:
            return
        self._seen[id(frame)] = frame  # kept alive, so that its id names only it
        role, entries = found
        parent = self._parent(frame)
        if parent is not None and parent.role == role:
            self._visit_of[id(frame)] = parent
            return
        if entries is not None and frame.f_code.co_name not in entries:
            return  # a value read or built, not a visit
        visit = Visit(role=role, entry=frame.f_code.co_name)
        self._visit_of[id(frame)] = visit
        (parent.children if parent is not None else self.roots).append(visit)

    def _parent(self, frame: types.FrameType) -> Visit | None:
        back = frame.f_back
        while back is not None:
            visit = self._visit_of.get(id(back))
            if visit is not None:
                return visit
            back = back.f_back
        return None


def paths(visit: Visit, above: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    here = (*above, visit.role)
    yield here
    for child in visit.children:
        yield from paths(child, here)


def roles_in(visit: Visit) -> list[str]:
    return [visit.role] + [r for c in visit.children for r in roles_in(c)]


def contains(visit: Visit, role: str) -> bool:
    return role in roles_in(visit)
