"""The MCP client over stdio, sans-IO (12 "The MCP client"): bytes in, outputs out.

In the manner of h11: the trio layer feeds what the server wrote
(`receive_data`, `receive_eof`) and the timers (`discover_timed_out`,
`call_timed_out`), asks for the call (`send_call`), and carries out what
comes back: `Write` a line (the newline is the writer's), and the outcomes.
Everything that moves the state is in `TRANSITIONS`; an input the table has
no row for is our own bug (`ClientStateError`).  Declares no client
capabilities; answers a legacy `ping`; refuses every other server request
with -32601 (and says so for the daemon log); ignores notifications, at most
10,000 (with server requests) per client.  Bounds: the line length, 64 list
pages, 1024 tools, 4 MiB of list lines, a cursor of 1024 characters.

One client serves one container.  With ``protocol = "auto"`` the era probe
sends `server/discover`; a legacy outcome ends this client (`EraDecided`
``legacy``): the trio layer removes the container and starts a fresh one with
a client of protocol ``auto-legacy`` (offers 2025-11-25, accepts 2025-06-18).
"""

from __future__ import annotations

import enum
from typing import Any, Final, Literal

import attrs

from ..._errors import InternalError
from ._canonical import sha256_hex
from ._lines import (
    DISCOVER_ID,
    INIT_ID,
    INITIALIZED_LINE,
    LEGACY,
    MODERN,
    LineViolation,
    Notification,
    Request,
    Response,
    call_id_text,
    call_line,
    cancel_line,
    discover_line,
    initialize_line,
    list_id,
    list_line,
    ping_answer,
    read_message,
    refusal_answer,
    shown_method,
)
from ._pin import ServerInfo, instructions_of, server_info_of

MAX_PAGES: Final = 64
MAX_TOOLS: Final = 1024
MAX_LIST_BYTES: Final = 4 * 1024 * 1024
MAX_CURSOR: Final = 1024
MAX_NOTICES: Final = 10_000
MAX_ERROR_MESSAGE: Final = 4096
UNSUPPORTED_CODES: Final = frozenset({-32022, -32021, -32020})
SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"
ClientProtocol = Literal["auto", "auto-legacy", "2026-07-28", "2025-11-25", "2025-06-18"]


def max_line_bytes(output_max_bytes: int) -> int:
    """`max(output_max_bytes, 4 MiB) + 64 KiB`."""
    return max(output_max_bytes, 4 * 1024 * 1024) + 64 * 1024


class ClientStateError(InternalError):
    """An input the client's table has no transition for: the caller's bug."""


class State(enum.Enum):
    START = "start"
    DISCOVERING = "discovering"
    INITIALIZING = "initializing"
    LISTING = "listing"
    READY = "ready"
    CALLING = "calling"
    DONE = "done"
    """The call settled (answered, failed, timed out): every later line is discarded."""
    CLOSED = "closed"
    """Before the call: unavailable, or the era probe said legacy (a fresh container)."""


class In(enum.Enum):
    START_PROBE = "start_probe"
    START_LEGACY = "start_legacy"
    START_MODERN = "start_modern"
    ERA_MODERN = "era_modern"
    ERA_LEGACY = "era_legacy"
    INITIALIZED = "initialized"
    PAGE = "page"
    LISTED = "listed"
    CALL = "call"
    ANSWER = "answer"
    CALL_TIMEOUT = "call_timeout"
    FAIL = "fail"


TRANSITIONS: Final[dict[tuple[State, In], State]] = {
    (State.START, In.START_PROBE): State.DISCOVERING,
    (State.START, In.START_LEGACY): State.INITIALIZING,
    (State.START, In.START_MODERN): State.LISTING,
    (State.DISCOVERING, In.ERA_MODERN): State.LISTING,
    (State.DISCOVERING, In.ERA_LEGACY): State.CLOSED,
    (State.DISCOVERING, In.FAIL): State.CLOSED,
    (State.INITIALIZING, In.INITIALIZED): State.LISTING,
    (State.INITIALIZING, In.FAIL): State.CLOSED,
    (State.LISTING, In.PAGE): State.LISTING,
    (State.LISTING, In.LISTED): State.READY,
    (State.LISTING, In.FAIL): State.CLOSED,
    (State.READY, In.CALL): State.CALLING,
    (State.READY, In.FAIL): State.CLOSED,
    (State.CALLING, In.ANSWER): State.DONE,
    (State.CALLING, In.CALL_TIMEOUT): State.DONE,
    (State.CALLING, In.FAIL): State.DONE,
}
"""Every transition.  DONE and CLOSED have none: what arrives then is discarded."""


# -- outputs ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Write:
    line: bytes
    """Without the newline."""


@attrs.frozen(kw_only=True)
class EraDecided:
    era: Literal["modern", "legacy"]


@attrs.frozen(kw_only=True)
class Listed:
    protocol: str
    tools: tuple[Any, ...]
    """The Tool objects as served, strictly decoded, every page in order."""
    server_info: ServerInfo | None
    instructions: str | None
    pages: int
    bytes: int


@attrs.frozen(kw_only=True)
class Unavailable:
    """Before the call line: `source_unavailable`, or (`protocol`) a violation."""

    reason: str
    protocol_violation: bool = False
    named_version: str | None = None
    """The version `initialize`'s answer named when it was not the one offered: with a
    pinned version this is `pin_mismatch`, not `source_unavailable` (12 "Protocol
    versions": a server cannot downgrade itself)."""


FailKind = Literal["mcp_error", "input_required", "protocol", "crashed", "output_too_large"]


@attrs.frozen(kw_only=True)
class CallAnswered:
    result: dict[str, Any]
    is_error: bool | None
    response_sha256: str
    bytes: int


@attrs.frozen(kw_only=True)
class CallFailed:
    """`tool_failed` with its code; `response_sha256` when a line answered the call."""

    kind: FailKind
    message: str
    response_sha256: str | None = None


@attrs.frozen(kw_only=True)
class CallTimedOut:
    pass


@attrs.frozen(kw_only=True)
class RequestRefused:
    """A server request answered -32601 (sampling, elicitation, roots, unknown): a daemon
    log line; `method` is the server's text, cut, not escaped."""

    method: str


Output = (Write | EraDecided | Listed | Unavailable | CallAnswered | CallFailed | CallTimedOut
          | RequestRefused)


class McpClient:
    """One container's client.  `version` is brokerd's (the newest `start` record's)."""

    def __init__(self, *, protocol: ClientProtocol, version: str, output_max_bytes: int) -> None:
        self.protocol_choice = protocol
        self.version = version
        self.max_line = max_line_bytes(output_max_bytes)
        self.state = State.START
        self.protocol: str | None = MODERN if protocol == MODERN else None
        self.server_info: ServerInfo | None = None
        self.instructions: str | None = None
        self.request_sha256: str | None = None
        self.response_sha256: str | None = None
        self._buffer = bytearray()
        self._notices = 0
        self._page = 0
        self._tools: list[Any] = []
        self._list_bytes = 0
        self._call_id: int | None = None
        self._first_result = True

    # -- the table ---------------------------------------------------------------------------

    def _move(self, event: In) -> None:
        next_state = TRANSITIONS.get((self.state, event))
        if next_state is None:
            raise ClientStateError(f"no transition from {self.state.value} on {event.value}")
        self.state = next_state

    @property
    def modern(self) -> bool:
        return self.protocol == MODERN

    # -- inputs -------------------------------------------------------------------------------

    def start(self) -> list[Output]:
        choice = self.protocol_choice
        if choice == "auto":
            self._move(In.START_PROBE)
            return [Write(line=discover_line(self.version))]
        if choice == MODERN:
            self._move(In.START_MODERN)
            return [self._list_request(None)]
        self._move(In.START_LEGACY)
        offer = "2025-11-25" if choice == "auto-legacy" else choice
        return [Write(line=initialize_line(offer, self.version))]

    def send_call(self, call_id: int, name: str, arguments: dict[str, Any]) -> list[Output]:
        """The call line; only once the list was read and checked by the caller."""
        self._move(In.CALL)
        self._call_id = call_id
        line = call_line(call_id, name, arguments, self.version if self.modern else None)
        self.request_sha256 = sha256_hex(line)
        return [Write(line=line)]

    def call_timed_out(self) -> list[Output]:
        if self.state is not State.CALLING:
            return []
        assert self._call_id is not None
        self._move(In.CALL_TIMEOUT)
        return [Write(line=cancel_line(self._call_id)), CallTimedOut()]

    def start_timed_out(self) -> list[Output]:
        """`start_timeout_ms` passed before the list was read: `source_unavailable`."""
        if self.state not in (State.INITIALIZING, State.LISTING, State.DISCOVERING):
            return []
        self._move(In.FAIL)
        return [Unavailable(reason="the server did not negotiate and list within "
                                   "start_timeout_ms")]

    def discover_timed_out(self) -> list[Output]:
        if self.state is not State.DISCOVERING:
            return []
        self._move(In.ERA_LEGACY)
        return [EraDecided(era="legacy")]

    def receive_eof(self) -> list[Output]:
        """The server's stdout ended (it exited or was killed)."""
        if self.state is State.DISCOVERING:
            self._move(In.ERA_LEGACY)
            return [EraDecided(era="legacy")]
        if self.state is State.CALLING:
            self._move(In.FAIL)
            return [CallFailed(kind="crashed", message="the server exited before it answered")]
        if self.state in (State.INITIALIZING, State.LISTING, State.READY):
            self._move(In.FAIL)
            return [Unavailable(reason="the server exited before the call line was written")]
        if self.state is State.START:
            raise ClientStateError("end of output before start")
        return []

    def receive_data(self, data: bytes) -> list[Output]:
        out: list[Output] = []
        if self.state in (State.DONE, State.CLOSED):
            return out
        self._buffer += data
        while self.state not in (State.DONE, State.CLOSED):
            end = self._buffer.find(b"\n")
            if end == -1:
                if len(self._buffer) > self.max_line:
                    out.extend(self._too_long())
                break
            raw = bytes(self._buffer[:end])
            del self._buffer[:end + 1]
            if len(raw) > self.max_line:
                out.extend(self._too_long())
                break
            out.extend(self._line(raw))
        if self.state in (State.DONE, State.CLOSED):
            self._buffer.clear()
        return out

    # -- one line ---------------------------------------------------------------------------

    def _too_long(self) -> list[Output]:
        if self.state is State.CALLING:
            self._move(In.FAIL)
            return [CallFailed(kind="output_too_large",
                               message=f"a line longer than {self.max_line} bytes")]
        return self._violation(f"a line longer than {self.max_line} bytes")

    def _violation(self, reason: str) -> list[Output]:
        if self.state is State.DISCOVERING:
            self._move(In.ERA_LEGACY)
            return [EraDecided(era="legacy")]
        self._move(In.FAIL)
        if self._call_id is not None:
            return [CallFailed(kind="protocol", message=reason)]
        return [Unavailable(reason=reason, protocol_violation=True)]

    def _line(self, raw: bytes) -> list[Output]:
        """One line as read, without its newline (`raw` is what the hashes cover)."""
        line = raw[:-1] if raw.endswith(b"\r") else raw
        try:
            message = read_message(line)
        except LineViolation as exc:
            return self._violation(exc.message)
        if isinstance(message, Response):
            return self._response(message, raw)
        self._notices += 1
        if self._notices > MAX_NOTICES:
            return self._violation(f"more than {MAX_NOTICES} notifications and requests")
        if isinstance(message, Notification):
            return []
        return self._server_request(message)

    def _server_request(self, request: Request) -> list[Output]:
        legacy = self.protocol in LEGACY or self.state is State.INITIALIZING
        if request.method == "ping" and legacy:
            return [Write(line=ping_answer(request.id))]
        return [Write(line=refusal_answer(request.id)),
                RequestRefused(method=shown_method(request.method))]

    def _expected_id(self) -> str | None:
        if self.state is State.DISCOVERING:
            return DISCOVER_ID
        if self.state is State.INITIALIZING:
            return INIT_ID
        if self.state is State.LISTING:
            return list_id(self._page)
        if self.state is State.CALLING and self._call_id is not None:
            return call_id_text(self._call_id)
        return None

    def _response(self, response: Response, line: bytes) -> list[Output]:
        if self.state is State.DISCOVERING:
            return self._discovered(response)
        if response.id is None or response.id != self._expected_id():
            return self._violation("an answer to an id that is not outstanding")
        if self.state is State.INITIALIZING:
            return self._initialized(response)
        if self.state is State.LISTING:
            return self._page_read(response, len(line))
        return self._answered(response, line)

    def _discovered(self, response: Response) -> list[Output]:
        result = response.result
        if response.id == DISCOVER_ID and result is not None:
            versions = result.get("supportedVersions")
            if isinstance(versions, list) and MODERN in versions:
                self._move(In.ERA_MODERN)
                self.protocol = MODERN
                self._take_meta_info(result)
                return [EraDecided(era="modern"), self._list_request(None)]
        if (response.id == DISCOVER_ID and response.error is not None
                and response.error.code in UNSUPPORTED_CODES):
            self._move(In.FAIL)
            return [Unavailable(reason="no common protocol version (the server is modern and "
                                       "speaks none that boxmaker does)")]
        self._move(In.ERA_LEGACY)
        return [EraDecided(era="legacy")]

    def _initialized(self, response: Response) -> list[Output]:
        result = response.result
        if result is None:
            assert response.error is not None
            self._move(In.FAIL)
            return [Unavailable(reason=f"initialize: the server answered error "
                                       f"{response.error.code}")]
        accepted = LEGACY if self.protocol_choice == "auto-legacy" else (self.protocol_choice,)
        version = result.get("protocolVersion")
        if not isinstance(version, str) or version not in accepted:
            self._move(In.FAIL)
            return [Unavailable(reason="no common protocol version (initialize named another)",
                                named_version=version[:64] if isinstance(version, str)
                                else None)]
        self._move(In.INITIALIZED)
        self.protocol = version
        self.server_info = server_info_of(result.get("serverInfo"))
        self.instructions = instructions_of(result.get("instructions"))
        self._first_result = False
        return [Write(line=INITIALIZED_LINE), self._list_request(None)]

    def _take_meta_info(self, result: dict[str, Any]) -> None:
        if self._first_result:
            self._first_result = False
            info = result.get("_meta")
            self.server_info = server_info_of(info.get(SERVER_INFO_META)) if isinstance(
                info, dict) else None

    def _list_request(self, cursor: str | None) -> Write:
        self._page += 1
        return Write(line=list_line(self._page, cursor, self.version if self.modern else None))

    def _page_read(self, response: Response, size: int) -> list[Output]:
        result = response.result
        if result is None:
            assert response.error is not None
            self._move(In.FAIL)
            return [Unavailable(reason=f"tools/list: the server answered error "
                                       f"{response.error.code}")]
        self._take_meta_info(result)
        tools, cursor = result.get("tools"), result.get("nextCursor")
        if not isinstance(tools, list):
            return self._violation("tools/list: tools is not an array")
        self._tools.extend(tools)
        self._list_bytes += size
        if len(self._tools) > MAX_TOOLS:
            return self._violation(f"tools/list: more than {MAX_TOOLS} tools")
        if self._list_bytes > MAX_LIST_BYTES:
            return self._violation(f"tools/list: more than {MAX_LIST_BYTES} bytes")
        if cursor is None:
            self._move(In.LISTED)
            assert self.protocol is not None
            return [Listed(protocol=self.protocol, tools=tuple(self._tools),
                           server_info=self.server_info, instructions=self.instructions,
                           pages=self._page, bytes=self._list_bytes)]
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR:
            return self._violation(f"tools/list: nextCursor not a string of at most "
                                   f"{MAX_CURSOR} characters")
        if self._page >= MAX_PAGES:
            return self._violation(f"tools/list: more than {MAX_PAGES} pages")
        self._move(In.PAGE)
        return [self._list_request(cursor)]

    def _answered(self, response: Response, line: bytes) -> list[Output]:
        digest = sha256_hex(line)
        self.response_sha256 = digest
        if response.error is not None:
            self._move(In.FAIL)
            message = response.error.message.encode("utf-8")[:MAX_ERROR_MESSAGE]
            return [CallFailed(kind="mcp_error", response_sha256=digest,
                               message=message.decode("utf-8", "ignore"))]
        result = response.result
        assert result is not None
        kind, is_error = result.get("resultType"), result.get("isError")
        if kind not in (None, "complete", "input_required") or (
                is_error is not None and not isinstance(is_error, bool)):
            self._move(In.FAIL)
            return [CallFailed(kind="protocol", response_sha256=digest,
                               message="a result whose resultType or isError is not of the "
                                       "protocol")]
        self._move(In.FAIL if kind == "input_required" else In.ANSWER)
        if kind == "input_required":
            return [CallFailed(kind="input_required", response_sha256=digest,
                               message="the server asked for input; boxmaker provides none")]
        return [CallAnswered(result=result, is_error=is_error, response_sha256=digest,
                             bytes=len(line))]
