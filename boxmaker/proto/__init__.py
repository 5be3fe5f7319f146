"""Pure protocol layer shared by every host process (no I/O, no trio).

Framing, the strict codec, terminal escaping and taint are re-exported here;
the messages of each socket, audit records with the chain verifier, and the
transparency log are imported from the faces of their rooms
(`boxmaker.proto.wire`, `boxmaker.proto.audit`, `boxmaker.proto.tlog`: their
names would collide in one namespace, a broker `Call` is not an audit `Call`),
tool arguments from `_args`.
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
from ._taint import FAIL_CLOSED, LABELS, NEW_SESSION, Label, Taint, label_rank, max_label

__all__ = [
    "FAIL_CLOSED",
    "LABELS",
    "MAX_DEPTH",
    "MAX_FRAME",
    "NEW_SESSION",
    "U64",
    "U64_MAX",
    "DecodeError",
    "FrameDecoder",
    "FrameError",
    "JsonObject",
    "Label",
    "ProtoError",
    "Taint",
    "canonical",
    "converter",
    "decode",
    "dumps",
    "encode",
    "encode_frame",
    "escape_line",
    "escape_text",
    "label_rank",
    "loads_object",
    "loads_value",
    "max_label",
    "register_tagged_union",
    "structure",
    "unstructure",
]
