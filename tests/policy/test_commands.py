"""run_command D3 matching, D6 and the token-by-token explanation (12-tool-sources)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.policy._commands import (
    CommandGrant,
    CommandMatch,
    Prefix,
    Rest,
    command_matches,
    command_winner,
    cwd_entry,
    explain_command,
    match_command,
)
from boxmaker.policy._model import Mode


def _prefix(*tokens: str | Sequence[str]) -> Prefix:
    return tuple((t,) if isinstance(t, str) else tuple(t) for t in tokens)


def grant(
    *prefixes: Prefix,
    id: str = "g",
    mode: Mode = "allow",
    paths: tuple[str, ...] = ("/home/me/src",),
    rest: Rest = "none",
    write: bool = False,
) -> CommandGrant:
    return CommandGrant(id=id, mode=mode, paths=paths, write=write, commands=prefixes, rest=rest)


GIT = grant(_prefix("git", ["status", "log", "diff"]), rest="any")
CWD = "/home/me/src"


def test_cwd_component_wise() -> None:
    assert match_command(GIT, ["git", "status"], CWD) is not None
    assert match_command(GIT, ["git", "status"], CWD + "/sub/dir") is not None
    assert match_command(GIT, ["git", "status"], "/home/me/srcx") is None
    assert match_command(GIT, ["git", "status"], "/home/me") is None
    assert cwd_entry(("/a", "/a/b"), "/a/b/c") == "/a/b"


@pytest.mark.parametrize(
    "argv",
    [
        ["/tmp/git", "status"],
        ["/usr/bin/git", "status"],
        ["Git", "status"],
        ["git ", "status"],
        ["git", "Status"],
        ["git"],
        ["git", "-c", "core.pager=sh", "status"],
        ["env", "git", "status"],
    ],
)
def test_prefix_is_literal(argv: list[str]) -> None:
    """No basename fallback, no unwrapping, no case folding: /tmp/git is not git."""
    assert match_command(GIT, argv, CWD) is None


def test_an_absolute_token_matches_only_itself() -> None:
    g = grant(_prefix("/usr/bin/git", "status"))
    assert match_command(g, ["/usr/bin/git", "status"], CWD) is not None
    assert match_command(g, ["git", "status"], CWD) is None
    assert match_command(g, ["/tmp/git", "status"], CWD) is None


@pytest.mark.parametrize(
    ("rest", "after", "ok"),
    [
        ("none", [], True),
        ("none", ["x"], False),
        ("no_options", [], True),
        ("no_options", ["a", "b.txt", "../x"], True),
        ("no_options", ["a", "-n"], False),
        ("no_options", ["--", "x"], False),
        ("paths", ["a.txt", "sub/b"], True),
        ("paths", ["/home/me/src/a"], True),
        ("paths", ["/home/me/other"], False),
        ("paths", ["../../etc/passwd"], False),
        ("paths", ["./a"], False),
        ("paths", ["a//b"], False),
        ("paths", [""], False),
        ("paths", ["a/"], False),
        ("paths", ["-r"], False),
        ("any", ["-c", "x", "&&", "rm"], True),
    ],
)
def test_rest(rest: Rest, after: list[str], ok: bool) -> None:
    g = grant(_prefix("cat"), rest=rest)
    found = match_command(g, ["cat", *after], CWD)
    assert (found is not None) is ok
    if found is not None and rest == "paths":
        assert all(p.startswith(CWD + "/") for p in found.path_tokens)


def test_rest_paths_may_name_another_entry() -> None:
    g = grant(_prefix("cat"), rest="paths", paths=(CWD, "/srv/data"))
    found = match_command(g, ["cat", "/srv/data/x", "y"], CWD)
    assert found is not None
    assert found.path_tokens == ("/srv/data/x", CWD + "/y")
    assert found.entry == CWD


def test_flag_insertion_is_not_stopped_by_a_deny_prefix() -> None:
    """Literal prefixes: documented, 12 says so (allow only what is needed)."""
    deny = grant(_prefix("git", "push"), id="no-push", mode="deny", paths=())
    allow = grant(_prefix("git"), id="git", rest="any")
    argv = ["git", "-c", "k=v", "push"]
    assert [m.grant.id for m in command_matches([deny, allow], argv, CWD)] == ["git"]
    assert [m.grant.id for m in command_matches([deny, allow], ["git", "push", "-f"], CWD)] == [
        "no-push",
        "git",
    ]


def test_deny_matches_whatever_follows_and_every_cwd_without_paths() -> None:
    deny = grant(_prefix("rm"), mode="deny", paths=(), rest="none")
    found = match_command(deny, ["rm", "-rf", "/"], "/anywhere")
    assert found is not None and found.entry is None and found.specificity == (1, 0)
    with_paths = grant(_prefix("rm"), mode="deny", paths=("/a",))
    assert match_command(with_paths, ["rm", "x"], "/b") is None


def test_the_longest_prefix_of_a_grant() -> None:
    g = grant(_prefix("git"), _prefix("git", "log"), _prefix("git", "log", "-n"), rest="any")
    found = match_command(g, ["git", "log", "-n", "5"], CWD)
    assert found is not None and (found.prefix, found.tokens) == (2, 3)
    found = match_command(g, ["git", "log"], CWD)
    assert found is not None and found.prefix == 1


def _winner(matches: list[CommandMatch], untrusted: bool = False) -> str | None:
    def effective(g: CommandGrant) -> Mode:
        return g.mode

    won = command_winner(matches, effective)
    return None if won is None else won.grant.id


def test_d6_most_tokens_then_longest_entry_then_smallest_id() -> None:
    argv = ["git", "log", "-n", "5"]
    cwd = "/home/me/src/proj"
    short = grant(_prefix("git"), id="a-short", rest="any", paths=("/home/me/src/proj",))
    long = grant(_prefix("git", "log"), id="z-long", rest="any", paths=("/home/me",))
    assert _winner(command_matches([short, long], argv, cwd)) == "z-long"
    wide = grant(_prefix("git", "log"), id="a-wide", rest="any", paths=("/home/me",))
    deep = grant(_prefix("git", "log"), id="z-deep", rest="any", paths=("/home/me/src",))
    assert _winner(command_matches([wide, deep], argv, cwd)) == "z-deep"
    twin = grant(_prefix("git", "log"), id="b-twin", rest="any", paths=("/home/me/src",))
    assert _winner(command_matches([deep, twin], argv, cwd)) == "b-twin"
    strict = grant(_prefix("git"), id="zz-ask", mode="ask", rest="any", paths=("/home",))
    assert _winner(command_matches([deep, twin, strict], argv, cwd)) == "zz-ask"
    assert _winner([]) is None


def test_explain_shows_each_token() -> None:
    g = grant(_prefix("git", ["status", "log"]), _prefix("make", "test"), rest="none")
    got = explain_command(g, ["git", "log", "-n"], CWD)
    assert got.match is None and got.cwd_ok
    first = got.prefixes[0]
    assert [(t.got, t.equal) for t in first.tokens] == [("git", True), ("log", True)]
    assert first.equal and first.rest_problem is not None and "rest none" in first.rest_problem
    second = got.prefixes[1]
    assert [(t.got, t.equal) for t in second.tokens] == [("git", False), ("log", False)]
    doc = got.as_json()
    assert doc["matched"] is False and doc["prefix"] is None
    assert doc["prefixes"][0]["tokens"][1] == {
        "position": 1, "want": ["status", "log"], "got": "log", "equal": True
    }
    lines = got.lines()
    assert '    [1] "log" = "status" | "log"' in lines
    assert lines[-1] == "  the grant does not match"
    short = explain_command(g, ["git"], CWD)
    assert short.prefixes[0].tokens[1].got is None
    assert "(argv ends)" in "\n".join(short.lines())


def test_explain_escapes() -> None:
    g = grant(_prefix("cat"), rest="any")
    lines = explain_command(g, ["cat", "\x1b[31mred"], "/home/me/src/\x07").lines()
    assert all("\x1b" not in line and "\x07" not in line for line in lines)


_TOKENS = st.sampled_from(["git", "log", "-n", "5", "a", "/tmp/git", "..", "x/y", ""])


@given(
    argv=st.lists(_TOKENS, min_size=1, max_size=5),
    prefixes=st.lists(
        st.lists(st.lists(_TOKENS, min_size=1, max_size=2), min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    ),
    rest=st.sampled_from(["none", "no_options", "paths", "any"]),
    mode=st.sampled_from(["allow", "ask", "deny"]),
    cwd=st.sampled_from([CWD, CWD + "/a", "/home/me"]),
)
def test_explain_agrees_with_match(
    argv: list[str], prefixes: list[list[list[str]]], rest: Rest, mode: Mode, cwd: str
) -> None:
    g = grant(*(tuple(tuple(t) for t in p) for p in prefixes), rest=rest, mode=mode)
    found = match_command(g, argv, cwd)
    explained = explain_command(g, argv, cwd)
    assert explained.match == found
    assert (found is not None) == (explained.cwd_ok and any(p.matched for p in explained.prefixes))


def test_d2b_cwd_and_path_tokens() -> None:
    from boxmaker.policy._commands import command_protected
    from boxmaker.policy._decision import ProtectedPaths

    protected = ProtectedPaths.of(["/home/me/src/.boxmaker"])
    cat = grant(_prefix("cat"), rest="paths")
    found = command_matches([cat], ["cat", "ok", ".boxmaker/key"], CWD)
    assert command_protected(CWD, found, protected) == (
        "/home/me/src/.boxmaker/key", "/home/me/src/.boxmaker")
    assert command_protected(CWD + "/.boxmaker", [], protected) == (
        CWD + "/.boxmaker", "/home/me/src/.boxmaker")
    assert command_protected(CWD, command_matches([cat], ["cat", "ok"], CWD), protected) is None
