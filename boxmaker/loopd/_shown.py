"""What loopd itself tells the owner about a turn (issue 27): pure, no I/O.

A model that asks again for a call it already made in the same turn is not
run again: `call_key` says when two calls are the same, and `outcome_text`
puts the earlier outcome into boxmaker's own words (the tool, the status, the
output, cut to the notice's bound).  The text is shown to the owner, who sees
the tool's output itself; clients escape it like any untrusted text.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ..proto._json import dumps
from ..proto.wire import MAX_NOTICE_CHARS

REPEAT_TEXT_FOR_MODEL: Final = (
    "Not run again: this identical call already ran in this turn, and boxmaker showed "
    "its result to the owner. Answer from the result you already have."
)
CUT_CALL_TEXT_FOR_MODEL: Final = (
    "[boxmaker: my tool call was cut off before it was complete, so it was not run. "
    "A call must be short enough to finish.]"
)
CUT_CALL_TEXT_FOR_OWNER: Final = (
    "the model's tool call was cut off before it was complete (the token limit, or the "
    "server could not read it); nothing was run, and the model was told"
)
_CUT: Final = "\u2026 (cut)"


def call_key(tool: str, args: dict[str, Any] | None, raw_arguments: str) -> str:
    """One string per distinct call: the tool and its arguments in canonical JSON."""
    if args is None:
        return json.dumps([tool, None, raw_arguments])
    return json.dumps([tool, args], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _bounded(text: str, room: int) -> str:
    return text if len(text) <= room else text[: max(0, room - len(_CUT))] + _CUT


def result_text(tool: str, status: str, output: Any) -> str:
    """An earlier result in boxmaker's words: its text content, else its JSON."""
    head = f"{tool} {status} (not run again; its earlier result): "
    content = output.get("content") if isinstance(output, dict) else None
    body = content if isinstance(content, str) else dumps(output)
    return head + _bounded(body, MAX_NOTICE_CHARS - len(head))


def denial_text(tool: str, code: str, reason: str) -> str:
    """An earlier refusal in boxmaker's words."""
    text = f"{tool} was refused earlier in this turn ({code}: {reason}); not asked again"
    return _bounded(text, MAX_NOTICE_CHARS)
