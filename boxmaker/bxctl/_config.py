"""bxctl.toml (07-bxctl): every key optional, unknown keys refused."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from .._errors import ConfigError
from .._paths import boxmaker_home, default_socket, under
from .._toml import TomlFileError, read_toml


@attrs.frozen(kw_only=True)
class BxctlFile:
    home: str | None = None
    admin_socket: str | None = None
    loop_socket: str | None = None
    grants: str = "grants"
    audit: str = "audit"
    state: str = "state"
    brokerd_uid: int | None = None
    loopd_uid: int | None = None


@attrs.frozen(kw_only=True)
class BxctlConfig:
    """bxctl's settings with every default resolved."""

    home: Path
    admin_socket: Path
    loop_socket: Path
    grants: Path
    audit: Path
    state: Path
    brokerd_uid: int
    loopd_uid: int
    source: Path | None


def load_config(path: Path | None) -> BxctlConfig:
    """Read `path` (or the default, when it exists) and resolve the defaults."""
    explicit = path is not None
    if path is None:
        path = boxmaker_home() / "bxctl.toml"
    raw: BxctlFile
    if path.exists() or explicit:
        try:
            raw = read_toml(path, BxctlFile)
        except TomlFileError as exc:
            raise ConfigError("bxctl", str(exc)) from exc
        source: Path | None = path
    else:
        raw = BxctlFile()
        source = None
    home = Path(raw.home) if raw.home else boxmaker_home()
    uid = os.getuid()
    return BxctlConfig(
        home=home,
        admin_socket=under(home, raw.admin_socket)
        if raw.admin_socket
        else default_socket(home, "admin.sock"),
        loop_socket=under(home, raw.loop_socket)
        if raw.loop_socket
        else default_socket(home, "loop.sock"),
        grants=under(home, raw.grants),
        audit=under(home, raw.audit),
        state=under(home, raw.state),
        brokerd_uid=raw.brokerd_uid if raw.brokerd_uid is not None else uid,
        loopd_uid=raw.loopd_uid if raw.loopd_uid is not None else uid,
        source=source,
    )
