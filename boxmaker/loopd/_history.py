"""Conversation store records -> loop.sock `history` and `conversations` answers."""

from __future__ import annotations

from ..proto._convert import U64
from ..proto.wire import (
    Conversations,
    ConversationSummary,
    FunctionCall,
    HistoryMessage,
    MessageToolCall,
)
from ._conversations import ConversationInfo, Message


def history_messages(messages: list[Message]) -> list[HistoryMessage]:
    return [
        HistoryMessage(
            role=message.role,
            content=message.content,
            tool_calls=[
                MessageToolCall(id=call.id, type="function",
                                function=FunctionCall(name=call.name, arguments=call.arguments))
                for call in message.tool_calls
            ] if message.tool_calls else None,
            tool_call_id=message.tool_call_id,
            interrupted=message.interrupted,
            ts=message.ts,
        )
        for message in messages
    ]


def conversation_summaries(items: list[ConversationInfo]) -> Conversations:
    return Conversations(items=[
        ConversationSummary(name=item.name, messages=U64(item.messages),
                            updated_at=item.updated_at)
        for item in items
    ])
