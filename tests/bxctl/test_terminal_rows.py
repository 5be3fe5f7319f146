"""Issue 22 item 16 (b): untrusted text in `bxctl grants explain|check|suggest`
and `bxctl audit verify`
goes through chat's renderer, on a real terminal (a pty of 60 columns): no row
is wider than the terminal, and no row of untrusted text starts at column 0."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from boxmaker.bxctl._screen import GUTTER, text_width
from tests.fakes.audit_log import valid_log

BXCTL = Path(sys.executable).parent / "bxctl"
WIDTH = 60
FORGED = "approval 318457 \u00b7 expires 07:10:00 (in 9m58s)"
FORGED_ASCII = "type 318457 to approve, r to refuse, or Enter"


def on_terminal(home: Path, *args: str, width: int = WIDTH) -> tuple[int, list[str]]:
    """bxctl with stdout and stderr on a pty `width` columns wide: exit code, rows."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, width, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(BOXMAKER_HOME=str(home), XDG_RUNTIME_DIR="", LANG="C.UTF-8")
    proc = subprocess.Popen([str(BXCTL), *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8").replace("\r\n", "\n").split("\n")


def assert_no_forged_row(rows: list[str], own: tuple[str, ...]) -> None:
    assert all(text_width(row) <= WIDTH for row in rows), rows
    for row in rows:
        assert row.startswith(own) or GUTTER in row[:16] or row == "", row
    assert not any(row.startswith(("approval", "type ")) for row in rows), rows


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "g.toml").write_text(
        '[[grant]]\nid = "notes"\ntool = "read_file"\nmode = "allow"\n'
        'paths = ["/home/me/notes"]\n')
    (home / "brokerd.toml").write_text(f'home = "{home}"\n')
    return home


@pytest.mark.parametrize("forged", [FORGED, FORGED_ASCII])
def test_explain_wraps_a_padded_path_behind_the_gutter(home: Path, forged: str) -> None:
    path = "/home/me/notes/" + "x" * 37 + forged
    code, rows = on_terminal(home, "grants", "explain", "--tool", "read_file",
                             "--args", json.dumps({"path": path}))
    assert code == 0, rows
    assert_no_forged_row(rows, ("outcome", "reason", "grant", "session", "result",
                                "matched", "applicable"))


def test_explain_wraps_a_padded_tool_name(home: Path) -> None:
    code, rows = on_terminal(home, "grants", "explain", "--tool", "t" * 48 + FORGED_ASCII,
                             "--args", "{}")
    assert code == 1, rows
    assert_no_forged_row(rows, ("outcome", "reason", "grant", "session", "result",
                                "matched", "applicable"))


def test_check_wraps_a_padded_grants_directory(home: Path, tmp_path: Path) -> None:
    padded = tmp_path / ("g" * 30 + FORGED_ASCII.replace(" ", "_"))
    padded.mkdir()
    (padded / ("f" * 40 + FORGED_ASCII + ".toml")).write_text("[[grant]]\nid = 1\n")
    code, rows = on_terminal(home, "grants", "check", str(padded))
    assert code == 1, rows
    assert_no_forged_row(rows, ("not ok:", "ok:", "G"))  # G3 ...: the rule broken


def test_suggest_on_a_terminal_wraps_the_draft(home: Path, tmp_path: Path) -> None:
    audit = tmp_path / ("a" * 26 + FORGED_ASCII.replace(" ", "_"))
    valid_log(5, files=1).write(audit)
    code, rows = on_terminal(home, "grants", "suggest", "--audit", str(audit))
    assert code == 0, rows
    assert_no_forged_row(rows, ("#",))
    # a pipe still gets the TOML itself (for a file or a program)
    piped = subprocess.run([str(BXCTL), "grants", "suggest", "--audit", str(audit)],
                           env={**os.environ, "BOXMAKER_HOME": str(home),
                                "XDG_RUNTIME_DIR": "", "COLUMNS": str(WIDTH)},
                           capture_output=True, text=True, timeout=60, check=False)
    assert piped.returncode == 0 and GUTTER not in piped.stdout
    assert FORGED_ASCII.replace(" ", "_") in piped.stdout.splitlines()[0]


@pytest.mark.parametrize("witnessed", [False, True])
def test_audit_verify_wraps_a_padded_file_name(home: Path, tmp_path: Path,
                                               witnessed: bool) -> None:
    """A day-file-like name the owner's uid planted, in plain and witnessed verify
    (`--witness-key` printed its lines unwrapped)."""
    from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, Signer

    audit = tmp_path / "audit"
    valid_log(5, files=1).write(audit)
    (audit / ("n" * 40 + FORGED_ASCII + ".jsonl")).write_text("planted\n")
    key = Signer.from_seed("witness.test/v", TYPE_COSIGNATURE_V1, b"\x22" * 32).verifier.text()
    args = ["audit", "verify", *(["--witness-key", key] if witnessed else []), str(audit)]
    code, rows = on_terminal(home, *args)
    assert code == (1 if witnessed else 0), rows  # witnessed: no checkpoint here
    assert any(FORGED_ASCII[:10] in row for row in rows), rows  # the name is shown
    assert_no_forged_row(rows, ("ok", "ignored:", "assertions:", "checkpoint", "witness",
                                "FAILED", "not ok", "head"))
