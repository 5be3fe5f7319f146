"""loopd's daemon: loop.sock, the busy guard, slots, readiness (06-loopd, 02-wire).

loop.sock is served by the connection shell (`boxmaker._sockets._framed_server`: the
owner's uid, one request frame within 10 s, bad frames answered); each
connection carries one request, handed to `LoopDaemon.answer`.  A `say`
takes the busy guard (a second `say` gets `busy` at once), runs the turn with
its events streamed as frames, releases the guard on every path, and only
then sends the final `done` or `error` frame.  When bxctl goes away mid-turn
the turn is cancelled: the inference stream is closed (llama-server stops
generating) and a pending broker call is withdrawn (brokerd records it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Final

import attrs
import trio

from .. import __version__
from .._error_table import shown
from .._errors import BoxmakerError, PeerError, StartFailed, UnavailableError
from .._http import InferenceError
from .._http.client import LlamaClient
from .._sockets import _sd
from .._sockets._framed_server import MAX_FRAME, FramedServer, FramedSocket, Wording
from .._sockets._streams import send_frame, send_frame_direct
from .._sockets._unix import (
    PeerCred,
    SocketSetupError,
    bind_unix_listener,
    peer_credentials,
    served_by,
)
from ..proto._convert import U64
from ..proto._escape import escape_line
from ..proto.wire import (
    BrokerLinkStatus,
    ConversationsRequest,
    Event,
    History,
    HistoryRequest,
    InferenceStatus,
    LoopRequest,
    LoopStatus,
    LoopStatusRequest,
    McpToolShown,
    SayRequest,
    ToolsAnswer,
    answer_of,
    decode_loop_request,
    encode_loop_frame,
)
from ._broker_client import BrokerPort
from ._config import LoopdConfig
from ._conversations import ConversationStore
from ._history import conversation_summaries, history_messages
from ._selftest import Expected, InferenceMismatch, check_props, self_test
from ._tools import mcp_offer, names_mcp, tool_schemas
from ._turn import Turn, TurnSettings

log = logging.getLogger("boxmaker.loopd")

LOOP_WORDING = Wording(
    forbidden="this uid may not use loop.sock",
    bad_header="the frame does not decode: {error}",
    undecodable="the frame does not decode: {error}",
    bad_version="v must be 1",
    no_frame=None,
)
"""What the shell's error frames say on loop.sock (a silent peer is closed unanswered)."""

class EventTooLarge(PeerError):
    """An event that would not fit in one frame; the turn fails (never a traceback)."""

    wire_code = "turn_failed"


class TurnBusy(PeerError):
    """A say while a turn is running (one turn at a time)."""

    wire_code = "busy"


class HistoryTooLarge(PeerError):
    """A history that would not fit in one frame."""

    wire_code = "turn_failed"


class ConversationUnwritable(UnavailableError):
    """The conversation file could not be written (the disk)."""

    wire_code = "turn_failed"


class InferenceStartFailed(StartFailed):
    """The start's self-test failed: `reason` is what a waiting client is told."""

    def __init__(self, message: str, *, reason: str) -> None:
        self.reason = reason
        super().__init__("loopd", message)


FAILED_START_ANSWER_S: Final = 3.0
"""How long a loopd whose self-test failed answers the clients already waiting."""


def slot_file(conversation: str) -> str:
    return f"boxmaker-{conversation}.bin"


@attrs.define
class LoopDaemon:
    config: LoopdConfig
    store: ConversationStore
    llama: LlamaClient
    broker: BrokerPort
    busy: bool = False
    slot_owner: str | None = None
    """The conversation whose KV cache is in our slot (restored or saved last)."""

    @classmethod
    def from_config(cls, config: LoopdConfig) -> LoopDaemon:
        inference = config.inference
        return cls(
            config=config,
            store=ConversationStore(config.conversations),
            llama=LlamaClient(inference.endpoint, timeouts=inference.timeouts),
            broker=BrokerPort(socket_path=config.broker.socket,
                              timeout_ms=config.broker.timeout_ms,
                              brokerd_uid=config.broker.brokerd_uid),
        )

    def expected(self) -> Expected:
        return Expected(slots=self.config.inference.slots,
                        n_ctx_per_slot=self.config.inference.n_ctx_per_slot,
                        tools_offered=bool(self.config.tools))

    async def start_checks(self) -> None:
        """The self-test at start, then the slot of the newest conversation."""
        try:
            report = await self_test(self.llama, self.expected(),
                                     load_timeout_s=self.config.inference.load_timeout_s)
        except InferenceMismatch as exc:
            raise InferenceStartFailed(f"loopd: {shown(exc.message, exc, joiner=' ')}",
                                       reason=shown(exc.message, exc, joiner=" ")) from exc
        except InferenceError as exc:
            raise InferenceStartFailed(
                f"loopd: the self-test failed: {shown(exc.message, exc, joiner=' ')}",
                reason=f"loopd cannot start: the inference self-test failed: {exc.message}",
            ) from exc
        for line in report.lines():
            log.info("self-test: %s", line)
        conversations = self.store.list()
        if conversations:
            newest = max(conversations, key=lambda info: info.updated_at)
            await self._restore_slot(newest.name)

    async def _restore_slot(self, conversation: str) -> None:
        try:
            await self.llama.restore_slot(self.config.inference.slot, slot_file(conversation))
            log.info("slot %d restored from %s", self.config.inference.slot,
                     slot_file(conversation))
        except InferenceError as exc:
            log.info("slot restore for %s failed (costs only time): %s", conversation,
                     escape_line(shown(exc.message, exc, joiner=" ")))
        self.slot_owner = conversation

    async def _slot_for(self, conversation: str) -> None:
        """Before a turn of `conversation`, whose KV cache is not in our slot.

        A conversation with history has its slot restored.  A new one has no
        slot file, and a failed restore empties the slot (llama-server clears it
        on every failure), so the slot is left as it is: it holds another
        conversation, which begins with the same system message and tools, and
        `cache_prompt` re-uses that common prefix; the new conversation pays
        only for its own tokens.
        """
        if self.store.path_of(conversation).exists():
            await self._restore_slot(conversation)
            return
        log.info("conversation %s is new: slot %d kept for the shared prefix (%s)", conversation,
                 self.config.inference.slot, self.slot_owner or "nothing restored yet")
        self.slot_owner = conversation

    async def _save_slot(self, conversation: str) -> None:
        try:
            await self.llama.save_slot(self.config.inference.slot, slot_file(conversation))
        except InferenceError as exc:
            log.info("slot save for %s failed (costs only time): %s", conversation,
                     escape_line(shown(exc.message, exc, joiner=" ")))
        self.slot_owner = conversation

    async def status(self) -> LoopStatus:
        inference = self.config.inference
        reason: str | None = None
        model = ""
        with trio.move_on_after(5) as scope:
            try:
                props = await self.llama.props()
                model = props.model or ""
                mismatches = check_props(props, self.expected())
                if mismatches:
                    reason = shown("; ".join(mismatches), InferenceMismatch, joiner=" ")
            except InferenceError as exc:
                reason = shown(exc.message, exc, joiner=" ")
        if scope.cancelled_caught:
            reason = "the inference server did not answer within 5 s"
        broker_reason = await self._broker_check()
        mcp_tools = await self._mcp_tools() if broker_reason is None else None
        return LoopStatus(
            version=__version__,
            busy=self.busy,
            inference=InferenceStatus(ok=reason is None, model=model,
                                      n_ctx_per_slot=U64(inference.n_ctx_per_slot),
                                      slots=U64(inference.slots), slot=U64(inference.slot),
                                      reason=reason),
            broker=BrokerLinkStatus(ok=broker_reason is None, reason=broker_reason),
            mcp_tools=mcp_tools,
        )

    async def _mcp_tools(self) -> list[McpToolShown] | None:
        """What a turn started now would offer of the tool sources (the chat's banner
        and `/help` list it); None when `[loop] tools` names none or brokerd does not
        answer the `tools` query within 2 s."""
        if not names_mcp(self.config.tools):
            return None
        with trio.move_on_after(2):
            answer = await self.broker.tools()
            if isinstance(answer, ToolsAnswer):
                offer = mcp_offer(self.config.tools, answer)
                return [McpToolShown(name=t.name, model_name=t.model_name,
                                     description=t.description) for t in offer.tools]
        return None

    async def _broker_check(self) -> str | None:
        path = self.config.broker.socket
        try:
            with trio.fail_after(2):
                stream = await trio.open_unix_socket(str(path))
        except (OSError, trio.TooSlowError) as exc:
            return f"brokerd's socket {path} cannot be reached ({exc})"
        async with stream:
            server = peer_credentials(stream.socket)
            uid = server.uid
            if not served_by(server, self.config.broker.brokerd_uid):
                return (f"the server on {path} runs as uid {uid}, expected "
                        f"{self.config.broker.brokerd_uid}")
        return None

    def settings(self) -> TurnSettings:
        inference = self.config.inference
        return TurnSettings(model=inference.model, slot=inference.slot,
                            temperature=inference.temperature,
                            max_tokens=inference.max_tokens,
                            tools=tool_schemas(list(self.config.tools)),
                            configured=self.config.tools,
                            max_rounds=self.config.max_rounds,
                            turn_timeout_s=inference.turn_timeout_s,
                            core_md=self.config.core_md)

    # -- connections -------------------------------------------------------------------

    async def answer(self, stream: trio.SocketStream, peer: PeerCred,
                     request: LoopRequest) -> None:
        """One decoded loop.sock request (the shell checked the peer and the frame).

        The one place a raised `BoxmakerError` becomes its `error` answer, with
        its class's code; one answered on no socket propagates to the shell.
        """
        try:
            await self._answer(stream, request)
        except BoxmakerError as exc:
            error = answer_of(exc)
            if error is None:
                raise
            await send_frame(stream, encode_loop_frame(request.id, error))

    async def _answer(self, stream: trio.SocketStream, request: LoopRequest) -> None:
        request_body = request.body
        if isinstance(request_body, SayRequest):
            await self._say(stream, request.id, request_body)
        elif isinstance(request_body, LoopStatusRequest):
            await send_frame(stream, encode_loop_frame(request.id, await self.status()))
        elif isinstance(request_body, HistoryRequest):
            await self._history(stream, request.id, request_body.conversation)
        else:
            assert isinstance(request_body, ConversationsRequest)
            await send_frame(stream, encode_loop_frame(
                request.id, conversation_summaries(self.store.list())))

    async def _history(self, stream: trio.SocketStream, request_id: int,
                       conversation: str) -> None:
        messages = self.store.load(conversation)
        body = encode_loop_frame(request_id, History(messages=history_messages(messages)))
        if len(body) > MAX_FRAME:
            raise HistoryTooLarge(
                f"the history of {conversation} takes {len(body)} bytes, more "
                f"than one frame holds ({MAX_FRAME}); read the conversation file instead")
        await send_frame(stream, body)

    async def _say(self, stream: trio.SocketStream, request_id: int, say: SayRequest) -> None:
        if self.busy:
            raise TurnBusy("a turn is already running")
        self.busy = True
        final: Any
        try:
            final = await self._run_turn(stream, request_id, say)
        finally:
            self.busy = False
        if final is not None:
            await send_frame(stream, encode_loop_frame(request_id, final))

    async def _run_turn(self, stream: trio.SocketStream, request_id: int,
                        say: SayRequest) -> Any:
        """Run the turn, cancelled if the client goes away; return the final frame.

        The turn sends its events over a channel without a buffer (each is
        taken the moment it is made, the next waits for the frame before it to
        be written); a task of the shell writes them as frames, and ends when
        the turn closes the channel.  The turn's error, or the writer's, is
        carried out of the nursery and raised here (a nursery would wrap it in
        an exception group)."""
        send_events, receive_events = trio.open_memory_channel[Event](0)
        turn = Turn(settings=self.settings(), store=self.store, llama=self.llama,
                    broker=self.broker, events=send_events)
        result: list[Any] = []
        failed: list[BoxmakerError] = []
        written = trio.Event()
        gone = False
        async with trio.open_nursery() as nursery:

            async def watch_client() -> None:
                nonlocal gone
                # bxctl sends nothing more during a turn: any read end means it went away.
                while await stream.receive_some(4096):
                    pass
                gone = True
                nursery.cancel_scope.cancel()

            async def write_events() -> None:
                try:
                    async for event in receive_events:
                        body = encode_loop_frame(request_id, event)
                        if len(body) > MAX_FRAME:  # bounded by the event's own checks: our bug
                            raise EventTooLarge(
                                f"an event of {len(body)} bytes does not fit a frame")
                        await send_frame_direct(stream, body)  # no pass of its own
                except EventTooLarge as exc:
                    failed.insert(0, exc)  # before any error the turn met after the event
                    nursery.cancel_scope.cancel()
                written.set()

            async def run() -> None:
                with send_events:  # closed also when the turn never ran (/health failed)
                    try:
                        result.append(await self._turn(turn, say))
                    except BoxmakerError as exc:
                        failed.append(exc)
                await written.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_client)
            nursery.start_soon(write_events)
            nursery.start_soon(run)
        if gone:
            log.info("conversation %s: bxctl went away; the turn was cancelled",
                     say.conversation)
            return None
        if failed:
            raise failed[0]
        return result[0] if result else None

    async def _turn(self, turn: Turn, say: SayRequest) -> Any:
        # A server that stopped answering since the start (an inferproxy that
        # restarts for ever, its connections queued) would hold the chat request
        # for first_event_timeout_s; /health answers at once or within its 10 s.
        await self.llama.health()
        if self.slot_owner != say.conversation:
            await self._slot_for(say.conversation)
        try:
            done = await turn.run(say.conversation, say.text)
        except OSError as exc:
            raise ConversationUnwritable(
                f"the conversation cannot be written ({exc})") from exc
        await self._save_slot(say.conversation)
        return done


async def serve(
    config: LoopdConfig,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    daemon_factory: Callable[[LoopdConfig], LoopDaemon] = LoopDaemon.from_config,
) -> None:
    """Bind (or take) loop.sock, run the self-test, report ready, serve until cancelled."""
    daemon = daemon_factory(config)
    try:
        activated = _sd.unix_listener(_sd.listen_fds(), "loop")
    except _sd.ActivationError as exc:
        raise StartFailed(
            "loopd", shown(f"loopd: {exc}", StartFailed, joiner=" ", shown_by="loopd")) from exc
    if activated is not None:
        listener = activated
    else:
        own = os.getuid()
        shared = any(uid != own for uid in config.owner_uids)
        try:
            listener = bind_unix_listener(config.socket, shared_dir=shared, open_socket=shared,
                                          own_uid=own)
        except SocketSetupError as exc:
            raise StartFailed(
                "loopd", shown(f"loopd: {exc}", StartFailed, joiner=" ", shown_by="loopd")) from exc
    listener.setblocking(False)
    trio_listener = trio.socket.from_stdlib_socket(listener)
    with trio_listener:
        try:
            await daemon.start_checks()
        except InferenceStartFailed as exc:
            await answer_waiting_clients(trio_listener, config, exc.reason)
            raise
        framed = FramedSocket(name="loop.sock", allowed_uids=frozenset(config.owner_uids),
                              decode=decode_loop_request, handle=daemon.answer,
                              wording=LOOP_WORDING)
        async with trio.open_nursery() as nursery:
            await nursery.start(FramedServer().serve, trio_listener, framed)
            _sd.notify("READY=1")
            task_status.started()


async def answer_waiting_clients(listener: trio.socket.SocketType, config: LoopdConfig,
                                 reason: str) -> None:
    """Before a loopd whose self-test failed exits: answer the clients that wait.

    Under socket activation the connection that started loopd (a `bxctl chat`)
    waits in loop.sock's queue, which outlives loopd; unanswered, it would wait
    through every restart.  For `FAILED_START_ANSWER_S` every request (checked
    by the same shell: the owner's uid, a valid frame) is answered
    ``inference_unavailable`` with `reason`, and its runbook pointer.
    """
    answer = answer_of(InferenceError(reason))
    assert answer is not None

    async def refuse(stream: trio.SocketStream, peer: PeerCred,
                     request: LoopRequest) -> None:
        await send_frame(stream, encode_loop_frame(request.id, answer))

    framed = FramedSocket(name="loop.sock", allowed_uids=frozenset(config.owner_uids),
                          decode=decode_loop_request, handle=refuse, wording=LOOP_WORDING)
    with trio.move_on_after(FAILED_START_ANSWER_S):
        await FramedServer().serve(listener, framed)
