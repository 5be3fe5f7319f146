"""`boxmaker witness key|serve` (boxmaker/witness/_cli.py) with click's runner:
the key is made once and printed; a bad config or key file fails with the
runbook pointer and exit 1."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from boxmaker.proto.tlog._note import parse_verifier_key
from boxmaker.witness._cli import witness
from tests.fakes.tlog import ORIGIN, log_signer

POINTER = "See docs/runbook.md#witness-start-failed"


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "witness.toml"
    path.write_text(f'''name = "nas.example/witness"
key_file = "witness.key"
state = "state"
listen = "127.0.0.1:0"

[[log]]
origin = "{ORIGIN}"
key = "{log_signer().verifier.text()}"
''')
    return path


def test_key_creates_once_and_prints_the_verifier_key(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    runner = CliRunner()
    first = runner.invoke(witness, ["key", "--config", str(config)])
    assert first.exit_code == 0, first.output
    assert "created a new key" in first.stderr
    key = parse_verifier_key(first.stdout.strip())
    assert key.name == "nas.example/witness" and key.key_type == 0x04
    assert (tmp_path / "witness.key").stat().st_mode & 0o077 == 0
    second = runner.invoke(witness, ["key", "--config", str(config)])
    assert second.exit_code == 0 and second.stdout == first.stdout
    assert "created" not in second.stderr


def test_a_bad_config_fails_with_the_pointer(tmp_path: Path) -> None:
    config = tmp_path / "witness.toml"
    config.write_text('name = "x"\n')
    for command in ("key", "serve"):
        result = CliRunner().invoke(witness, [command, "--config", str(config)])
        assert result.exit_code == 1
        assert "the config is not valid" in result.stderr and POINTER in result.stderr


def test_a_readable_key_file_fails_with_the_pointer(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert CliRunner().invoke(witness, ["key", "--config", str(config)]).exit_code == 0
    os.chmod(tmp_path / "witness.key", 0o644)
    result = CliRunner().invoke(witness, ["key", "--config", str(config)])
    assert result.exit_code == 1
    assert "the key file cannot be used" in result.stderr and POINTER in result.stderr


def _damaged(tmp_path: Path) -> Path:
    config = write_config(tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / ("0" * 64 + ".checkpoint")).write_bytes(b"garbage")
    return config


def test_serve_refuses_to_start_on_a_damaged_state(tmp_path: Path) -> None:
    result = CliRunner().invoke(witness, ["serve", "--config", str(_damaged(tmp_path))])
    assert result.exit_code == 1


def test_serve_says_why_it_refuses_a_damaged_state(tmp_path: Path) -> None:
    result = CliRunner().invoke(witness, ["serve", "--config", str(_damaged(tmp_path))])
    assert "the state is damaged" in result.stderr and POINTER in result.stderr
