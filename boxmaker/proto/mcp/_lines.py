"""The JSON-RPC lines of the MCP client (12 "Lines brokerd writes", "Lines brokerd reads").

Every line brokerd writes is in canonical form (`_canonical.py`), one per line,
with string request ids.  A line read is decoded by boxmaker's one strict
decoder (02-wire: no duplicate keys, no lone surrogates, depth 64, no NaN),
must be one object with ``"jsonrpc": "2.0"`` and exactly the members of a
response, a request or a notification; an array (a batch), a non-object or
anything else is a `LineViolation`.  Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from .._errors import DecodeError
from .._json import loads_value, type_word
from ._canonical import canonical_bytes

MODERN: Final = "2026-07-28"
LEGACY: Final = ("2025-11-25", "2025-06-18")
DISCOVER_ID: Final = "bx-discover"
INIT_ID: Final = "bx-init"
MAX_METHOD_SHOWN: Final = 128


class LineViolation(DecodeError):
    """A line from the server that breaks the protocol (the server's fault)."""


def meta(version: str) -> dict[str, Any]:
    """`META`: sent as `params._meta` on modern requests only."""
    return {"io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "boxmaker", "version": version},
            "io.modelcontextprotocol/protocolVersion": MODERN}


def _line(value: dict[str, Any]) -> bytes:
    return canonical_bytes(value)


def discover_line(version: str) -> bytes:
    return _line({"id": DISCOVER_ID, "jsonrpc": "2.0", "method": "server/discover",
                  "params": {"_meta": meta(version)}})


def initialize_line(protocol: str, version: str) -> bytes:
    return _line({"id": INIT_ID, "jsonrpc": "2.0", "method": "initialize",
                  "params": {"capabilities": {},
                             "clientInfo": {"name": "boxmaker", "version": version},
                             "protocolVersion": protocol}})


INITIALIZED_LINE: Final = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def list_id(page: int) -> str:
    return f"bx-list-{page}"


def call_id_text(call_id: int) -> str:
    return f"bx-call-{call_id}"


def list_line(page: int, cursor: str | None, version: str | None) -> bytes:
    """Page `page` (from 1); `version` set when modern (adds `_meta`)."""
    params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
    if version is not None:
        params["_meta"] = meta(version)
    return _line({"id": list_id(page), "jsonrpc": "2.0", "method": "tools/list",
                  "params": params})


def call_line(call_id: int, name: str, arguments: dict[str, Any], version: str | None) -> bytes:
    params: dict[str, Any] = {"arguments": arguments, "name": name}
    if version is not None:
        params["_meta"] = meta(version)
    return _line({"id": call_id_text(call_id), "jsonrpc": "2.0", "method": "tools/call",
                  "params": params})


def cancel_line(call_id: int) -> bytes:
    return _line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"reason": "timeout", "requestId": call_id_text(call_id)}})


def ping_answer(request_id: str | int) -> bytes:
    return _line({"id": request_id, "jsonrpc": "2.0", "result": {}})


def refusal_answer(request_id: str | int) -> bytes:
    return _line({"error": {"code": -32601, "message": "boxmaker provides no client features"},
                  "id": request_id, "jsonrpc": "2.0"})


# -- reading ---------------------------------------------------------------------------------

RequestId = str | int


@attrs.frozen(kw_only=True)
class RpcError:
    code: int
    message: str
    data: Any = None


@attrs.frozen(kw_only=True)
class Response:
    id: RequestId | None
    result: dict[str, Any] | None
    error: RpcError | None


@attrs.frozen(kw_only=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None


@attrs.frozen(kw_only=True)
class Notification:
    method: str
    params: dict[str, Any] | None


Message = Response | Request | Notification


def _id(value: Any, *, null_ok: bool) -> RequestId | None:
    if value is None and null_ok:
        return None
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise LineViolation(f"id: expected a string or an integer, found {type_word(value)}")


def _params(value: dict[str, Any]) -> dict[str, Any] | None:
    if "params" not in value:
        return None
    params = value["params"]
    if not isinstance(params, dict):
        raise LineViolation(f"params: expected an object, found {type_word(params)}")
    return params


def _keys(value: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    extra = sorted(set(value) - allowed)
    if extra:
        raise LineViolation(f"a {what} with a member other than "
                            f"{', '.join(sorted(allowed))} ({len(extra)})")


_RESPONSE_KEYS: Final = frozenset({"jsonrpc", "id", "result", "error"})
_REQUEST_KEYS: Final = frozenset({"jsonrpc", "id", "method", "params"})
_NOTIFICATION_KEYS: Final = frozenset({"jsonrpc", "method", "params"})
_ERROR_KEYS: Final = frozenset({"code", "message", "data"})


def read_message(line: bytes) -> Message:
    """One line (no newline, a trailing CR already dropped) -> its message."""
    try:
        value = loads_value(line)
    except DecodeError as exc:
        raise LineViolation(f"not strict JSON: {exc.message}") from exc
    if isinstance(value, list):
        raise LineViolation("a batch (a JSON array)")
    if not isinstance(value, dict):
        raise LineViolation(f"expected a JSON object, found {type_word(value)}")
    if value.get("jsonrpc") != "2.0" or not isinstance(value.get("jsonrpc"), str):
        raise LineViolation('expected "jsonrpc": "2.0"')
    if "method" in value:
        method = value["method"]
        if not isinstance(method, str):
            raise LineViolation(f"method: expected a string, found {type_word(method)}")
        if "id" in value:
            _keys(value, _REQUEST_KEYS, "request")
            request_id = _id(value["id"], null_ok=False)
            assert request_id is not None
            return Request(id=request_id, method=method, params=_params(value))
        _keys(value, _NOTIFICATION_KEYS, "notification")
        return Notification(method=method, params=_params(value))
    _keys(value, _RESPONSE_KEYS, "response")
    if "id" not in value:
        raise LineViolation("a response without an id")
    if ("result" in value) == ("error" in value):
        raise LineViolation("a response needs exactly one of result and error")
    response_id = _id(value["id"], null_ok=True)
    if "result" in value:
        result = value["result"]
        if not isinstance(result, dict):
            raise LineViolation(f"result: expected an object, found {type_word(result)}")
        return Response(id=response_id, result=result, error=None)
    error = value["error"]
    if not isinstance(error, dict):
        raise LineViolation(f"error: expected an object, found {type_word(error)}")
    _keys(error, _ERROR_KEYS, "error object")
    code, message = error.get("code"), error.get("message")
    if not (isinstance(code, int) and not isinstance(code, bool)) or not isinstance(message, str):
        raise LineViolation("error: expected an integer code and a string message")
    return Response(id=response_id, result=None,
                    error=RpcError(code=code, message=message, data=error.get("data")))


def shown_method(method: str) -> str:
    """A server's method name for the daemon log, cut (escaping is the log's)."""
    return method if len(method) <= MAX_METHOD_SHOWN else method[:MAX_METHOD_SHOWN] + "..."
