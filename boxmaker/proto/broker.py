"""broker.sock messages (loopd -> brokerd): one tool call per connection."""

from __future__ import annotations

from ._wire_broker import (
    BROKER_ANSWER_TAGS,
    BROKER_REQUEST_TAGS,
    BrokerAnswer,
    BrokerRequest,
    Call,
    Denied,
    Pending,
    Result,
    ResultStatus,
    decode_broker_answer,
    decode_broker_request,
    encode_broker_answer,
    encode_broker_request,
)

__all__ = [
    "BROKER_ANSWER_TAGS",
    "BROKER_REQUEST_TAGS",
    "BrokerAnswer",
    "BrokerRequest",
    "Call",
    "Denied",
    "Pending",
    "Result",
    "ResultStatus",
    "decode_broker_answer",
    "decode_broker_request",
    "encode_broker_answer",
    "encode_broker_request",
]
