"""MCP servers as tool sources (12-tool-sources): the pure foundation.

Declarations (`sources/*.toml`, S1..S14), tool names, canonical bytes and pins,
the schema profile and kinds, and the sans-IO MCP client.  Pure: no I/O, no
trio.  The names below are the public surface; the `_x` modules are private.
"""

from ._canonical import canonical_bytes, canonical_sha256, canonical_text, sha256_hex
from ._decl import (
    InvalidSourceSet,
    ServerDecl,
    SourceFile,
    SourceProblem,
    SourceSet,
    SourcesReport,
    SourceState,
    ToolSourcesConfig,
    parse_source_files,
    parse_source_texts,
    parse_tool_sources,
    sources_digest,
)
from ._decl_tool import KINDS, Egress, Kind, ToolTable, default_egress
from ._names import (
    NamedTool,
    is_server_id,
    local_name,
    model_name,
    name_tools,
    split_model_name,
    split_wire_name,
    wire_name,
)

__all__ = [
    "KINDS",
    "Egress",
    "InvalidSourceSet",
    "Kind",
    "NamedTool",
    "ServerDecl",
    "SourceFile",
    "SourceProblem",
    "SourceSet",
    "SourceState",
    "SourcesReport",
    "ToolSourcesConfig",
    "ToolTable",
    "canonical_bytes",
    "canonical_sha256",
    "canonical_text",
    "default_egress",
    "is_server_id",
    "local_name",
    "model_name",
    "name_tools",
    "parse_source_files",
    "parse_source_texts",
    "parse_tool_sources",
    "sha256_hex",
    "sources_digest",
    "split_model_name",
    "split_wire_name",
    "wire_name",
]
