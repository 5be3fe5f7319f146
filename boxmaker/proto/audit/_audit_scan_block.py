"""The verifier's block scan (issue 23 goal 5): many record lines checked at once.

`scan_block(text, count)` checks `count` lines (``text``: their ASCII text,
joined by ``\\n``) with one compiled expression over the whole text (the
per-kind expressions of `_audit_scan`, joined), and returns what the
verifier needs of each as columns (`BlockFacts`), or None when any line is
not of the ordinary kinds in their one form: the caller then takes the lines
one by one (`check_record_line`, with its strict fallback and its messages).

What each line must be for the block to pass is what `_audit_scan._scan`
asks of it, kind by kind (the same field expressions, the same date, call,
approval and argument checks, through the same functions), except two
fields whose check the verifier makes exactly afterwards: ``seq`` is any
digits here (the verifier compares them, as text, with the seq numbers the
chain expects, which have one form) and ``prev`` any 64 characters but a
quote (compared with the hash of the line before, lowercase hex).  Kinds
with rules of their own (recovery, break, passkey, approval attempts,
tool sources, MCP pins and servers) are never taken here.  Tests compare
the block scan with the line scan on valid and damaged lines.  Pure: no I/O.
"""

from __future__ import annotations

import re
from itertools import compress, repeat
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from operator import add, itemgetter
from typing import Any, NamedTuple

from .._json import MAX_DEPTH
from ._audit import EVENT_TYPES, Call, scan_json
from ._audit_rules import canonical_within
from ._audit_scan import (
    _ARGS_DEPTH,
    _MAX_TOOL,
    _STRICT_ONLY,
    _TS,
    _args_ok,
    _date_ok,
    _pattern,
)

_SORTED_ENCODER = c_make_encoder(None, None, encode_basestring_ascii, None, ":", ",", True,
                                 False, False)
"""The line encoder (`_audit.dump_json`) with keys sorted."""

_BLOCK_KEYS = tuple(key for key in EVENT_TYPES
                    if key not in _STRICT_ONLY and key not in ("recovery", "break"))
_DATE = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"


def _body(key: str, cls: type[Any] | None = None, name: str | None = None) -> str:
    """The kind's event expression, its groups named after the kind (or `name`)."""
    body = _pattern(cls or EVENT_TYPES[key]).replace(f"(?P<expires>{_TS})",
                                                     f"(?P<expires>{_DATE})T{_TIME}")
    body = re.sub(r"\(\?P<([a-z_]+)>", lambda m: f"(?P<{name or key}_{m.group(1)}>", body)
    return f"(?<={key}\":){body}"


_LINE = re.compile(
    r'^\{"seq":(?P<seq>[0-9]+),"ts":"(?P<date>' + _DATE + ")T" + _TIME
    + r'","prev":"(?P<prev>[^"]{64})","(?P<key>' + "|".join(_BLOCK_KEYS) + r')":(?:'
    + "|".join([*(_body(key) for key in _BLOCK_KEYS), _body("call", Call, "legacy")])
    + r")\}$",
    re.MULTILINE,
)
_AT = {name: index - 1 for name, index in _LINE.groupindex.items()}
_SEQ, _DATE_AT, _PREV, _KEY = _AT["seq"], _AT["date"], _AT["prev"], _AT["key"]
_D_CALL, _D_ALLOWED, _D_EXPIRES = (_AT["decision_call"], _AT["decision_allowed"],
                                   _AT["decision_expires"])
_R_CALL = _AT["result_call"]
_A_CALL, _A_VERDICT, _A_REDECISION, _A_ALLOWED, _A_BY = (
    _AT["approval_call"], _AT["approval_verdict"], _AT["approval_redecision"],
    _AT["approval_allowed"], _AT["approval_by"])
_C_TOOL, _C_ARGS, _C_OMITTED = _AT["call_tool"], _AT["call_args"], _AT["call_omitted"]
_L_TOOL, _L_ARGS = _AT["legacy_tool"], _AT["legacy_args"]


class BlockFacts(NamedTuple):
    """The lines' facts as columns: per line, in order, seq as written, prev, key
    and whether it is a call record; per line naming a call (`refs`: their
    indexes, in order), that call and whether the line lets it run; the indexes
    of the asking decisions."""

    seqs: list[str]
    prevs: list[str]
    keys: list[str]
    is_call: list[bool]
    refs: list[int]
    ref_calls: list[int]
    ref_lets: list[bool]
    asks: list[int]


def scan_block(text: str, count: int, start: int = 0, end: int | None = None) -> BlockFacts | None:
    """The facts of the `count` lines of ``text[start:end]`` (ASCII, lines joined by
    ``\\n``, `start` at a line's start), or None."""
    stop = len(text) if end is None else end
    if text.find("\\ud", start, stop) >= 0:
        return None  # surrogate escapes: the strict path
    rows = _LINE.findall(text, start, stop)
    if len(rows) != count:  # a line matches at most once (^...$, no \n inside)
        return None
    # the days of the timestamps and of the asks' expiry, each distinct one once
    days = set(map(itemgetter(_DATE_AT), rows))
    days.update(map(itemgetter(_D_EXPIRES), rows))
    days.discard("")
    if not all(map(_date_ok, days)):
        return None
    keys = list(map(itemgetter(_KEY), rows))
    calls = list(map("".join, map(itemgetter(_D_CALL, _R_CALL, _A_CALL), rows)))
    refs = list(compress(range(count), calls))
    for index in refs:
        row = rows[index]
        if keys[index] == "approval":
            verdict = row[_A_VERDICT]
            if (verdict == "approved") != bool(row[_A_REDECISION]):
                return None
            if verdict == "abandoned" and row[_A_BY] != "null":
                return None
    is_call = list(map("call".__eq__, keys))
    call_rows = list(compress(rows, is_call))
    if call_rows:
        if any(row[_C_OMITTED] not in ("", "null") and row[_C_ARGS] != "{}"
               for row in call_rows):
            return None  # omitted arguments are written as {}
        # the newer form's fields, or the older form's (one of the two is empty)
        tools = list(map("".join, map(itemgetter(_C_TOOL, _L_TOOL), call_rows)))
        args = list(map("".join, map(itemgetter(_C_ARGS, _L_ARGS), call_rows)))
        if not _all_args_ok(tools, args):
            return None
    return BlockFacts(
        list(map(itemgetter(_SEQ), rows)), list(map(itemgetter(_PREV), rows)), keys, is_call,
        refs, list(map(int, compress(calls, calls))),
        list(map(bool, compress(map("".join, map(itemgetter(_D_ALLOWED, _A_ALLOWED), rows)),
                                calls))),
        list(compress(range(count), map(itemgetter(_D_EXPIRES), rows))))


def _all_args_ok(tools: list[str], args: list[str]) -> bool:
    """`_args_ok` for many calls at once: every tool within its bound, every
    arguments text one JSON object in its one form.

    The texts are parsed together, as one array, by the C scanner, and each value
    is encoded again with sorted keys: equal to its text, the text is that value's
    one form (compact, ASCII, keys sorted at every depth, no duplicate key), so it
    parses alone to that value, as the line check asks.  The depth is bounded by
    the brackets' count, and the exact check runs when that count could exceed it."""
    if max(map(len, tools)) > _MAX_TOOL + 2:
        return all(map(_args_ok, tools, args, repeat("null")))
    try:
        joined = "[" + ",".join(args) + "]"
        values, end = scan_json(joined, 0)
        if end != len(joined) or type(values) is not list or len(values) != len(args):
            return False
        if set(map(type, values)) != {dict}:
            return False
        if list(map("".join, map(_SORTED_ENCODER, values, repeat(0)))) != args:
            return False
    except (ValueError, StopIteration, RecursionError):
        return False
    # no deeper than allowed: a text's brackets bound its depth; the exact check
    # (keys sorted too, already known) where they could exceed it
    deep = MAX_DEPTH - _ARGS_DEPTH
    brackets = list(map(add, map(str.count, args, repeat("{")), map(str.count, args, repeat("["))))
    if max(brackets) > deep:
        return all(canonical_within(value, _ARGS_DEPTH)
                   for value, many in zip(values, brackets, strict=True) if many > deep)
    return True
