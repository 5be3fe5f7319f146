"""Drafting grants from history (`bxctl grants suggest`, 07-bxctl): pure, no I/O.

Two kinds of suggestion, from the calls in the window (`--since`):

- `ask`: calls denied `no_grant` when they were made and still now get the
  narrowest `ask` grant that covers them: the file (or directory) itself, or
  the parent directory when several paths below it were asked for; for a
  fetch (`http_fetch`) the exact host (with its port when not the default),
  never a wildcard; for a tool whose grants list neither (`echo`) its one grant;
  for `run_command`, the prefixes of `suggest_commands` (_command_suggest.py:
  a shell, an exec wrapper or an interpreter only as its exact argv with
  `rest = "none"`), `paths` the call's `cwd`.
- `replace`: an `ask` grant the owner approved at least `min_approvals` times
  in the window and never refused (anywhere in the log) becomes the same grant
  (same `id`) with `mode = "allow"` and `when_untrusted` at least `ask`; never a
  run_command grant that G20 keeps `ask` (a shell with `rest` other than `none`).

Taint is never laundered: `label` is the highest label of the grants that
decided the calls (the replaced grant's; `private` when none did), `untrusted`
is inherited and always true for a tool untrusted by default, `max_label` is the highest
session label seen among the calls; for a replacement, among the calls the
grant allowed or the owner approved only, and a grant asked at a higher label
than those keeps `ask` (no grant can allow below a label and ask above it).
Never a protected path, a path at or below a `deny` grant's path (of any file
tool), or a host a `deny` grant names.

`SuggestGather` collects while the log is read (pass 1).  `SuggestCheck`
replays the log against the current grants and the draft (`draft_state`, the
rendered text parsed back) and attributes every changed call; a suggestion
that changes a call it does not name is narrowed (a directory to its files) or
dropped, and the log is replayed again, until the draft changes exactly the
calls it names (`revise`).  The comments name those calls.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Final, Literal

import attrs

from ..proto._escape import escape_line
from ..proto._grammar import Url, parse_url
from ..proto._taint import Label, max_label
from ..proto.audit import HistoryApproval, HistoryCall
from ..proto.tools import CATALOGUE
from ._command_suggest import (
    CommandSuggestion,
    allow_is_valid,
    command_field_lines,
    suggest_commands,
)
from ._commands import CommandGrant, match_command
from ._decision import ProtectedPaths
from ._grants import parse_grant_texts
from ._model import Grant, GrantSet, InvalidGrantSet
from ._replay import Redecided, Redecider, call_words
from ._suggest_toml import render_grant_lines

MAX_ENTRIES: Final = 10_000
"""Distinct paths and hosts kept from the no_grant calls (beyond: noted, left out)."""
MAX_WAITING: Final = 65_536
"""Asked calls whose approval has not been read yet."""
SHOWN_CALLS: Final = 20
"""Calls named in the comment of one suggestion (then "and N more")."""

Kind = Literal["ask", "replace"]


@attrs.define(kw_only=True)
class Candidate:
    kind: Kind
    tool: str
    entries: list[str]
    """Paths, or host patterns as written."""
    http: bool = False
    label: Label = "private"
    untrusted: bool = False
    max_label: Label = "public"
    replaces: Grant | None = None
    files: list[str] = attrs.field(factory=list)
    """A directory suggestion: the paths below it that were asked for."""
    why: str = ""
    id: str = ""
    covered: list[HistoryCall] = attrs.field(factory=list)
    covered_count: int = 0
    command: CommandSuggestion | None = None
    """A run_command ask suggestion: its prefix, `rest`, `paths` and examples."""

    def grant_lines(self) -> list[str]:
        if self.replaces is not None:
            g = self.replaces
            entries = (list(g.paths) if g.tool in CATALOGUE.path_tools
                       or g.tool in CATALOGUE.command_tools else [h.text for h in g.hosts])
            c = g.command
            fields = (command_field_lines(c.write, c.commands, c.rest)
                      if isinstance(c, CommandGrant) else [])
            return render_grant_lines(
                id=self.id, tool=g.tool, mode="allow", entries=entries, label=g.label,
                untrusted=g.untrusted or CATALOGUE[g.tool].untrusted, max_label=self.max_label,
                when_untrusted=g.when_untrusted, http=g.http,
                private_network=g.private_network, note=g.note, fields=fields)
        return render_grant_lines(
            id=self.id, tool=self.tool, mode="ask", entries=self.entries, label=self.label,
            untrusted=self.untrusted, max_label=self.max_label, when_untrusted="ask",
            http=self.http, private_network=False, note=None,
            fields=[] if self.command is None else self.command.field_lines())


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:40].strip("-") or "x"


def _host_entry(url: Url) -> tuple[str, bool]:
    """The narrowest pattern for a URL's host, and whether it needs `http = true`."""
    http = url.scheme == "http"
    default = 80 if http else 443
    port = url.effective_port
    return (url.host if port == default else f"{url.host}:{port}"), http


def _deny_names_host(grants: GrantSet, host: str) -> bool:
    return any(p.matches_host(host) for g in grants.grants if g.mode == "deny"
               for p in g.hosts)


def _below_deny(grants: GrantSet, path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for g in grants.grants
               if g.mode == "deny" for d in g.paths)


class SuggestGather:
    """Pass 1: what the window's calls ask for, and how the owner answered."""

    def __init__(self, grants: GrantSet, protected: ProtectedPaths, min_approvals: int) -> None:
        self.grants = grants
        self.protected = protected
        self.min_approvals = min_approvals
        self._paths: dict[tuple[Any, Any], Label] = {}
        """(tool, path) -> the highest session label seen"""
        self._hosts: dict[tuple[Any, Any, Any], Label] = {}
        """(tool, host pattern, http) -> the highest session label seen"""
        self._bare: dict[str, Label] = {}
        """tool whose grants list neither paths nor hosts -> the highest session label seen"""
        self._commands: dict[tuple[str, tuple[str, ...], str], Label] = {}
        """(tool, argv, cwd) of a command tool -> the highest session label seen"""
        self.left_out = 0
        self._waiting: dict[int, tuple[str, bool, Label]] = {}
        self._approved: dict[str, int] = {}
        self._approved_labels: dict[str, Label] = {}
        """grant -> the highest session label of the calls it allowed or the owner approved"""
        self._refused: set[str] = set()
        self._ask_labels: dict[str, Label] = {}

    def on_call(self, call: HistoryCall, now: Redecided, in_window: bool) -> None:
        if call.outcome == "ask" and call.grant is not None:
            waiting = self._waiting
            if len(waiting) >= MAX_WAITING:
                del waiting[next(iter(waiting))]
            waiting[call.seq] = (call.grant, in_window, call.state.label)
        if not in_window:
            return
        label = call.state.label
        if call.outcome == "allowed" and call.grant is not None:
            self._note_approved(call.grant, label)
        if now.outcome == "ask" and now.grant is not None:
            seen = self._ask_labels.get(now.grant)
            self._ask_labels[now.grant] = label if seen is None else max_label(seen, label)
        if call.outcome != "denied:no_grant" or now.outcome != "denied:no_grant":
            return
        args = call.args()
        if call.tool in CATALOGUE.command_tools:
            self._add(self._commands, (call.tool, tuple(args["argv"]), args["cwd"]), label)
            return
        entry = CATALOGUE[call.tool]
        target = entry.target
        if entry.entries == "paths" and target is not None:
            self._add(self._paths, (call.tool, args[target.name]), label)
        elif entry.entries == "hosts" and target is not None:
            self._add(self._hosts, (call.tool, *_host_entry(parse_url(args[target.name]))),
                      label)
        elif entry.entries is None:
            seen = self._bare.get(call.tool)
            self._bare[call.tool] = label if seen is None else max_label(seen, label)

    def _add(self, table: dict[Any, Label], key: tuple[Any, ...], label: Label) -> None:
        known = table.get(key)
        if known is None and (len(self._paths) + len(self._hosts) + len(self._commands)
                              >= MAX_ENTRIES):
            self.left_out += 1
            return
        table[key] = label if known is None else max_label(known, label)

    def on_approval(self, approval: HistoryApproval) -> None:
        entry = self._waiting.pop(approval.call, None)
        if entry is None:
            return
        grant, in_window, label = entry
        if approval.refused:
            self._refused.add(grant)
        elif approval.approved and in_window:
            self._approved[grant] = self._approved.get(grant, 0) + 1
            self._note_approved(grant, label)

    def _note_approved(self, grant: str, label: Label) -> None:
        seen = self._approved_labels.get(grant)
        self._approved_labels[grant] = label if seen is None else max_label(seen, label)

    # -- the suggestions -------------------------------------------------------------

    def _path_ok(self, path: str) -> bool:
        return self.protected.covering(path) is None and not _below_deny(self.grants, path)

    def candidates(self) -> list[Candidate]:
        out: list[Candidate] = []
        by_parent: dict[tuple[str, str], list[tuple[str, Label]]] = {}
        for (tool, path), label in sorted(self._paths.items()):
            if self._path_ok(path):
                by_parent.setdefault((tool, posixpath.dirname(path)), []).append((path, label))
        for (tool, parent), items in sorted(by_parent.items()):
            top = max((label for _, label in items), key=("public", "private", "secret").index)
            if len(items) > 1 and parent.count("/") >= 2 and self._path_ok(parent):
                out.append(Candidate(kind="ask", tool=tool, entries=[parent],
                                     files=[p for p, _ in items], max_label=top,
                                     why=f"{len(items)} paths below it were denied no_grant"))
                continue
            for path, label in items:
                out.append(Candidate(kind="ask", tool=tool, entries=[path],
                                     max_label=label, why="denied no_grant"))
        for (tool, entry, http), label in sorted(self._hosts.items()):
            if not _deny_names_host(self.grants, entry.partition(":")[0]):
                out.append(Candidate(kind="ask", tool=tool, entries=[entry], http=http,
                                     untrusted=CATALOGUE[tool].untrusted, max_label=label,
                                     why="denied no_grant"))
        out.extend(self._command_candidates())
        for tool, label in sorted(self._bare.items()):
            out.append(Candidate(kind="ask", tool=tool, entries=[], max_label=label,
                                 why="denied no_grant"))
        for grant_id, approved in sorted(self._approved.items()):
            grant = self.grants.get(grant_id)
            if (grant is None or grant.mode != "ask" or grant_id in self._refused
                    or approved < self.min_approvals or not self._replaceable(grant)):
                continue
            reach = self._approved_labels.get(grant_id, "public")
            if max_label(reach, self._ask_labels.get(grant_id, "public")) != reach:
                continue  # asked above what was approved: those calls may only keep ask
            out.append(Candidate(
                kind="replace", tool=grant.tool, entries=[], replaces=grant,
                max_label=reach,
                why=f"approved {approved} time{'s' if approved != 1 else ''}, never refused"))
        assign_ids(out, self.grants)
        return out

    def _command_candidates(self) -> list[Candidate]:
        out: list[Candidate] = []
        tools = sorted({tool for tool, _, _ in self._commands})
        for tool in tools:
            calls = [(argv, cwd, label) for (t, argv, cwd), label in self._commands.items()
                     if t == tool and self._path_ok(cwd)]
            for suggestion in suggest_commands((argv, cwd) for argv, cwd, _ in calls):
                drafted = suggestion.grant("draft")
                top: Label = "public"
                for argv, cwd, label in calls:
                    if match_command(drafted, argv, cwd) is not None:
                        top = max_label(top, label)
                out.append(Candidate(kind="ask", tool=tool, entries=list(suggestion.paths),
                                     untrusted=True, max_label=top, command=suggestion,
                                     why="denied no_grant"))
        return out

    def _replaceable(self, grant: Grant) -> bool:
        if any(not self._path_ok(p) for p in grant.paths):
            return False
        if isinstance(grant.command, CommandGrant) and not allow_is_valid(grant.command):
            return False  # G20: a shell or an interpreter with more after it stays ask
        return not any(_deny_names_host(self.grants, h.name) for h in grant.hosts)


def assign_ids(candidates: list[Candidate], grants: GrantSet) -> None:
    taken = {g.id for g in grants.grants}
    for c in candidates:
        if c.replaces is not None:
            c.id = c.replaces.id
    for c in candidates:
        if c.replaces is not None:
            continue
        where = c.entries[0] if c.entries else "all"
        if c.command is not None:
            where = posixpath.basename(c.command.prefix[0][0]) or "command"
        elif c.tool in CATALOGUE.path_tools:
            where = posixpath.basename(where) or where
        base = f"{c.tool.replace('_', '-')}-{_slug(where)}"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        c.id = name


def draft_state(grants: GrantSet, draft_text: str) -> GrantSet:
    """The grant set with the draft applied: its grants added, the replaced ones taken out.

    Raises ValueError when the draft does not parse on its own (our own bug)."""
    parsed = parse_grant_texts({"suggested.toml": draft_text})
    if isinstance(parsed, InvalidGrantSet):
        problems = "; ".join(p.message for p in parsed.report.problems)
        raise ValueError(f"the draft does not pass grants check: {problems}")
    replaced = {g.id for g in parsed.grants}
    kept = [g for g in grants.grants if g.id not in replaced]
    return GrantSet.of([*kept, *parsed.grants], digest="draft")


class SuggestCheck:
    """Pass 2 and after: which calls the draft changes, and which suggestions go too far."""

    def __init__(self, candidates: list[Candidate], current: Redecider, draft: Redecider) -> None:
        self.candidates = candidates
        self.current = current
        self.draft = draft
        self._by_id = {c.id: c for c in candidates}
        self._replacing = {c.id: c for c in candidates if c.kind == "replace"}
        self.offenders: set[str] = set()
        self.unattributed = 0
        for c in candidates:
            c.covered, c.covered_count = [], 0

    def on_call(self, call: HistoryCall) -> None:
        now = self.current(call)
        then = self.draft(call)
        if now.outcome == then.outcome:
            return
        owner: Candidate | None = None
        if (then.outcome == "ask" and now.outcome == "denied:no_grant"
                and call.outcome == "denied:no_grant"):
            owner = self._by_id.get(then.grant or "")
            if owner is not None and owner.kind != "ask":
                owner = None
        elif now.outcome == "ask" and then.outcome == "allowed":
            owner = self._replacing.get(now.grant or "")
        if owner is not None:
            owner.covered_count += 1
            if len(owner.covered) < SHOWN_CALLS:
                owner.covered.append(call)
            return
        blamed = {g for g in (then.grant, now.grant, *then.matched) if g in self._by_id}
        if not blamed:
            self.unattributed += 1
        self.offenders |= blamed

    def revise(self) -> list[Candidate] | None:
        """The narrowed candidates, or None when nothing went too far."""
        idle = {c.id for c in self.candidates if c.covered_count == 0}
        if not self.offenders and not self.unattributed and not idle:
            return None
        if self.unattributed:
            return []
        out: list[Candidate] = []
        for c in self.candidates:
            if c.id in idle and c.id not in self.offenders:
                continue  # changes nothing in the log: nothing to show for it
            if c.id not in self.offenders:
                out.append(c)
            elif c.files:
                out.extend(Candidate(kind="ask", tool=c.tool, entries=[p], max_label=c.max_label,
                                     why="denied no_grant") for p in c.files)
        return out


def comment_lines(c: Candidate, file_of: str | None) -> list[str]:
    if c.replaces is not None:
        head = (f"# replaces grant {c.id} in {file_of or c.replaces.file} ({c.why}): "
                "take that one out when you add this")
    elif c.command is not None:
        head = (f"# ask before {c.tool} of {c.command.words()} ({c.command.rest} after it) "
                f"in {', '.join(c.entries)} ({c.why})")
    else:
        head = f"# ask before {c.tool} of {', '.join(c.entries) or 'any text'} ({c.why})"
    lines = [escape_line(head)]
    word = "allows" if c.kind == "replace" else "asks for"
    lines.append(f"# {word} {c.covered_count} call{'s' if c.covered_count != 1 else ''} "
                 "of the log that it covers:")
    lines.extend(f"#   {call_words(call)}" for call in c.covered)
    if c.covered_count > len(c.covered):
        lines.append(f"#   ... and {c.covered_count - len(c.covered)} more")
    return lines


def render_draft(candidates: list[Candidate], header: list[str], *,
                 with_comments: bool = True) -> str:
    lines = [f"# {line}" if line else "#" for line in header]
    for c in candidates:
        lines.append("")
        if with_comments:
            lines.extend(comment_lines(c, None))
        lines.extend(c.grant_lines())
    return "\n".join(lines) + "\n"
