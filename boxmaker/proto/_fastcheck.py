"""Compiled checkers: a faster twin of the strict converter for hot paths.

`compile_checkers` generates, from attrs classes, one Python function per
class that takes a parsed JSON value and returns the instance, accepting only
what the strict converter (`_convert`) accepts, and raising `Mismatch` or
`KeyError` for anything else.  A caller then asks the converter, which is the
authority and says what is wrong.  Only the types audit records use are
supported: U64, str, bool, JsonObject, Literal words, ``X | None``, attrs
classes and externally tagged unions.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import attrs

from .._errors import InternalSignal
from ._convert import U64, U64_MAX, JsonObject

Check = Callable[[Any], Any]


class Mismatch(InternalSignal):
    """The fast checker does not accept the value; ask the converter."""


class _Source:
    """Python source of one checker function per attrs class."""

    def __init__(
        self,
        tagged: dict[Any, dict[str, type[Any]]],
        json_names: dict[tuple[type[Any], str], str],
        slow: frozenset[Any],
    ) -> None:
        self.tagged = tagged
        self.json_names = json_names
        self.slow = slow
        self.namespace: dict[str, Any] = {"Mismatch": Mismatch, "U64_MAX": U64_MAX}
        self.done: dict[type[Any], str] = {}
        self.lines: list[str] = []
        self.tables: list[str] = []

    def name_of(self, obj: Any, hint: str) -> str:
        name = f"_{hint}_{len(self.namespace)}"
        self.namespace[name] = obj
        return name

    def function_for(self, cls: type[Any]) -> str:
        if cls in self.done:
            return self.done[cls]
        fname = f"check_{cls.__name__}_{len(self.done)}"
        self.done[cls] = fname
        hints = get_type_hints(cls)
        fields = attrs.fields(cls)
        # A field whose default is None may be left out (newer than the format).
        required = sum(1 for field in fields if field.default is not None)
        body = [
            f"def {fname}(v):",
            f"    if type(v) is not dict or not {required} <= len(v) <= {len(fields)}:",
            "        raise Mismatch",
        ]
        for index, field in enumerate(fields):
            json_name = self.json_names.get((cls, field.name), field.name)
            if field.default is None:
                body.append(f"    x{index} = v.get({json_name!r})")
            else:
                body.append(f"    x{index} = v[{json_name!r}]")
            body.extend("    " + line for line in self.test(f"x{index}", hints[field.name]))
        args = ", ".join(f"{field.name}=x{index}" for index, field in enumerate(fields))
        body.append(f"    return {self.name_of(cls, 'cls')}({args})")
        self.lines.extend([*body, ""])
        return fname

    def test(self, var: str, tp: Any) -> list[str]:
        """Lines that check `var` against `tp`, possibly rebinding it."""
        if tp in self.slow:
            return [f"if {var} is not None:", "    raise Mismatch"]
        if tp is U64:
            return [
                f"if type({var}) is not int or not 0 <= {var} <= U64_MAX:",
                "    raise Mismatch",
            ]
        simple = {str: "str", bool: "bool", JsonObject: "dict"}
        if tp in simple:
            return [f"if type({var}) is not {simple[tp]}:", "    raise Mismatch"]
        if tp in self.tagged:
            tags = {tag: self.function_for(cls) for tag, cls in self.tagged[tp].items()}
            table = self.name_of(tags, "tags")
            self.tables.append(table)
            return [
                f"if type({var}) is not dict or len({var}) != 1:",
                "    raise Mismatch",
                f"(({var}_tag, {var}_inner),) = {var}.items()",
                f"{var} = {table}[{var}_tag]({var}_inner)",
            ]
        origin = get_origin(tp)
        if origin is Literal:
            words = frozenset(get_args(tp))
            if not all(type(word) is str for word in words):  # pragma: no cover - our bug
                raise TypeError(f"only Literal words are supported, not {tp!r}")
            table = self.name_of(words, "words")
            return [f"if type({var}) is not str or {var} not in {table}:", "    raise Mismatch"]
        if origin in (Union, UnionType):
            members = [arg for arg in get_args(tp) if arg is not type(None)]
            if len(members) != 1 or len(get_args(tp)) != 2:  # pragma: no cover - our bug
                raise TypeError(f"only X | None is supported, not {tp!r}")
            return [f"if {var} is not None:", *("    " + x for x in self.test(var, members[0]))]
        if attrs.has(tp):
            return [f"{var} = {self.function_for(tp)}({var})"]
        raise TypeError(f"no fast check for {tp!r}")  # pragma: no cover - our own bug


def compile_checkers(
    types: dict[str, type[Any]],
    *,
    tagged: dict[Any, dict[str, type[Any]]],
    json_names: dict[tuple[type[Any], str], str],
    slow: frozenset[Any] = frozenset(),
) -> dict[str, Check]:
    """One checker per entry of `types`.

    `tagged` maps each externally tagged union type to its tags; `json_names`
    maps (class, field name) to the JSON key where they differ; a field of a
    type in `slow` is only accepted as None (any other value: ask the converter).
    A field whose default is None may be absent (then None); the caller
    re-encodes what it built, so a null written out is still refused there.
    """
    source = _Source(tagged, json_names, slow)
    names = {key: source.function_for(cls) for key, cls in types.items()}
    namespace = source.namespace
    exec("\n".join(source.lines), namespace)
    for table in source.tables:  # tag -> function name becomes tag -> function
        namespace[table] = {tag: namespace[name] for tag, name in namespace[table].items()}
    return {key: namespace[name] for key, name in names.items()}
