"""Pure protocol layer shared by every host process (no I/O, no trio).

Framing, the strict codec, wire messages, audit records, the chain verifier,
tool arguments and their grammars, and terminal escaping.
"""

from ._convert import (
    U64,
    U64_MAX,
    JsonObject,
    converter,
    decode,
    encode,
    register_tagged_union,
    structure,
    unstructure,
)
from ._errors import DecodeError, FrameError, ProtoError
from ._escape import escape_line, escape_text
from ._framing import MAX_FRAME, FrameDecoder, encode_frame
from ._json import MAX_DEPTH, canonical, dumps, loads_object, loads_value

__all__ = [
    "MAX_DEPTH",
    "MAX_FRAME",
    "U64",
    "U64_MAX",
    "DecodeError",
    "FrameDecoder",
    "FrameError",
    "JsonObject",
    "ProtoError",
    "canonical",
    "converter",
    "decode",
    "dumps",
    "encode",
    "encode_frame",
    "escape_line",
    "escape_text",
    "loads_object",
    "loads_value",
    "register_tagged_union",
    "structure",
    "unstructure",
]
