"""Conversations as fsynced JSONL files that survive restarts (06-loopd).

`home/conversations/<name>.jsonl` holds one message per line, appended as each
message completes and fsynced before the next step.  A crash can leave at most
a torn last line (no newline); it is cut off when the conversation is next
opened, and that is logged.  Any other bad line makes the conversation
unreadable (`ConversationDamaged`): it is never silently rewritten.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

from .._errors import DamagedError
from ..proto._convert import decode, encode
from ..proto._errors import DecodeError

log = logging.getLogger("boxmaker.loopd")

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


@attrs.frozen(kw_only=True)
class ToolCallRef:
    """One tool call the assistant made: the model's id, name and raw arguments."""

    id: str
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class Message:
    """One message of a conversation, in the chat-completions vocabulary."""

    role: Literal["user", "assistant", "tool"]
    content: str | None
    tool_calls: list[ToolCallRef] | None
    tool_call_id: str | None
    interrupted: bool
    """An assistant message cut short (error, cancellation): kept as received."""
    ts: str


def now_ts(clock: Callable[[], dt.datetime] | None = None) -> str:
    moment = clock() if clock else dt.datetime.now(dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def user_message(text: str, ts: str) -> Message:
    return Message(
        role="user", content=text, tool_calls=None, tool_call_id=None, interrupted=False, ts=ts
    )


def _sendable_arguments(arguments: str) -> str:
    """The call's arguments as the server will take them back: a JSON object's text.

    llama-server refuses a whole request (HTTP 500 "Failed to parse tool call
    arguments as JSON") whose history holds a call with other arguments, so a
    call the model wrote badly (answered `bad_args`, kept as written in the
    conversation file) goes back to the server as ``{}``.
    """
    try:
        return arguments if isinstance(json.loads(arguments), dict) else "{}"
    except ValueError:
        return "{}"


def to_chat(messages: list[Message]) -> list[dict[str, Any]]:
    """The messages as llama-server's chat completion API wants them."""
    out: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content or ""}
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name,
                                 "arguments": _sendable_arguments(call.arguments)},
                }
                for call in message.tool_calls
            ]
        if message.tool_call_id is not None:
            item["tool_call_id"] = message.tool_call_id
        out.append(item)
    return out


class ConversationDamaged(DamagedError):
    """A conversation file has a line that is not a message (not a torn tail)."""

    wire_code = "turn_failed"


@attrs.frozen(kw_only=True)
class ConversationInfo:
    name: str
    messages: int
    updated_at: str


def _fsync_file_and_dir(path: Path, fd: int) -> None:
    os.fsync(fd)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class ConversationStore:
    """All conversations under one directory.  One writer (loopd) at a time."""

    def __init__(self, directory: Path, *, fsync: bool = True) -> None:
        self.directory = directory
        self._fsync = fsync

    def path_of(self, name: str) -> Path:
        if not NAME.fullmatch(name):
            raise ValueError("conversation names are [a-z0-9][a-z0-9-]{0,63}")
        return self.directory / f"{name}.jsonl"

    def load(self, name: str) -> list[Message]:
        """All messages; a torn last line is cut off (and logged)."""
        path = self.path_of(name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        if end < len(data):
            log.warning(
                "conversation %s: cutting off a torn last line of %d bytes",
                name,
                len(data) - end,
            )
            with path.open("r+b") as handle:
                handle.truncate(end)
                os.fsync(handle.fileno())
            data = data[:end]
        messages: list[Message] = []
        for number, line in enumerate(data.splitlines(), 1):
            try:
                messages.append(decode(line, Message))
            except DecodeError as exc:
                raise ConversationDamaged(
                    f"conversation {name}: line {number} is not a message ({exc})"
                ) from exc
        return messages

    async def append(self, name: str, message: Message) -> None:
        """Append one message and fsync it (file, and directory when new)."""
        path = self.path_of(name)
        line = encode(message, Message) + b"\n"
        await trio.to_thread.run_sync(self._append_sync, path, line)

    def _append_sync(self, path: Path, line: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        new = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"short write to {path} ({written} of {len(line)} bytes)")
            if self._fsync:
                if new:
                    _fsync_file_and_dir(path, fd)
                else:
                    os.fsync(fd)
        finally:
            os.close(fd)

    def list(self) -> list[ConversationInfo]:
        out: list[ConversationInfo] = []
        if not self.directory.is_dir():
            return out
        for path in sorted(self.directory.glob("*.jsonl")):
            name = path.name[: -len(".jsonl")]
            if not NAME.fullmatch(name):
                continue
            data = path.read_bytes()
            count = data.count(b"\n")
            stamp = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
            out.append(
                ConversationInfo(
                    name=name,
                    messages=count,
                    updated_at=stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                )
            )
        return out
