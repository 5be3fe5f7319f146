"""docs/grants.md: every worked example runs and prints exactly what the doc shows.

An example starts at a ``<!-- example: NAME -->`` marker.  Its ```` ```toml ````
blocks are grant files (the first line names the file, ``# grants/NAME.toml``);
its ```` ```console ```` blocks hold ``$ bxctl ...`` commands, each followed by
its expected output.  The commands run against those files in a fresh
directory, with ``$BOXMAKER_HOME`` set to the home the doc names.  A block may
also name another directory (``# proposed/NAME.toml``); the "week" example gets
its audit log (`tests.fakes.week_log`, decided with the example's grants) in
``audit/``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from boxmaker.bxctl._cli import cli
from boxmaker.policy._load import load_grants
from boxmaker.policy._model import GrantSet
from tests.fakes.week_log import write_week

DOC = Path(__file__).resolve().parent.parent / "docs" / "grants.md"
HOME = "/home/me/.local/share/boxmaker"
RUNTIME = "/run/user/1000"


@attrs.define
class Command:
    line: int
    text: str
    expected: list[str] = attrs.field(factory=list)


@attrs.define
class Example:
    name: str
    files: dict[str, str] = attrs.field(factory=dict)
    commands: list[Command] = attrs.field(factory=list)


def parse_examples(text: str) -> list[Example]:
    examples: list[Example] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = re.fullmatch(r"<!-- example: (\S+) -->", line.strip())
        if marker:
            examples.append(Example(marker.group(1)))
        elif line.startswith("```") and examples and line.strip() in ("```toml", "```console"):
            kind = line.strip()[3:]
            start = i + 1
            i += 1
            while lines[i] != "```":
                i += 1
            body = lines[start:i]
            if kind == "toml":
                name = re.fullmatch(r"# ((?:grants|proposed)/\S+\.toml)", body[0])
                assert name, f"line {start + 1}: a grant file block starts with # grants/NAME"
                examples[-1].files[name.group(1)] = "\n".join(body[1:]) + "\n"
            else:
                for number, body_line in enumerate(body, start + 1):
                    if body_line.startswith("$ "):
                        examples[-1].commands.append(Command(number, body_line[2:]))
                    else:
                        examples[-1].commands[-1].expected.append(body_line)
        i += 1
    return examples


def run_command(command: Command) -> tuple[int, str, str]:
    """Run one command in the current directory, which holds `grants/`."""
    argv = shlex.split(command.text)
    assert argv[0] == "bxctl"
    argv = argv[1:]
    if argv[:2] in (["grants", "explain"], ["grants", "suggest"]) and "--grants" not in argv:
        argv += ["--grants", "grants"]  # the doc's sessions run in the boxmaker home
    # a wide terminal: the examples show whole lines (bxctl wraps at the width it has)
    env = {"BOXMAKER_HOME": HOME, "XDG_RUNTIME_DIR": RUNTIME, "COLUMNS": "1000"}
    result = CliRunner().invoke(cli, argv, env=env)
    return result.exit_code, result.stdout, result.stderr


def _write_example(example: Example, directory: Path) -> None:
    for name, content in example.files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(content)
    if example.name == "week":
        grants = load_grants(directory / "grants")
        assert isinstance(grants, GrantSet)
        write_week(directory / "audit", grants)


def _expected_exit(command: Command, stdout: str) -> int:
    if " check" in command.text:
        return 0 if stdout.splitlines()[-1].startswith("ok: ") else 1
    if " suggest" in command.text:
        return 0
    if " replay" in command.text:
        if "--json" in command.text:
            matrix = json.loads(stdout)["matrix"]
            return 1 if any(now == "allowed" != was for was, row in matrix.items()
                            for now in row) else 0
        return 0 if stdout.splitlines()[-1].startswith("ok: ") else 1
    if "--json" in command.text:
        doc = json.loads(stdout)
        return 0 if doc.get("outcome") in ("allowed", "ask") else 1
    return 0 if stdout.splitlines()[0] in ("outcome     allowed", "outcome     ask") else 1


EXAMPLES = parse_examples(DOC.read_text())


def test_the_doc_has_examples() -> None:
    assert [e.name for e in EXAMPLES] == ["notes", "web", "broken", "week"]
    assert sum(len(e.commands) for e in EXAMPLES) >= 15
    for example in EXAMPLES:
        assert example.files and example.commands


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example(example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_example(example, tmp_path)
    monkeypatch.chdir(tmp_path)
    for command in example.commands:
        code, stdout, stderr = run_command(command)
        where = f"docs/grants.md line {command.line}: {command.text}"
        assert stdout == "\n".join(command.expected) + "\n", where
        assert stderr == "", where
        assert code == _expected_exit(command, stdout), where
