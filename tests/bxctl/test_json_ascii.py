"""Every `--json` output of bxctl is ASCII (issue 11): real bxctl processes, real files.

C1 controls (U+0085), bidirectional controls (U+202E), DEL (U+007F, ASCII but
a control) and plain non-ASCII text from file names, grant files and
arguments all come out as JSON escapes, so a terminal shows them inertly and
a script reads back the same value.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.fakes.audit_log import valid_log
from tests.fakes.brokerd import BXCTL

HOSTILE = "n\u0085\u202e\x7f\u00e9\u4e2d"


def bxctl(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, BOXMAKER_HOME=str(home), XDG_RUNTIME_DIR=str(home / "run"))
    return subprocess.run([str(BXCTL), *args], capture_output=True, text=True, timeout=60,
                          check=False, env=env)


def is_plain_ascii(text: str) -> bool:
    return text.isascii() and "\x7f" not in text and all(
        ch >= " " or ch == "\n" for ch in text)


def test_audit_verify_json_escapes_ignored_file_names(tmp_path: Path) -> None:
    audit = valid_log(3).write(tmp_path / "audit")
    (audit / f"{HOSTILE}.jsonl").write_bytes(b"x\n")
    result = bxctl(tmp_path, "audit", "verify", str(audit), "--json")
    assert result.returncode == 0, result.stderr
    assert is_plain_ascii(result.stdout), ascii(result.stdout)
    assert json.loads(result.stdout)["ignored_files"] == [f"{HOSTILE}.jsonl"]


def test_audit_show_json_is_ascii(tmp_path: Path) -> None:
    audit = valid_log(3).write(tmp_path / "audit")
    result = bxctl(tmp_path, "audit", "show", str(audit), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout and is_plain_ascii(result.stdout)


def test_grants_check_and_explain_json_are_ascii(tmp_path: Path) -> None:
    grants = tmp_path / "grants"
    grants.mkdir()
    (grants / f"{HOSTILE}.toml").write_text(f'[[grant]]\nid = "x"\ntool = "{HOSTILE}"\n')
    check = bxctl(tmp_path, "grants", "check", "--json")
    assert check.returncode == 1
    assert is_plain_ascii(check.stdout), ascii(check.stdout)
    [problem] = json.loads(check.stdout)["problems"]
    assert problem["file"] == f"{HOSTILE}.toml"  # the same name, read back from the escapes
    (grants / f"{HOSTILE}.toml").unlink()
    (grants / "echo.toml").write_text('[[grant]]\nid = "echo-all"\ntool = "echo"\n'
                                      'mode = "allow"\n')
    explain = bxctl(tmp_path, "grants", "explain", "--tool", "echo", "--args",
                    json.dumps({"text": HOSTILE}), "--json")
    assert explain.returncode == 0, explain.stderr
    assert is_plain_ascii(explain.stdout), ascii(explain.stdout)
    assert json.loads(explain.stdout)["outcome"] == "allowed"
    denied = bxctl(tmp_path, "grants", "explain", "--tool", HOSTILE, "--args",
                   json.dumps({"text": HOSTILE}), "--json")
    assert denied.returncode == 1
    assert is_plain_ascii(denied.stdout), ascii(denied.stdout)
