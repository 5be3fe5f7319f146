"""brokerd.toml's `[checkpoints]` resolved (10-checkpoints): the origin (default
``boxmaker/<hostname>/<instance>``), the interval, the witnesses."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path
from typing import Any

import attrs

from ._errors import ConfigurationError
from .proto._grammar import GrammarError, Url, parse_endpoint_url
from .proto.tlog import (
    TYPE_COSIGNATURE_V1,
    CheckpointError,
    NoteError,
    VerifierKey,
    check_origin,
    parse_verifier_key,
)

INTERVAL_MS_MIN = 100
INTERVAL_MS_MAX = 86_400_000
MAX_WITNESSES = 16


class CheckpointsConfigError(ConfigurationError, ValueError):
    pass


@attrs.frozen(kw_only=True)
class WitnessSetting:
    url: str
    parsed: Url
    key: VerifierKey


@attrs.frozen(kw_only=True)
class CheckpointSettings:
    origin: str = "boxmaker/unset/0"
    origin_explicit: bool = False
    """Set in brokerd.toml; else the default, or the existing key's name."""
    interval_ms: int = 10_000
    witnesses: tuple[WitnessSetting, ...] = ()


def instance_of(home: Path) -> str:
    """08-runner's instance: the first 8 hex digits of SHA-256 of the home path."""
    return hashlib.sha256(os.fsencode(home)).hexdigest()[:8]


def resolve_checkpoints(table: Any, home: Path) -> CheckpointSettings:
    origin = table.origin
    if origin is None:
        origin = f"boxmaker/{socket.gethostname()}/{instance_of(home)}"
    try:
        check_origin(origin)
    except CheckpointError as exc:
        raise CheckpointsConfigError(
            f"checkpoints.origin: {exc}; set [checkpoints] origin") from exc
    if not INTERVAL_MS_MIN <= table.interval_ms <= INTERVAL_MS_MAX:
        raise CheckpointsConfigError(
            f"checkpoints.interval_ms: {table.interval_ms} is outside "
            f"{INTERVAL_MS_MIN}..{INTERVAL_MS_MAX}")
    if len(table.witnesses) > MAX_WITNESSES:
        raise CheckpointsConfigError(f"checkpoints.witnesses: at most {MAX_WITNESSES}")
    witnesses: list[WitnessSetting] = []
    for index, entry in enumerate(table.witnesses):
        where = f"checkpoints.witnesses[{index}]"
        try:
            parsed = parse_endpoint_url(entry.url)
        except GrammarError as exc:
            raise CheckpointsConfigError(f"{where}.url: {exc}") from exc
        try:
            key = parse_verifier_key(entry.key)
        except NoteError as exc:
            raise CheckpointsConfigError(f"{where}.key: {exc}") from exc
        if key.key_type != TYPE_COSIGNATURE_V1:
            raise CheckpointsConfigError(
                f"{where}.key: a witness key is a cosignature/v1 (0x04) key "
                "(`boxmaker witness key` prints it)")
        if any(w.key == key for w in witnesses):
            raise CheckpointsConfigError(f"{where}.key: the same witness twice")
        witnesses.append(WitnessSetting(url=entry.url, parsed=parsed, key=key))
    return CheckpointSettings(origin=origin, origin_explicit=table.origin is not None,
                              interval_ms=table.interval_ms, witnesses=tuple(witnesses))
