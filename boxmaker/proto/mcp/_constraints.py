"""Whether a grant's constraint on one MCP argument holds (12 "Grants for tool-source tools", D3).

A constraint applies to the effective argument; a JSON `null` counts as
absent.  An absent argument holds only with ``optional = true``.  An array
holds when it has at most `max_items` items and every (non-null) item holds
the item's keys.  `values` and `prefixes` compare exact strings (`values`
by JSON type and value for enums and numbers), `max_bytes` counts UTF-8
bytes, `min`/`max` are inclusive, `value` is the boolean; `paths` match as
03-policy D3 does for `read_file` (the entry or below it, component-wise; the
longest matching entry is the mount's), `hosts` as for `http_fetch` (an exact
name or ``*.name``; a pattern without a port covers 443 for https, 80 for
http when the grant has ``http = true``; a deny grant's pattern without a
port covers every port).  Protected paths (D2b) and the winner among grants
(D6) are the policy layer's.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._grammar import GrammarError, is_below, parse_url
from ._decl_tool import Kind
from ._nodes import json_equal


@attrs.frozen(kw_only=True)
class ArgMatch:
    """A constraint that holds: the path entries matched (one per value, for the mounts)
    and the most specific host pattern's rank (D6: exact over wildcard, longer, a port)."""

    paths: tuple[str, ...] = ()
    host_rank: tuple[int, int, int] | None = None


def _pattern(text: str) -> tuple[str, bool, int | None]:
    rest, colon, port = text.partition(":")
    wildcard = rest.startswith("*.")
    return (rest[2:] if wildcard else rest), wildcard, (int(port) if colon else None)


def _host_rank(patterns: list[str], host: str, port: int, scheme: str | None, *,
               http: bool, deny: bool) -> tuple[int, int, int] | None:
    best: tuple[int, int, int] | None = None
    for text in patterns:
        name, wildcard, pattern_port = _pattern(text)
        if not (host.endswith("." + name) if wildcard else host == name):
            continue
        if deny:
            covered = pattern_port is None or pattern_port == port
        elif scheme == "http" and not http:
            covered = False
        elif pattern_port is None:
            covered = port == (80 if scheme == "http" else 443)
        else:
            covered = port == pattern_port
        if covered:
            rank = (0 if wildcard else 1, len(name), 0 if pattern_port is None else 1)
            best = rank if best is None or rank > best else best
    return best


def _scalar(table: Mapping[str, Any], value: Any, kind: Kind, deny: bool,
            found: dict[str, Any]) -> bool:
    if "values" in table and not any(json_equal(value, v) for v in table["values"]):
        return False
    if "prefixes" in table and not (isinstance(value, str) and any(
            value.startswith(p) for p in table["prefixes"])):
        return False
    if "max_bytes" in table and not (isinstance(value, str)
                                     and len(value.encode("utf-8")) <= table["max_bytes"]):
        return False
    if "min" in table and not value >= table["min"]:
        return False
    if "max" in table and not value <= table["max"]:
        return False
    if "value" in table and value is not table["value"]:
        return False
    if "paths" in table:
        entries = [entry for entry in table["paths"] if is_below(value, entry)]
        if not entries:
            return False
        found["paths"].append(max(entries, key=len))
    if "hosts" in table:
        if kind == "url":
            try:
                url = parse_url(value)
            except GrammarError:
                return False
            host, port, scheme = url.host, url.effective_port, url.scheme
        else:
            host, port, scheme = value, 443, None
        rank = _host_rank(list(table["hosts"]), host, port, scheme,
                          http=table.get("http") is True, deny=deny)
        if rank is None:
            return False
        previous = found["host_rank"]
        found["host_rank"] = rank if previous is None else min(previous, rank)
    return True


def constraint_holds(table: Mapping[str, Any], value: Any, kind: Kind, *,
                     deny: bool = False) -> ArgMatch | None:
    """`table` (a grant's constraints on one argument, checked by G10..G13) against the
    effective argument's `value` (None when absent): the match, or None."""
    if value is None:
        return ArgMatch() if table.get("optional") is True else None
    found: dict[str, Any] = {"paths": [], "host_rank": None}
    if isinstance(value, list):
        if "max_items" in table and len(value) > table["max_items"]:
            return None
        for item in value:
            if item is not None and not _scalar(table, item, kind, deny, found):
                return None
    elif not _scalar(table, value, kind, deny, found):
        return None
    return ArgMatch(paths=tuple(found["paths"]), host_rank=found["host_rank"])


def argument_value(effective: Mapping[str, Any], dotted: str) -> Any:
    """The effective argument at a dotted name, or None (absent or null)."""
    value: Any = effective
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value
