"""loopd.toml: defaults, strictness, checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker._errors import ConfigError
from boxmaker._http import Endpoint
from boxmaker.loopd._config import DEFAULT_TOOLS, load_config

FULL = """
home = "{home}"
socket = "run/loop.sock"
owner_uids = [1000, 1001]

[inference]
socket = "run/infer.sock"
model = "gemma"
slot = 1
n_ctx_per_slot = 8192
slots = 2
load_timeout_s = 60
first_event_timeout_s = 30.5
idle_timeout_s = 6
turn_timeout_s = 100
temperature = 0.2

[broker]
socket = "/run/boxmaker/broker.sock"
timeout_ms = 5000
brokerd_uid = 999

[loop]
max_rounds = 3
tools = ["read_file", "echo"]
"""


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "loopd.toml"
    path.write_text(text)
    return path


def test_every_default_without_a_file(tmp_path: Path) -> None:
    config = load_config(None)
    home = tmp_path / "home"
    assert config.source is None
    assert config.home == home
    assert config.socket == home / "run" / "loop.sock"
    assert config.owner_uids == (os.getuid(),)
    inf = config.inference
    assert inf.endpoint == Endpoint.unix(home / "run" / "infer.sock")
    assert (inf.model, inf.slot, inf.n_ctx_per_slot, inf.slots) == ("local", 0, 262144, 4)
    assert (inf.load_timeout_s, inf.first_event_timeout_s, inf.idle_timeout_s,
            inf.turn_timeout_s, inf.temperature) == (600, 300, 60, 1800, 0.7)
    assert inf.timeouts.first_event_s == 300 and inf.timeouts.idle_s == 60
    assert config.broker.socket == home / "run" / "broker.sock"
    assert (config.broker.timeout_ms, config.broker.brokerd_uid) == (60000, os.getuid())
    assert (config.max_rounds, config.tools) == (8, DEFAULT_TOOLS)
    assert config.conversations == home / "conversations"
    assert config.core_md == home / "core.md"


def test_sockets_under_xdg_runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    config = load_config(None)
    assert config.socket == tmp_path / "xdg" / "boxmaker" / "loop.sock"
    assert config.inference.endpoint.unix_socket == tmp_path / "xdg" / "boxmaker" / "infer.sock"


def test_every_key(tmp_path: Path) -> None:
    home = tmp_path / "h"
    config = load_config(write(tmp_path, FULL.format(home=home)))
    assert config.source == tmp_path / "loopd.toml"
    assert config.socket == home / "run" / "loop.sock"
    assert config.owner_uids == (1000, 1001)
    assert config.inference.endpoint == Endpoint.unix(home / "run" / "infer.sock")
    assert (config.inference.slot, config.inference.slots, config.inference.n_ctx_per_slot) == (
        1, 2, 8192)
    assert config.inference.first_event_timeout_s == 30.5
    assert config.broker.socket == Path("/run/boxmaker/broker.sock")
    assert (config.broker.timeout_ms, config.broker.brokerd_uid) == (5000, 999)
    assert config.tools == ("read_file", "echo") and config.max_rounds == 3


def test_mcp_entries_are_not_checked_at_load(tmp_path: Path) -> None:
    # 12-tool-sources "loopd": the server may be unpinned, or not declared yet
    config = load_config(write(tmp_path, '[loop]\ntools = ["read_file", "mcp.git.*", '
                                         '"mcp.time.get_current_time"]\n'))
    assert config.tools == ("read_file", "mcp.git.*", "mcp.time.get_current_time")


def test_url_instead_of_socket(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[inference]\nurl = "http://127.0.0.1:8080"\n'))
    assert config.inference.endpoint == Endpoint.tcp("127.0.0.1", 8080)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("surprise = 1\n", "surprise"),
        ("[inference]\nsurprise = 1\n", "surprise"),
        ("[loop]\nmax_rounds = 1\n[loop.deep]\nx = 1\n", "deep"),
        ('[inference]\nsocket = "a"\nurl = "http://x:1"\n', "not both"),
        ('[inference]\nurl = "https://x:1"\n', "http://"),
        ('[inference]\nurl = "http://x:1/v1"\n', "host:port"),
        ("[inference]\nslots = 0\n", "slots"),
        ("[inference]\nslot = 4\n", "slot"),
        ("[inference]\nslot = -1\n", "slot"),
        ("[inference]\nn_ctx_per_slot = 0\n", "n_ctx_per_slot"),
        ("[inference]\nidle_timeout_s = 0\n", "idle_timeout_s"),
        ("[inference]\nload_timeout_s = -5\n", "load_timeout_s"),
        ("[inference]\nload_timeout_s = inf\n", "load_timeout_s"),
        ("[inference]\nload_timeout_s = \"600\"\n", "load_timeout_s"),
        ("[inference]\ntemperature = 3.0\n", "temperature"),
        ('[inference]\nmodel = ""\n', "model"),
        ("[inference]\nslots = true\n", "slots"),
        ("[broker]\ntimeout_ms = 0\n", "timeout_ms"),
        ("[broker]\nbrokerd_uid = -1\n", "brokerd_uid"),
        ("owner_uids = []\n", "owner_uids"),
        ("owner_uids = [4294967295]\n", "owner_uids"),
        ("[loop]\nmax_rounds = 0\n", "max_rounds"),
        ('[loop]\ntools = ["rm_rf"]\n', "rm_rf"),
        ('[loop]\ntools = ["read_file", "read_file"]\n', "twice"),
        ('[loop]\ntools = ["mcp.git"]\n', "mcp.<server id>"),
        ('[loop]\ntools = ["mcp__git__git_log"]\n', "mcp__git__git_log"),
        ('[loop]\ntools = ["mcp.git.*", "mcp.git.*"]\n', "twice"),
        ("[inference\n", "loopd.toml"),
    ],
)
def test_refused(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_config(write(tmp_path, text))


def test_explicit_missing_file_and_bad_utf8(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.toml")
    path = tmp_path / "loopd.toml"
    path.write_bytes(b"home = \"\xff\"\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)
