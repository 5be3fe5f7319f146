"""The judgement of `decide`, 03-policy D0..D8, without the words: pure (no I/O, no clock).

`judge` is the one implementation of the decision rules.  It returns a
`Verdict`: the denial code or the winner's effective mode, the parsed
arguments, the matching and applicable grants, the winner and D8's result
taint.  `decide` (`_decide.py`) turns a verdict into a `Decision` or an `Ask`
with its reason for a person; `bxctl grants replay` reads the verdict as it
is, since it needs only the outcome, the grant and the result taint of each
of a million recorded calls.

Steps, marked in the code:

- D0 an invalid grant set denies every call (`grants_invalid`);
- D1 unknown tool; D2 arguments (strict, grammars); D2b protected paths;
- D3 matching grants; D4 applicable grants; D5 effective mode;
- D6 the winner (strictest mode, then most specific entry, then smallest id);
- D7 no applicable grant: `taint` or `no_grant`;
- D8 the result taint over all applicable matching non-deny grants.

The grant set is indexed once when it is built (`GrantSet.of`): a call is
matched only against the grants of its tool with a path that is a prefix of
its path, or a host pattern that names its host or a parent domain of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, get_args

from ..proto._errors import DecodeError
from ..proto._grammar import Url, parse_url, path_problem
from ..proto._taint import LABELS, Label, Taint
from ..proto.tools import CATALOGUE, ArgsError, ParsedArgs, RunCommandArgs, Tool, parse_args
from ._commands import CommandGrant, command_protected, match_command
from ._decision import DenialCode, ProtectedPaths
from ._model import (
    MEMO_SIZE,
    STRICTNESS,
    Grant,
    GrantSet,
    GrantState,
    HostPattern,
    InvalidGrantSet,
    Mode,
    path_grants,
)

Match = tuple[Grant, str | None, tuple[int, ...]]
"""A matching grant, its most specific matching entry (path or host pattern as written,
None for a tool whose grants list neither) and that entry's specificity (D6)."""

_AVAILABLE: Final = frozenset(CATALOGUE.names)
_PATH_TOOLS: Final = CATALOGUE.path_tools
_RANK: Final[dict[str, int]] = {label: rank for rank, label in enumerate(LABELS)}
_OUTCOME: Final[dict[str, str]] = {"allow": "allowed", "ask": "ask"}
_DENIED: Final[dict[str, str]] = {code: f"denied:{code}" for code in get_args(DenialCode)}


class Verdict:
    """What D0..D8 make of one call (built by `judge` only)."""

    __slots__ = ("applicable", "code", "detail", "label", "long_way", "matched", "mode",
                 "short_way", "untrusted", "winner")

    def __init__(self, code: DenialCode | None, mode: Mode | None, parsed: ParsedArgs | None,
                 detail: str, matched: list[Match], applicable: list[Match],
                 winner: Match | None, label: Label | None, untrusted: bool | None,
                 short: _Short | None = None) -> None:
        self.code = code
        """The denial code, or None when the winner allows or asks."""
        self.mode = mode
        """The winner's effective mode (D5), or None when there is no winner."""
        self.long_way = parsed
        """The typed arguments when D2 went the long way (`parse_args`), else None."""
        self.short_way = short
        """What D2's short way took (`fast_target`), or None: the typed arguments are
        made of it when `parsed` is first read (`decide` stores the facts; the rest waits)."""
        self.detail = detail
        """D2's message for `bad_args`, the protected path for `protected`, else empty."""
        self.matched = matched
        self.applicable = applicable
        self.winner = winner
        self.label = label
        self.untrusted = untrusted
        """D8's result taint (None when no non-deny grant applies)."""

    @property
    def parsed(self) -> ParsedArgs | None:
        """The parsed arguments (D2), or None when D1 or D2 refused them."""
        parsed = self.long_way
        if parsed is None and self.short_way is not None:
            parsed = self.long_way = _fast_parsed(*self.short_way)
            self.short_way = None
        return parsed

    @property
    def outcome(self) -> str:
        """`allowed`, `ask` or `denied:<code>` (07-bxctl "Grants against history")."""
        if self.code is None:
            assert self.mode is not None
            return _OUTCOME[self.mode]
        return _DENIED[self.code]

    @property
    def grant(self) -> str | None:
        """The winning grant's id, or None."""
        return None if self.winner is None else self.winner[0].id

    @property
    def matched_ids(self) -> tuple[str, ...]:
        matched = self.matched
        if len(matched) == 1:
            return (matched[0][0].id,)
        return tuple(sorted(m[0].id for m in matched))

    @property
    def applicable_ids(self) -> tuple[str, ...]:
        return tuple(sorted(m[0].id for m in self.applicable))


_Short = tuple[str, "dict[str, Any] | None", "str | None", "Url | None"]
"""A call D2 took the short way: the tool, a copy of its arguments (each a `str`, so the
copy is all of them; None when the path is the one argument), the request path and the
URL."""


def _early(code: DenialCode, parsed: ParsedArgs | None = None, detail: str = "",
           short: _Short | None = None) -> Verdict:
    return Verdict(code, None, parsed, detail, [], [], None, None, None, short)


class _Shape:
    """The one shape of a tool's arguments that D2 can take the short way."""

    __slots__ = ("bounded", "kind", "limit", "name", "option", "words")

    def __init__(self, tool: Tool) -> None:
        required = [a for a in tool.args if a.required]
        optional = [a for a in tool.args if not a.required]
        self.kind = ""
        self.name = required[0].name if required else ""
        self.option: str | None = None
        self.words: tuple[str, ...] = ()
        self.bounded = ""
        self.limit = 0
        kinds = [a.kind for a in required]
        if kinds == ["write_path", "text", "enum"] and not optional:
            # write_file: a path, a bounded text, a word
            self.kind = "write"
            self.bounded, self.limit = required[1].name, required[1].max_bytes or 0
            self.option, self.words = required[2].name, required[2].words
        elif len(required) != 1 or any(a.max_bytes is not None for a in tool.args):
            return
        elif kinds[0] in ("path", "write_path", "text") and not optional:
            self.kind = "path" if kinds[0] != "text" else "text"
        elif kinds[0] == "url" and len(optional) <= 1 and all(a.kind == "enum" for a in optional):
            self.kind = "url"
            if optional:
                self.option, self.words = optional[0].name, optional[0].words


_SHAPES: Final[dict[str, _Shape]] = {
    tool.name: shape for tool in CATALOGUE if (shape := _Shape(tool)).kind}


def _fits(text: str, limit: int) -> bool:
    """`text` is valid UTF-8 (no lone surrogate) of at most `limit` bytes."""
    if len(text) > limit:
        return False
    if text.isascii():
        return True
    try:
        return len(text.encode("utf-8")) <= limit
    except UnicodeEncodeError:
        return False


def short_way(tool: str, raw_args: Mapping[str, Any]) -> tuple[str | None, Url | None] | str | None:
    """D2 the short way for the common shapes: the request path and URL; or D2's words
    for a path of the short shape that is not of the grammar; or None to go the long way
    (`parse_args`), which says what else is wrong.

    An argument object of exactly the tool's fields, each a `str` (a word one of its
    words, a bounded text within its bound), is what the strict converter would
    structure unchanged; the grammar is checked by the same functions.  Anything else
    goes the long way.  A property test holds the two equal."""
    if type(raw_args) is not dict:
        return None
    shape = _SHAPES.get(tool)
    if shape is None:
        return None
    size = len(raw_args)
    kind = shape.kind
    if kind in ("path", "write"):
        path = raw_args.get(shape.name)
        if type(path) is not str:
            return None
        if kind == "path":
            if size != 1:
                return None
        else:
            text, word = raw_args.get(shape.bounded), raw_args.get(shape.option or "")
            if (size != 3 or type(text) is not str or type(word) is not str
                    or word not in shape.words or not _fits(text, shape.limit)):
                return None
        problem = path_problem(path)
        if problem is None:
            return path, None
        return f"{shape.name}: {problem}"
    if kind == "url":
        text = raw_args.get(shape.name)
        option = shape.option
        present = option is not None and option in raw_args
        word = raw_args[option] if present else None
        if (type(text) is str and size == 1 + present
                and (not present or (type(word) is str and word in shape.words))):
            try:
                return None, parse_url(text)
            except DecodeError:
                pass  # the long way says it as D2 words it
    elif size == 1 and type(raw_args.get(shape.name)) is str:
        return None, None
    return None


def fast_target(tool: str, raw_args: Mapping[str, Any]) -> tuple[str | None, Url | None] | None:
    """`short_way`'s request path and URL, or None when it does not take them."""
    target = short_way(tool, raw_args)
    return None if isinstance(target, str) else target


def _fast_parsed(tool: str, raw_args: Mapping[str, Any] | None, path: str | None,
                 url: Url | None) -> ParsedArgs:
    """The `ParsedArgs` of arguments `fast_target` took (what `parse_args` returns);
    `raw_args` None for a tool whose one argument is the path."""
    cls = CATALOGUE[tool].args_class
    assert cls is not None
    if raw_args is None:
        raw_args = {_SHAPES[tool].name: path}
    return ParsedArgs(args=cls(**raw_args), path=path, url=url)


def parse_call_args(tool: str, raw_args: Mapping[str, Any]) -> ParsedArgs:
    """D2: `parse_args` (raises ArgsError), the short way when `fast_target` can."""
    target = fast_target(tool, raw_args)
    if target is None:
        return parse_args(tool, raw_args)
    return _fast_parsed(tool, raw_args, *target)


def _covers_port(grant: Grant, pattern: HostPattern, port: int, scheme: str) -> bool:
    """Scheme and port coverage of a host pattern (03-policy "Host patterns"), for a URL
    of this scheme and effective port."""
    if grant.mode == "deny":
        return pattern.port is None or pattern.port == port
    if scheme == "http" and not grant.http:
        return False
    if pattern.port is None:
        return port == (443 if scheme == "https" else 80)
    return port == pattern.port


def _naming(host: str, grants: GrantSet) -> tuple[tuple[Grant, HostPattern], ...]:
    """The (grant, pattern) pairs whose pattern is `host` itself or a wildcard over a
    parent domain of it, remembered per host (`GrantSet.naming`)."""
    memo = grants.naming
    found = memo.get(host)
    if found is None:
        by_host = grants.by_host
        candidates = list(by_host.get((False, host), ()))
        at = host.find(".")
        while at != -1:
            candidates.extend(by_host.get((True, host[at + 1 :]), ()))
            at = host.find(".", at + 1)
        found = tuple(candidates)
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[host] = found
    return found


def _offer(best: dict[str, Match], grant: Grant, entry: str | None,
           specificity: tuple[int, ...]) -> None:
    current = best.get(grant.id)
    if current is None or specificity > current[2]:
        best[grant.id] = (grant, entry, specificity)


def _entries_covering(tool: str, path: str, grants: GrantSet) -> tuple[tuple[Grant, str], ...]:
    """The (grant, entry) pairs of `tool` whose entry `path` equals or lies below."""
    # A grant path can only be a prefix that ends at a component boundary and has
    # the length of some grant path of this tool: look up only those prefixes.
    lengths = grants.path_lengths.get(tool, ())
    size = len(path)
    if len(lengths) <= path.count("/"):
        cuts = [n for n in lengths if n == size or (n < size and path[n] == "/")]
    else:
        wanted = grants.length_sets[tool]
        cuts = [size] if size in wanted else []
        at = path.find("/", 1)
        while at != -1:
            if at in wanted:
                cuts.append(at)
            at = path.find("/", at + 1)
    by_path = grants.by_path.get(tool, {})
    found: list[tuple[Grant, str]] = []
    for cut in cuts:
        entry = path[:cut]
        hit = by_path.get(entry)
        if hit is None:
            continue
        if isinstance(hit, Grant):
            found.append((hit, entry))
        else:
            found.extend((grant, entry) for grant in hit)
    return tuple(found)


def _file_matches(tool: str, path: str, grants: GrantSet) -> list[Match]:
    # The matches of the entries covering the path's directory are remembered
    # (`GrantSet.covering`); the path itself is looked up as it is.
    directory = path[: path.rfind("/")]
    key = (tool, directory)
    memo = grants.covering
    above = memo.get(key)
    if above is None:
        above = tuple((grant, entry, (len(entry),)) for grant, entry
                      in _entries_covering(tool, directory, grants)) if directory else ()
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[key] = above
    exact = grants.by_path.get(tool, {}).get(path)
    if exact is None:
        if len(above) <= 1:  # the common case: one grant, one entry (or none)
            return list(above)
        found = above
    elif not above and isinstance(exact, Grant):  # the other common case: the grant's path
        return [(exact, path, (len(path),))]
    else:
        found = above + tuple((grant, path, (len(path),)) for grant in path_grants(exact))
    best: dict[str, Match] = {}
    for grant, entry, specificity in found:
        _offer(best, grant, entry, specificity)
    return list(best.values())


def matches(tool: str, path: str | None, url: Url | None, grants: GrantSet) -> list[Match]:
    """D3: every grant of the tool that covers the request (the path of a tool whose
    grants list paths, the URL of one whose grants list hosts), with its best entry."""
    if tool in CATALOGUE.path_tools:
        assert path is not None
        return _file_matches(tool, path, grants)
    best: dict[str, Match] = {}
    if url is not None:
        port, scheme = url.effective_port, url.scheme
        naming = _naming(url.host, grants)
        if len(naming) == 1:  # the common case: one grant names the host
            grant, pattern = naming[0]
            if _covers_port(grant, pattern, port, scheme):
                return [(grant, pattern.text, pattern.specificity)]
            return []
        for grant, pattern in naming:
            if _covers_port(grant, pattern, port, scheme):
                _offer(best, grant, pattern.text, pattern.specificity)
    else:  # a tool whose grants list neither: a grant covers every call
        for grant in grants.by_tool.get(tool, ()):
            _offer(best, grant, None, ())
    return list(best.values())


def command_matches(tool: str, args: RunCommandArgs, grants: GrantSet,
                    protected: ProtectedPaths) -> tuple[list[Match], str | None]:
    """D3 for run_command (`policy/_commands.py`): every grant whose `paths` hold the
    cwd and one of whose prefixes matches argv with `rest` satisfied, its entry and
    its specificity (D6: prefix tokens, then the entry's length); and D2b over the
    joined ``rest = "paths"`` tokens of the matching grants (a protected base or None)."""
    found: list[Match] = []
    command_found = []
    for grant in grants.by_tool.get(tool, ()):
        command = grant.command
        assert isinstance(command, CommandGrant)
        hit = match_command(command, args.argv, args.cwd)
        if hit is not None:
            command_found.append(hit)
            found.append((grant, hit.entry, hit.specificity))
    base = command_protected(args.cwd, command_found, protected)
    return found, None if base is None else base[1]


def judge(tool: str, raw_args: Mapping[str, Any], taint: Taint, grants: GrantState,
          protected: ProtectedPaths, *, with_args: bool = True) -> Verdict:
    """D0..D8 for one call at a taint, against a grant state and the protected paths.

    Arguments taken the short way (`fast_target`) are typed when the verdict's `parsed`
    is first read; with `with_args` false that read gives None (replay never looks)."""
    # D0: no valid grant set, no call.
    if isinstance(grants, InvalidGrantSet):
        return _early("grants_invalid")
    # D1: unknown tool; the arguments are not parsed.
    if tool not in _AVAILABLE:
        return _early("unknown_tool")
    # D2: strict arguments and grammars.
    target = short_way(tool, raw_args)
    parsed: ParsedArgs | None = None
    short: _Short | None = None
    if isinstance(target, str):
        return _early("bad_args", None, target)
    if target is None:
        try:
            parsed = parse_args(tool, raw_args)
        except ArgsError as exc:
            return _early("bad_args", None, str(exc))
        path, url = parsed.path, parsed.url
    else:
        path, url = target
        if with_args:  # a copy (each value a str), or the path when it is all of them
            short = (tool, None if path is not None and len(raw_args) == 1 else dict(raw_args),
                     path, url)
    # D2b: boxmaker's own paths, whatever the grants say.
    if path is not None:
        base = protected.covering(path)
        if base is not None:
            return _early("protected", parsed, base, short)
    # D3: matching grants (run_command: by cwd, prefix and rest, then D2b for its paths).
    if parsed is not None and isinstance(parsed.args, RunCommandArgs):
        matched, base = command_matches(tool, parsed.args, grants, protected)
        if base is not None:
            return _early("protected", parsed, base)
    elif path is not None and tool in _PATH_TOOLS:
        matched = _file_matches(tool, path, grants)
    else:
        matched = matches(tool, path, url, grants)
    if not matched:  # D7
        return Verdict("no_grant", None, parsed, "", matched, [], None, None, None, short)
    # D4: applicable grants (a deny grant always applies; allow/ask up to its max_label);
    # D8: the result taint over the applicable non-deny grants; D5 + D6: the winner, by
    # the strictest effective mode, then the most specific entry, then the smallest id.
    rank = _RANK[taint.label]
    untrusted_session = taint.untrusted
    if len(matched) == 1:  # the common case, the same rules for one grant
        only = matched[0]
        grant = only[0]
        deny = grant.mode == "deny"  # a deny grant always applies, and taints nothing
        if not deny and rank > _RANK[grant.max_label]:
            return Verdict("taint", None, parsed, "", matched, [], None, None, None, short)
        mode: Mode = grant.when_untrusted if untrusted_session else grant.mode
        return Verdict("denied_by_grant" if mode == "deny" else None, mode, parsed, "",
                       matched, matched, only, None if deny else grant.label,
                       None if deny else grant.untrusted, short)  # applicable: the same
    applicable: list[Match] = []
    label: Label | None = None
    untrusted: bool | None = None
    winner: Match | None = None
    top: tuple[int, tuple[int, ...]] = (-1, ())
    for m in matched:
        grant = m[0]
        if grant.mode != "deny":
            if rank > _RANK[grant.max_label]:
                continue
            label = grant.label if label is None or _RANK[grant.label] > _RANK[label] else label
            untrusted = bool(untrusted) or grant.untrusted
        applicable.append(m)
        key = (STRICTNESS[grant.when_untrusted if untrusted_session else grant.mode], m[2])
        if winner is None or key > top or (key == top and grant.id < winner[0].id):
            winner, top = m, key
    # D7: nothing applies.
    if winner is None:
        return Verdict("taint", None, parsed, "", matched, applicable, None, None, None, short)
    mode = winner[0].when_untrusted if untrusted_session else winner[0].mode
    return Verdict("denied_by_grant" if mode == "deny" else None, mode, parsed, "", matched,
                   applicable, winner, label, untrusted, short)
