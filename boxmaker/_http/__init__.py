"""The HTTP client shared by loopd, inferproxy and `boxmaker up` (06-loopd, 09-inferproxy).

Pure (no I/O, no trio): `_chunked` (the chunked transfer coding), `_sse` (the
event-stream parser), `_errors` and `_error_answers` (the errors, split by
fault, and how an answer becomes one), `_endpoint` (where a server is, the
timeouts, a response head), `_llama_api` and `_llama_decode` (llama-server's
answers as typed values).

On trio, thin, re-exported by `boxmaker._http.client` (not here, so that
importing a pure module of this package never loads trio): `_connection`
(`HttpConnection`, one h11 client connection, its request sent whole or
streamed), `_fetch` (a whole small exchange), `_sse_stream` (a streamed answer,
event by event), `_llama_client` (`LlamaClient`).
"""

from ._chunked import ChunkedDecoder, ChunkedError
from ._endpoint import Endpoint, HttpResponse, ResponseHead, Timeouts
from ._error_answers import MAX_ERROR_BODY, http_error, stream_error
from ._errors import (
    BodyTooLarge,
    InferenceClosed,
    InferenceError,
    InferenceHTTPError,
    InferenceProtocolError,
    InferenceStreamError,
    InferenceTimeout,
    InferenceUnavailable,
    Phase,
    shown,
)
from ._llama_api import (
    CHAT_PATH,
    ChatDelta,
    ChatResult,
    FinishDelta,
    PartialToolCall,
    Props,
    SlotAction,
    SlotActionResult,
    SlotInfo,
    TextDelta,
    Timings,
    TimingsDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    UsageDelta,
    chat_request_body,
)
from ._llama_decode import ChatAssembler, decode_chunk, describe_props
from ._sse import SSEError, SSEEvent, SSEParser

__all__ = [
    "CHAT_PATH",
    "MAX_ERROR_BODY",
    "BodyTooLarge",
    "ChatAssembler",
    "ChatDelta",
    "ChatResult",
    "ChunkedDecoder",
    "ChunkedError",
    "Endpoint",
    "FinishDelta",
    "HttpResponse",
    "InferenceClosed",
    "InferenceError",
    "InferenceHTTPError",
    "InferenceProtocolError",
    "InferenceStreamError",
    "InferenceTimeout",
    "InferenceUnavailable",
    "PartialToolCall",
    "Phase",
    "Props",
    "ResponseHead",
    "SSEError",
    "SSEEvent",
    "SSEParser",
    "SlotAction",
    "SlotActionResult",
    "SlotInfo",
    "TextDelta",
    "Timeouts",
    "Timings",
    "TimingsDelta",
    "ToolCall",
    "ToolCallDelta",
    "Usage",
    "UsageDelta",
    "chat_request_body",
    "decode_chunk",
    "describe_props",
    "http_error",
    "shown",
    "stream_error",
]
