"""Rules of single audit record fields that the field types alone do not say
(04-audit; `_audit` applies them after the strict converter).  Pure: no I/O."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .._json import MAX_DEPTH
from ._audit_passkey import passkey_record_problem

_TS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SESSION = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


def is_valid_ts(text: str) -> bool:
    """True for ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` naming a real moment."""
    if _TS.fullmatch(text) is None:
        return False
    try:
        datetime.fromisoformat(text[:-1])
    except ValueError:
        return False
    return True


def canonical_within(value: Any, depth: int) -> bool:
    """Keys sorted at every depth, and no deeper than MAX_DEPTH."""
    if depth > MAX_DEPTH:
        return False
    if type(value) is dict:
        keys = list(value)
        if keys != sorted(keys):
            return False
        items: Any = value.values()
    else:
        items = value
    for item in items:
        kind = type(item)
        if (kind is dict or kind is list) and not canonical_within(item, depth + 1):
            return False
    return True


_ARGS_DEPTH = 3  # the record is depth 1, the call 2, its args 3


def event_problem(key: str, payload: dict[str, Any]) -> tuple[str, str] | None:
    """(path under the event, what is wrong) for an event's JSON, or None.

    Rules of single fields that the types alone do not say; `payload` has
    already passed the type check.
    """
    if key == "call":
        if _SESSION.fullmatch(payload["session"]) is None:
            return ("session", "expected a session name [a-z0-9][a-z0-9-]{0,63}")
        if len(payload["tool"]) > 1024:
            return ("tool", "a tool name has at most 1024 characters")
        if not canonical_within(payload["args"], _ARGS_DEPTH):
            return ("args", "the arguments are not in canonical form (keys sorted)")
        omitted = payload.get("omitted")
        if omitted is not None:
            if _HEX64.fullmatch(omitted["sha256"]) is None:
                return ("omitted.sha256", "expected 64 lowercase hex digits")
            if payload["args"] != {}:
                return ("args", "arguments that were omitted are written as {}")
    elif key == "decision":
        ask = payload["outcome"].get("ask")
        if ask is not None and not is_valid_ts(ask["expires_at"]):
            return ("outcome.ask.expires_at", "expected a time YYYY-MM-DDTHH:MM:SS.ffffffZ")
    elif key == "approval":
        if (payload["verdict"] == "approved") != (payload["redecision"] is not None):
            return ("redecision", "a redecision is present exactly when the verdict is approved")
        if payload["verdict"] == "abandoned" and payload["by"] is not None:
            return ("by", "an abandoned approval names nobody (by is null)")
        return passkey_record_problem(key, payload)
    elif key in ("passkey", "approval_attempt"):
        return passkey_record_problem(key, payload)
    elif key == "result":
        output = payload["output"]
        if output is not None and _HEX64.fullmatch(output["sha256"]) is None:
            return ("output.sha256", "expected 64 lowercase hex digits")
    elif key == "declassify":
        if _SESSION.fullmatch(payload["session"]) is None:
            return ("session", "expected a session name [a-z0-9][a-z0-9-]{0,63}")
    elif key == "recovery" and _HEX64.fullmatch(payload["sha256"]) is None:
        return ("sha256", "expected 64 lowercase hex digits")
    return None
