"""The load-time rules of run_command grants: G2, G6, G7, G17..G22 (12-tool-sources)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from boxmaker.policy._command_grants import (
    COMMAND_DENY_FIELDS,
    COMMAND_FIELDS,
    Reader,
    check_command_table,
    g21_problems,
    g22_problems,
    runs_any_program,
)
from boxmaker.policy._commands import CommandGrant
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import InvalidGrantSet, Mode


def check(text: str) -> tuple[CommandGrant | None, list[tuple[str, str]]]:
    table: dict[str, Any] = tomllib.loads(text)
    problems: list[tuple[str, str]] = []
    got = check_command_table(
        table,
        grant_id=table.get("id"),
        mode=table.get("mode"),
        when_untrusted=table.get("when_untrusted"),
        report=lambda rule, message: problems.append((rule, message)),
    )
    return got, problems


SPEC_EXAMPLE = """
id = "proj-tests"
tool = "run_command"
mode = "allow"
paths = ["/home/me/src/proj"]
write = false
commands = [
  ["make", ["test", "check"]],
  ["git", ["status", "diff", "log"]],
  ["pytest"],
]
rest = "any"
match = [["make", "test"], ["git", "log", "-n", "5"]]
not_match = [["git", "push"], ["make", "install"]]
label = "private"
untrusted = true
max_label = "private"
"""


def test_the_spec_example_loads() -> None:
    got, problems = check(SPEC_EXAMPLE)
    assert problems == []
    assert got == CommandGrant(
        id="proj-tests",
        mode="allow",
        paths=("/home/me/src/proj",),
        write=False,
        commands=(
            (("make",), ("test", "check")),
            (("git",), ("status", "diff", "log")),
            (("pytest",),),
        ),
        rest="any",
    )


def test_defaults() -> None:
    got, problems = check('id="a"\ntool="run_command"\nmode="ask"\npaths=["/w"]\n'
                          'commands=[["ls"]]\n')
    assert problems == [] and got is not None
    assert (got.write, got.rest) == (False, "none")


def test_a_deny_grant_without_paths() -> None:
    got, problems = check('id="d"\ntool="run_command"\nmode="deny"\ncommands=[["git","push"]]\n'
                          'match=[["git","push","--force"]]\nnot_match=[["git","-c","x","push"]]\n')
    assert problems == [] and got is not None and got.paths == ()


def test_field_sets() -> None:
    assert COMMAND_DENY_FIELDS < COMMAND_FIELDS
    assert {"write", "rest", "label", "untrusted", "max_label", "when_untrusted"}.isdisjoint(
        COMMAND_DENY_FIELDS
    )


BASE = 'id="a"\ntool="run_command"\nmode="allow"\n'


@pytest.mark.parametrize(
    ("body", "rule", "words"),
    [
        ('commands=[["ls"]]', "G6", "needs paths"),
        ('paths=[]\ncommands=[["ls"]]', "G6", "empty list"),
        ('paths="/w"\ncommands=[["ls"]]', "G6", "must be an array"),
        ('paths=["w"]\ncommands=[["ls"]]', "G7", "absolute"),
        ('paths=[1]\ncommands=[["ls"]]', "G7", "must be a string"),
        ('paths=["/w"]', "G17", "needs commands"),
        ('paths=["/w"]\ncommands=[]', "G17", "non-empty array of prefixes"),
        ('paths=["/w"]\ncommands="ls"', "G17", "non-empty array of prefixes"),
        ('paths=["/w"]\ncommands=[[]]', "G17", "empty prefix"),
        ('paths=["/w"]\ncommands=["ls"]', "G17", "non-empty array of tokens"),
        ('paths=["/w"]\ncommands=[["ls", []]]', "G17", "empty list of alternatives"),
        ('paths=["/w"]\ncommands=[["ls", [1]]]', "G17", "string or a non-empty list"),
        ('paths=["/w"]\ncommands=[["ls", 1]]', "G17", "string or a non-empty list"),
        ('paths=["/w"]\ncommands=[["ls", [["x"]]]]', "G17", "string or a non-empty list"),
        ('paths=["/w"]\ncommands=[["ls", "a\\u0000b"]]', "G17", "NUL"),
        ('paths=["/w"]\ncommands=[["./ls"]]', "G17", "absolute path"),
        ('paths=["/w"]\ncommands=[[["git", "bin/git"]]]', "G17", "absolute path"),
        ('paths=["/w"]\ncommands=[["-x"]]', "G17", "bare program name"),
        ('paths=["/w"]\ncommands=[["ls"]]\nrest="some"', "G18", "rest"),
        ('paths=["/w"]\ncommands=[["ls"]]\nrest=true', "G18", "rest"),
        ('paths=["/w"]\ncommands=[["ls"]]\nwrite="yes"', "G18", "write"),
        ('paths=["/w"]\ncommands=[["ls"]]\nargs.x={values=["a"]}', "G18", "args"),
        ('paths=["/w"]\ncommands=[["ls"]]\nhosts=["a.b"]', "G2", "unknown field"),
        ('paths=["/w"]\ncommands=[["ls"]]\nmatch=[["cat"]]', "G19", "does not match"),
        ('paths=["/w"]\ncommands=[["ls"]]\nnot_match=[["ls"]]', "G19", "matches"),
        ('paths=["/w"]\ncommands=[["ls"]]\nmatch=[["./ls"]]', "G19", "not an argv"),
        ('paths=["/w"]\ncommands=[["ls"]]\nmatch="ls"', "G19", "array of argv"),
        ('paths=["/w"]\ncommands=[["ls"]]\nmatch=[[]]', "G19", "not an argv"),
    ],
)
def test_problems(body: str, rule: str, words: str) -> None:
    got, problems = check(BASE + body)
    assert got is None
    assert any(r == rule and words in m for r, m in problems), problems


@pytest.mark.parametrize(
    "field", ["write = true", 'rest = "any"', 'label = "private"', "untrusted = false",
              'max_label = "secret"', 'when_untrusted = "deny"']
)
def test_deny_grant_fields(field: str) -> None:
    got, problems = check(f'id="d"\ntool="run_command"\nmode="deny"\ncommands=[["ls"]]\n{field}\n')
    assert got is None and [r for r, _ in problems] == ["G2"]


def test_g19_uses_the_first_entry_as_cwd() -> None:
    got, problems = check(BASE + 'paths=["/w", "/v"]\ncommands=[["cat"]]\nrest="paths"\n'
                          'match=[["cat", "a"], ["cat", "/v/x"]]\nnot_match=[["cat", "/u"]]\n')
    assert problems == [] and got is not None
    _, problems = check(BASE + 'paths=["/w"]\ncommands=[["cat"]]\nrest="paths"\n'
                        'match=[["cat", "../x"]]\n')
    assert [r for r, _ in problems] == ["G19"]
    assert "match[0]" in problems[0][1] and '"../x"' in problems[0][1]


@pytest.mark.parametrize(
    "name",
    ["sh", "bash", "/bin/sh", "/usr/bin/env", "env", "xargs", "busybox", "timeout", "nice",
     "python", "python3", "python3.11", "/usr/bin/python3.11", "perl5.36", "node", "Rscript",
     "awk", "sudo", "gdb", "bun", "deno", "exec", "command"],
)
def test_g20_runs_any_program(name: str) -> None:
    assert runs_any_program(name)


@pytest.mark.parametrize("name", ["git", "make", "pytest", "python-config", "shx", "envy",
                                  "/tmp/gits", "ls"])
def test_g20_others(name: str) -> None:
    assert not runs_any_program(name)


@pytest.mark.parametrize(
    ("mode", "when_untrusted", "rest", "rule"),
    [
        ("allow", None, "any", "G20"),
        ("allow", None, "no_options", "G20"),
        ("allow", None, "paths", "G20"),
        ("allow", None, "none", None),
        ("ask", None, "any", None),
        ("allow", "ask", "any", "G20"),
        ("deny", None, None, None),
    ],
)
def test_g20(mode: Mode, when_untrusted: str | None, rest: str | None, rule: str | None) -> None:
    lines = [f'id="a"\ntool="run_command"\nmode="{mode}"\ncommands=[["git"], [["make", "bash"]]]']
    if mode != "deny":
        lines.append('paths=["/w"]')
    if rest is not None:
        lines.append(f'rest="{rest}"')
    if when_untrusted is not None:
        lines.append(f'when_untrusted="{when_untrusted}"')
    got, problems = check("\n".join(lines) + "\n")
    assert [r for r, _ in problems] == ([] if rule is None else [rule])
    if rule is not None:
        assert got is None and "commands[1][0] \"bash\"" in problems[0][1]


def _g(paths: tuple[str, ...], *, write: bool = True, mode: Mode = "allow") -> CommandGrant:
    return CommandGrant(id="w", mode=mode, paths=paths, write=write, commands=((("make",),),),
                        rest="none")


def test_g21() -> None:
    path = ("/usr/local/bin", "/usr/bin", "/bin")
    assert g21_problems(_g(("/home/me",)), path) == []
    assert len(g21_problems(_g(("/usr",)), path)) == 1  # above
    assert len(g21_problems(_g(("/usr/bin",), write=False), path)) == 1  # equal, even ro
    assert len(g21_problems(_g(("/usr/local/bin/x", "/bin/y")), path)) == 2  # below
    assert g21_problems(_g(("/usr/bin",), mode="deny"), path) == []  # never mounted
    assert g21_problems(_g(("/usr/binx",)), path) == []


def test_g22() -> None:
    writer = _g(("/home/me/src",))
    public_reader = Reader(grant="docs", paths=("/home/me/src/docs",), label="public")
    above = Reader(grant="home", paths=("/home/me",), label="public")
    private = Reader(grant="p", paths=("/home/me/src",), label="private")
    elsewhere = Reader(grant="e", paths=("/srv",), label="public")
    assert g22_problems(writer, "public", "public", [public_reader, above]) == []
    got = g22_problems(writer, "private", "private", [public_reader, above, private, elsewhere])
    assert [m.split(" reads ")[0].rsplit(" ", 2)[-2:] for m in got] == [
        ["grant", "docs"], ["grant", "home"]
    ]
    itself = g22_problems(writer, "public", "private", [])
    assert len(itself) == 1 and "this grant itself" in itself[0]
    assert g22_problems(_g(("/home/me/src",), write=False), "private", "secret", [above]) == []
    assert g22_problems(_g(("/home/me/src",), mode="deny"), "private", "secret", [above]) == []
    same_id = Reader(grant="w", paths=("/home/me/src",), label="public")
    assert g22_problems(writer, "private", "private", [same_id]) == []


def test_g21_at_load_with_the_commands_path() -> None:
    text = {"a.toml": '[[grant]]\nid = "usr"\ntool = "run_command"\nmode = "ask"\n'
                      'paths = ["/usr/local"]\ncommands = [["ls"]]\n'
                      '[[grant]]\nid = "deny-usr"\ntool = "run_command"\nmode = "deny"\n'
                      'paths = ["/usr"]\ncommands = [["rm"]]\n'}
    assert parse_grant_texts(text).ok  # no [commands]: nothing to check against
    state = parse_grant_texts(text, commands_path=("/usr/local/bin", "/usr/bin", "/bin"))
    assert isinstance(state, InvalidGrantSet)
    (problem,) = state.report.problems  # the deny grant is never mounted
    assert (problem.rule, problem.grant, problem.index) == ("G21", "usr", 0)
    assert "/usr/local/bin" in problem.message
