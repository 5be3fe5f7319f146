"""brokerd.toml's [commands] table: defaults, each bound, unknown keys, absent = unchanged."""

from __future__ import annotations

import pytest

from boxmaker._brokerd_config import BrokerdFile, parse_config
from boxmaker._commands_config import (
    CommandsSettings,
    CommandsTable,
    commands_problem,
    resolve_commands,
)
from boxmaker._errors import ConfigError

IMAGE = "sha256:" + "ab" * 32
HOME = 'home = "/srv/bx"\n'


def test_absent_changes_nothing() -> None:
    config = parse_config(HOME.encode(), None)
    assert config.commands is None
    assert BrokerdFile().commands is None


def test_defaults() -> None:
    config = parse_config(f'{HOME}[commands]\nimage = "{IMAGE}"\n'.encode(), None)
    assert config.commands == CommandsSettings(
        image=IMAGE, path=("/usr/local/bin", "/usr/bin", "/bin"), memory="512m", pids=256,
        cpus=1.0, tmp="256m", timeout_ms=120_000, output_max_bytes=1_048_576,
    )
    assert config.commands.path_env == "/usr/local/bin:/usr/bin:/bin"


def test_every_key() -> None:
    text = (f'{HOME}[commands]\nimage = "{IMAGE}"\npath = "/opt/bin"\nmemory = "1g"\n'
            'pids = 10\ncpus = 2\ntmp = "16m"\ntimeout_ms = 3600000\noutput_max_bytes = 4096\n')
    got = parse_config(text.encode(), None).commands
    assert got is not None
    assert (got.path, got.memory, got.pids, got.cpus, got.tmp, got.timeout_ms,
            got.output_max_bytes) == (("/opt/bin",), "1g", 10, 2.0, "16m", 3_600_000, 4096)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("", "image"),
        ('image = "localhost/cmds:latest"', "by id"),
        ('image = "sha256:abc"', "by id"),
        (f'image = "{IMAGE}"\nnetwork = "host"', "network"),
        (f'image = "{IMAGE}"\npath = ""', "entry 0 is empty"),
        (f'image = "{IMAGE}"\npath = "/usr/bin::/bin"', "entry 1 is empty"),
        (f'image = "{IMAGE}"\npath = "/usr/bin:"', "entry 1 is empty"),
        (f'image = "{IMAGE}"\npath = "bin"', "absolute"),
        (f'image = "{IMAGE}"\npath = "/usr/bin/"', "ends with /"),
        (f'image = "{IMAGE}"\npath = "/"', "may not be /"),
        (f'image = "{IMAGE}"\npath = "' + ":".join(["/b"] * 17) + '"', "1 to 16"),
        (f'image = "{IMAGE}"\nmemory = "lots"', "commands.memory"),
        (f'image = "{IMAGE}"\ntmp = "0m"', "commands.tmp"),
        (f'image = "{IMAGE}"\npids = 0', "commands.pids"),
        (f'image = "{IMAGE}"\ntimeout_ms = 0', "commands.timeout_ms"),
        (f'image = "{IMAGE}"\ntimeout_ms = 3600001', "commands.timeout_ms"),
        (f'image = "{IMAGE}"\noutput_max_bytes = 4095', "commands.output_max_bytes"),
        (f'image = "{IMAGE}"\noutput_max_bytes = 67108864', "commands.output_max_bytes"),
        (f'image = "{IMAGE}"\ncpus = 0.001', "commands.cpus"),
        (f'image = "{IMAGE}"\npids = "10"', "pids"),
    ],
)
def test_refused(body: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_config(f"{HOME}[commands]\n{body}\n".encode(), None)


def test_sixteen_entries_are_enough() -> None:
    table = CommandsTable(image=IMAGE, path=":".join(f"/b{n}" for n in range(16)))
    assert commands_problem(table, output_bound=8 << 20) is None
    assert len(resolve_commands(table).path) == 16
