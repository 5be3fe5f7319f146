"""Grants as values: `Grant`, `HostPattern`, `GrantSet`, the grants report.

Pure: no I/O.  A `GrantSet` is always complete and valid; an invalid set is an
`InvalidGrantSet` holding only its report (never a partial set).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import attrs

from ..proto._taint import Label
from ..proto.tools import CATALOGUE

Mode = Literal["allow", "ask", "deny"]
MODES: Final[tuple[Mode, ...]] = ("allow", "ask", "deny")
STRICTNESS: Final[dict[str, int]] = {"allow": 0, "ask": 1, "deny": 2}
"""allow < ask < deny."""

Rule = Literal[
    "G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8", "G9", "G10",
    "G17", "G18", "G19", "G20", "G21", "G22",
]
"""G10 is MCP tools' `args`, G17..G22 run_command's (12-tool-sources)."""

EMPTY_DIGEST: Final = hashlib.sha256(b"").hexdigest()

MEMO_SIZE: Final = 4096
"""Directories a `GrantSet` remembers the covering grant paths of, and hosts the naming
host patterns of (then each memo starts over)."""


@attrs.frozen(kw_only=True)
class HostPattern:
    """`name`, `*.name`, either optionally with `:PORT` (03-policy "Host patterns")."""

    text: str
    """As written in the grant file."""
    name: str
    """The name without ``*.`` and without the port."""
    wildcard: bool
    port: int | None

    def matches_host(self, host: str) -> bool:
        if self.wildcard:
            return host.endswith("." + self.name)
        return host == self.name

    @property
    def specificity(self) -> tuple[int, int, int]:
        """D6: an exact name beats a wildcard, then longer names, then a port."""
        return (0 if self.wildcard else 1, len(self.name), 0 if self.port is None else 1)


@attrs.frozen(kw_only=True, weakref_slot=False)
class Grant:
    """One valid `[[grant]]` table with every default applied.  (No `__weakref__` slot:
    nothing refers to a grant weakly, and 100,000 grants would pay 0.8 MB for it.)"""

    id: str
    tool: str
    """An available tool of the catalogue (G4)."""
    mode: Mode
    paths: tuple[str, ...]
    hosts: tuple[HostPattern, ...]
    label: Label
    untrusted: bool
    max_label: Label
    when_untrusted: Mode
    http: bool
    private_network: bool
    note: str | None
    file: str
    index: int
    command: object | None = None
    """A run_command grant's `policy._commands.CommandGrant` (prefixes, rest, write;
    `paths` is also here); None for every other tool.  (Typed `object` so that this
    module, which `_commands` imports, does not import it back.)"""
    args: Mapping[str, Mapping[str, Any]] | None = None
    """An `mcp.*` grant's argument constraints (G10 held; G11..G14 are checked
    against the pin when deciding); None for a built-in."""


@attrs.frozen(kw_only=True)
class GrantProblem:
    """One problem of a grant file: `index` is None for the whole file."""

    file: str
    index: int | None
    grant: str | None
    rule: Rule
    message: str


@attrs.frozen(kw_only=True)
class GrantsReport:
    """`{"ok", "count", "digest", "problems"}` (03-policy, admin `grants_check`)."""

    ok: bool
    count: int
    digest: str
    problems: list[GrantProblem]


def _index_by_tool(grants: tuple[Grant, ...]) -> dict[str, tuple[Grant, ...]]:
    by_tool: dict[str, list[Grant]] = {}
    for grant in grants:
        by_tool.setdefault(grant.tool, []).append(grant)
    return {tool: tuple(items) for tool, items in by_tool.items()}


PathGrants = Grant | tuple[Grant, ...]
"""The grants of one tool with one path: the grant itself when it is the only one (as
it almost always is), else a tuple of two or more in grant order."""


def _index_paths(grants: tuple[Grant, ...]) -> dict[str, dict[str, PathGrants]]:
    # tool -> path -> the grant, or the grants: no key tuple nor (grant, path) pair nor
    # tuple of one per path, since with 100,000 grants each costs megabytes (issue 23)
    index: dict[str, dict[str, PathGrants]] = {}
    shared: dict[tuple[str, str], list[Grant]] = {}
    for grant in grants:
        paths = index.get(grant.tool)
        if paths is None:
            paths = index[grant.tool] = {}
        for path in grant.paths:
            found = paths.get(path)
            if found is None:
                paths[path] = grant
            elif isinstance(found, Grant):
                shared[(grant.tool, path)] = [found, grant]
                paths[path] = ()  # filled below
            else:
                shared[(grant.tool, path)].append(grant)
    for (tool, path), items in shared.items():
        index[tool][path] = tuple(items)
    return index


def path_grants(found: PathGrants | None) -> tuple[Grant, ...]:
    """A `GrantSet.by_path` entry as a tuple (empty for None)."""
    if found is None:
        return ()
    return (found,) if isinstance(found, Grant) else found


def _path_lengths(grants: tuple[Grant, ...]) -> dict[str, tuple[int, ...]]:
    lengths: dict[str, set[int]] = {}
    for grant in grants:
        for path in grant.paths:
            lengths.setdefault(grant.tool, set()).add(len(path))
    return {tool: tuple(sorted(items)) for tool, items in lengths.items()}


def _index_hosts(
    grants: tuple[Grant, ...],
) -> dict[tuple[bool, str], tuple[tuple[Grant, HostPattern], ...]]:
    index: dict[tuple[bool, str], list[tuple[Grant, HostPattern]]] = {}
    for grant in grants:
        for pattern in grant.hosts:
            index.setdefault((pattern.wildcard, pattern.name), []).append((grant, pattern))
    return {key: tuple(items) for key, items in index.items()}


@attrs.frozen(kw_only=True)
class GrantSet:
    """A complete, valid grant set, indexed for `decide`."""

    grants: tuple[Grant, ...]
    digest: str
    by_tool: dict[str, tuple[Grant, ...]] = attrs.field(eq=False, repr=False)
    by_path: dict[str, dict[str, PathGrants]] = attrs.field(eq=False, repr=False)
    """tool -> grant path -> the grant with that path, or the grants (`PathGrants`)."""
    path_lengths: dict[str, tuple[int, ...]] = attrs.field(eq=False, repr=False)
    """tool -> the distinct lengths of its grant paths, ascending."""
    by_host: dict[tuple[bool, str], tuple[tuple[Grant, HostPattern], ...]] = attrs.field(
        eq=False, repr=False
    )
    """(wildcard, name) -> the grants with such a pattern (of the catalogue's one tool
    whose grants list hosts: a second one would key this by tool too)."""
    length_sets: dict[str, frozenset[int]] = attrs.field(eq=False, repr=False)
    """tool -> `path_lengths` as a set."""
    deny_paths: dict[str, tuple[str, ...]] = attrs.field(eq=False, repr=False)
    """file tool -> the paths the runner masks inside its directory mounts: the `deny`
    grants of that tool, and for a tool that writes (a read-write mount) those of every
    file tool; built once when the grants load (issue 23), never a walk per call."""
    by_id: dict[str, Grant] = attrs.field(eq=False, repr=False)
    covering: dict[tuple[str, str], tuple[tuple[Grant, str, tuple[int, ...]], ...]] = (
        attrs.field(factory=dict, eq=False, repr=False))
    """(tool, directory) -> the matches (grant, path, specificity) of the entries that the
    directory equals or lies below: a memo of `decide`'s (at most `MEMO_SIZE` entries),
    since the calls of a session tend to stay in a few directories."""
    naming: dict[str, tuple[tuple[Grant, HostPattern], ...]] = attrs.field(
        factory=dict, eq=False, repr=False
    )
    """host -> the (grant, pattern) pairs whose pattern names the host or, as a
    wildcard, a parent domain of it: a memo of `decide`'s (at most `MEMO_SIZE`
    entries), since the fetches of a session tend to go to a few hosts."""

    @classmethod
    def of(cls, grants: Iterable[Grant], digest: str) -> GrantSet:
        items = tuple(grants)
        lengths = _path_lengths(items)
        return cls(
            grants=items,
            digest=digest,
            by_tool=_index_by_tool(items),
            by_path=_index_paths(items),
            path_lengths=lengths,
            by_host=_index_hosts(items),
            length_sets={tool: frozenset(sizes) for tool, sizes in lengths.items()},
            deny_paths=_index_deny_paths(items),
            by_id={grant.id: grant for grant in items},
        )

    @property
    def ok(self) -> Literal[True]:
        return True

    @property
    def report(self) -> GrantsReport:
        return GrantsReport(ok=True, count=len(self.grants), digest=self.digest, problems=[])

    def get(self, grant_id: str) -> Grant | None:
        return self.by_id.get(grant_id)


def _index_deny_paths(grants: tuple[Grant, ...]) -> dict[str, tuple[str, ...]]:
    """See `GrantSet.deny_paths`: each path once, in grant order."""
    out: dict[str, tuple[str, ...]] = {}
    file_tools = CATALOGUE.path_tools
    for tool in sorted(file_tools):
        tools = file_tools if CATALOGUE[tool].writes else frozenset({tool})
        seen: dict[str, None] = {}
        for grant in grants:
            if grant.mode == "deny" and grant.tool in tools:
                seen.update(dict.fromkeys(grant.paths))
        out[tool] = tuple(seen)
    return out


@attrs.frozen(kw_only=True)
class InvalidGrantSet:
    """A grant set with problems (or a missing directory): every call is denied."""

    report: GrantsReport
    missing: bool = False
    """True when the grants directory does not exist (the report is then empty)."""

    @property
    def ok(self) -> Literal[False]:
        return False

    @property
    def digest(self) -> str:
        return self.report.digest


GrantState = GrantSet | InvalidGrantSet
"""What `decide` is given: a valid set, or the reason there is none."""
