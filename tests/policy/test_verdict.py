"""The short ways of the policy equal the long ways (hypothesis).

- D2's short way (`fast_target`, `short_way`) for well-formed argument objects:
  whenever it takes the arguments, `parse_args` (the strict converter and the
  grammars) gives the same path, URL and parsed value; when it refuses a path,
  `parse_args` refuses it in the same words; otherwise it steps aside.
- The replay's `Redecider` (`judge` without the words, the arguments not built,
  a cache, and the grant set's memo of the grant paths covering a directory,
  warm from the calls before) says for each call what `decide` says with a
  fresh grant set: outcome, grant, result taint and the matching grants; and
  the indexed, memoised D3 of a file tool finds what a scan of every grant finds.
- A replay tally merged from batches equals the tally of the whole.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxmaker.policy import _verdict
from boxmaker.policy._decide import decide
from boxmaker.policy._decision import Ask, Decision, ProtectedPaths, ToolCall
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.policy._replay import Change, Redecided, Redecider, ReplayTally
from boxmaker.policy._verdict import fast_target, parse_call_args
from boxmaker.proto._taint import LABELS, Taint
from boxmaker.proto.audit._history import HistoryCall
from boxmaker.proto.tools import CATALOGUE, MAX_WRITE_CONTENT_BYTES, ArgsError, parse_args
from tests.conftest import examples

# Grant paths in a few levels, so that a request is covered at several depths, and
# more lengths than a request has components (both ways of cutting a path).
GRANT_PATHS = ["/a", "/a/b", "/a/b/c", "/a/bc", "/ab", "/b", "/b/a", "/a/b/c/d",
               "/a/b/c/d/e", "/a/b/c/dd", "/home/me/p1", "/home/me/p1/secret"]
REQUEST_PATHS = [*GRANT_PATHS, "/a/b/x", "/a/b/c/d/e/f", "/a/bcd", "/abc", "/c",
                 "/a/b/c/d/x", "/home/me/p1/notes/f.md", "/home/me/p1/secret/k",
                 "/home/me/p12/x", "/home/me", "/home/me/p1/secret/k/deeper"]
HOSTS = ["ex.org", "a.ex.org", "b.a.ex.org", "ex.io"]
IDS = ["a", "b", "c", "aa", "ab", "a1", "z", "m-n", "q"]
MODES = ["allow", "ask", "deny"]

strings = st.text(max_size=12) | st.sampled_from(
    ["", "/", "/a/", "/a//b", "/a/./b", "/a/../b", "a/b", "/a\x00", "/a\x1b[0m", "/a\u202e",
     "/a\ud800", "/a\n", "/a\x85", "GET", "HEAD", "get", "create", "append", "truncate",
     "https://ex.org/", "http://a.ex.org:8443/x?q", "https://EX.org", "https://ex.org/#f",
     "https://u@ex.org", "https://127.0.0.1", "https://ex.org:0", "https://ex.org/a%zz",
     "https://ex.org/caf\u00e9", "ftp://ex.org", *REQUEST_PATHS])
LIMIT = MAX_WRITE_CONTENT_BYTES  # write_file's content, in UTF-8 bytes
BIG_CONTENTS = ["a" * LIMIT, "a" * (LIMIT + 1), "\u00e9" * (LIMIT // 2),
                "\u00e9" * (LIMIT // 2) + "a", "\U0001f600" * (LIMIT // 4) + "\ud800",
                "\ud800" + "a" * LIMIT]
values = strings | st.sampled_from([None, 5, 0, True, False, 1.5, ["/a"], {"path": "/a"}])


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["https", "http", "https", "HTTPS"]))
    host = draw(st.sampled_from([*HOSTS, "zz.a.ex.org", "EX.org", "ex", "0x7f.1", "[::1]"]))
    port = draw(st.sampled_from(["", "", ":443", ":80", ":8443", ":065", ":65536"]))
    rest = draw(st.sampled_from(["", "/", "/x/y", "?q=1", "/a%20b", "/a%zz", "/#f", "/ x"]))
    return f"{scheme}://{host}{port}{rest}"


@st.composite
def argument_objects(draw: st.DrawFn, tool: str) -> Any:
    """Mostly the tool's own shape, often broken: a field missing, one more, a wrong type."""
    if draw(st.integers(0, 29)) == 7:
        return draw(st.sampled_from([[], "x", None, 5]))
    args: dict[str, Any] = {}
    if tool in ("read_file", "list_dir", "write_file"):
        args["path"] = draw(st.sampled_from(REQUEST_PATHS) | strings)
        if tool == "write_file":
            args["content"] = draw(st.sampled_from(["", "x", "\ud800", *BIG_CONTENTS]) | strings)
            args["mode"] = draw(st.sampled_from(["create", "replace", "append", "x"]))
    elif tool == "http_fetch":
        args["url"] = draw(urls() | strings)
        if draw(st.booleans()):
            args["method"] = draw(st.sampled_from(["GET", "HEAD", "POST", "get"]) | values)
    else:
        args["text"] = draw(strings)
    if draw(st.integers(0, 5)) == 2:
        args[draw(st.sampled_from(["path", "url", "text", "method", "extra", "mode"]))] = (
            draw(values))
    if draw(st.integers(0, 7)) == 3 and args:
        del args[draw(st.sampled_from(sorted(args)))]
    return args


tools = st.sampled_from(CATALOGUE.names)


@settings(max_examples=examples(1500), deadline=None)
@given(data=st.data(), tool=tools)
def test_the_short_way_of_d2_equals_parse_args(data: st.DataObject, tool: str) -> None:
    args = data.draw(argument_objects(tool), label="args")
    try:
        slow = parse_args(tool, args)
        slow_error = None
    except ArgsError as exc:
        slow, slow_error = None, str(exc)
    target = fast_target(tool, args)
    if target is not None:
        assert slow is not None, slow_error
        assert target == (slow.path, slow.url)
    short = _verdict.short_way(tool, args)
    if isinstance(short, str):  # a refusal the short way: in D2's own words
        assert short == slow_error
    else:
        assert short == target
    try:
        assert parse_call_args(tool, args) == slow
    except ArgsError as exc:
        assert str(exc) == slow_error


@st.composite
def grant_tables(draw: st.DrawFn, grant_id: str) -> str:
    # run_command's grants have their own tests (test_decide_commands, test_commands)
    tool = draw(st.sampled_from(
        [name for name in CATALOGUE.names if name not in CATALOGUE.command_tools]))
    mode = draw(st.sampled_from(MODES))
    lines = [f'id = "{grant_id}"', f'tool = "{tool}"', f'mode = "{mode}"']
    if tool in ("read_file", "list_dir", "write_file"):
        paths = draw(st.lists(st.sampled_from(GRANT_PATHS), min_size=1, max_size=4))
        lines.append("paths = [" + ", ".join(f'"{p}"' for p in paths) + "]")
    elif tool == "http_fetch":
        hosts = [("*." if draw(st.booleans()) else "") + draw(st.sampled_from(HOSTS))
                 + draw(st.sampled_from(["", "", ":443", ":8443", ":80"]))
                 for _ in range(draw(st.integers(1, 3)))]
        lines.append("hosts = [" + ", ".join(f'"{h}"' for h in hosts) + "]")
        if mode != "deny" and draw(st.booleans()):
            lines.append(f"http = {'true' if draw(st.booleans()) else 'false'}")
    if mode != "deny":
        if tool != "write_file" and draw(st.booleans()):
            lines.append(f'label = "{draw(st.sampled_from(LABELS))}"')
        if tool != "write_file" and draw(st.booleans()):
            lines.append(f"untrusted = {'true' if draw(st.booleans()) else 'false'}")
        if draw(st.booleans()):
            lines.append(f'max_label = "{draw(st.sampled_from(LABELS))}"')
        if draw(st.booleans()):
            stricter = MODES[MODES.index(mode):]
            lines.append(f'when_untrusted = "{draw(st.sampled_from(stricter))}"')
    return "[[grant]]\n" + "\n".join(lines) + "\n"


@st.composite
def grant_texts(draw: st.DrawFn) -> str:
    ids = draw(st.lists(st.sampled_from(IDS), unique=True, min_size=0, max_size=8))
    return "".join(draw(grant_tables(grant_id)) for grant_id in ids)


taints = st.builds(Taint, label=st.sampled_from(LABELS), untrusted=st.booleans())


def outcome_word(result: Decision | Ask) -> str:
    if isinstance(result, Ask):
        return "ask"
    return "allowed" if result.allowed else f"denied:{result.code}"


def canonical(args: Any) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), text=grant_texts(), memo_size=st.sampled_from([1, 2, 4096]),
       protected=st.lists(st.sampled_from(GRANT_PATHS), max_size=1))
def test_redecider_says_what_decide_says(data: st.DataObject, text: str, memo_size: int,
                                         protected: list[str]) -> None:
    state = parse_grant_texts({"g.toml": text})
    assert isinstance(state, GrantSet), state
    paths = ProtectedPaths.of(protected)
    redecider = Redecider(state, paths, cache_size=data.draw(st.sampled_from([1, 3, 1000])))
    calls = data.draw(st.lists(st.tuples(tools, st.data(), taints), min_size=1, max_size=12),
                      label="calls")
    with mock.patch.object(_verdict, "MEMO_SIZE", memo_size):  # the memo starting over
        for tool, more, taint in calls + calls[:3]:  # some a second time: from the caches
            args = more.draw(argument_objects(tool), label="args")
            if type(args) is not dict:
                continue  # a log holds an object of arguments
            fresh = parse_grant_texts({"g.toml": text})  # a memo of its own, empty
            assert isinstance(fresh, GrantSet)
            expected = decide(ToolCall(tool=tool, args=args), taint, fresh, paths)
            now = redecider.decide(tool, canonical(args), taint)
            assert now == Redecided(outcome_word(expected), expected.grant, expected.label,
                                    expected.untrusted, expected.matched), (tool, args, taint)
            assert len(state.covering) <= memo_size
            if tool in CATALOGUE.path_tools and fast_target(tool, args) is not None:
                assert matched_entries(tool, args["path"], state) == naive_entries(
                    tool, args["path"], state)


def matched_entries(tool: str, path: str, state: GrantSet) -> dict[str, str | None]:
    return {grant.id: entry for grant, entry, _ in _verdict.matches(tool, path, None, state)}


def naive_entries(tool: str, path: str, state: GrantSet) -> dict[str, str | None]:
    """D3 by a scan of every grant: the longest of its paths that `path` is at or below."""
    found: dict[str, str | None] = {}
    for grant in state.grants:
        covering = [p for p in grant.paths if path == p or path.startswith(p + "/")]
        if grant.tool == tool and covering:
            found[grant.id] = max(covering, key=len)
    return found


def history_call(seq: int, outcome: str) -> HistoryCall:
    return HistoryCall(seq, "2026-11-20T00:00:00.000000Z", "s", "echo", '{"text":"x"}', outcome,
                       None, Taint(label="public", untrusted=False))


OUTCOMES = ["allowed", "ask", "denied:no_grant", "denied:taint"]


@settings(max_examples=examples(200), deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from(OUTCOMES), st.sampled_from(OUTCOMES)),
                      max_size=40),
       cuts=st.lists(st.integers(0, 40), max_size=4))
def test_a_tally_merged_from_batches_equals_the_whole(pairs: list[tuple[str, str]],
                                                      cuts: list[int]) -> None:
    changes_whole: list[Change] = []
    changes_merged: list[Change] = []
    whole = ReplayTally(on_change=changes_whole.append)
    merged = ReplayTally(on_change=changes_merged.append)
    bounds = [0, *sorted(min(c, len(pairs)) for c in cuts), len(pairs)]
    returned = []
    for n, (was, now) in enumerate(pairs):
        change = whole.add(history_call(n, was), Redecided(now, None, None, None, ()))
        if change is not None:
            returned.append(change)
    for start, end in pairwise(bounds):
        batch = ReplayTally()  # as in the worker: its changes are what `add` returns
        batch_changes = []
        for n in range(start, end):
            was, now = pairs[n]
            change = batch.add(history_call(n, was), Redecided(now, None, None, None, ()))
            if change is not None:
                batch_changes.append(change)
        merged.merge(batch, batch_changes)
    assert (merged.calls, merged.changes, merged.widening) == (
        whole.calls, whole.changes, whole.widening)
    assert merged.matrix_json() == whole.matrix_json()
    assert changes_merged == changes_whole == returned
    assert [c.call.seq for c in returned] == [n for n, (was, now) in enumerate(pairs)
                                              if was != now]
