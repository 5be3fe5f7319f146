"""The approval rows of a run_command call: one token per row, quoted, escaped."""

from __future__ import annotations

from boxmaker.proto.tools._command_block import command_block_rows


def test_rows() -> None:
    rows = command_block_rows(["git", "log", "a b", ""], "/home/me/src",
                              [("/home/me/src", False), ("/srv/out", True)])
    assert rows == [
        ("argv[0]", '"git"'), ("argv[1]", '"log"'), ("argv[2]", '"a b"'), ("argv[3]", '""'),
        ("cwd", "/home/me/src"),
        ("mount", "/home/me/src (ro)"), ("mount", "/srv/out (rw)"),
        ("network", "none"),
    ]


def test_escaped() -> None:
    rows = command_block_rows(["echo", "\x1b[2J\u202eevil\nnext"], "/w/\x07", [("/w/\x07", False)])
    for _, value in rows:
        assert "\x1b" not in value and "\u202e" not in value and "\n" not in value
        assert "\x07" not in value
