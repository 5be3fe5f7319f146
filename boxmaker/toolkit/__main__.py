"""`python3 -m boxmaker.toolkit TOOL`: one tool, one answer (08-runner).

The tools image holds the toolkit alone, so the toolkit cannot read the tool
catalogue (`boxmaker.proto.tools`): it knows its tools by their functions,
each named as the tool it runs, and `tests/toolkit/test_main.py` holds them
equal to the catalogue's tools that run on `files` and `fetch`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from ._answer import encode_answer, error
from ._errors import ToolError
from ._tools import list_dir, read_file, write_file
from ._walk import Checked

# The request on stdin: arguments (write_file content is at most 1 MiB, which
# JSON escaping can grow sixfold) plus a little.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
DEFAULT_OUTPUT_MAX_BYTES = 2 * 1024 * 1024


def _parse_request(raw: bytes) -> tuple[dict[str, Any], int, str | None, Checked | None]:
    if len(raw) > MAX_REQUEST_BYTES:
        raise ToolError("bad_request", "the request is too large")
    try:
        request = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ToolError("bad_request", "the request is not a JSON object") from exc
    if not isinstance(request, dict) or set(request) - {"args", "limits", "egress", "checked"}:
        raise ToolError("bad_request", "the request must be {args, limits, egress, checked}")
    args = request.get("args")
    if not isinstance(args, dict):
        raise ToolError("bad_request", "args must be an object")
    limits = request.get("limits", {})
    if not isinstance(limits, dict) or set(limits) - {"output_max_bytes"}:
        raise ToolError("bad_request", "limits must be {output_max_bytes}")
    cap = limits.get("output_max_bytes", DEFAULT_OUTPUT_MAX_BYTES)
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 64:
        raise ToolError("bad_request", "limits.output_max_bytes must be an integer >= 64")
    egress = request.get("egress")
    sock: str | None = None
    if egress is not None:
        sock = egress.get("socket") if isinstance(egress, dict) else None
        if not isinstance(sock, str):
            raise ToolError("bad_request", "egress.socket must be a string")
    checked = Checked.parse(request["checked"]) if "checked" in request else None
    return args, cap, sock, checked


Handler = Callable[[dict[str, Any], int, str | None, Checked | None], bytes]
"""One tool: its arguments, the output cap, the egress socket, the checked mount."""


def http_fetch(args: dict[str, Any], cap: int, egress_socket: str | None,
               checked: Checked | None) -> bytes:
    # Imported here: ssl and h11 cost start-up time the file tools do not need.
    from ._fetch import http_fetch as fetch

    return fetch(args, cap, egress_socket)


def _file_tool(tool: Callable[[dict[str, Any], int, Checked | None], bytes]) -> Handler:
    def handler(args: dict[str, Any], cap: int, egress_socket: str | None,
                checked: Checked | None) -> bytes:
        return tool(args, cap, checked)

    handler.__name__ = tool.__name__
    return handler


HANDLERS: dict[str, Handler] = {
    handler.__name__: handler
    for handler in (_file_tool(read_file), _file_tool(list_dir), _file_tool(write_file),
                    http_fetch)
}
"""Tool name -> what runs it: each function bears its tool's name."""
TOOLS = tuple(HANDLERS)


def run(tool: str, raw_request: bytes) -> bytes:
    """The answer (encoded) to one request; never raises a ToolError."""
    cap = DEFAULT_OUTPUT_MAX_BYTES
    try:
        args, cap, egress_socket, checked = _parse_request(raw_request)
        if checked is not None:
            # Before anything is read or written: the mount is what brokerd checked.
            checked.verify_root()
        handler = HANDLERS.get(tool)
        if handler is None:
            raise ToolError("unknown_tool", "no such tool")
        return handler(args, cap, egress_socket, checked)
    except ToolError as exc:
        answer = encode_answer(error(exc.code, exc.message))
        if len(answer) > cap:
            answer = encode_answer(error(exc.code, ""))
        return answer


def main(argv: list[str]) -> int:
    if argv[:1] == ["egress-forward"]:
        # The egress sidecar of an MCP server (12 "Egress"), not a tool.
        from ._forward import main as forward

        return forward(argv[1:])
    if len(argv) != 1 or argv[0] not in TOOLS:
        sys.stderr.write(f"usage: python3 -m boxmaker.toolkit {{{'|'.join(TOOLS)}}}\n")
        return 2
    raw = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    sys.stdout.buffer.write(run(argv[0], raw))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
