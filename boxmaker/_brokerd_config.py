"""brokerd.toml (05-brokerd, 08-runner): strict, every key optional.

`load_config` reads the file (or none: every default), refuses unknown keys at
every depth, and resolves every path: relative ones under `home`, sockets under
``$XDG_RUNTIME_DIR/boxmaker`` or ``home/run``.  Pure apart from reading the
file and the environment.

The one source of brokerd's settings (issue 12): brokerd serves with them,
`bxctl grants explain|replay|suggest` decides with `compute_protected` of them
(exactly brokerd's protected paths), `boxmaker up` reads its starter file with
them.  Top-level, so that no daemon package imports another.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import attrs

from ._checkpoint_config import CheckpointsConfigError, CheckpointSettings, resolve_checkpoints
from ._commands_config import (
    CommandsSettings,
    CommandsTable,
    commands_problem,
    resolve_commands,
)
from ._errors import ConfigError
from ._passkey_origin import check_passkey_settings
from ._paths import UID_MAX, absolute, boxmaker_home, default_socket, under
from ._protected import ProtectedSet, protected_set
from ._toml import TomlFileError, parse_toml
from .proto.mcp import ToolSourcesConfig, parse_tool_sources

TTL_MS_MAX = 86_400_000
"""A day: the longest an approval may wait."""
MAX_PENDING_MAX = 65_536
"""Each pending ask holds its connection (one descriptor) until it is answered."""

RunnerKind = Literal["podman", "refusing", "echo"]


@attrs.frozen(kw_only=True)
class PathsTable:
    grants: str = "grants"
    audit: str = "audit"
    state: str = "state"


@attrs.frozen(kw_only=True)
class SocketsTable:
    broker: str | None = None
    admin: str | None = None
    broker_uids: list[int] | None = None
    owner_uid: int | None = None
    max_connections: int = 256
    """Connections served at once per socket; past it, accept pauses (issue 11)."""


@attrs.frozen(kw_only=True)
class ApprovalsTable:
    ttl_ms: int = 600_000
    max_pending: int = 128
    """Asks waiting for the owner at once, all sessions (issue 22): past it, denied
    `too_many_pending`."""
    max_pending_per_session: int = 16
    """Asks of one session waiting for the owner at once."""
    rp_id: str | None = None
    """The approval page's host name: the WebAuthn RP id (11-approvals-web)."""
    origins: list[str] | None = None
    """The approval page's origins (https://NAME[:PORT], or http://localhost[:PORT])."""
    require_passkey: bool = False


@attrs.frozen(kw_only=True)
class PolicyTable:
    protected: list[str] | None = None
    max_args_bytes: int = 1_179_648
    """The longest canonical `args` (UTF-8) a call may carry: room for the 1 MiB
    write_file content 03-policy allows, escaped."""


@attrs.frozen(kw_only=True)
class RunnerTable:
    """`[runner]`: `kind` (05-brokerd) and the podman keys with 08-runner's defaults."""

    kind: RunnerKind = "refusing"
    podman: str = "/usr/bin/podman"
    image: str | None = None
    oci_runtime: str | None = None
    launcher: Literal["podman", "oci"] | None = None
    """How each call's container starts: ``podman run --rm`` or the OCI runtime on a
    bundle brokerd writes (issue 23; rootful podman only).  Unset (the default): the
    oci launcher, and podman where it cannot (rootless podman, a failed set-up, an MCP
    server with egress); "oci" written refuses what it cannot do."""
    memory: str = "256m"
    pids: int = 64
    cpus: float = 1.0
    timeout_ms: int = 30_000
    output_max_bytes: int = 2_097_152
    nofile: int = 1024
    nproc: int = 512
    max_concurrent: int | None = None
    """Calls run at once; default min(MemTotal // memory, 2 x CPUs), at least 1."""
    max_queued: int | None = None
    """Calls waiting for a turn; default 4 x max_concurrent."""
    queue_timeout_ms: int = 10_000


@attrs.frozen(kw_only=True)
class AuditTable:
    fsync: bool = True


@attrs.frozen(kw_only=True)
class WitnessTable:
    url: str
    key: str


@attrs.frozen(kw_only=True)
class CheckpointsTable:
    """`[checkpoints]` (10-checkpoints)."""

    origin: str | None = None
    interval_ms: int = 10_000
    witnesses: list[WitnessTable] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class ToolSourcesTable:
    """`[tool_sources]` (12-tool-sources): where the `sources/*.toml` files are."""

    dir: str = "sources"
    """Relative to the home, or absolute; a missing directory means no servers."""


@attrs.frozen(kw_only=True)
class BrokerdFile:
    """brokerd.toml exactly as written (every table and key optional)."""

    home: str | None = None
    paths: PathsTable = attrs.field(factory=PathsTable)
    sockets: SocketsTable = attrs.field(factory=SocketsTable)
    approvals: ApprovalsTable = attrs.field(factory=ApprovalsTable)
    policy: PolicyTable = attrs.field(factory=PolicyTable)
    runner: RunnerTable = attrs.field(factory=RunnerTable)
    audit: AuditTable = attrs.field(factory=AuditTable)
    checkpoints: CheckpointsTable = attrs.field(factory=CheckpointsTable)
    commands: CommandsTable | None = None
    """`[commands]` (12-tool-sources): absent, run_command has no image to run in."""
    tool_sources: ToolSourcesTable = attrs.field(factory=ToolSourcesTable)


@attrs.frozen(kw_only=True)
class BrokerdConfig:
    """brokerd's settings with every default resolved and every path absolute."""

    home: Path
    grants: Path
    audit: Path
    state: Path
    broker_socket: Path
    admin_socket: Path
    broker_uids: tuple[int, ...]
    owner_uid: int
    own_uid: int
    ttl_ms: int
    max_pending: int
    max_pending_per_session: int
    protected: tuple[str, ...]
    """Every protected path (03-policy D2b): the configured ones and brokerd's own."""
    own_protected: tuple[str, ...]
    """brokerd's own directories (home first): the `own` of `boxmaker._protected`."""
    policy_protected: tuple[str, ...]
    """`[policy] protected` (or its default): protected when they exist."""
    runner: RunnerTable
    max_concurrent: int
    max_queued: int
    queue_timeout_ms: int
    max_connections: int
    max_args_bytes: int
    fsync: bool
    source: Path | None
    checkpoints: CheckpointSettings = attrs.field(factory=CheckpointSettings)
    """The config file read, or None when none existed (every default)."""
    rp_id: str | None = None
    origins: tuple[str, ...] = ()
    require_passkey: bool = False
    commands: CommandsSettings | None = None
    """`[commands]`, or None when brokerd.toml has none."""
    tool_sources: ToolSourcesConfig | None = None
    """`[tool_sources]` with `dir` absolute (12-tool-sources); None only in configs
    built by hand, which then read `home/sources`."""

    @property
    def sources(self) -> Path:
        """The sources directory (`*.toml` declaring MCP servers), absolute."""
        if self.tool_sources is None:
            return self.home / "sources"
        return Path(self.tool_sources.dir)

    @property
    def single_uid(self) -> bool:
        """The owner's uid may also call tools: a compromised loopd could approve itself."""
        return self.owner_uid in self.broker_uids

    @property
    def sockets_private(self) -> bool:
        """Only brokerd's own uid may connect to either socket."""
        return self.owner_uid == self.own_uid and all(u == self.own_uid for u in self.broker_uids)

    @property
    def sessions_dir(self) -> Path:
        return self.state / "sessions"

    @property
    def checkpoint_key(self) -> Path:
        return self.home / "checkpoint.key"

    @property
    def checkpoint_pub(self) -> Path:
        return self.home / "checkpoint.pub"


def default_config_path() -> Path:
    return boxmaker_home() / "brokerd.toml"


def commands_path(config: BrokerdConfig) -> tuple[str, ...]:
    """`[commands] path`'s directories, for G21 at grant load (empty without `[commands]`)."""
    return () if config.commands is None else config.commands.path


def compute_protected(config: BrokerdConfig) -> ProtectedSet:
    """brokerd's protected roots (03-policy D2b, issue 10): THE shared function,
    fed with brokerd's paths (blocking: realpath, stat and `podman info`).

    brokerd's `decide` and runner, and bxctl's `grants explain|replay|suggest`,
    all take them from here."""
    podman = config.runner.podman if config.runner.kind == "podman" else None
    return protected_set(config.own_protected, config.policy_protected, podman=podman,
                         oci_runtime=config.runner.oci_runtime if podman else None)


MAX_CONNECTIONS_MAX = 65_536
QUEUE_TIMEOUT_MS_MAX = 86_400_000
_MEMORY_UNITS = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def memory_bytes(text: str) -> int | None:
    """podman's `--memory` size (``256m``) in bytes, or None when it is not one."""
    unit = text[-1:].lower()
    digits, scale = (text[:-1], _MEMORY_UNITS[unit]) if unit in _MEMORY_UNITS else (text, 1)
    if not digits.isdigit() or not digits.isascii() or int(digits) < 1:
        return None
    return int(digits) * scale


def mem_total_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The host's MemTotal, or None when it cannot be read."""
    try:
        for line in meminfo.read_text(encoding="ascii", errors="replace").splitlines():
            name, _, rest = line.partition(":")
            if name == "MemTotal":
                fields = rest.split()
                return int(fields[0]) * 1024 if fields and fields[0].isdigit() else None
    except OSError:
        return None
    return None


def default_max_concurrent(memory: str, *, mem_total: int | None, cpus: int) -> int:
    """min(MemTotal // memory, 2 x CPUs), at least 1 (issue 11)."""
    bound = 2 * max(cpus, 1)
    per_call = memory_bytes(memory)
    if mem_total is not None and per_call is not None:
        bound = min(bound, mem_total // per_call)
    return max(bound, 1)


def largest_output_max_bytes() -> int:
    """The largest `output_max_bytes` whose biggest answer frame fits one frame.

    The runner's whole answer is at most `output_max_bytes`, and a `tool_failed`
    result carries it whole as its `output`; the envelope around it is measured
    with the longest id, status and label the answer can have.
    """
    from .proto._convert import U64, U64_MAX, JsonObject
    from .proto._framing import MAX_FRAME
    from .proto._json import dumps_bytes
    from .proto.wire import Result, encode_broker_answer

    output = {"error": {"code": "", "message": ""}}
    envelope = max(
        len(encode_broker_answer(U64(U64_MAX), Result(
            status=status, output=JsonObject(output), label=label,
            untrusted=untrusted)))
        for status in ("ok", "tool_failed") for label in ("public", "private", "secret")
        for untrusted in (False, True)
    ) - len(dumps_bytes(output))
    return MAX_FRAME - envelope


def _check_uid(uid: int, where: str) -> int:
    if not 0 <= uid <= UID_MAX:
        raise ConfigError("brokerd", f"{where}: {uid} is not a uid (0..{UID_MAX})")
    return uid


def _check(raw: BrokerdFile) -> None:
    ttl = raw.approvals.ttl_ms
    if not 1 <= ttl <= TTL_MS_MAX:
        raise ConfigError("brokerd", f"approvals.ttl_ms: {ttl} is outside 1..{TTL_MS_MAX} (a day)")
    most = raw.approvals.max_pending
    if not 1 <= most <= MAX_PENDING_MAX:
        raise ConfigError(
            "brokerd", f"approvals.max_pending: {most} is outside 1..{MAX_PENDING_MAX}")
    each = raw.approvals.max_pending_per_session
    if not 1 <= each <= most:
        raise ConfigError("brokerd", f"approvals.max_pending_per_session: {each} is outside "
                          f"1..{most} (approvals.max_pending)")
    problem = check_passkey_settings(raw.approvals.rp_id, raw.approvals.origins or [],
                                     require=raw.approvals.require_passkey)
    if problem is not None:
        raise ConfigError("brokerd", problem)
    runner = raw.runner
    for name in ("pids", "timeout_ms", "output_max_bytes", "nofile", "nproc"):
        value = getattr(runner, name)
        if value < 1:
            raise ConfigError("brokerd", f"runner.{name}: {value} must be at least 1")
    if not runner.cpus > 0:
        raise ConfigError("brokerd", f"runner.cpus: {runner.cpus} must be more than 0")
    largest = largest_output_max_bytes()
    if runner.output_max_bytes > largest:
        raise ConfigError("brokerd",
            f"runner.output_max_bytes: {runner.output_max_bytes} is more than {largest}: "
            "the largest answer would not fit one 8 MiB frame")
    if raw.commands is not None:
        problem = commands_problem(raw.commands, output_bound=largest)
        if problem is not None:
            raise ConfigError("brokerd", problem)
    for name in ("max_concurrent", "max_queued"):
        value = getattr(runner, name)
        if value is not None and not (0 if name == "max_queued" else 1) <= value <= 65_536:
            low = 0 if name == "max_queued" else 1
            raise ConfigError("brokerd", f"runner.{name}: {value} is outside {low}..65536")
    if not 1 <= runner.queue_timeout_ms <= QUEUE_TIMEOUT_MS_MAX:
        raise ConfigError(
            "brokerd", f"runner.queue_timeout_ms: {runner.queue_timeout_ms} is outside "
                          f"1..{QUEUE_TIMEOUT_MS_MAX}")
    if not 1 <= raw.sockets.max_connections <= MAX_CONNECTIONS_MAX:
        raise ConfigError(
            "brokerd", f"sockets.max_connections: {raw.sockets.max_connections} is outside "
                          f"1..{MAX_CONNECTIONS_MAX}")
    max_args = raw.policy.max_args_bytes
    if not 2 <= max_args <= 8 * 1024 * 1024:
        raise ConfigError("brokerd", f"policy.max_args_bytes: {max_args} is outside 2..8388608")
    if runner.kind == "podman" and runner.image is not None and not runner.image.startswith(
        "sha256:"
    ):
        raise ConfigError(
            "brokerd", "runner.image: name the tools image by digest (sha256:...), not a tag")
    _, problems = parse_tool_sources({"dir": raw.tool_sources.dir})
    if problems:
        raise ConfigError("brokerd", problems[0])
    for text, where in (
        (raw.home, "home"),
        (raw.paths.grants, "paths.grants"),
        (raw.paths.audit, "paths.audit"),
        (raw.paths.state, "paths.state"),
        (raw.sockets.broker, "sockets.broker"),
        (raw.sockets.admin, "sockets.admin"),
    ):
        if text is not None and (text == "" or "\0" in text):
            raise ConfigError("brokerd", f"{where}: not a path")


def parse_config(data: bytes, source: Path | None, *, own_uid: int | None = None) -> BrokerdConfig:
    """Parse brokerd.toml's bytes and resolve every default."""
    try:
        raw = parse_toml(data, BrokerdFile)
    except TomlFileError as exc:
        raise ConfigError("brokerd", str(exc)) from exc
    return resolve(raw, source, own_uid=own_uid)


def resolve(raw: BrokerdFile, source: Path | None, *, own_uid: int | None = None) -> BrokerdConfig:
    try:
        return _resolve(raw, source, own_uid=own_uid)
    except CheckpointsConfigError as exc:
        raise ConfigError("brokerd", str(exc)) from exc


def _resolve(raw: BrokerdFile, source: Path | None, *, own_uid: int | None) -> BrokerdConfig:
    _check(raw)
    uid = os.geteuid() if own_uid is None else own_uid
    home = absolute(Path(raw.home) if raw.home else boxmaker_home())
    sockets = raw.sockets
    if sockets.broker_uids is not None and not sockets.broker_uids:
        raise ConfigError(
            "brokerd", "sockets.broker_uids: an empty list would let no one call tools")
    broker_uids = tuple(
        _check_uid(u, "sockets.broker_uids")
        for u in (sockets.broker_uids if sockets.broker_uids is not None else [uid])
    )
    owner_uid = _check_uid(sockets.owner_uid if sockets.owner_uid is not None else uid,
                           "sockets.owner_uid")
    grants = absolute(under(home, raw.paths.grants))
    audit = absolute(under(home, raw.paths.audit))
    state = absolute(under(home, raw.paths.state))
    broker_socket = absolute(
        under(home, sockets.broker) if sockets.broker else default_socket(home, "broker.sock")
    )
    admin_socket = absolute(
        under(home, sockets.admin) if sockets.admin else default_socket(home, "admin.sock")
    )
    configured = (
        [str(absolute(under(home, p))) for p in raw.policy.protected]
        if raw.policy.protected is not None
        else [str(absolute(boxmaker_home()))]
    )
    sources = absolute(under(home, raw.tool_sources.dir))
    own = [home, grants, audit, state, sources, broker_socket.parent, admin_socket.parent]
    if source is not None:
        own.append(absolute(source).parent)
    protected: list[str] = []
    for path in [*configured, *(str(p) for p in own)]:
        if path not in protected and path != "/":
            protected.append(path)
    own_protected = tuple(dict.fromkeys(str(p) for p in own))
    runner = raw.runner
    max_concurrent = runner.max_concurrent if runner.max_concurrent is not None else (
        default_max_concurrent(runner.memory, mem_total=mem_total_bytes(),
                               cpus=len(os.sched_getaffinity(0))))
    max_queued = runner.max_queued if runner.max_queued is not None else 4 * max_concurrent
    return BrokerdConfig(
        checkpoints=resolve_checkpoints(raw.checkpoints, home),
        home=home,
        grants=grants,
        audit=audit,
        state=state,
        broker_socket=broker_socket,
        admin_socket=admin_socket,
        broker_uids=broker_uids,
        owner_uid=owner_uid,
        own_uid=uid,
        ttl_ms=raw.approvals.ttl_ms,
        max_pending=raw.approvals.max_pending,
        max_pending_per_session=raw.approvals.max_pending_per_session,
        protected=tuple(protected),
        own_protected=own_protected,
        policy_protected=tuple(configured),
        runner=raw.runner,
        max_concurrent=max_concurrent,
        max_queued=max_queued,
        queue_timeout_ms=runner.queue_timeout_ms,
        max_connections=sockets.max_connections,
        max_args_bytes=raw.policy.max_args_bytes,
        fsync=raw.audit.fsync,
        source=source,
        rp_id=raw.approvals.rp_id,
        origins=tuple(raw.approvals.origins or ()),
        require_passkey=raw.approvals.require_passkey,
        commands=None if raw.commands is None else resolve_commands(raw.commands),
        tool_sources=ToolSourcesConfig(dir=os.fsdecode(sources)),
    )


def load_config(path: Path | None) -> BrokerdConfig:
    """Read `path`, or the default path when it exists (else every default).

    An explicitly named file must exist.  Raises ConfigError.
    """
    explicit = path is not None
    target = path if path is not None else default_config_path()
    try:
        data = target.read_bytes()
    except FileNotFoundError as exc:
        if explicit:
            raise ConfigError("brokerd", f"{os.fsdecode(target)!r} does not exist") from exc
        return resolve(BrokerdFile(), None)
    except OSError as exc:
        raise ConfigError(
            "brokerd", f"{os.fsdecode(target)!r} cannot be read ({exc.strerror})") from exc
    try:
        return parse_config(data, absolute(target))
    except ConfigError as exc:
        raise ConfigError("brokerd", f"{os.fsdecode(target)!r}: {exc}") from exc
