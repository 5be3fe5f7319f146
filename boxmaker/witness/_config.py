"""witness.toml (10-checkpoints): strict, unknown keys refused at every depth.

```toml
name = "nas.example/witness"        # the witness's key name
key_file = "witness.key"            # relative paths are under the config file's directory
state = "state"                     # a directory: one file per witnessed log
listen = "0.0.0.0:8440"             # address:port ([v6]:port for IPv6)

[[log]]
origin = "boxmaker/host/0"
key = "boxmaker/host/0+1234abcd+AU..."   # the log's verifier key (`bxctl audit key`)
```
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from .._errors import ConfigError
from .._paths import absolute
from .._toml import TomlFileError, read_toml
from ..proto.tlog import (
    TYPE_ED25519,
    CheckpointError,
    NoteError,
    VerifierKey,
    check_key_name,
    check_origin,
    parse_verifier_key,
)

MAX_LOGS = 1000
_LISTEN = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})")


@attrs.frozen(kw_only=True)
class LogTable:
    origin: str
    key: str


@attrs.frozen(kw_only=True)
class WitnessFile:
    name: str
    key_file: str
    state: str
    listen: str
    log: list[LogTable] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class WitnessConfig:
    name: str
    key_file: Path
    state: Path
    host: str
    port: int
    logs: dict[str, list[VerifierKey]]
    source: Path


def parse_listen(text: str) -> tuple[str, int]:
    match = _LISTEN.fullmatch(text)
    if match is None or not 0 <= int(match.group(2)) <= 65535:
        raise ConfigError("witness", f"listen: {text!r} is not address:port")
    return match.group(1).strip("[]"), int(match.group(2))


def resolve(raw: WitnessFile, source: Path) -> WitnessConfig:
    try:
        check_key_name(raw.name)
    except NoteError as exc:
        raise ConfigError("witness", f"name: {exc}") from exc
    host, port = parse_listen(raw.listen)
    if len(raw.log) > MAX_LOGS:
        raise ConfigError("witness", f"log: at most {MAX_LOGS} logs")
    logs: dict[str, list[VerifierKey]] = {}
    for index, table in enumerate(raw.log):
        where = f"log[{index}]"
        try:
            check_origin(table.origin)
            key = parse_verifier_key(table.key)
        except (CheckpointError, NoteError) as exc:
            raise ConfigError("witness", f"{where}: {exc}") from exc
        if key.key_type != TYPE_ED25519:
            raise ConfigError("witness", f"{where}.key: a log's key is an Ed25519 (0x01) key")
        logs.setdefault(table.origin, []).append(key)
    for text, what in ((raw.key_file, "key_file"), (raw.state, "state")):
        if not text or "\0" in text:
            raise ConfigError("witness", f"{what}: not a path")
    base = absolute(source).parent
    return WitnessConfig(name=raw.name, key_file=absolute(base / raw.key_file),
                         state=absolute(base / raw.state), host=host, port=port,
                         logs=logs, source=absolute(source))


def load_witness_config(path: Path) -> WitnessConfig:
    try:
        raw = read_toml(path, WitnessFile)
    except TomlFileError as exc:
        raise ConfigError("witness", str(exc)) from exc
    return resolve(raw, path)
