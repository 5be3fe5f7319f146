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
quote (compared with the hash of the line before, lowercase hex).  And
three in how (`_body`): a string holds no ``\\udXXX`` escape, where `_scan`
leaves any line holding ``\\ud`` to the strict parser (an escaped backslash
then ``ud`` is three plain characters, the one form of that text); the
call's two forms are one expression; the approval's two rules that `_scan`
checks on its groups are written into the expression.  Kinds
with rules of their own (recovery, break, passkey, approval attempts,
tool sources, MCP pins and servers) are never taken here.  Tests compare
the block scan with the line scan on valid and damaged lines.  Pure: no I/O.
"""

from __future__ import annotations

import re
from itertools import compress, repeat
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from operator import itemgetter
from typing import NamedTuple

from .._json import MAX_DEPTH
from ._audit import EVENT_TYPES, scan_json
from ._audit_rules import canonical_within
from ._audit_scan import (
    _ARGS_DEPTH,
    _MAX_TOOL,
    _STRICT_ONLY,
    _TS,
    _U64,
    _args_ok,
    _date_ok,
    _pattern,
)

_SORTED_ENCODER = c_make_encoder(None, None, encode_basestring_ascii, None, ":", ",", True,
                                 False, False)
"""The line encoder (`_audit.dump_json`) with keys sorted."""

_FREQUENT = ("decision", "call", "result", "approval")
_BLOCK_KEYS = (*_FREQUENT, *(key for key in EVENT_TYPES if key not in _FREQUENT
                             and key not in _STRICT_ONLY and key not in ("recovery", "break")))
"""The kinds taken here, the most frequent first (the expression tries them in turn)."""
_DATE = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"


_NOT_UD = r"\\u[1-9a-ce-f][0-9a-f]{3}"
"""A \\u escape of four hex digits but none of ``\\udXXX`` (those take the line path)."""


def _body(key: str) -> str:
    """The kind's event expression, its groups named after the kind.

    Two changes to the line scan's expression, neither widening it: a string holds no
    ``\\ud`` escape (where the line scan refuses any line holding ``\\ud``; a call's
    arguments, the one free text, are looked at by `_all_args_ok`), and a call takes
    both forms in one expression, ``omitted`` optional (the line scan's two
    expressions, the newer form and the one written before issue 11, one after the
    other: a call line of the older form was matched twice)."""
    body = _pattern(EVENT_TYPES[key]).replace(f"(?P<expires>{_TS})",
                                              f"(?P<expires>{_DATE})T{_TIME}")
    any_u = r"\\u[1-9a-f][0-9a-f]{3}"
    assert any_u in body or "\\u" not in body
    body = body.replace(any_u, _NOT_UD)
    if key == "approval":
        body = _approval_rules(body)
    if key == "call":
        omitted = body.index(',"omitted":')
        assert body.endswith(r"\})\}")
        body = f"{body[:omitted]}(?:{body[omitted:-2]})?{body[-2:]}"
    body = re.sub(r"\(\?P<([a-z_]+)>", lambda m: f"(?P<{key}_{m.group(1)}>", body)
    return f"(?<={key}\":){body}"


def _approval_rules(body: str) -> str:
    """The approval's expression with `_scan`'s two rules of it written in: a
    re-decision when approved and only then, nobody by an abandoned one (the three
    verdicts, each with what it allows)."""
    head = ('"verdict":"(?P<verdict>approved|refused|expired|requester_gone|abandoned)",'
            f'"by":(?P<by>null|{_U64}),"reason":')
    redecision = ',"redecision":(?:null|(?P<redecision>'
    at = body.index(head)
    mid = body.index(redecision, at)
    end = body.index('(?:,"passkey":', mid)
    assert body.count(head) == body.count(redecision) == 1 and body[end - 2:end] == "))"
    reason, inner, by = body[at + len(head):mid], body[mid + len(redecision):end - 2], \
        f"(?:null|{_U64})"
    return (f'{body[:at]}(?:"verdict":"approved","by":{by},"reason":{reason},"redecision":{inner}'
            f'|"verdict":"(?:refused|expired|requester_gone)","by":{by},"reason":{reason},'
            f'"redecision":null|"verdict":"abandoned","by":null,"reason":{reason},'
            f'"redecision":null){body[end:]}')


_LINE = re.compile(
    r'^\{"seq":(?P<seq>[0-9]+),"ts":"(?P<date>' + _DATE + ")T" + _TIME
    + r'","prev":"(?P<prev>[^"]{64})","(?P<key>' + "|".join(_BLOCK_KEYS) + r')":(?:'
    + "|".join(map(_body, _BLOCK_KEYS))
    + r")\}$",
    re.MULTILINE,
)
_AT = {name: index - 1 for name, index in _LINE.groupindex.items()}
_SEQ, _DATE_AT, _PREV, _KEY = _AT["seq"], _AT["date"], _AT["prev"], _AT["key"]
_D_CALL, _D_ALLOWED, _D_EXPIRES = (_AT["decision_call"], _AT["decision_allowed"],
                                   _AT["decision_expires"])
_R_CALL = _AT["result_call"]
_A_CALL, _A_ALLOWED = _AT["approval_call"], _AT["approval_allowed"]
_C_TOOL, _C_ARGS, _C_OMITTED = _AT["call_tool"], _AT["call_args"], _AT["call_omitted"]


class BlockFacts(NamedTuple):
    """The lines' facts as columns: per line, in order, seq as written, prev, key
    and whether it is a call record; per line naming a call (`refs`: their
    indexes, in order), that call and whether the line lets it run; the indexes
    of the asking decisions and the calls they name."""

    seqs: list[str]
    prevs: list[str]
    keys: list[str]
    is_call: list[bool]
    refs: list[int]
    ref_calls: list[int]
    ref_lets: list[bool]
    asks: list[int]
    ask_calls: list[int]
    """The call each asking decision names."""


def scan_block(text: str, count: int, start: int = 0, end: int | None = None) -> BlockFacts | None:
    """The facts of the `count` lines of ``text[start:end]`` (ASCII, lines joined by
    ``\\n``, `start` at a line's start), or None."""
    rows = _LINE.findall(text, start, len(text) if end is None else end)
    if len(rows) != count:  # a line matches at most once (^...$, no \n inside)
        return None
    # the days of the timestamps and of the asks' expiry, each distinct one once
    days = set(map(itemgetter(_DATE_AT), rows))
    expires = list(map(itemgetter(_D_EXPIRES), rows))
    days.update(expires)
    days.discard("")
    if not all(map(_date_ok, days)):
        return None
    keys = list(map(itemgetter(_KEY), rows))
    calls = list(map("".join, map(itemgetter(_D_CALL, _R_CALL, _A_CALL), rows)))
    is_call = list(map("call".__eq__, keys))
    call_rows = list(compress(rows, is_call))
    if call_rows:
        if not set(map(itemgetter(_C_OMITTED), call_rows)) <= {"", "null"} and any(
                row[_C_OMITTED] not in ("", "null") and row[_C_ARGS] != "{}"
                for row in call_rows):
            return None  # omitted arguments are written as {}
        if not _all_args_ok(list(map(itemgetter(_C_TOOL), call_rows)),
                            list(map(itemgetter(_C_ARGS), call_rows))):
            return None
    return BlockFacts(
        list(map(itemgetter(_SEQ), rows)), list(map(itemgetter(_PREV), rows)), keys, is_call,
        list(compress(range(count), calls)), list(map(int, compress(calls, calls))),
        list(map(bool, compress(map("".join, map(itemgetter(_D_ALLOWED, _A_ALLOWED), rows)),
                                calls))),
        list(compress(range(count), expires)), list(map(int, compress(calls, expires))))


_OPEN, _CLOSE = repeat("{"), repeat("}")
_DEEP = MAX_DEPTH - _ARGS_DEPTH
"""Containers an arguments object may surely nest, itself included (the bracket-count
bound as before; `canonical_within(value, _ARGS_DEPTH)` allows one level more)."""


def _all_args_ok(tools: list[str], args: list[str]) -> bool:
    """`_args_ok` for many calls at once: every tool within its bound, every
    arguments text one JSON object in its one form, none holding ``\\ud``.

    Each text is scanned alone by the C scanner, which must end exactly at the
    text's end (one value, a dict); the values are then encoded again together,
    as one array, with sorted keys, and that must be the texts joined the same
    way.  It then holds for each text: the scanner stops at the end of a value
    without reading past it, so neither a text nor its value's encoding can be
    the other's proper prefix, and the array's items line up one to one.

    When every text starts with ``{`` and ends with ``}`` and the joined texts
    hold ``},{`` only at their joints (as many as texts but one), they are
    scanned at once, as that array: the encoding, equal to the joined texts,
    holds a ``},{`` at each joint of its own items (dicts), so these are the
    only ones, the joints of the texts, and the items line up one to one.  Equal
    to its value's one form (compact, ASCII, keys sorted at every depth, no
    duplicate key), each text parses alone to that value, as the line check
    asks.  Depth: a text nests at most half its length in containers (each opens
    and closes) and at most its brackets' count; the exact check runs on a text
    where both could exceed the bound."""
    joined = "[" + ",".join(args) + "]"
    if "\\ud" in joined:
        return False  # surrogate escapes: the line path
    if max(map(len, tools)) > _MAX_TOOL + 2:
        return all(map(_args_ok, tools, args, repeat("null")))
    lengths = list(map(len, args))
    try:
        if joined.count("},{") == len(args) - 1 and all(map(str.startswith, args, _OPEN)) \
                and all(map(str.endswith, args, _CLOSE)):
            # the joints are the only "},{" of the whole: scanned at once
            values, end = scan_json(joined, 0)
            if end != len(joined) or type(values) is not list or len(values) != len(args):
                return False
        else:
            # a StopIteration (no value at 0) ends the map early: fewer than the texts
            scanned = list(map(scan_json, args, repeat(0)))
            if len(scanned) != len(args) or list(map(itemgetter(1), scanned)) != lengths:
                return False
            values = list(map(itemgetter(0), scanned))
        if set(map(type, values)) != {dict}:
            return False
        if "".join(_SORTED_ENCODER(values, 0)) != joined:
            return False
    except (ValueError, StopIteration, RecursionError):
        return False
    if max(lengths) <= 2 * _DEEP:
        return True
    return all(canonical_within(value, _ARGS_DEPTH)
               for value, text in zip(values, args, strict=True)
               if len(text) > 2 * _DEEP and text.count("{") + text.count("[") > _DEEP)
