"""loopd.toml (06-loopd): strict, every key optional.

`load_config` reads the file (or none: every default), refuses unknown keys at
every depth, checks every value, and resolves paths: relative ones under
`home`, sockets under ``$XDG_RUNTIME_DIR/boxmaker`` or ``home/run`` like
brokerd's.  Pure apart from reading the file and the environment.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import attrs

from .._errors import ConfigError
from .._http import Endpoint, Timeouts
from .._paths import UID_MAX, absolute, boxmaker_home, default_socket, under
from .._toml import TomlFileError, read_toml
from ._tools import DEFAULT_TOOLS, KNOWN_TOOLS, mcp_entry


@attrs.frozen(kw_only=True)
class InferenceTable:
    socket: str | None = None
    url: str | None = None
    model: str = "local"
    slot: int = 0
    n_ctx_per_slot: int = 262144
    slots: int = 4
    load_timeout_s: float = 600.0
    first_event_timeout_s: float = 300.0
    idle_timeout_s: float = 60.0
    turn_timeout_s: float = 1800.0
    connect_timeout_s: float = 10.0
    temperature: float = 0.7
    max_tokens: int | None = None


@attrs.frozen(kw_only=True)
class BrokerTable:
    socket: str | None = None
    timeout_ms: int = 60_000
    brokerd_uid: int | None = None


@attrs.frozen(kw_only=True)
class LoopTable:
    max_rounds: int = 8
    tools: list[str] = attrs.field(factory=lambda: list(DEFAULT_TOOLS))


@attrs.frozen(kw_only=True)
class LoopdFile:
    """loopd.toml exactly as written."""

    home: str | None = None
    socket: str | None = None
    owner_uids: list[int] | None = None
    inference: InferenceTable = attrs.field(factory=InferenceTable)
    broker: BrokerTable = attrs.field(factory=BrokerTable)
    loop: LoopTable = attrs.field(factory=LoopTable)


@attrs.frozen(kw_only=True)
class InferenceConfig:
    endpoint: Endpoint  # inferproxy's socket, or a direct http:// URL (development)
    model: str
    slot: int
    n_ctx_per_slot: int
    slots: int
    load_timeout_s: float
    first_event_timeout_s: float
    idle_timeout_s: float
    turn_timeout_s: float
    connect_timeout_s: float
    temperature: float
    max_tokens: int | None

    @property
    def timeouts(self) -> Timeouts:
        """The client's timeouts for one request (the turn's own bound is the caller's)."""
        return Timeouts(connect_s=self.connect_timeout_s,
                        first_event_s=self.first_event_timeout_s,
                        idle_s=self.idle_timeout_s, total_s=None)


@attrs.frozen(kw_only=True)
class BrokerConfig:
    socket: Path
    timeout_ms: int
    brokerd_uid: int


@attrs.frozen(kw_only=True)
class LoopdConfig:
    """loopd's settings with every default resolved and every path absolute."""

    home: Path
    socket: Path
    owner_uids: tuple[int, ...]
    inference: InferenceConfig
    broker: BrokerConfig
    max_rounds: int
    tools: tuple[str, ...]
    source: Path | None  # the file read, or None when none existed (every default)

    @property
    def conversations(self) -> Path:
        return self.home / "conversations"

    @property
    def core_md(self) -> Path:
        return self.home / "core.md"


def default_config_path() -> Path:
    return boxmaker_home() / "loopd.toml"


def _positive(value: float, where: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ConfigError("loopd", f"{where}: {value} must be a positive number of seconds")
    return value


def _uid(uid: int, where: str) -> int:
    if not 0 <= uid <= UID_MAX:
        raise ConfigError("loopd", f"{where}: {uid} is not a uid (0..{UID_MAX})")
    return uid


def _inference(raw: InferenceTable, home: Path) -> InferenceConfig:
    if raw.socket is not None and raw.url is not None:
        raise ConfigError("loopd", "[inference]: give socket or url, not both")
    if raw.url is not None:
        try:
            endpoint = Endpoint.from_url(raw.url)
        except ValueError as exc:
            raise ConfigError("loopd", f"[inference] url: {exc}") from exc
    elif raw.socket is not None:
        endpoint = Endpoint.unix(absolute(under(home, raw.socket)))
    else:
        endpoint = Endpoint.unix(absolute(default_socket(home, "infer.sock")))
    if not raw.model:
        raise ConfigError("loopd", "[inference] model: must not be empty")
    if raw.slots < 1:
        raise ConfigError("loopd", f"[inference] slots: {raw.slots} must be at least 1")
    if not 0 <= raw.slot < raw.slots:
        raise ConfigError("loopd", f"[inference] slot: {raw.slot} is not one of 0..{raw.slots - 1}")
    if raw.n_ctx_per_slot < 1:
        raise ConfigError(
            "loopd", f"[inference] n_ctx_per_slot: {raw.n_ctx_per_slot} must be positive")
    if not (math.isfinite(raw.temperature) and 0 <= raw.temperature <= 2):
        raise ConfigError("loopd", f"[inference] temperature: {raw.temperature} is outside 0..2")
    if raw.max_tokens is not None and raw.max_tokens < 1:
        raise ConfigError("loopd", f"[inference] max_tokens: {raw.max_tokens} must be at least 1")
    return InferenceConfig(
        endpoint=endpoint,
        model=raw.model,
        slot=raw.slot,
        n_ctx_per_slot=raw.n_ctx_per_slot,
        slots=raw.slots,
        load_timeout_s=_positive(raw.load_timeout_s, "[inference] load_timeout_s"),
        first_event_timeout_s=_positive(raw.first_event_timeout_s,
                                        "[inference] first_event_timeout_s"),
        idle_timeout_s=_positive(raw.idle_timeout_s, "[inference] idle_timeout_s"),
        turn_timeout_s=_positive(raw.turn_timeout_s, "[inference] turn_timeout_s"),
        connect_timeout_s=_positive(raw.connect_timeout_s, "[inference] connect_timeout_s"),
        temperature=raw.temperature,
        max_tokens=raw.max_tokens,
    )


def resolve(raw: LoopdFile, source: Path | None) -> LoopdConfig:
    """Check `raw` and resolve every default."""
    home = absolute(Path(raw.home)) if raw.home else absolute(boxmaker_home())
    own = os.getuid()
    owner_uids = tuple(raw.owner_uids) if raw.owner_uids is not None else (own,)
    if not owner_uids:
        raise ConfigError("loopd", "owner_uids: must name at least one uid")
    for uid in owner_uids:
        _uid(uid, "owner_uids")
    broker = raw.broker
    if not 1 <= broker.timeout_ms <= 86_400_000:
        raise ConfigError(
            "loopd", f"[broker] timeout_ms: {broker.timeout_ms} is outside 1..86400000")
    loop = raw.loop
    if not 1 <= loop.max_rounds <= 1000:
        raise ConfigError("loopd", f"[loop] max_rounds: {loop.max_rounds} is outside 1..1000")
    for name in loop.tools:
        # mcp.<id>.* and mcp.<id>.<local> are not checked against brokerd's sources
        # here (the server may be unpinned): each turn offers what is pinned.
        if name not in KNOWN_TOOLS and mcp_entry(name) is None:
            raise ConfigError("loopd",
                f"[loop] tools: unknown tool {name!r} (known: {', '.join(sorted(KNOWN_TOOLS))}; "
                "or an MCP server's tools: mcp.<server id>.* or mcp.<server id>.<tool>)"
            )
    if len(set(loop.tools)) != len(loop.tools):
        raise ConfigError("loopd", "[loop] tools: a tool is named twice")
    return LoopdConfig(
        home=home,
        socket=absolute(under(home, raw.socket)) if raw.socket
        else absolute(default_socket(home, "loop.sock")),
        owner_uids=owner_uids,
        inference=_inference(raw.inference, home),
        broker=BrokerConfig(
            socket=absolute(under(home, broker.socket)) if broker.socket
            else absolute(default_socket(home, "broker.sock")),
            timeout_ms=broker.timeout_ms,
            brokerd_uid=_uid(broker.brokerd_uid, "[broker] brokerd_uid")
            if broker.brokerd_uid is not None else own,
        ),
        max_rounds=loop.max_rounds,
        tools=tuple(loop.tools),
        source=source,
    )


def load_config(path: Path | None) -> LoopdConfig:
    """Read `path` (or the default file, when it exists) and resolve the defaults.

    An explicit `path` must exist; the default one may be missing (every
    default then applies).  Raises ConfigError naming the file and the key.
    """
    explicit = path is not None
    if path is None:
        path = default_config_path()
    if not explicit and not path.exists():
        return resolve(LoopdFile(), None)
    try:
        raw = read_toml(path, LoopdFile)
    except TomlFileError as exc:
        raise ConfigError("loopd", str(exc)) from exc
    try:
        return resolve(raw, path)
    except ConfigError as exc:
        raise ConfigError("loopd", f"{path}: {exc}") from exc
