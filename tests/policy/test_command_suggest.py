"""Suggested run_command grants: narrow prefixes, never a shell with rest other than none."""

from __future__ import annotations

import tomllib

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.policy._command_grants import check_command_table, runs_any_program
from boxmaker.policy._command_suggest import suggest_commands
from boxmaker.policy._commands import match_command

CWD = "/home/me/src"


def test_subcommands_merge_into_alternatives() -> None:
    got = suggest_commands([(["git", "status"], CWD), (["git", "log", "-n", "5"], CWD),
                            (["git", "status"], CWD)])
    assert len(got) == 1
    one = got[0]
    assert one.prefix == (("git",), ("status", "log"))
    assert one.rest == "any" and one.paths == (CWD,) and one.calls == 3
    assert one.examples == (("git", "status"), ("git", "log", "-n", "5"))


def test_the_narrowest_rest() -> None:
    assert suggest_commands([(["make"], CWD)])[0].rest == "none"
    assert suggest_commands([(["cat", "a.txt"], CWD)])[0].prefix == (("cat",), ("a.txt",))
    assert suggest_commands([(["cat", "-n", "a.txt"], CWD)])[0].rest == "any"
    ls = suggest_commands([(["ls", "--", "x"], CWD), (["ls", "a/b", "c"], CWD)])
    assert [(s.rest, s.calls) for s in ls] == [("any", 2)]
    assert suggest_commands([(["ls", "a/b", "c"], CWD)])[0].rest == "paths"
    outside = suggest_commands([(["wc", "x", "../../etc/passwd"], CWD)])[0]
    assert outside.prefix == (("wc",), ("x",)) and outside.rest == "no_options"


def test_shells_and_interpreters_are_exact() -> None:
    calls = [(["bash", "-c", "make && make test"], CWD), (["python3", "-c", "print(1)"], CWD),
             (["/usr/bin/env", "git", "push"], CWD), (["bash", "-c", "make && make test"], CWD)]
    got = suggest_commands(calls)
    assert [(s.prefix, s.rest, s.calls) for s in got] == [
        ((("bash",), ("-c",), ("make && make test",)), "none", 2),
        ((("python3",), ("-c",), ("print(1)",)), "none", 1),
        ((("/usr/bin/env",), ("git",), ("push",)), "none", 1),
    ]


def test_toml_lines_load_back() -> None:
    got = suggest_commands([(["git", "status"], CWD), (["git", "diff", "a\u202eb"], CWD)])[0]
    text = 'id = "s"\ntool = "run_command"\nmode = "ask"\n' + "\n".join(got.toml_lines()) + "\n"
    assert "\u202e" not in text
    table = tomllib.loads(text)
    problems: list[tuple[str, str]] = []
    loaded = check_command_table(table, grant_id="s", mode="ask", when_untrusted=None,
                                 report=lambda r, m: problems.append((r, m)))
    assert problems == []
    assert loaded == got.grant("s")


_TOKENS = st.sampled_from(["git", "sh", "python3", "log", "-n", "5", "a", "x/y", "..", "/etc",
                           "k=v", "", "env", "/bin/bash"])


@given(st.lists(st.tuples(st.lists(_TOKENS, min_size=1, max_size=5),
                          st.sampled_from([CWD, "/srv/w"])), min_size=1, max_size=8))
def test_every_suggestion_matches_its_calls_and_never_widens_a_shell(
    calls: list[tuple[list[str], str]],
) -> None:
    calls = [(argv, cwd) for argv, cwd in calls if not argv[0].startswith(("-", ".", "k"))
             and argv[0] not in ("", "x/y")]
    suggestions = suggest_commands(calls)
    for argv, cwd in calls:
        assert any(match_command(s.grant("s", "allow"), argv, cwd) for s in suggestions)
    for s in suggestions:
        if any(runs_any_program(name) for name in s.prefix[0]):
            assert s.rest == "none"
        for example in s.examples:
            assert match_command(s.grant("s"), example, s.paths[0]) is not None
