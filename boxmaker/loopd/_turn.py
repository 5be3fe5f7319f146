"""One turn of the agent loop (06-loopd "A turn").

The owner's message is appended; then, up to `max_rounds` times: build the
request (core.md as the system message, the conversation, the offered tools),
stream the answer (each text delta goes out as an event the moment it
arrives), append the assistant message, and run its tool calls in order
through brokerd, appending a `tool` message for each.  The turn ends when the
model stops without calling tools, or at `max_rounds`.  When it ends so and the
model's words since the last successful call do not carry that call's result,
loopd shows the result to the owner itself (a `result` notice, `_shown`) and
notes in the conversation that it did, for the model's next turn.

Before the first round, when `[loop] tools` names tool-source tools, the turn
asks brokerd's `tools` query (through the BrokerPort, with its deadline) and
offers the items named after the built-ins, under their model names; a
model's call is mapped back by the items (`McpOffer.wire_name`).  When the
query fails the turn offers the built-ins only and loopd logs why.

Everything the model produced is data here: tool names and arguments are
forwarded to brokerd, which decides; nothing in this module allows anything.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import trio

from .._error_table import MODEL_TEXT, TURN_ERRORS
from .._errors import ConfigurationError, UnavailableError
from .._http import (
    ChatResult,
    InferenceHTTPError,
    InferenceStreamError,
    TextDelta,
    ToolCall,
    chat_request_body,
)
from .._http.client import LlamaClient
from ..proto._convert import U64, JsonObject
from ..proto._errors import DecodeError
from ..proto._escape import escape_line
from ..proto._json import dumps, loads_object
from ..proto.tools import CATALOGUE
from ..proto.wire import (
    MAX_CALL_ID_CHARS,
    MAX_RAW_ARGS_CHARS,
    ApprovalPendingEvent,
    Denied,
    Done,
    ErrorAnswer,
    Event,
    Finish,
    NoticeEvent,
    Pending,
    Result,
    TextEvent,
    ToolCallEvent,
    ToolDeniedEvent,
    ToolResultEvent,
    Usage,
    args_problem,
    split_text,
)
from ._broker_client import BROKER_UNAVAILABLE_RUNBOOK, BrokerOutcome, BrokerPort, BrokerUnavailable
from ._conversations import ConversationStore, Message, ToolCallRef, now_ts, to_chat, user_message
from ._shown import (
    CUT_CALL_TEXT_FOR_MODEL,
    CUT_CALL_TEXT_FOR_OWNER,
    REPEAT_TEXT_FOR_MODEL,
    RESULT_SHOWN_TEXT_FOR_MODEL,
    call_key,
    carries,
    denial_text,
    result_text,
    shown_text,
)
from ._tools import NO_MCP_OFFER, McpOffer, mcp_offer, names_mcp

log = logging.getLogger("boxmaker.loopd")

MAX_TOOL_NAME = 1024


_DO_NOT_RETRY = " Do not retry the same call."


def text_for_model(code: str) -> str:
    text = MODEL_TEXT.get(code, "The owner's policy refused this call.")
    return text if text.endswith(_DO_NOT_RETRY) else text + _DO_NOT_RETRY


async def mcp_offer_of(broker: BrokerPort, configured: Sequence[str]) -> McpOffer:
    """The tool-source tools `[loop] tools` names, from brokerd's `tools` answer;
    none when it names none (brokerd is not asked) or the query failed (logged)."""
    if not names_mcp(configured):
        return NO_MCP_OFFER
    answer = await broker.tools()
    if isinstance(answer, BrokerUnavailable):
        log.warning("this turn offers the built-in tools only: the tools query failed: %s",
                    escape_line(answer.reason))
        return NO_MCP_OFFER
    return mcp_offer(configured, answer)


class CoreUnreadable(ConfigurationError):
    """core.md exists but cannot be read as UTF-8."""

    wire_code = "core_unreadable"
    runbook = "docs/runbook.md#core-unreadable"
    answer_shows_runbook = True


def read_core(path: Path) -> str | None:
    """The owner's standing instructions; missing means none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CoreUnreadable(
            f"{path} cannot be read ({exc.strerror})"
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CoreUnreadable(
            f"{path} is not UTF-8 (byte {exc.start})"
        ) from exc


def exit_code(tool: str, output: dict[str, Any] | None) -> int | None:
    """The exit code a tool's result carries, when its catalogue result has one."""
    entry = CATALOGUE.get(tool)
    if entry is None or output is None or not any(f.name == "exit" for f in entry.result):
        return None
    code = output.get("exit")
    return code if isinstance(code, int) and not isinstance(code, bool) and 0 <= code <= 255 \
        else None


def _forwardable_args(arguments: str) -> tuple[dict[str, Any] | None, str]:
    """The model's arguments as an object loopd can forward, or None and why not."""
    try:
        args = loads_object(arguments)
    except DecodeError:
        return None, "the model's arguments are not a JSON object"
    problem = args_problem(args)
    if problem is not None:
        return None, f"the model's arguments cannot be forwarded: {problem}"
    return args, ""


def _raw(arguments: str) -> str:
    """The model's text for `raw_args`, cut to a bound (the whole stays in the history)."""
    if len(arguments) <= MAX_RAW_ARGS_CHARS:
        return arguments
    return arguments[:MAX_RAW_ARGS_CHARS] + f"\u2026 (cut: {len(arguments)} characters)"


def _is_cut_call(exc: InferenceHTTPError | InferenceStreamError) -> bool:
    """The server could not read the model's tool call (llama-server's own words)."""
    message = exc.error.get("message") if exc.error else None
    text = message if isinstance(message, str) else exc.text
    return "Failed to parse tool call" in text


@attrs.define
class TurnSettings:
    model: str
    slot: int
    temperature: float
    tools: list[dict[str, Any]]
    max_tokens: int | None
    max_rounds: int
    turn_timeout_s: float
    core_md: Path
    configured: tuple[str, ...] = ()
    """`[loop] tools` as written: its `mcp.` entries pick the tool-source tools."""


@attrs.define
class _Clock:
    """The turn's own deadline, which stands still while the owner decides."""

    scope: trio.CancelScope
    paused_remaining: float | None = None

    def pause(self) -> None:
        if self.paused_remaining is None:
            self.paused_remaining = self.scope.deadline - trio.current_time()
            self.scope.deadline = float("inf")

    def resume(self) -> None:
        if self.paused_remaining is not None:
            self.scope.deadline = trio.current_time() + self.paused_remaining
            self.paused_remaining = None


class TurnTimeout(UnavailableError):
    """The whole turn ran past `turn_timeout_s` (approval waits not counted)."""

    wire_code = "turn_failed"


@attrs.define
class Turn:
    settings: TurnSettings
    store: ConversationStore
    llama: LlamaClient
    broker: BrokerPort
    events: trio.MemorySendChannel[Event]
    """Where each event goes, in order, the moment it is made (the shell writes them
    as frames); closed when the turn ends, however it ends."""
    offer: McpOffer = NO_MCP_OFFER
    """The tool-source tools of this turn (asked for at its start)."""
    last_ok: tuple[str, str, Result] | None = None
    """The turn's last successful call: its id, tool and result."""
    said_since: list[str] = attrs.Factory(list)
    """The model's words since that call's result."""

    async def run(self, conversation: str, text: str) -> Done:
        with self.events, trio.move_on_after(self.settings.turn_timeout_s) as scope:
            return await self._run(conversation, text, _Clock(scope))
        raise TurnTimeout(
            f"the turn ran past {self.settings.turn_timeout_s:g} s (approval waits not counted)"
        )

    async def _run(self, conversation: str, text: str, clock: _Clock) -> Done:
        await self.store.append(conversation, user_message(text, now_ts()))
        self.offer = await mcp_offer_of(self.broker, self.settings.configured)
        prompt_tokens = completion_tokens = 0
        rounds = 0
        ran: dict[str, str] = {}
        """Each call made in this turn (its `call_key`) and its outcome in boxmaker's words."""
        while True:
            core = read_core(self.settings.core_md)
            rounds += 1
            result = await self._one_round(conversation, core)
            if result is not None and result.usage is not None:
                prompt_tokens += result.usage.prompt_tokens
                completion_tokens += result.usage.completion_tokens
            if result is not None:
                self.said_since.append(result.text)
            usage = Usage(prompt_tokens=U64(prompt_tokens),
                          completion_tokens=U64(completion_tokens))
            if result is not None and (result.finish_reason != "tool_calls"
                                       or not result.tool_calls):
                finish: Finish = "length" if result.finish_reason == "length" else "stop"
                await self._show_result(conversation)
                return Done(finish=finish, rounds=U64(rounds), usage=usage)
            calls = result.tool_calls if result is not None else []
            for index, call in enumerate(calls):
                args, _ = _forwardable_args(call.arguments)
                key = call_key(call.name[:MAX_TOOL_NAME], args, call.arguments)
                if key in ran:
                    await self._repeat(conversation, calls[index:], ran[key])
                    return Done(finish="repeat", rounds=U64(rounds), usage=usage)
                ran[key] = await self._run_tool_call(conversation, call.id, call.name,
                                                     call.arguments, clock)
            if rounds >= self.settings.max_rounds:
                await self._show_result(conversation)
                return Done(finish="max_rounds", rounds=U64(rounds), usage=usage)

    async def _send(self, event: Event) -> None:
        """Hand `event` to the shell's writer; wait while it writes the one before.

        Taken at once when the writer waits (the common case: no switch of
        task here, the turn goes on to its next read), else sent when it is."""
        try:
            self.events.send_nowait(event)
        except trio.WouldBlock:
            await self.events.send(event)

    async def _show_result(self, conversation: str) -> None:
        """The turn ends: the last successful call's result, when the model's words
        since it do not carry it, is shown to the owner, and the model told so."""
        if self.last_ok is None:
            return
        call_id, tool, result = self.last_ok
        if carries("\n".join(self.said_since), result.output):
            return
        await self._send(NoticeEvent(kind="result", call_id=call_id, tool=tool,
                                     text=shown_text(tool, result.status, result.output)))
        await self.store.append(
            conversation,
            Message(role="assistant", content=RESULT_SHOWN_TEXT_FOR_MODEL.format(tool=tool),
                    tool_calls=None, tool_call_id=None, interrupted=False, ts=now_ts()),
        )

    async def _repeat(self, conversation: str, calls: Sequence[ToolCall], shown: str) -> None:
        """The model asked again for a call it made in this turn: show, do not run.

        The owner sees the earlier outcome in boxmaker's words; each call left
        in the round gets a `tool` message (the repeat: that it was shown; any
        after it: that the turn ended), so the next turn's history is whole.
        """
        first = calls[0]
        await self._send(NoticeEvent(kind="repeat", call_id=first.id[:MAX_CALL_ID_CHARS],
                                     tool=first.name[:MAX_TOOL_NAME], text=shown))
        for call in calls:
            await self._tool_message(conversation, call.id[:MAX_CALL_ID_CHARS],
                                     REPEAT_TEXT_FOR_MODEL)

    async def _one_round(self, conversation: str, core: str | None) -> ChatResult | None:
        """One request and its answer; None when the model's call was cut (and told)."""
        messages = to_chat(self.store.load(conversation))
        if core:
            messages.insert(0, {"role": "system", "content": core})
        body = chat_request_body(
            messages,
            model=self.settings.model,
            slot=self.settings.slot,
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
            tools=[*self.settings.tools, *self.offer.schemas],
        )
        stream = self.llama.chat(body)
        try:
            async with stream:
                async for delta in stream:
                    if isinstance(delta, TextDelta) and delta.text:
                        for piece in split_text(delta.text):  # a frame holds 8 MiB
                            await self._send(TextEvent(delta=piece))
            result = stream.result()
        except (InferenceHTTPError, InferenceStreamError) as exc:
            if not _is_cut_call(exc):
                await self._keep_interrupted(conversation, stream.assembler.text)
                raise
            await self._cut_call(conversation, stream.assembler.text, None)
            return None
        except BaseException:
            await self._keep_interrupted(conversation, stream.assembler.text)
            raise
        if result.finish_reason == "length" and result.tool_calls:
            await self._cut_call(conversation, result.text, result.tool_calls[0].name)
            return None
        if result.timings is not None:
            timings = result.timings
            log.info("conversation %s: round done: finish %s, prompt_n %s, cache_n %s, "
                     "predicted_n %s", conversation, escape_line(result.finish_reason),
                     timings.prompt_n, timings.cache_n, timings.predicted_n)
        calls = [
            ToolCallRef(id=c.id[:MAX_CALL_ID_CHARS], name=c.name[:MAX_TOOL_NAME],
                        arguments=c.arguments)
            for c in result.tool_calls
        ] if result.finish_reason == "tool_calls" else []
        await self.store.append(
            conversation,
            Message(role="assistant", content=result.text, tool_calls=calls or None,
                    tool_call_id=None, interrupted=False, ts=now_ts()),
        )
        return result

    async def _cut_call(self, conversation: str, text: str, tool: str | None) -> None:
        """A call cut before it was complete: told to the owner and the model; none runs."""
        await self._send(NoticeEvent(kind="cut_call", call_id=None,
                                     tool=tool[:MAX_TOOL_NAME] if tool else None,
                                     text=CUT_CALL_TEXT_FOR_OWNER))
        content = f"{text}\n{CUT_CALL_TEXT_FOR_MODEL}" if text else CUT_CALL_TEXT_FOR_MODEL
        await self.store.append(
            conversation,
            Message(role="assistant", content=content, tool_calls=None, tool_call_id=None,
                    interrupted=False, ts=now_ts()),
        )

    async def _keep_interrupted(self, conversation: str, text: str) -> None:
        """An interrupted assistant message is kept with what was received."""
        message = Message(role="assistant", content=text, tool_calls=None, tool_call_id=None,
                          interrupted=True, ts=now_ts())
        with trio.CancelScope(shield=True):
            try:
                await self.store.append(conversation, message)
            except OSError as exc:
                log.error("conversation %s: the interrupted message cannot be kept (%s)",
                          conversation, exc.strerror)

    async def _run_tool_call(
        self, conversation: str, call_id: str, name: str, arguments: str, clock: _Clock
    ) -> str:
        """Run one call through brokerd; its outcome in boxmaker's words (for a repeat)."""
        tool = self.offer.wire_name(name[:MAX_TOOL_NAME])  # boxmaker's name from here on
        call_id = call_id[:MAX_CALL_ID_CHARS]  # as kept in the assistant message
        args, problem = _forwardable_args(arguments)
        await self._send(ToolCallEvent(
            call_id=call_id, tool=tool, args=JsonObject(args) if args is not None else None,
            raw_args=None if args is not None else _raw(arguments)))
        if args is None:
            reason = f"{problem}; brokerd was not asked"
            await self._deny(conversation, call_id, tool, "bad_args", reason, None)
            return denial_text(tool, "bad_args", reason)

        # The turn pulls brokerd's answers: each `pending` stops the turn's clock
        # and is shown; the last answer is the call's outcome.
        outcome: BrokerOutcome | None = None
        try:
            async with aclosing(self.broker.call(session=conversation, tool=tool,
                                                 args=args)) as answers:
                async for answer in answers:
                    if not isinstance(answer, Pending):
                        outcome = answer
                        continue
                    clock.pause()
                    await self._send(ApprovalPendingEvent(
                        call_id=call_id, approval_id=answer.approval_id, tool=tool,
                        expires_at=answer.expires_at))
        finally:
            clock.resume()
        assert outcome is not None  # the broker client's last answer is never `pending`
        return await self._settle(conversation, call_id, tool, outcome)

    async def _settle(self, conversation: str, call_id: str, tool: str,
                      outcome: BrokerOutcome) -> str:
        if isinstance(outcome, Result):
            output = outcome.output
            size = len(dumps(output).encode("utf-8")) if output is not None else 0
            await self._send(ToolResultEvent(
                call_id=call_id, tool=tool, status=outcome.status, bytes=U64(size),
                label=outcome.label, untrusted=outcome.untrusted, exit=exit_code(tool, output)))
            content = dumps({"status": outcome.status, "output": output})
            await self._tool_message(conversation, call_id, content)
            if outcome.status == "ok":
                self.last_ok = (call_id, tool, outcome)
                self.said_since.clear()
            return result_text(tool, outcome.status, output)
        if isinstance(outcome, Denied):
            return await self._deny(conversation, call_id, tool, outcome.code, outcome.reason,
                                    outcome.runbook)
        if isinstance(outcome, ErrorAnswer):
            code = outcome.code if outcome.code in TURN_ERRORS else None
            if code is None:
                return await self._deny(conversation, call_id, tool, "broker_unavailable",
                                        f"brokerd answered with error {outcome.code}",
                                        BROKER_UNAVAILABLE_RUNBOOK)
            return await self._deny(conversation, call_id, tool, code, outcome.message,
                                    outcome.runbook)
        assert isinstance(outcome, BrokerUnavailable)
        log.warning("broker call %s: %s", json.dumps(call_id), outcome.reason)
        return await self._deny(conversation, call_id, tool, "broker_unavailable",
                                outcome.reason, BROKER_UNAVAILABLE_RUNBOOK)

    async def _deny(self, conversation: str, call_id: str, tool: str, code: str, reason: str,
                    runbook: str | None) -> str:
        await self._send(ToolDeniedEvent(call_id=call_id, tool=tool,
                                         code=code,  # type: ignore[arg-type]
                                         reason=reason, runbook=runbook))
        await self._tool_message(conversation, call_id, text_for_model(code))
        return denial_text(tool, code, reason)

    async def _tool_message(self, conversation: str, call_id: str, content: str) -> None:
        await self.store.append(
            conversation,
            Message(role="tool", content=content, tool_calls=None, tool_call_id=call_id,
                    interrupted=False, ts=now_ts()),
        )
