"""Audit payloads of tool sources (12-tool-sources "Audit records"): the new events
`sources`, `mcp_pin` and `mcp_server`, the `source` of a tool-source `result`, and
their field rules.  Pure: no I/O.

Every field is written as 12 lists it; the `source` of a result is left out when
null (a built-in call's result is written byte for byte as before).  The rules
here are the ones the types do not say: hex digests, bounded strings and lists,
which fields an `action` or `event` word needs.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import attrs

from .._convert import U64, register_structure_hook, structure
from .._errors import DecodeError
from .._json import type_word
from ..mcp import PINNED_PROTOCOLS, is_server_id
from ._audit_passkey import PasskeyUse, passkey_use_problem

MAX_REASON: Final = 1024
"""A `reason` of an `mcp_pin` or `mcp_server` record (brokerd escapes and cuts it)."""
MAX_CONTAINER: Final = 255
NOTHING_SENT: Final = ("pin_mismatch", "source_unavailable")
"""`result.status` of an MCP call that was never sent (12): its output is null."""
MAX_DRIFT_NAMES: Final = 32
MAX_DRIFT_NAME: Final = 128
MAX_EGRESS: Final = 64
MAX_HOSTS: Final = 64
MAX_HOST: Final = 253
MAX_MCP_NAME: Final = 128
MAX_TOOL_COUNT: Final = 1024
_HEX64 = re.compile(r"[0-9a-f]{64}", re.ASCII)
_IMAGE = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
_CONTAINER = re.compile(r"[a-z0-9][a-z0-9_.-]{0,254}", re.ASCII)
_ADDRESS = re.compile(r"[0-9a-f.:]{2,45}", re.ASCII)

PinAction = Literal["pinned", "unpinned"]
ServerEvent = Literal["probe", "probed", "drifted", "cooling_down", "restarted"]
Refusal = Literal["not_allowed", "address_not_allowed", "limit"]


@attrs.frozen(kw_only=True)
class SourcesChanged:
    """The tool-source set was loaded or changed (event key ``sources``)."""

    ok: bool
    count: U64
    digest: str
    problem_count: U64


@attrs.frozen(kw_only=True)
class PinSourceRecord:
    """A pin's `source`, as the pin file holds it."""

    transport: Literal["stdio"]
    lifecycle: Literal["per_call"]
    image: str
    command_sha256: str
    env_sha256: str
    hosts: list[str]
    private_network: bool
    pin_ignore: list[str]


@attrs.frozen(kw_only=True)
class McpPinRecord:
    """The owner pinned or unpinned a server (event key ``mcp_pin``)."""

    server: str
    action: PinAction
    digest: str | None
    prev: str | None
    """The digest of the server's newest earlier `pinned` record, or None (the verifier checks)."""
    tools: U64 | None
    protocol: str | None
    source: PinSourceRecord | None
    by: U64
    passkey: PasskeyUse | None
    reason: str | None


@attrs.frozen(kw_only=True)
class DriftNames:
    """What differs from the pin: tool names, sorted, cut and bounded."""

    pinned: str
    added: list[str]
    removed: list[str]
    changed: list[str]


@attrs.frozen(kw_only=True)
class EgressRecord:
    """One connection a server's container opened or was refused."""

    host: str | None
    port: U64
    address: str | None
    bytes_out: U64
    bytes_in: U64
    refused: Refusal | None


@attrs.frozen(kw_only=True)
class McpServerRecord:
    """A probe, the end of a probe with egress, a drift, a cool-down or its end (event
    key ``mcp_server``)."""

    server: str
    call: U64 | None
    probe_id: U64 | None
    container: str | None
    event: ServerEvent
    protocol: str | None
    list_digest: str | None
    reason: str | None
    drift: DriftNames | None
    egress: list[EgressRecord] | None = None
    """Only on `probed` (issue 26): every connection the probe's containers opened or
    were refused, as a call's `result.source.egress`; left out otherwise."""
    egress_truncated: bool | None = None


@attrs.frozen(kw_only=True)
class McpSource:
    """`result.source` of an MCP call."""

    kind: Literal["mcp"]
    server: str
    mcp_name: str
    container: str
    protocol: str | None
    list_digest: str | None
    request_sha256: str | None
    response_sha256: str | None
    is_error: bool | None
    exit: U64 | None
    egress: list[EgressRecord]
    egress_truncated: bool


@attrs.frozen(kw_only=True)
class CommandSource:
    """`result.source` of a `run_command` call."""

    kind: Literal["command"]
    container: str
    exit: U64 | None


ResultSource = McpSource | CommandSource
_SOURCE_KINDS: Final[dict[str, type[Any]]] = {"mcp": McpSource, "command": CommandSource}


def _structure_source(value: Any, _: Any) -> McpSource | CommandSource | None:
    """A result's `source`: its `kind` says which object it is."""
    if value is None:
        return None
    if type(value) is not dict:
        raise DecodeError(f"expected an object or null, found {type_word(value)}")
    kind = value.get("kind")
    cls = _SOURCE_KINDS.get(kind) if type(kind) is str else None
    if cls is None:
        raise DecodeError('expected "kind" to be "mcp" or "command"', path="$.kind")
    result: McpSource | CommandSource = structure(value, cls)
    return result


register_structure_hook(McpSource | CommandSource | None, _structure_source)


# -- field rules ------------------------------------------------------------------------

Problem = tuple[str, str] | None


def _hex_or_null(payload: dict[str, Any], names: tuple[str, ...]) -> Problem:
    for name in names:
        value = payload[name]
        if value is not None and _HEX64.fullmatch(value) is None:
            return (name, "expected 64 lowercase hex digits or null")
    return None


def _bounded_text(payload: dict[str, Any], name: str, limit: int) -> Problem:
    value = payload[name]
    if value is not None and len(value) > limit:
        return (name, f"expected at most {limit} characters")
    return None


def _protocol(payload: dict[str, Any]) -> Problem:
    protocol = payload["protocol"]
    if protocol is not None and protocol not in PINNED_PROTOCOLS:
        return ("protocol", "expected one of " + ", ".join(PINNED_PROTOCOLS) + " or null")
    return None


def _container(payload: dict[str, Any]) -> Problem:
    container = payload["container"]
    if container is not None and _CONTAINER.fullmatch(container) is None:
        return ("container", "expected a container name of 1 to 255 characters")
    return None


def _server(payload: dict[str, Any]) -> Problem:
    if not is_server_id(payload["server"]):
        return ("server", "expected a server id [a-z][a-z0-9-]{0,30}")
    return None


def _pin_source_problem(source: dict[str, Any]) -> Problem:
    if _IMAGE.fullmatch(source["image"]) is None:
        return ("source.image", "expected sha256: and 64 lowercase hex digits")
    for name in ("command_sha256", "env_sha256"):
        if _HEX64.fullmatch(source[name]) is None:
            return (f"source.{name}", "expected 64 lowercase hex digits")
    hosts = source["hosts"]
    if len(hosts) > MAX_HOSTS or not all(1 <= len(h) <= MAX_HOST for h in hosts):
        return ("source.hosts", f"expected at most {MAX_HOSTS} host patterns of 1 to "
                f"{MAX_HOST} characters")
    ignore = source["pin_ignore"]
    if ignore != sorted(set(ignore)) or not set(ignore) <= {"_meta", "icons"}:
        return ("source.pin_ignore", "expected a sorted subset of _meta, icons")
    return None


def _pin_problem(payload: dict[str, Any]) -> Problem:
    problem = _server(payload) or _hex_or_null(payload, ("digest", "prev")) or _protocol(
        payload) or _bounded_text(payload, "reason", MAX_REASON)
    if problem is not None:
        return problem
    pinned = payload["action"] == "pinned"
    for name in ("digest", "tools", "protocol", "source"):
        if (payload[name] is not None) != pinned:
            return (name, f"{name} is present exactly when the action is pinned")
    if not pinned and payload["passkey"] is not None:
        return ("passkey", "an unpin needs no passkey (passkey is null)")
    tools = payload["tools"]
    if tools is not None and tools > MAX_TOOL_COUNT:
        return ("tools", f"expected at most {MAX_TOOL_COUNT} tools")
    if payload["source"] is not None:
        problem = _pin_source_problem(payload["source"])
        if problem is not None:
            return problem
    used = payload["passkey"]
    return None if used is None else passkey_use_problem(used)


def _names_problem(where: str, names: list[str]) -> Problem:
    if len(names) > MAX_DRIFT_NAMES:
        return (where, f"expected at most {MAX_DRIFT_NAMES} names")
    if not all(1 <= len(name) <= MAX_DRIFT_NAME for name in names):
        return (where, f"expected names of 1 to {MAX_DRIFT_NAME} characters")
    if names != sorted(set(names)):
        return (where, "expected the names sorted, each once")
    return None


def _server_problem(payload: dict[str, Any]) -> Problem:
    problem = _server(payload) or _container(payload) or _protocol(payload) or _hex_or_null(
        payload, ("list_digest",)) or _bounded_text(payload, "reason", MAX_REASON)
    if problem is not None:
        return problem
    event = payload["event"]
    if event in ("probe", "probed") and (payload["probe_id"] is None
                                         or payload["call"] is not None):
        return ("probe_id", "a probe names its probe id and no call")
    probed = event == "probed"
    for name in ("egress", "egress_truncated"):
        if (payload.get(name) is not None) != probed:
            return (name, f"{name} is present exactly when the event is probed")
    if probed:
        problem = _egress_list_problem(payload, "")
        if problem is not None:
            return problem
    if event == "drifted" and (payload["call"] is None or payload["probe_id"] is not None):
        return ("call", "a drift names the call it was found at and no probe")
    if event == "restarted" and (payload["call"], payload["probe_id"]) != (None, None):
        return ("call", "a restart by the owner names no call and no probe")
    drift = payload["drift"]
    if (drift is not None) != (event == "drifted"):
        return ("drift", "drift is present exactly when the event is drifted")
    if drift is not None:
        if _HEX64.fullmatch(drift["pinned"]) is None:
            return ("drift.pinned", "expected 64 lowercase hex digits")
        for name in ("added", "removed", "changed"):
            problem = _names_problem(f"drift.{name}", drift[name])
            if problem is not None:
                return problem
    return None


def _egress_problem(index: int, item: dict[str, Any], prefix: str = "source.") -> Problem:
    where = f"{prefix}egress[{index}]"
    host = item["host"]
    if host is not None and not 1 <= len(host) <= MAX_HOST:
        return (f"{where}.host", f"expected 1 to {MAX_HOST} characters or null")
    if not 1 <= item["port"] <= 65535:
        return (f"{where}.port", "expected a port 1..65535")
    address = item["address"]
    if address is not None and _ADDRESS.fullmatch(address) is None:
        return (f"{where}.address", "expected an IPv4 or IPv6 address or null")
    if item["refused"] is not None and (item["bytes_out"], item["bytes_in"]) != (0, 0):
        return (f"{where}.refused", "a refused connection carried no bytes")
    return None


def result_source_problem(payload: dict[str, Any]) -> Problem:
    """(path, what is wrong) of a `result` payload's 12 fields, or None."""
    status = payload.get("status")
    if status in NOTHING_SENT and payload.get("output") is not None:
        return ("output", "nothing ran: output is null")
    source = payload.get("source")
    if source is None:
        return None
    container = source["container"]
    if _CONTAINER.fullmatch(container) is None:
        return ("source.container", "expected a container name of 1 to 255 characters")
    exit_code = source["exit"]
    if exit_code is not None and exit_code > 255:
        return ("source.exit", "expected an exit code 0..255 or null")
    if source["kind"] == "command":
        return None
    if not is_server_id(source["server"]):
        return ("source.server", "expected a server id [a-z][a-z0-9-]{0,30}")
    if not 1 <= len(source["mcp_name"]) <= MAX_MCP_NAME:
        return ("source.mcp_name", f"expected 1 to {MAX_MCP_NAME} characters")
    problem = _protocol(source) or _hex_or_null(
        source, ("list_digest", "request_sha256", "response_sha256"))
    if problem is not None:
        return ("source." + problem[0], problem[1])
    return _egress_list_problem(source, "source.")


def _egress_list_problem(payload: dict[str, Any], prefix: str) -> Problem:
    """`egress` and `egress_truncated` of a `result.source` or an `mcp_server probed`."""
    egress = payload["egress"]
    if len(egress) > MAX_EGRESS:
        return (f"{prefix}egress", f"expected at most {MAX_EGRESS} connections")
    if payload["egress_truncated"] and len(egress) != MAX_EGRESS:
        return (f"{prefix}egress_truncated",
                f"truncated only with {MAX_EGRESS} connections kept")
    for index, item in enumerate(egress):
        problem = _egress_problem(index, item, prefix)
        if problem is not None:
            return problem
    return None


def mcp_record_problem(key: str, payload: dict[str, Any]) -> Problem:
    """(path, what is wrong) of a `sources`, `mcp_pin` or `mcp_server` payload, or None."""
    if key == "sources":
        if _HEX64.fullmatch(payload["digest"]) is None:
            return ("digest", "expected 64 lowercase hex digits")
        return None
    if key == "mcp_pin":
        return _pin_problem(payload)
    return _server_problem(payload)
