"""broker.sock: one tool call per connection (05-brokerd "Handling one call").

1. The connection shell (`boxmaker._sockets._framed_server`) checks the peer's uid,
   reads one frame (10 s limit) and decodes it strictly; a bad frame gets one
   `error bad_frame` (or `bad_version`) there and never reaches this module.
2. Ledger **decide**: `call` + `decision` are recorded for every decodable
   request (unknown tools, bad arguments, invalid grants included).
3. `denied`: answer `denied`.
4. `ask`: the call is in the pending table (at most `[approvals] max_pending`,
   `max_pending_per_session` of one session; past them the ledger denies it
   `too_many_pending`); answer `pending`, give the connection's place under
   `max_connections` back, then wait for the owner's answer, the expiry, or
   the peer closing (recorded `requester_gone`, at that time).  Only an
   approval whose re-decision still allows it runs.
5. `allowed`: build the RunSpec, wait for a turn (`runner/_queue.py`: at most
   `max_concurrent` run, `max_queued` wait, each `queue_timeout_ms`; a call
   whose requester leaves while it waits never runs), run, ledger **settle**,
   answer `result` (`runner_unavailable` and `source_unavailable` are errors,
   `unsafe_target` and `pin_mismatch` denials).

A call that cannot be recorded is never run and never answered `result`: the
answer is `error audit_unavailable`.  The call table's replies are broker.sock's
answers themselves (`_call_events.Reply`), sent as they are; its error replies
are made by `answer_of`, as `handle_broker` makes the answer of a raised
`BoxmakerError`, with its class's code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from .._error_table import shown
from .._errors import BoxmakerError, InternalError
from .._sockets._streams import send_frame
from .._sockets._unix import PeerCred
from .._sockets._unix_accept import leave_connection_places
from ..policy._decision import Decision
from ..policy._model import GrantState
from ..proto._json import dumps_bytes
from ..proto.wire import (
    BrokerAnswer,
    BrokerRequest,
    Pending,
    ToolsQuery,
    answer_of,
    encode_broker_answer,
)
from ._approvals import PendingApproval
from ._call_events import Reply, Run, Started, bounded_request
from ._context import Daemon
from ._lifecycle import CallLifecycle
from ._tools_query import record_mcp_events, tools_of
from .log._audit_writer import AuditUnavailable
from .runner._queue import RunnerBusy, RunQueue
from .runner._spec import RunStatus

log = logging.getLogger("brokerd")

_WATCH_CHUNK = 4096


async def send_answer(stream: trio.abc.SendStream, request_id: int | None,
                      answer: BrokerAnswer) -> None:
    await send_frame(stream, encode_broker_answer(request_id, answer))


async def handle_broker(stream: trio.abc.Stream, peer: PeerCred, daemon: Daemon,
                        request: BrokerRequest) -> None:
    """Serve one decoded broker.sock request (the shell checked the peer and the frame).

    A `BoxmakerError` raised on the way is answered here, with its class's
    code; one answered on no socket propagates (the shell logs it and closes).
    """
    try:
        await _handle(stream, peer, daemon, request)
    except BoxmakerError as exc:
        answer = answer_of(exc)
        if answer is None:
            raise
        await send_answer(stream, request.id, answer)


async def _handle(stream: trio.abc.Stream, peer: PeerCred, daemon: Daemon,
                  request: BrokerRequest) -> None:
    call = request.call
    rid = request.id
    if isinstance(call, ToolsQuery):
        await send_answer(stream, rid, await tools_of(daemon))
        return
    grants, leading = daemon.refresh_grants()
    if daemon.sources is not None:  # re-read like the grant set (12 "Configuration")
        leading = [*leading, *daemon.sources.refresh()[1]]
    request_of, too_long = bounded_request(
        call.session, call.tool, call.args, peer_uid=peer.uid, peer_pid=peer.pid,
        max_args_bytes=daemon.config.max_args_bytes)
    opened = await daemon.ledger.decide(request_of, grants, leading=leading, too_long=too_long)
    reply: Reply | None = opened.reply
    if isinstance(reply, Pending) and opened.approval is not None:
        reply = await _wait_for_owner(stream, rid, daemon, reply, opened.approval)
    if isinstance(reply, Run):
        await _run_and_settle(stream, rid, daemon, opened.call, reply.allow, grants)
    elif reply is not None:
        await send_answer(stream, rid, reply)


async def _wait_for_owner(stream: trio.abc.Stream, rid: int, daemon: Daemon,
                          pending: Pending, entry: PendingApproval) -> Reply | None:
    """Answer `pending`, then wait for the owner, the expiry, or the peer leaving.

    None: the requester went away and its withdrawal was recorded.
    """
    if daemon.stopping and daemon.ledger.pending.take(entry.approval_id) is entry:
        await daemon.ledger.expire([entry], reason="shutdown")
    else:
        try:
            await send_answer(stream, rid, pending)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            if await _withdraw(daemon, entry):
                return None
            return await entry.wait()
    # Waiting for the owner is bounded by [approvals] max_pending, not by
    # [sockets] max_connections: the place goes to the next connection.
    leave_connection_places()
    gone = False
    async with trio.open_nursery() as nursery:

        async def watch_peer() -> None:
            nonlocal gone
            try:
                while await stream.receive_some(_WATCH_CHUNK):
                    pass  # one request per connection: anything more is ignored
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            gone = True
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_peer)
        await entry.wait()
        nursery.cancel_scope.cancel()
    if gone and not entry.answered and await _withdraw(daemon, entry):
        return None
    # Whoever took the entry answers it; a call approved as its requester
    # left still runs and is recorded (its answer then goes nowhere).
    return await entry.wait()


async def _withdraw(daemon: Daemon, entry: PendingApproval) -> bool:
    """The requester closed its connection while its call waited.

    False when someone else had already taken the approval.
    """
    with trio.CancelScope(shield=True):
        try:
            took = await daemon.ledger.requester_gone(entry.approval_id)
        except AuditUnavailable as exc:
            log.error("approval %d: requester gone, not recorded: %s", entry.approval_id,
                      shown(str(exc), exc))
            return True
    if took:
        log.info("approval %d withdrawn: the requester went away", entry.approval_id)
    return took


async def _wait_for_turn(stream: trio.abc.Stream, queue: RunQueue) -> str | None:
    """Take a run slot, waiting in the queue while watching the requester.

    None: the slot is ours.  Otherwise why the call does not run (nothing
    holds a slot then): the queue is full, the wait was too long, or the
    requester went away first.
    """
    if queue.try_acquire():
        return None
    busy: str | None = "the requester went away before its turn"
    async with trio.open_nursery() as nursery:

        async def watch_peer() -> None:
            try:
                while await stream.receive_some(_WATCH_CHUNK):
                    pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_peer)
        try:
            await queue.acquire()
            busy = None
        except RunnerBusy as exc:
            busy = str(exc)
        nursery.cancel_scope.cancel()
    return busy


def _fits(output: dict[str, Any] | None, limit: int) -> bool:
    return output is None or len(dumps_bytes(output)) <= limit


async def _run_and_settle(stream: trio.abc.Stream, rid: int, daemon: Daemon,
                          call: CallLifecycle, allow: Decision,
                          grants: GrantState | None = None) -> None:
    """Run an allowed call in its turn, record its result, and answer it."""
    request = call.request
    spec = daemon.link.run_spec(call_id=call.call_id, session=request.session,
                                tool=request.tool, args=request.args, allow=allow,
                                grants=grants)
    busy = await _wait_for_turn(stream, daemon.run_queue)
    # Running tools finish within their limits even when brokerd is stopping.
    with trio.CancelScope(shield=True):
        if busy is not None:
            await send_answer(stream, rid, _final(call, await daemon.ledger.not_run(call, busy)))
            return
        call.feed(Started())
        status: RunStatus
        output: dict[str, Any] | None
        message: str | None
        runbook: str | None = None
        source: dict[str, Any] | None = None
        after_answer: Callable[[], None] | None = None
        try:
            outcome = await daemon.runtimes.run(spec)
            status, output, message = outcome.status, outcome.output, outcome.message
            runbook, source = outcome.runbook, outcome.source
            after_answer = outcome.after_answer
        except Exception as exc:  # a bug in a runtime: the tool may have run
            log.exception("call %d: the runtime failed", call.call_id)
            status = "tool_failed"
            output = {"error": {"code": "runner_failed",
                                "message": f"the runner failed ({type(exc).__name__})"}}
            message = None
        finally:
            daemon.run_queue.release()
        if not _fits(output, daemon.config.runner.output_max_bytes):
            # The toolkit caps its answer; one that does not is a failure, so
            # that the answer frame always fits (the limit is checked at load).
            status, message = "tool_failed", "output too large"
            output = {"error": {"code": "output_too_large",
                                "message": "the tool's output is larger than "
                                           "[runner] output_max_bytes"}}
        try:
            reply = await daemon.ledger.settle(call, status, output, message, runbook=runbook,
                                               source=source)
            if daemon.mcp_events:
                await record_mcp_events(daemon)
            await send_answer(stream, rid, _final(call, reply))
        finally:
            # The runtime's work behind the answer (a command container's removal).
            if after_answer is not None:
                after_answer()


def _final(call: CallLifecycle, reply: Reply | None) -> BrokerAnswer:
    """A settle's reply: an answer (a result, a denial or an error).  None: the
    runtime's output breaks the answer's rules (recorded; the shell logs this)."""
    if reply is None or isinstance(reply, Run):
        raise InternalError(f"call {call.call_id}: the runtime's output is not an answer")
    return reply
