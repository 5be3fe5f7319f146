"""Pins (12 "What a pin covers", "Loading and checking a pin"): pure encode, decode, check.

A pin binds a server's whole tool list, its declaration's `source` (image,
command, environment, hosts) and the protocol version under one digest:

    digest = sha256(canonical({"protocol": P, "server": ID, "source": SOURCE,
                               "tools": [raw, ...]}))

with the `raw` Tool objects sorted by name, each less the top-level fields of
`pin_ignore`.  The file `audit/pins/<digest>.json` holds `canonical` of the
whole pin; `decode_pin` accepts only that form (a file re-encoded differently,
edited or planted fails), and `check_pin` says why a pin does not hold.  The
file I/O is the file layer's.  Drift is `_drift.py`'s.  Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from .._errors import DecodeError
from .._json import loads_value, type_word
from ._canonical import canonical_bytes, canonical_sha256
from ._decl import ServerDecl
from ._names import SERVER_ID

PinnedProtocol = Literal["2026-07-28", "2025-11-25", "2025-06-18"]
PINNED_PROTOCOLS: Final[tuple[PinnedProtocol, ...]] = ("2026-07-28", "2025-11-25", "2025-06-18")
MAX_TOOL_NAME: Final = 128
MAX_INFO_CHARS: Final = 256
MAX_INSTRUCTIONS_BYTES: Final = 64 * 1024
MAX_TOOLS: Final = 1024
PINS_DIR: Final = "pins"
"""Beside the log: `audit/pins/`."""
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_IMAGE: Final = re.compile(r"sha256:[0-9a-f]{64}")
_TS: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
UnpinnedReason = Literal["none", "unpinned", "drifted", "file_missing", "file_damaged",
                         "declaration_changed", "before_break"]


class PinFileError(DecodeError):
    """A pin file that is not a pin in canonical form, or whose hashes do not recompute."""


class UnpinnableList(DecodeError):
    """A tool list that cannot be pinned (two tools of one name, a tool not an object,
    a bad name); the message says why, for the probe."""


@attrs.frozen(kw_only=True)
class PinSource:
    """What binds the list to the code and to what the server can reach."""

    image: str
    command_sha256: str
    env_sha256: str
    hosts: tuple[str, ...]
    """As declared, in order."""
    private_network: bool
    pin_ignore: tuple[str, ...]
    """Sorted."""
    transport: Literal["stdio"] = "stdio"
    lifecycle: Literal["per_call"] = "per_call"

    def to_json(self) -> dict[str, Any]:
        return {"transport": self.transport, "lifecycle": self.lifecycle, "image": self.image,
                "command_sha256": self.command_sha256, "env_sha256": self.env_sha256,
                "hosts": list(self.hosts), "private_network": self.private_network,
                "pin_ignore": list(self.pin_ignore)}


def pin_source(decl: ServerDecl) -> PinSource:
    """The `source` a declaration gives (compared with the pin's on every load)."""
    return PinSource(image=decl.image, command_sha256=canonical_sha256(list(decl.command)),
                     env_sha256=canonical_sha256(dict(decl.env)), hosts=decl.hosts,
                     private_network=decl.private_network,
                     pin_ignore=tuple(sorted(decl.pin_ignore)))


@attrs.frozen(kw_only=True)
class PinnedTool:
    name: str
    sha256: str
    raw: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "raw": dict(self.raw)}


def pin_tools(raw_tools: Sequence[Any], pin_ignore: Iterable[str]) -> tuple[PinnedTool, ...]:
    """The served Tool objects (strictly decoded) -> pinned tools sorted by name.

    Raises UnpinnableList for a tool that is not an object, a name that is not a
    string of 1..128 characters, two tools of one name, or more than 1024 tools.
    """
    if len(raw_tools) > MAX_TOOLS:
        raise UnpinnableList(f"expected at most {MAX_TOOLS} tools, found {len(raw_tools)}")
    ignored = frozenset(pin_ignore)
    out: dict[str, PinnedTool] = {}
    for position, tool in enumerate(raw_tools):
        if not isinstance(tool, dict):
            raise UnpinnableList(f"tool {position}: expected an object, found {type_word(tool)}")
        name = tool.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_TOOL_NAME:
            found = f"{len(name)} characters" if isinstance(name, str) else type_word(name)
            raise UnpinnableList(f"tool {position}: expected a name of 1..{MAX_TOOL_NAME} "
                                 f"characters, found {found}")
        if name in out:
            raise UnpinnableList(f"tool {position}: expected one tool of each name, found a "
                                 "second of one name")
        raw = {key: value for key, value in tool.items() if key not in ignored}
        out[name] = PinnedTool(name=name, sha256=canonical_sha256(raw), raw=raw)
    return tuple(out[name] for name in sorted(out))


def list_digest(protocol: str, server: str, source: PinSource,
                tools: Sequence[PinnedTool]) -> str:
    """The digest of a list: a pin's, or a live list's with the current declaration."""
    return canonical_sha256({"protocol": protocol, "server": server,
                             "source": source.to_json(),
                             "tools": [dict(tool.raw) for tool in tools]})


@attrs.frozen(kw_only=True)
class ServerInfo:
    name: str
    version: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version}


def server_info_of(value: Any) -> ServerInfo | None:
    """`serverInfo` (legacy) or `_meta["io.modelcontextprotocol/serverInfo"]` (modern):
    only `name` and `version`, each a string of at most 256 characters, else None."""
    if not isinstance(value, dict):
        return None
    name, version = value.get("name"), value.get("version")
    if not (isinstance(name, str) and isinstance(version, str)):
        return None
    if len(name) > MAX_INFO_CHARS or len(version) > MAX_INFO_CHARS:
        return None
    return ServerInfo(name=name, version=version)


def instructions_of(value: Any) -> str | None:
    if isinstance(value, str) and len(value.encode("utf-8")) <= MAX_INSTRUCTIONS_BYTES:
        return value
    return None


@attrs.frozen(kw_only=True)
class Pin:
    server: str
    digest: str
    protocol: PinnedProtocol
    source: PinSource
    server_info: ServerInfo | None
    instructions: str | None
    pinned_at: str
    by: int
    tools: tuple[PinnedTool, ...]

    def to_json(self) -> dict[str, Any]:
        return {"v": 1, "server": self.server, "digest": self.digest,
                "protocol": self.protocol, "source": self.source.to_json(),
                "server_info": None if self.server_info is None else self.server_info.to_json(),
                "instructions": self.instructions, "pinned_at": self.pinned_at, "by": self.by,
                "tools": [tool.to_json() for tool in self.tools]}

    @property
    def file_name(self) -> str:
        return pin_file_name(self.digest)


def pin_file_name(digest: str) -> str:
    """`<digest>.json`, below `audit/pins/`."""
    if _HEX64.fullmatch(digest) is None:
        raise ValueError(f"not a digest: {digest!r}")
    return f"{digest}.json"


def make_pin(*, server: str, protocol: PinnedProtocol, source: PinSource,
             tools: Sequence[PinnedTool], server_info: ServerInfo | None,
             instructions: str | None, pinned_at: str, by: int) -> Pin:
    return Pin(server=server, digest=list_digest(protocol, server, source, tools),
               protocol=protocol, source=source, server_info=server_info,
               instructions=instructions, pinned_at=pinned_at, by=by, tools=tuple(tools))


def encode_pin(pin: Pin) -> bytes:
    """The pin file's bytes: canonical ASCII JSON, no newline."""
    return canonical_bytes(pin.to_json())


# -- decoding -----------------------------------------------------------------------------


def _keys(value: Any, where: str, keys: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PinFileError(f"{where}: expected an object, found {type_word(value)}")
    if set(value) != keys:
        extra, missing = sorted(set(value) - keys), sorted(keys - set(value))
        raise PinFileError(f"{where}: expected the keys {', '.join(sorted(keys))}, found "
                           f"{len(extra)} unknown and {len(missing)} missing")
    return value


def _str(value: Any, where: str, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str) or (pattern is not None and pattern.fullmatch(value) is None):
        raise PinFileError(f"{where}: expected a string of its form, found {type_word(value)}")
    return value


_PIN_KEYS = frozenset({"v", "server", "digest", "protocol", "source", "server_info",
                       "instructions", "pinned_at", "by", "tools"})
_SOURCE_KEYS = frozenset({"transport", "lifecycle", "image", "command_sha256", "env_sha256",
                          "hosts", "private_network", "pin_ignore"})
_TOOL_KEYS = frozenset({"name", "sha256", "raw"})
_INFO_KEYS = frozenset({"name", "version"})


def _source(value: Any) -> PinSource:
    data = _keys(value, "source", _SOURCE_KEYS)
    if data["transport"] != "stdio" or data["lifecycle"] != "per_call":
        raise PinFileError("source: expected stdio and per_call, found other words")
    hosts, ignore = data["hosts"], data["pin_ignore"]
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise PinFileError("source.hosts: expected an array of strings")
    if not isinstance(ignore, list) or ignore != sorted(set(ignore)) or not set(ignore) <= {
            "_meta", "icons"}:
        raise PinFileError("source.pin_ignore: expected a sorted subset of _meta, icons")
    if not isinstance(data["private_network"], bool):
        raise PinFileError("source.private_network: expected a boolean")
    return PinSource(image=_str(data["image"], "source.image", _IMAGE),
                     command_sha256=_str(data["command_sha256"], "source.command_sha256", _HEX64),
                     env_sha256=_str(data["env_sha256"], "source.env_sha256", _HEX64),
                     hosts=tuple(hosts), private_network=data["private_network"],
                     pin_ignore=tuple(ignore))


def _tools(value: Any) -> tuple[PinnedTool, ...]:
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise PinFileError(f"tools: expected an array of at most {MAX_TOOLS}")
    out: list[PinnedTool] = []
    for position, item in enumerate(value):
        data = _keys(item, f"tools[{position}]", _TOOL_KEYS)
        raw = data["raw"]
        if not isinstance(raw, dict) or raw.get("name") != data["name"]:
            raise PinFileError(f"tools[{position}]: expected name equal to raw.name")
        name = _str(data["name"], f"tools[{position}].name")
        if not 1 <= len(name) <= MAX_TOOL_NAME:
            raise PinFileError(f"tools[{position}].name: expected 1..{MAX_TOOL_NAME} characters")
        sha = _str(data["sha256"], f"tools[{position}].sha256", _HEX64)
        if canonical_sha256(raw) != sha:
            raise PinFileError(f"tools[{position}].sha256: expected the hash of raw, found "
                               "another")
        out.append(PinnedTool(name=name, sha256=sha, raw=raw))
    names = [tool.name for tool in out]
    if names != sorted(set(names)):
        raise PinFileError("tools: expected sorted by name, each name once")
    return tuple(out)


def decode_pin(data: bytes) -> Pin:
    """A pin file's bytes -> the `Pin`, or PinFileError (edited, planted, damaged)."""
    try:
        value = loads_value(data)
    except DecodeError as exc:
        raise PinFileError(f"not strict JSON: {exc.message}") from exc
    top = _keys(value, "pin", _PIN_KEYS)
    if top["v"] != 1 or isinstance(top["v"], bool):
        raise PinFileError("v: expected 1")
    server = _str(top["server"], "server", SERVER_ID)
    protocol = top["protocol"]
    if protocol not in PINNED_PROTOCOLS:
        raise PinFileError("protocol: expected one of " + ", ".join(PINNED_PROTOCOLS))
    by = top["by"]
    if not isinstance(by, int) or isinstance(by, bool) or not 0 <= by < 2 ** 32:
        raise PinFileError("by: expected a uid")
    info = top["server_info"]
    server_info = None
    if info is not None:
        info = _keys(info, "server_info", _INFO_KEYS)
        server_info = server_info_of(info)
        if server_info is None:
            raise PinFileError("server_info: expected name and version of at most 256")
    instructions = top["instructions"]
    if instructions is not None and instructions_of(instructions) is None:
        raise PinFileError("instructions: expected a string of at most 64 KiB or null")
    pin = Pin(server=server, digest=_str(top["digest"], "digest", _HEX64), protocol=protocol,
              source=_source(top["source"]), server_info=server_info, instructions=instructions,
              pinned_at=_str(top["pinned_at"], "pinned_at", _TS), by=by,
              tools=_tools(top["tools"]))
    if list_digest(pin.protocol, pin.server, pin.source, pin.tools) != pin.digest:
        raise PinFileError("digest: expected the hash of protocol, server, source and tools, "
                           "found another")
    if encode_pin(pin) != data:
        raise PinFileError("expected the canonical form, found other bytes")
    return pin


@attrs.frozen(kw_only=True)
class PinCheck:
    """A pin that holds (`pin`), or why the server is unpinned (`reason`, `detail`)."""

    pin: Pin | None
    reason: UnpinnedReason | None
    detail: str | None = None


def check_pin(data: bytes | None, *, server: str, record_digest: str,
              current: PinSource) -> PinCheck:
    """12 "Loading and checking a pin", given the newest `mcp_pin pinned` record's digest
    and the file's bytes (None: missing).  The record steps (none, unpinned, drifted,
    before a break) are the caller's, who reads the log."""
    if data is None:
        return PinCheck(pin=None, reason="file_missing")
    try:
        pin = decode_pin(data)
    except PinFileError as exc:
        return PinCheck(pin=None, reason="file_damaged", detail=exc.message)
    if pin.digest != record_digest or pin.server != server:
        return PinCheck(pin=None, reason="file_damaged",
                        detail="expected the record's digest and server, found another")
    if pin.source != current:
        return PinCheck(pin=None, reason="declaration_changed",
                        detail=f"changed: {', '.join(source_changes(pin.source, current))}")
    return PinCheck(pin=pin, reason=None)


def source_changes(pinned: PinSource, current: PinSource) -> list[str]:
    """The `source` fields that differ (`image` for a rebuilt image)."""
    old, new = pinned.to_json(), current.to_json()
    return [key for key in old if old[key] != new[key]]


def pin_challenge(*, server: str, probe_id: int, digest: str,
                  invalidates: Sequence[Mapping[str, Any]]) -> bytes:
    """What a passkey signs to pin (12 "Pinning" step 3):
    ``SHA-256(canonical({"mcp_pin": {"digest", "invalidates", "probe_id", "server"}}))``.
    The probe id makes an assertion good for this pin only."""
    return hashlib.sha256(canonical_bytes({"mcp_pin": {
        "digest": digest, "invalidates": [dict(item) for item in invalidates],
        "probe_id": probe_id, "server": server}})).digest()
