"""`bxctl grants check|explain` on real grant files (07-bxctl), with CliRunner."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from boxmaker.bxctl._cli import cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "grants"

NOTES = """
[[grant]]
id = "notes-read"
tool = "read_file"
mode = "allow"
paths = ["/home/me/notes"]
label = "private"
max_label = "private"

[[grant]]
id = "docs-fetch"
tool = "http_fetch"
mode = "ask"
hosts = ["docs.python.org"]

[[grant]]
id = "python-any"
tool = "http_fetch"
mode = "allow"
hosts = ["*.python.org"]

[[grant]]
id = "home-read"
tool = "read_file"
mode = "allow"
paths = ["/home"]
max_label = "secret"
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "notes.toml").write_text(NOTES)
    return home


def run(home: Path, *args: str) -> Result:
    env = {"BOXMAKER_HOME": str(home), "XDG_RUNTIME_DIR": str(home.parent / "run"),
           "COLUMNS": "1000"}  # wide: these tests read whole lines
    return CliRunner().invoke(cli, list(args), env=env)


def explain(home: Path, *args: str) -> Result:
    return run(home, "grants", "explain", *args)


# -- check -------------------------------------------------------------------------------

def test_check_ok_uses_the_configured_directory(home: Path) -> None:
    result = run(home, "grants", "check")
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"ok: 4 grants in {home / 'grants'}, digest ")
    assert result.stderr == ""


def test_check_json_is_the_report(home: Path) -> None:
    result = run(home, "grants", "check", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert list(doc) == ["ok", "count", "digest", "problems", "dormant"]
    assert doc["dormant"] == []
    assert doc["ok"] is True and doc["count"] == 4 and len(doc["digest"]) == 64
    assert result.stdout.count("\n") == 1


def test_check_invalid_lists_every_problem(home: Path) -> None:
    result = run(home, "grants", "check", str(FIXTURES / "several-problems"))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 10
    assert lines[0].startswith("G2 a.toml grant 0: ")
    assert lines[7].startswith("G3 a.toml grant 2 (good-one): id \"good-one\" is used twice")
    assert lines[-1].startswith("not ok: 9 problems in 1 file of ")
    assert lines[-1].endswith("docs/runbook.md#grants-invalid")


def test_check_invalid_json(home: Path) -> None:
    result = run(home, "grants", "check", str(FIXTURES / "G1-file"), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    expected = json.loads((FIXTURES / "G1-file" / "expected.json").read_text())
    assert doc["ok"] is False and doc["count"] == 0
    assert doc["problems"] == expected["problems"]


def test_check_missing_directory(home: Path) -> None:
    result = run(home, "grants", "check", str(home / "nope"))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip().endswith("docs/runbook.md#grants-missing")


def test_check_escapes_what_it_prints(home: Path) -> None:
    grants = home / "grants"
    (grants / "evil\x1b[2J.toml").write_text('[[grant]]\nid = "x"\ntool = "\x1b]0;pwn\x07"\n')
    result = run(home, "grants", "check")
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "evil\\u{001B}[2J.toml" in result.stdout


# -- explain -----------------------------------------------------------------------------

def test_explain_json_shape(home: Path) -> None:
    result = explain(home, "--tool", "http_fetch", "--args",
                     '{"url": "https://docs.python.org/3/library/ssl.html"}', "--untrusted",
                     "--label", "private", "--json")
    assert result.exit_code == 1, result.output  # nothing applies at private
    doc = json.loads(result.stdout)
    assert list(doc) == ["outcome", "code", "reason", "grant", "label", "untrusted", "matched",
                         "applicable"]
    assert (doc["outcome"], doc["code"]) == ("denied", "taint")
    result = explain(home, "--tool", "http_fetch", "--args",
                     '{"url": "https://docs.python.org/3/library/ssl.html"}', "--untrusted",
                     "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc == {
        "outcome": "ask", "code": None, "reason": doc["reason"], "grant": "docs-fetch",
        "label": "public", "untrusted": True, "matched": ["docs-fetch", "python-any"],
        "applicable": ["docs-fetch", "python-any"],
    }


def test_explain_allowed_text(home: Path) -> None:
    result = explain(home, "--tool", "read_file", "--args", '{"path": "/home/me/notes/todo.md"}')
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "outcome     allowed"
    assert lines[2] == ("grant       notes-read (allow, max_label private), "
                        "entry /home/me/notes")
    assert lines[4] == "result      private, trusted"
    assert lines[5] == ("matched     home-read (allow, max_label secret), "
                        "notes-read (allow, max_label private)")
    assert lines[6] == "applicable  home-read, notes-read"


def test_explain_label_option(home: Path) -> None:
    result = explain(home, "--tool", "read_file", "--args", '{"path": "/home/me/notes/todo.md"}',
                     "--label", "secret", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert (doc["grant"], doc["applicable"], doc["label"]) == ("home-read", ["home-read"],
                                                                "public")


@pytest.mark.parametrize("args", ["{", "[]", '"x"', '{"a": 1, "a": 2}', '{"a": NaN}', ""])
def test_explain_bad_json_is_usage(home: Path, args: str) -> None:
    result = explain(home, "--tool", "read_file", "--args", args)
    assert result.exit_code == 2
    assert result.stdout == ""


def test_explain_unknown_label_is_usage(home: Path) -> None:
    result = explain(home, "--tool", "echo", "--args", "{}", "--label", "top-secret")
    assert result.exit_code == 2


def test_explain_denials_exit_1(home: Path) -> None:
    for tool, args, code in [
        ("shell", "{}", "unknown_tool"),
        ("read_file", '{"path": "/home/me/../etc/shadow"}', "bad_args"),
        ("read_file", '{"path": "/etc/shadow"}', "no_grant"),
        ("read_file", json.dumps({"path": str(home / "audit" / "x.jsonl")}), "protected"),
    ]:
        result = explain(home, "--tool", tool, "--args", args, "--json")
        assert result.exit_code == 1, (tool, args, result.output)
        assert json.loads(result.stdout)["code"] == code


def test_explain_escapes_hostile_text(home: Path) -> None:
    result = explain(home, "--tool", "read_\x1b[31mfile\u202e", "--args",
                     '{"path": "/home/me/notes/\\u001b]0;x\\u0007\\u202e"}')
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    result = explain(home, "--tool", "read_file", "--args",
                     '{"path": "/home/me/notes/\\u202eevil"}')
    assert result.exit_code == 0
    assert "\u202e" not in result.stdout and "\\u{202E}evil" in result.stdout


def test_explain_invalid_grants_json_prints_the_report(home: Path) -> None:
    result = explain(home, "--tool", "echo", "--args", '{"text": "x"}', "--grants",
                     str(FIXTURES / "G9-strictness"), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert list(doc) == ["ok", "count", "digest", "problems"]
    assert doc["problems"][0]["rule"] == "G9"
    result = explain(home, "--tool", "echo", "--args", '{"text": "x"}', "--grants",
                     str(FIXTURES / "G9-strictness"))
    assert result.exit_code == 1
    assert "outcome     denied: grants_invalid" in result.stdout


def test_explain_missing_grants_directory(home: Path) -> None:
    result = explain(home, "--tool", "echo", "--args", "{}", "--grants", str(home / "none"))
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("docs/runbook.md#grants-missing")


# -- protected paths from brokerd's config ---------------------------------------------------

def _read(home: Path, path: str, *extra: str) -> str:
    result = explain(home, "--tool", "read_file", "--args", json.dumps({"path": path}),
                     "--json", *extra)
    assert result.exit_code in (0, 1), result.output
    return str(json.loads(result.stdout)["code"] or json.loads(result.stdout)["outcome"])


def test_default_protected_paths(home: Path) -> None:
    # no brokerd.toml: $BOXMAKER_HOME and brokerd's default directories
    assert _read(home, str(home)) == "protected"
    assert _read(home, str(home / "grants" / "notes.toml")) == "protected"
    assert _read(home, str(home.parent / "run" / "boxmaker" / "admin.sock")) == "protected"
    assert _read(home, str(home.parent / "run" / "other")) == "no_grant"


def test_protected_paths_from_brokerd_toml(home: Path, tmp_path: Path) -> None:
    var = tmp_path / "var"
    (home / "brokerd.toml").write_text(
        f'home = "{var}"\n[paths]\naudit = "/srv/audit"\n'
        f'[sockets]\nadmin = "/srv/sock/admin.sock"\n'
        f'[policy]\nprotected = ["/home/me/notes/secret"]\n[runner]\nkind = "echo"\n'
    )
    grants = home / "grants"
    (grants / "srv.toml").write_text('[[grant]]\nid = "srv"\ntool = "read_file"\n'
                                     'mode = "allow"\npaths = ["/srv", "/tmp"]\n')
    assert _read(home, "/srv/audit/x") == "protected"
    assert _read(home, "/srv/sock/admin.sock") == "protected"
    assert _read(home, "/srv/other") == "allowed"
    assert _read(home, "/home/me/notes/secret/a") == "protected"
    assert _read(home, "/home/me/notes/a") == "allowed"
    assert _read(home, str(var / "state" / "sessions")) == "protected"
    # [policy] protected replaces the $BOXMAKER_HOME default; the config's directory stays
    assert _read(home, str(home / "x")) == "protected"
    # --brokerd-config names another file
    other = tmp_path / "etc" / "brokerd.toml"
    other.parent.mkdir()
    other.write_text("")
    assert _read(home, "/srv/audit/x", "--brokerd-config", str(other)) == "allowed"
    assert _read(home, str(other), "--brokerd-config", str(other)) == "protected"


def test_bad_brokerd_config_is_usage(home: Path, tmp_path: Path) -> None:
    for text in ["home = 5\n", "[policy]\nprotected = \"/x\"\n", "[[[", "[paths]\ngrants = 1\n"]:
        (home / "brokerd.toml").write_text(text)
        result = explain(home, "--tool", "echo", "--args", '{"text": "x"}')
        assert result.exit_code == 2, text
    os.unlink(home / "brokerd.toml")
    result = explain(home, "--tool", "echo", "--args", '{"text": "x"}', "--brokerd-config",
                     str(tmp_path / "missing.toml"))
    assert result.exit_code == 2


def test_text_arguments_that_are_not_utf8_are_usage(home: Path) -> None:
    result = explain(home, "--tool", "echo\udcff", "--args", '{"text": "x"}')
    assert result.exit_code == 2
    result = explain(home, "--tool", "echo", "--args", '{"text": "\udcff"}')
    assert result.exit_code == 2


GIT_GRANT = """
[[grant]]
id = "git-log"
tool = "run_command"
mode = "allow"
paths = ["/home/me/src"]
commands = [["git", "log"]]
"""


def test_explain_run_command_token_by_token(home: Path) -> None:
    (home / "grants" / "git.toml").write_text(GIT_GRANT)
    args = '{"argv": ["git", "-c", "core.pager=sh", "log"], "cwd": "/home/me/src"}'
    result = explain(home, "--tool", "run_command", "--args", args)
    assert result.exit_code == 1, result.output  # no_grant: rest none, and -c is not log
    text = result.stdout
    assert "grant git-log (allow, rest none)" in text
    assert '[1] "-c" != "log"' in text
    assert "the grant does not match" in text
    result = explain(home, "--tool", "run_command", "--args",
                     '{"argv": ["git", "log"], "cwd": "/home/me/src"}', "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["outcome"] == "allowed" and doc["grant"] == "git-log"
    (one,) = doc["commands"]
    assert one["matched"] is True and one["cwd"]["entry"] == "/home/me/src"
    assert [t["got"] for t in one["prefixes"][0]["tokens"]] == ["git", "log"]


OPT_GRANT = """
[[grant]]
id = "opt-tools"
tool = "run_command"
mode = "allow"
paths = ["/opt"]
commands = [["ls"]]
"""


def test_g21_against_brokerds_commands_path(home: Path, tmp_path: Path) -> None:
    (home / "grants" / "opt.toml").write_text(OPT_GRANT)
    config = tmp_path / "brokerd.toml"
    config.write_text(f'[runner]\nkind = "echo"\n[commands]\nimage = "sha256:{"a" * 64}"\n'
                      'path = "/opt/tools/bin:/usr/bin"\n')
    # without [commands] in brokerd.toml there is no PATH to check against
    assert run(home, "grants", "check").exit_code == 0
    result = run(home, "grants", "check", "--brokerd-config", str(config), "--json")
    assert result.exit_code == 1, result.output
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["rule"] == "G21" and problem["grant"] == "opt-tools"
    assert "/opt/tools/bin" in problem["message"]
    (home / "brokerd.toml").write_text(config.read_text())  # the default: as brokerd sees it
    result = run(home, "grants", "check")
    assert result.exit_code == 1 and "G21" in result.stdout, result.output
    os.unlink(home / "brokerd.toml")
    # explain reads brokerd.toml anyway: the same set is invalid there
    args = '{"argv": ["ls"], "cwd": "/opt"}'
    assert explain(home, "--tool", "run_command", "--args", args).exit_code == 0
    result = explain(home, "--tool", "run_command", "--args", args,
                     "--brokerd-config", str(config))
    assert result.exit_code == 1 and "G21" in result.stdout, result.output
    bad = tmp_path / "bad.toml"
    bad.write_text("[commands]\nimage = 5\n")
    assert run(home, "grants", "check", "--brokerd-config", str(bad)).exit_code == 2
