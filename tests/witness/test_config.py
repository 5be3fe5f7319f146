"""witness.toml (boxmaker/witness/_config.py), from real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker._errors import ConfigError
from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, Signer
from boxmaker.witness._config import (
    MAX_LOGS,
    load_witness_config,
    parse_listen,
)
from tests.fakes.tlog import ORIGIN, log_signer

LOG_KEY = log_signer().verifier.text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "witness.toml"
    path.write_text(text)
    return path


BASE = f'''name = "nas.example/witness"
key_file = "witness.key"
state = "state"
listen = "127.0.0.1:8440"

[[log]]
origin = "{ORIGIN}"
key = "{LOG_KEY}"
'''


def test_a_valid_config(tmp_path: Path) -> None:
    config = load_witness_config(write(tmp_path, BASE))
    assert config.name == "nas.example/witness"
    assert config.key_file == tmp_path / "witness.key"
    assert config.state == tmp_path / "state"
    assert (config.host, config.port) == ("127.0.0.1", 8440)
    assert [k.text() for k in config.logs[ORIGIN]] == [LOG_KEY]
    assert config.source == tmp_path / "witness.toml"


def test_two_keys_for_one_origin_and_absolute_paths(tmp_path: Path) -> None:
    second = log_signer(seed=8).verifier.text()
    text = BASE.replace('"witness.key"', '"/etc/bx/witness.key"') + (
        f'\n[[log]]\norigin = "{ORIGIN}"\nkey = "{second}"\n')
    config = load_witness_config(write(tmp_path, text))
    assert len(config.logs[ORIGIN]) == 2
    assert config.key_file == Path("/etc/bx/witness.key")


@pytest.mark.parametrize(("change", "why"), [
    (('name = "nas.example/witness"', 'name = "bad name"'), "name"),
    (('listen = "127.0.0.1:8440"', 'listen = "127.0.0.1"'), "listen"),
    (('listen = "127.0.0.1:8440"', 'listen = "127.0.0.1:70000"'), "listen"),
    ((f'origin = "{ORIGIN}"', 'origin = "has space"'), "log[0]"),
    ((f'key = "{LOG_KEY}"', 'key = "not+a+key"'), "log[0]"),
    (('state = "state"', 'state = ""'), "state"),
    (('state = "state"', 'state = "state"\nsurprise = 1'), "surprise"),
    ((f'key = "{LOG_KEY}"', f'key = "{LOG_KEY}"\nextra = true'), "extra"),
    (('listen = "127.0.0.1:8440"', 'listen = 8440'), "listen"),
])
def test_invalid_configs(tmp_path: Path, change: tuple[str, str], why: str) -> None:
    with pytest.raises(ConfigError, match=why.replace("[", r"\[")):
        load_witness_config(write(tmp_path, BASE.replace(*change)))


def test_a_cosignature_key_is_not_a_log_key(tmp_path: Path) -> None:
    witness_key = Signer.from_seed("w", TYPE_COSIGNATURE_V1, b"\x03" * 32).verifier.text()
    with pytest.raises(ConfigError, match="Ed25519"):
        load_witness_config(write(tmp_path, BASE.replace(LOG_KEY, witness_key)))


def test_too_many_logs(tmp_path: Path) -> None:
    table = f'\n[[log]]\norigin = "{ORIGIN}"\nkey = "{LOG_KEY}"\n'
    with pytest.raises(ConfigError, match="at most"):
        load_witness_config(write(tmp_path, BASE + table * MAX_LOGS))


def test_missing_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_witness_config(tmp_path / "absent.toml")
    with pytest.raises(ConfigError):
        load_witness_config(write(tmp_path, "name = [unclosed"))


@pytest.mark.parametrize(("text", "parsed"), [
    ("0.0.0.0:8440", ("0.0.0.0", 8440)), ("[::1]:1", ("::1", 1)),
    ("witness.lan:65535", ("witness.lan", 65535)), ("h:0", ("h", 0)),
])
def test_parse_listen(text: str, parsed: tuple[str, int]) -> None:
    assert parse_listen(text) == parsed


@pytest.mark.parametrize("text", ["", ":80", "h:", "h:123456", "h:65536", "a b:1", "::1:80"])
def test_parse_listen_refuses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_listen(text)
