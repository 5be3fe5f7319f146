"""`Decision` and `Ask`: built only by `decide`/`redecide` (01-architecture).

Their constructors always raise TypeError: the policy builds one without
calling them (`_new`), so a handler elsewhere cannot make up its own
"allowed": calling `Decision(...)` or `attrs.evolve(decision, ...)` outside
the policy raises TypeError.  (A guard against mistakes, not against hostile
code: Python cannot stop `object.__new__`.)

The words are built when someone reads them (issue 23): `decide` stores the
verdict's facts and a formatter; the reason, the matched and applicable ids,
a denial's outcome and the typed arguments of a call D2 took the short way
are each made on their first read, stored, and are then plain attributes.
Equality, `repr` and `attrs.fields` see the same fields as before.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from os import PathLike, fsdecode
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar

import attrs

from .. import _error_table
from .._error_table import DENIAL_RUNBOOKS
from ..proto._convert import register_tagged_union
from ..proto._taint import Label, Taint
from ..proto.tools import ParsedArgs

DenialCode = Literal[
    "unknown_tool",
    "bad_args",
    "protected",
    "no_grant",
    "denied_by_grant",
    "taint",
    "grants_invalid",
    "changed",
    "sources_invalid",
    "source_unpinned",
]

GRANTS_INVALID_RUNBOOK: Final = DENIAL_RUNBOOKS["grants_invalid"]


@attrs.frozen(kw_only=True)
class Allowed:
    """`{"allowed": {}}`."""


@attrs.frozen(kw_only=True)
class Denied:
    """`{"denied": {"code", "reason"}}`."""

    code: _error_table.DenialCode
    reason: str


Outcome = Allowed | Denied
register_tagged_union(Outcome, {"allowed": Allowed, "denied": Denied})


class CallLike(Protocol):
    """What `decide` reads of a call: any tool name, any JSON object of arguments."""

    @property
    def tool(self) -> str: ...

    @property
    def args(self) -> Mapping[str, Any]: ...


@attrs.frozen(kw_only=True)
class ToolCall:
    """A call to decide (bxctl explain and tests; brokerd passes its wire `call`)."""

    tool: str
    args: dict[str, Any]


def _normalise_protected(path: str | PathLike[str]) -> str:
    text = fsdecode(path)
    if not text.startswith("/"):
        raise ValueError(f"a protected path must be absolute: {text!r}")
    norm = posixpath.normpath(text)
    while norm.startswith("//"):
        norm = norm[1:]
    return norm


@attrs.frozen(kw_only=True)
class ProtectedPaths:
    """boxmaker's own paths (D2b), lexically normalised, no request may touch them."""

    paths: tuple[str, ...]

    @classmethod
    def of(cls, paths: Iterable[str | PathLike[str]]) -> ProtectedPaths:
        normalised = {_normalise_protected(p) for p in paths}
        return cls(paths=tuple(sorted(normalised)))

    _below: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False)
    """Each path with a / appended ("/" itself as it is): what a path below one starts with."""

    def __attrs_post_init__(self) -> None:
        below = tuple(base if base == "/" else base + "/" for base in self.paths)
        object.__setattr__(self, "_below", below)

    def covering(self, path: str) -> str | None:
        """The protected path that `path` equals or lies below, or None."""
        if not path.startswith(self._below) and path not in self.paths:
            return None  # the common case, in one step
        for base in self.paths:
            if base in ("/", path) or path.startswith(base + "/"):
                return base
        return None


NO_PROTECTED_PATHS: Final = ProtectedPaths(paths=())

T = TypeVar("T")

Words = Callable[[dict[str, Any], str], Any]
"""The formatter of a decision's words: the value of a lazy field (`_LAZY`) by name, from
the decision's own state (its `__dict__`); AttributeError for a field it does not make."""

_LAZY: Final = frozenset({"outcome", "reason", "matched", "applicable", "args"})


def _guard(name: str) -> None:
    raise TypeError(f"a {name} is built only by boxmaker.policy.decide/redecide")


def _lazy(obj: object, name: str) -> Any:
    """A lazy field's value, made on its first read and then stored."""
    state = obj.__dict__
    words: Words | None = state.get("_words")
    if words is None or name not in _LAZY:
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    value = state[name] = words(state, name)
    return value


@attrs.frozen(kw_only=True, slots=False)
class Decision:
    """The final word on a call: allowed, or denied with a code and a reason."""

    tool: str
    args: ParsedArgs | None
    """The strictly parsed arguments (None when D1 or D2 refused them)."""
    outcome: Outcome
    reason: str
    """Why, for a person (also for an allowed call: explain prints it)."""
    grant: str | None
    """The winning grant's id, or None."""
    grant_entry: str | None
    """The winner's most specific matching entry: its path, or host pattern as written."""
    private_network: bool
    label: Label | None
    untrusted: bool | None
    """D8's result taint; None when no non-deny grant applies."""
    state: Taint
    """The taint the call was decided at."""
    matched: tuple[str, ...]
    applicable: tuple[str, ...]
    grants_digest: str
    effective_args: dict[str, Any] | None = None
    """12: an `mcp.*` call's effective arguments (defaults filled); None otherwise."""
    pin: str | None = None
    """12: the pin digest of an `mcp.*` call's server, when it was pinned."""

    def __attrs_post_init__(self) -> None:
        _guard("Decision")

    if not TYPE_CHECKING:  # mypy keeps checking every other attribute name
        def __getattr__(self, name: str) -> Any:
            return _lazy(self, name)

    @property
    def allowed(self) -> bool:
        return self.code is None

    @property
    def code(self) -> _error_table.DenialCode | None:
        """The denial code (read without making the words): the policy's, or brokerd's
        own for a `refusal`."""
        code: _error_table.DenialCode | None = self.__dict__["_code"]
        return code

    @property
    def runbook(self) -> str | None:
        """The runbook pointer of the denial (02-wire): `grants_invalid`'s, and the tool
        sources' (`sources_invalid`, `source_unpinned`)."""
        if self.code in ("grants_invalid", "sources_invalid", "source_unpinned"):
            return DENIAL_RUNBOOKS[self.code]
        return None


@attrs.frozen(kw_only=True, slots=False)
class Ask:
    """A call that waits for the owner; it becomes a Decision only through `redecide`."""

    tool: str
    raw_args: Mapping[str, Any]
    """The call's arguments as received, for the re-decision."""
    args: ParsedArgs | None
    """The parsed arguments (None for an `mcp.*` call: `effective_args`)."""
    reason: str
    grant: str
    grant_entry: str | None
    private_network: bool
    label: Label | None
    untrusted: bool | None
    state: Taint
    matched: tuple[str, ...]
    applicable: tuple[str, ...]
    grants_digest: str
    protected: ProtectedPaths
    """The protected paths it was decided with (to say what changed)."""
    effective_args: dict[str, Any] | None = None
    pin: str | None = None
    sources_digest: str | None = None
    """12: the tool-source set's digest it was decided with (`mcp.*` calls)."""

    def __attrs_post_init__(self) -> None:
        _guard("Ask")

    if not TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any:
            return _lazy(self, name)


def _defaults(cls: type) -> dict[str, Any]:
    """The fields of `cls` that have an immutable default (a field added later with a
    default is set by `_new` without every builder naming it)."""
    found = _DEFAULTS.get(cls)
    if found is None:
        found = _DEFAULTS[cls] = {
            f.name: f.default for f in attrs.fields(cls)
            if isinstance(f.default, _PLAIN)}
    return found


_DEFAULTS: dict[type, dict[str, Any]] = {}
_PLAIN: Final = (str, int, float, tuple, frozenset, type(None))
"""The defaults `_new` sets: immutable values (not a factory, not NOTHING)."""


def _new(cls: type[T], fields: dict[str, Any]) -> T:
    """A Decision or an Ask with these fields (and the class's defaults for the ones
    not given), and `_words` for the lazy ones; a Decision also takes `_code`
    (this package only)."""
    made = object.__new__(cls)
    defaults = _defaults(cls)
    for name in defaults:
        if name not in fields:
            fields = {**defaults, **fields}
            break
    object.__setattr__(made, "__dict__", fields)
    return made


def _new_whole(cls: type[T], fields: dict[str, Any]) -> T:
    """`_new` for fields that name every field with a default too (`decide`'s own):
    the dict becomes the instance's state as it is."""
    made = object.__new__(cls)
    object.__setattr__(made, "__dict__", fields)
    return made


def refusal(code: _error_table.DenialCode, reason: str, *, tool: str, state: Taint,
            grant: str | None = None, grants_digest: str = "") -> Decision:
    """A denial brokerd reaches on its own, in the policy's one shape: arguments too
    long to record (`bad_args`, before the policy sees them), or an ask with no room
    (`too_many_pending`, `approvals_exhausted`)."""
    return _new(Decision, {
        "tool": tool, "args": None, "outcome": Denied(code=code, reason=reason),
        "reason": reason, "grant": grant, "grant_entry": None, "private_network": False,
        "label": None, "untrusted": None, "state": state, "matched": (), "applicable": (),
        "grants_digest": grants_digest, "_code": code,
    })
