"""The tools loopd offers to the model: JSON schemas and descriptions (06-loopd).

The production registry has the four real tools.  The test registry adds
`echo`, which exists only so that tests and benchmarks can drive the whole
decision path; it is never offered to a production model.
"""

from __future__ import annotations

from typing import Any

_PATH_RULES = (
    "An absolute path exactly as it is on disk: it starts with '/', has no '.' or "
    "'..' parts, no empty parts ('//') and no trailing '/'. It is refused, not "
    "corrected, if it is written any other way."
)

PRODUCTION_TOOLS: dict[str, dict[str, Any]] = {
    "read_file": {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": (
                "Read one file the owner has granted access to. Returns its content as "
                "text (encoding 'utf-8') or, for binary files, base64 (encoding 'base64'). "
                "Large files come back cut short with truncated=true and the full size in "
                "'bytes'. The owner's policy decides whether the call is allowed; if it is "
                "refused, do not retry the same call."
            ),
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": _PATH_RULES}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    "list_dir": {
        "type": "function",
        "function": {
            "name": "list_dir",
            "description": (
                "List the entries of one directory the owner has granted access to: each "
                "entry's name, kind (file, dir, symlink, other) and size in bytes."
            ),
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": _PATH_RULES}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    "write_file": {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": (
                "Write text to a file in a directory the owner has granted for writing. "
                "mode 'create' makes a new file and fails if it exists; 'replace' "
                "overwrites; 'append' adds to the end. At most 1 MiB of content."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": _PATH_RULES},
                    "content": {"type": "string", "description": "The text to write."},
                    "mode": {"type": "string", "enum": ["create", "replace", "append"]},
                },
                "required": ["path", "content", "mode"],
                "additionalProperties": False,
            },
        },
    },
    "http_fetch": {
        "type": "function",
        "function": {
            "name": "http_fetch",
            "description": (
                "Fetch one web page from a host the owner has granted. Redirects are not "
                "followed: a 3xx answer comes back with its Location, and fetching that is "
                "a new call. The URL must be https://host[:port]/path[?query], lowercase "
                "host name (no IP addresses), no user@, no #fragment, non-ASCII "
                "percent-encoded."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The URL to fetch."},
                    "method": {"type": "string", "enum": ["GET", "HEAD"]},
                },
                "required": ["url"],
                "additionalProperties": False,
            },
        },
    },
}

TEST_TOOLS: dict[str, dict[str, Any]] = {
    "echo": {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Test tool: answers with the text it was given.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
        },
    },
}

KNOWN_TOOLS = frozenset(PRODUCTION_TOOLS) | frozenset(TEST_TOOLS)


def tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """The schemas for the configured tool names, in the configured order.

    An unknown name is our configuration's fault and is refused by the config
    loader before this is called.
    """
    out = []
    for name in names:
        schema = PRODUCTION_TOOLS.get(name) or TEST_TOOLS.get(name)
        if schema is None:
            raise ValueError(f"unknown tool {name!r} in [loop] tools")
        out.append(schema)
    return out
