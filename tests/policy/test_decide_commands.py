"""decide for run_command: grants loaded from files, D2, D2b, D3, D6, D8 (12-tool-sources)."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.policy._decide import decide, redecide
from boxmaker.policy._decision import (
    NO_PROTECTED_PATHS,
    Allowed,
    Ask,
    Decision,
    Denied,
    ProtectedPaths,
    ToolCall,
)
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet, InvalidGrantSet
from boxmaker.proto._taint import Taint

PUBLIC = Taint(label="public", untrusted=False)
UNTRUSTED = Taint(label="public", untrusted=True)
PRIVATE = Taint(label="private", untrusted=False)

GIT = """
[[grant]]
id = "git-read"
tool = "run_command"
mode = "allow"
paths = ["/home/me/src"]
commands = [["git", ["status", "log", "diff"]]]
rest = "any"
"""


def grants(text: str) -> GrantSet:
    state = parse_grant_texts({"g.toml": text})
    assert isinstance(state, GrantSet), state
    return state


def problems(text: str) -> list[tuple[str, str]]:
    state = parse_grant_texts({"g.toml": text})
    assert isinstance(state, InvalidGrantSet)
    return [(p.rule, p.message) for p in state.report.problems]


def run(argv: Any, cwd: Any, state: GrantSet, taint: Taint = PUBLIC,
        protected: ProtectedPaths = NO_PROTECTED_PATHS, **more: Any) -> Decision | Ask:
    args = {"argv": argv, "cwd": cwd, **more}
    return decide(ToolCall(tool="run_command", args=args), taint, state, protected)


def outcome(result: Decision | Ask) -> str:
    if isinstance(result, Ask):
        return "ask"
    if isinstance(result.outcome, Allowed):
        return "allowed"
    assert isinstance(result.outcome, Denied)
    return result.outcome.code


def test_a_grant_loads_with_its_defaults() -> None:
    state = grants(GIT)
    (grant,) = state.grants
    assert grant.paths == ("/home/me/src",)
    assert grant.command is not None and grant.command.rest == "any"
    assert grant.command.write is False
    assert (grant.label, grant.untrusted, grant.max_label) == ("public", True, "public")
    assert grant.when_untrusted == "allow"


def test_the_allowed_call_and_its_taint() -> None:
    decision = run(["git", "log", "-n", "5"], "/home/me/src/proj", grants(GIT))
    assert outcome(decision) == "allowed"
    assert decision.grant == "git-read" and decision.grant_entry == "/home/me/src"
    assert (decision.label, decision.untrusted) == ("public", True)
    assert '"git" "log"' in decision.reason and "/home/me/src/proj" in decision.reason


@pytest.mark.parametrize(
    "argv, cwd",
    [
        (["/tmp/git", "status"], "/home/me/src"),        # no basename fallback
        (["/usr/bin/git", "status"], "/home/me/src"),
        (["git", "push"], "/home/me/src"),
        (["git", "-c", "core.pager=sh", "log"], "/home/me/src"),  # flag before the verb
        (["git", "status"], "/home/me"),                 # cwd above the grant
        (["git", "status"], "/home/me/srcx"),            # component-wise
        (["sh", "-c", "git status"], "/home/me/src"),
        (["git", "status && rm -rf /"], "/home/me/src"),  # one token, not "status"
    ],
)
def test_what_the_git_grant_does_not_match(argv: list[str], cwd: str) -> None:
    assert outcome(run(argv, cwd, grants(GIT))) == "no_grant"


def test_shell_bytes_after_the_prefix_are_plain_arguments() -> None:
    # rest any: git gets "&&", ";" and "$(...)" as its own arguments; nothing runs them
    for extra in (["&&", "rm", "-rf", "/"], [";", "sh"], ["|", "sh"], ["$(id)"]):
        assert outcome(run(["git", "log", *extra], "/home/me/src", grants(GIT))) == "allowed"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["./git", "status"], "argv[0]"),
        (["bin/git"], "argv[0]"),
        ([], "argv"),
        (["git", "a\0b"], "NUL"),
        ("git status", "argv"),
    ],
)
def test_bad_argv_is_bad_args(argv: Any, says: str) -> None:
    decision = run(argv, "/home/me/src", grants(GIT))
    assert outcome(decision) == "bad_args" and says in decision.reason


def test_cwd_is_of_the_path_grammar() -> None:
    for cwd in ("home/me/src", "/home/me/src/", "/home/me/../me/src", 5):
        assert outcome(run(["git", "status"], cwd, grants(GIT))) == "bad_args"
    assert outcome(run(["git", "status"], "/home/me/src", grants(GIT), extra=1)) == "bad_args"


def test_rest_none_refuses_any_token_after_the_prefix() -> None:
    state = grants(GIT.replace('rest = "any"', 'rest = "none"')
                   .replace('[["git", ["status", "log", "diff"]]]', '[["git", "log"]]'))
    assert outcome(run(["git", "log"], "/home/me/src", state)) == "allowed"
    assert outcome(run(["git", "-c", "core.pager=sh", "log"], "/home/me/src", state)) == (
        "no_grant")
    assert outcome(run(["git", "log", "-p"], "/home/me/src", state)) == "no_grant"


def test_protected_cwd_and_protected_path_tokens() -> None:
    protected = ProtectedPaths.of(["/home/me/src/.boxmaker"])
    state = grants(GIT.replace('rest = "any"', 'rest = "paths"')
                   .replace('[["git", ["status", "log", "diff"]]]', '[["cat"]]'))
    assert outcome(run(["cat", "a"], "/home/me/src", state, protected=protected)) == "allowed"
    assert outcome(run(["ls"], "/home/me/src/.boxmaker", state, protected=protected)) == (
        "protected")
    decision = run(["cat", ".boxmaker/key"], "/home/me/src", state, protected=protected)
    assert outcome(decision) == "protected"
    assert outcome(run(["cat", "../../etc/passwd"], "/home/me/src", state)) == "no_grant"
    assert outcome(run(["cat", "/etc/passwd"], "/home/me/src", state)) == "no_grant"


TWO = GIT + """
[[grant]]
id = "no-push"
tool = "run_command"
mode = "deny"
commands = [["git", "push"]]

[[grant]]
id = "git-any"
tool = "run_command"
mode = "ask"
paths = ["/home/me"]
commands = [["git"]]
rest = "any"
label = "private"
max_label = "private"
"""


def test_d6_strictest_then_longest_prefix_then_longest_entry() -> None:
    state = grants(TWO)
    assert outcome(run(["git", "push"], "/home/me/src", state)) == "denied_by_grant"
    # git-read (allow) and git-any (ask) both match: the strictest mode wins.
    decision = run(["git", "log"], "/home/me/src", state)
    assert outcome(decision) == "ask" and decision.grant == "git-any"
    # D8 over every applicable non-deny grant: the highest label, untrusted.
    assert (decision.label, decision.untrusted) == ("private", True)
    assert isinstance(decision, Ask)
    again = redecide(decision, PUBLIC, state, NO_PROTECTED_PATHS)
    assert again.allowed
    # a deny without paths covers every cwd, even outside every allow grant
    assert outcome(run(["git", "push"], "/tmp", state)) == "denied_by_grant"
    # the literal prefix: a deny of git push does not stop git -c k=v push
    assert outcome(run(["git", "-c", "k=v", "push"], "/home/me", state)) == "ask"


def test_when_untrusted_and_max_label() -> None:
    state = grants(GIT.replace('rest = "any"', 'rest = "any"\nwhen_untrusted = "ask"'))
    assert outcome(run(["git", "log"], "/home/me/src", state, UNTRUSTED)) == "ask"
    assert outcome(run(["git", "log"], "/home/me/src", state, PRIVATE)) == "taint"


def test_load_rules_g2_g6_g17_g18_g19_g20() -> None:
    base = 'id = "x"\ntool = "run_command"\nmode = "allow"\n'
    assert [r for r, _ in problems(f'[[grant]]\n{base}commands = [["ls"]]\n')] == ["G6"]
    assert [r for r, _ in problems(f'[[grant]]\n{base}paths = ["/w"]\n')] == ["G17"]
    got = problems(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["ls"]]\nhosts = ["a.b"]\n')
    assert [r for r, _ in got] == ["G2"]
    got = problems(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["ls"]]\nargs = {{}}\n')
    assert [r for r, _ in got] == ["G18"]
    got = problems(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["ls"]]\nwrite = "yes"\n')
    assert [r for r, _ in got] == ["G18"]
    got = problems(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["ls"]]\n'
                   'match = [["ls", "-l"]]\n')
    assert [r for r, _ in got] == ["G19"]
    for wrapper in ("sh", "env", "nice", "timeout", "xargs", "busybox", "/bin/bash",
                    "python3.11"):
        got = problems(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["{wrapper}"]]\n'
                       'rest = "any"\n')
        assert [r for r, _ in got] == ["G20"], wrapper
    # as ask, or with rest none, it loads
    grants(f'[[grant]]\n{base.replace("allow", "ask")}paths = ["/w"]\n'
           'commands = [["env"]]\nrest = "any"\n')
    grants(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["env"]]\n')
    # the generic rules still apply: G5 words, G9 strictness, G2 booleans
    got = problems(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["ls"]]\nlabel = "x"\n')
    assert [r for r, _ in got] == ["G5"]
    got = problems(f'[[grant]]\n{base.replace("allow", "ask")}paths = ["/w"]\n'
                   'commands = [["ls"]]\nwhen_untrusted = "allow"\n')
    assert [r for r, _ in got] == ["G9"]
    got = problems(f'[[grant]]\n{base}paths = ["/w"]\ncommands = [["ls"]]\nuntrusted = 1\n')
    assert [r for r, _ in got] == ["G2"]
    deny = 'id = "d"\ntool = "run_command"\nmode = "deny"\ncommands = [["ls"]]\n'
    assert [r for r, _ in problems(f'[[grant]]\n{deny}label = "private"\n')] == ["G2"]


def test_g22_a_writable_grant_read_back_lower() -> None:
    text = """
[[grant]]
id = "build"
tool = "run_command"
mode = "allow"
paths = ["/home/me/src"]
commands = [["make"]]
write = true
label = "private"

[[grant]]
id = "notes"
tool = "read_file"
mode = "allow"
paths = ["/home/me/src/notes"]
"""
    assert [r for r, _ in problems(text)] == ["G22"]
    grants(text.replace('label = "private"', ""))
