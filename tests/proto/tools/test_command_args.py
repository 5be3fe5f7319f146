"""run_command's argument grammar (12-tool-sources "run_command"): each rule refused as bad_args."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto.tools import ArgsError
from boxmaker.proto.tools._command_args import (
    MAX_ARGV,
    MAX_ARGV_BYTES,
    MAX_STDIN_BYTES,
    MAX_TOKEN_BYTES,
    RunCommandArgs,
    argv_problem,
    parse_run_command_args,
    program_problem,
)


def _parse(**args: Any) -> RunCommandArgs:
    return parse_run_command_args(args)


def test_a_plain_call() -> None:
    got = _parse(argv=["git", "status"], cwd="/home/me/src")
    assert got == RunCommandArgs(argv=("git", "status"), cwd="/home/me/src", stdin=None)
    assert got.as_json() == {"argv": ["git", "status"], "cwd": "/home/me/src"}
    with_stdin = _parse(argv=["cat"], cwd="/w", stdin="hi\n")
    assert with_stdin.as_json() == {"argv": ["cat"], "cwd": "/w", "stdin": "hi\n"}


@pytest.mark.parametrize(
    "token",
    ["git", "python3.11", "g++", "x-y_z.1", "A", "/usr/bin/git", "/tmp/git", "0"],
)
def test_program_forms_accepted(token: str) -> None:
    assert program_problem(token) is None
    assert _parse(argv=[token], cwd="/w").argv == (token,)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("./git", "absolute"),
        ("bin/git", "absolute"),
        ("../git", "absolute"),
        ("/usr/bin/", "ends with /"),
        ("/usr//git", "empty component"),
        ("/usr/./git", ". component"),
        ("-c", "bare program name"),
        (".git", "bare program name"),
        ("g\\it", "bare program name"),
        ("git status", "bare program name"),
        ("", "bare program name"),
        ("x" * 129, "bare program name"),
        ("gït", "bare program name"),
    ],
)
def test_program_forms_refused(token: str, why: str) -> None:
    problem = program_problem(token)
    assert problem is not None and why in problem
    with pytest.raises(ArgsError, match="argv\\[0\\]"):
        _parse(argv=[token], cwd="/w")


def test_shell_text_is_plain_bytes() -> None:
    argv = ["echo", "a && b", ";", "|", "$(id)", "*", "'q'", '"q"', "`x`", ""]
    assert _parse(argv=argv, cwd="/w").argv == tuple(argv)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"argv": ["ls"]}, "cwd is required"),
        ({"cwd": "/w"}, "argv is required"),
        ({"argv": ["ls"], "cwd": "/w", "env": {}}, "unknown field \"env\""),
        ({"argv": "ls", "cwd": "/w"}, "expected an array"),
        ({"argv": [], "cwd": "/w"}, "1 to 256"),
        ({"argv": ["ls"] * (MAX_ARGV + 1), "cwd": "/w"}, "1 to 256"),
        ({"argv": ["ls", 1], "cwd": "/w"}, "argv\\[1\\] must be a string"),
        ({"argv": ["ls", None], "cwd": "/w"}, "argv\\[1\\] must be a string, not null"),
        ({"argv": ["ls", "a\0b"], "cwd": "/w"}, "argv\\[1\\] holds a NUL"),
        ({"argv": ["ls", "\udc80"], "cwd": "/w"}, "lone surrogate"),
        ({"argv": ["ls", "x" * (MAX_TOKEN_BYTES + 1)], "cwd": "/w"}, "longer than 4096"),
        ({"argv": ["ls", "é" * 2049], "cwd": "/w"}, "longer than 4096"),
        ({"argv": ["ls"] + ["x" * 4096] * 33, "cwd": "/w"}, "bytes in all"),
        ({"argv": ["ls"], "cwd": "w"}, "cwd: path grammar"),
        ({"argv": ["ls"], "cwd": "/w/../x"}, "cwd: path grammar"),
        ({"argv": ["ls"], "cwd": "/"}, "cwd: path grammar"),
        ({"argv": ["ls"], "cwd": 3}, "cwd: expected a string"),
        ({"argv": ["ls"], "cwd": "/w", "stdin": None}, "stdin: expected a string"),
        ({"argv": ["ls"], "cwd": "/w", "stdin": "\udc80"}, "lone surrogate"),
        ({"argv": ["ls"], "cwd": "/w", "stdin": "x" * (MAX_STDIN_BYTES + 1)}, "1 MiB"),
    ],
)
def test_refused(args: dict[str, Any], match: str) -> None:
    with pytest.raises(ArgsError, match=match):
        parse_run_command_args(args)


def test_not_an_object() -> None:
    with pytest.raises(ArgsError, match="JSON object"):
        parse_run_command_args([])  # type: ignore[arg-type]


def test_bounds_exactly() -> None:
    at_token = ["ls", "x" * MAX_TOKEN_BYTES]
    assert argv_problem(at_token) is None
    assert argv_problem(["ls"] * MAX_ARGV) is None
    total = ["ls"] + ["x" * 4096] * 31 + ["x" * (MAX_ARGV_BYTES - 2 - 31 * 4096)]
    assert sum(len(t) for t in total) == MAX_ARGV_BYTES
    assert argv_problem(total) is None
    assert _parse(argv=["cat"], cwd="/w", stdin="x" * MAX_STDIN_BYTES).stdin is not None


def test_ten_thousand_tokens_refused() -> None:
    with pytest.raises(ArgsError, match="1 to 256"):
        _parse(argv=["echo"] * 10_000, cwd="/w")


@given(st.lists(st.text(max_size=20), min_size=1, max_size=8))
def test_valid_or_refused_never_fixed_up(argv: list[str]) -> None:
    args = {"argv": argv, "cwd": "/w"}
    try:
        got = parse_run_command_args(args)
    except ArgsError:
        assert argv_problem(argv) is not None
    else:
        assert list(got.argv) == argv
