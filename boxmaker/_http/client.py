"""The trio layer of the shared HTTP client: thin, over the pure modules of `boxmaker._http`.

`HttpConnection` (one h11 client connection), `fetch` (a whole small exchange),
`open_sse` (a streamed answer, event by event) and `LlamaClient` (llama-server's
API).  A module of its own so that the package's `__init__` stays pure.
"""

from ._connection import HttpConnection
from ._fetch import MAX_BODY, fetch, read_error
from ._llama_client import ChatStream, LlamaClient
from ._sse_stream import SSEStream, open_sse

__all__ = [
    "MAX_BODY",
    "ChatStream",
    "HttpConnection",
    "LlamaClient",
    "SSEStream",
    "fetch",
    "open_sse",
    "read_error",
]
