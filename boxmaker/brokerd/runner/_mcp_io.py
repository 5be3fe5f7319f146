"""The trio adapter of the sans-IO MCP client (12 "The MCP client"): pipes in, outcomes out.

`McpConnection` carries out what `proto.mcp.McpClient` asks, in the manner of
h11's trio example: what the server writes on stdout is fed to the client
(`receive_data`, `receive_eof` at the end), each `Write` goes to the server's
stdin with its newline, and the client's timers are trio deadlines:

- `negotiate`: the whole of start (era probe, `initialize`, every list page)
  within `start_timeout_s` (`start_timed_out`); while the era probe waits, its
  own 2 s (`discover_timed_out`);
- `call`: one `tools/call` within `call_timeout_s` (`call_timed_out`, whose
  `notifications/cancelled` line gets `CANCEL_WRITE_S` of its own).

A write the server does not read blocks only until the phase's deadline; a
write to a server that is gone is dropped (its stdout's end says what
happened).  Every event the client produced is kept before any write is
awaited, so a deadline never loses an outcome.  stdin stays open until the
call has settled (`close_stdin` is the caller's).  Server requests the
client refused go to the daemon log, escaped.  `StderrTail` reads a server's
stderr concurrently, keeps its first 64 KiB, counts the rest, and gives it to
the daemon log escaped.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Final

import trio

from ...proto._escape import escape_line
from ...proto.mcp import (
    CallAnswered,
    CallFailed,
    CallTimedOut,
    ClientStateError,
    EraDecided,
    Listed,
    McpClient,
    Output,
    RequestRefused,
    State,
    Unavailable,
    Write,
)

log = logging.getLogger("brokerd")

DISCOVER_TIMEOUT_S: Final = 2.0
"""12 "Protocol versions": the era probe's wait for `server/discover`'s answer."""
CANCEL_WRITE_S: Final = 1.0
"""How long the `notifications/cancelled` line of a timed-out call may take to write."""
STDERR_KEEP: Final = 64 * 1024
READ_SIZE: Final = 65536

Negotiated = Listed | Unavailable | EraDecided
"""`Listed` (ready for the call), `Unavailable`, or `EraDecided` legacy (a fresh container)."""
Settled = CallAnswered | CallFailed | CallTimedOut


def _negotiated(event: Output) -> Negotiated | None:
    if isinstance(event, Listed | Unavailable):
        return event
    if isinstance(event, EraDecided) and event.era == "legacy":
        return event
    return None


def _settled(event: Output) -> Settled | None:
    return event if isinstance(event, CallAnswered | CallFailed | CallTimedOut) else None


class McpConnection:
    """One server process's client, over its stdin and stdout.  `name` is for the log."""

    def __init__(self, client: McpClient, stdin: trio.abc.SendStream,
                 stdout: trio.abc.ReceiveStream, *, name: str) -> None:
        self.client = client
        self.stdin = stdin
        self.stdout = stdout
        self.name = name
        self.refused: list[str] = []
        """The methods of the server requests refused with -32601, as the server wrote them."""
        self.eof = False
        self._stdin_gone = False

    # -- carrying out ------------------------------------------------------------------------

    async def _write(self, line: bytes) -> None:
        if self._stdin_gone:
            return
        try:
            await self.stdin.send_all(line + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._stdin_gone = True

    async def _carry_out(self, outputs: list[Output], deadline: float) -> list[Output]:
        """Write the `Write`s by `deadline`; return the other outputs (all of them, always)."""
        rest: list[Output] = []
        writes: list[bytes] = []
        for output in outputs:
            if isinstance(output, Write):
                writes.append(output.line)
                continue
            if isinstance(output, RequestRefused):
                self.refused.append(output.method)
                log.info("%s: refused the server's request %s (boxmaker provides no client "
                         "features)", self.name, escape_line(output.method))
                continue
            rest.append(output)
        with trio.move_on_at(deadline):
            for line in writes:
                await self._write(line)
        return rest

    async def _read(self) -> list[Output]:
        data = await self.stdout.receive_some(READ_SIZE)
        if not data:
            self.eof = True
            return self.client.receive_eof()
        return self.client.receive_data(bytes(data))

    # -- the two phases ----------------------------------------------------------------------

    async def negotiate(self, *, start_timeout_s: float,
                        discover_timeout_s: float = DISCOVER_TIMEOUT_S) -> Negotiated:
        """Start the client and read until it listed, failed, or decided on legacy."""
        now = trio.current_time()
        start_deadline = now + start_timeout_s
        discover_deadline = min(start_deadline, now + discover_timeout_s)
        pending = await self._carry_out(self.client.start(), start_deadline)
        while True:
            for event in pending:
                found = _negotiated(event)
                if found is not None:
                    return found
            discovering = self.client.state is State.DISCOVERING
            deadline = discover_deadline if discovering else start_deadline
            outputs: list[Output] | None = None
            with trio.move_on_at(deadline):
                outputs = await self._read()
            if outputs is None:
                outputs = (self.client.discover_timed_out() if discovering
                           else self.client.start_timed_out())
                if not outputs:
                    raise ClientStateError(f"{self.name}: a start timer in state "
                                           f"{self.client.state.value}")
            pending = await self._carry_out(outputs, start_deadline)

    async def call(self, call_id: int, name: str, arguments: dict[str, object], *,
                   call_timeout_s: float) -> Settled:
        """Write the call line and read until it settled.  Only after `Listed`."""
        deadline = trio.current_time() + call_timeout_s
        pending = await self._carry_out(self.client.send_call(call_id, name, dict(arguments)),
                                        deadline)
        while True:
            for event in pending:
                found = _settled(event)
                if found is not None:
                    return found
            outputs: list[Output] | None = None
            with trio.move_on_at(deadline):
                outputs = await self._read()
            if outputs is None:
                timed_out = await self._carry_out(self.client.call_timed_out(),
                                                  trio.current_time() + CANCEL_WRITE_S)
                return next((e for e in map(_settled, timed_out) if e is not None),
                            CallTimedOut())
            pending = await self._carry_out(outputs, deadline)

    async def close_stdin(self) -> None:
        """End the server's input (a per-call server stops on it)."""
        self._stdin_gone = True
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.stdin.aclose()


class StderrTail:
    """A server's stderr, read concurrently: the first 64 KiB kept, everything counted."""

    def __init__(self, keep: int = STDERR_KEEP) -> None:
        self.keep = keep
        self.kept = bytearray()
        self.total = 0

    async def read_all(self, stream: trio.abc.ReceiveStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while chunk := await stream.receive_some(READ_SIZE):
                self.total += len(chunk)
                room = self.keep - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]

    def shown(self) -> str:
        """What the daemon log gets: escaped, one line, with the count of what was cut."""
        text = escape_line(bytes(self.kept).decode("utf-8", "replace"))
        if self.total > len(self.kept):
            text += f" [{self.total - len(self.kept)} more bytes not kept]"
        return text
