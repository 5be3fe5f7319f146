"""D3 for MCP arguments: each constraint key, optional, arrays, paths and hosts as 03-policy."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.proto.mcp._constraints import ArgMatch, argument_value, constraint_holds


@pytest.mark.parametrize(("table", "value", "kind", "holds"), [
    ({"values": ["a", "b"]}, "a", "text", True),
    ({"values": ["a", "b"]}, "c", "text", False),
    ({"values": [1, 2]}, 1, "text", True),
    ({"values": [1, 2]}, 1.0, "text", False),
    ({"prefixes": ["2026-"]}, "2026-12-02", "text", True),
    ({"prefixes": ["2026-"]}, "2025-12-02", "text", False),
    ({"max_bytes": 4}, "\u00e9\u00e9", "text", True),
    ({"max_bytes": 3}, "\u00e9\u00e9", "text", False),
    ({"min": 1, "max": 200}, 200, "text", True),
    ({"min": 1, "max": 200}, 201, "text", False),
    ({"min": 1}, 0, "text", False),
    ({"value": False}, False, "text", True),
    ({"value": False}, True, "text", False),
    ({"max_items": 2, "prefixes": ["/"]}, ["/a", "/b"], "text", True),
    ({"max_items": 1}, ["/a", "/b"], "text", False),
    ({"prefixes": ["a"]}, ["ab", "b"], "text", False),
    ({"prefixes": ["a"]}, ["ab", None], "text", True),
    ({"values": ["x"]}, None, "text", False),
    ({"values": ["x"], "optional": True}, None, "text", True),
    ({"values": ["x"], "optional": True}, "y", "text", False),
])
def test_scalar_constraints(table: dict[str, Any], value: Any, kind: Any, holds: bool) -> None:
    assert (constraint_holds(table, value, kind) is not None) is holds


def test_paths_match_component_wise_with_the_longest_entry() -> None:
    table = {"paths": ["/home/me/notes", "/home/me/notes/sub"]}
    assert constraint_holds(table, "/home/me/notes/sub/x", "path") == ArgMatch(
        paths=("/home/me/notes/sub",))
    assert constraint_holds(table, "/home/me/notes", "path") == ArgMatch(
        paths=("/home/me/notes",))
    assert constraint_holds(table, "/home/me/notesx", "path") is None
    assert constraint_holds(table, ["/home/me/notes/a", "/home/me/notes/sub/b"],
                            "write_path") == ArgMatch(paths=("/home/me/notes",
                                                             "/home/me/notes/sub"))
    assert constraint_holds(table, ["/home/me/notes/a", "/etc/passwd"], "path") is None


@pytest.mark.parametrize(("hosts", "url", "http", "deny", "rank"), [
    (["docs.python.org"], "https://docs.python.org/3/", False, False, (1, 15, 0)),
    (["*.readthedocs.io"], "https://x.readthedocs.io/", False, False, (0, 14, 0)),
    (["*.readthedocs.io"], "https://readthedocs.io/", False, False, None),
    (["docs.python.org"], "https://docs.python.org:8443/", False, False, None),
    (["docs.python.org:8443"], "https://docs.python.org:8443/", False, False, (1, 15, 1)),
    (["docs.python.org"], "http://docs.python.org/", False, False, None),
    (["docs.python.org"], "http://docs.python.org/", True, False, (1, 15, 0)),
    (["docs.python.org"], "https://docs.python.org:8443/", False, True, (1, 15, 0)),
    (["a.example", "*.example"], "https://a.example/", False, False, (1, 9, 0)),
])
def test_url_hosts_as_http_fetch(hosts: list[str], url: str, http: bool, deny: bool,
                                 rank: Any) -> None:
    table: dict[str, Any] = {"hosts": hosts, "http": http}
    found = constraint_holds(table, url, "url", deny=deny)
    assert (found.host_rank if found is not None else None) == rank


def test_host_arguments_and_a_value_not_of_the_url_grammar() -> None:
    assert constraint_holds({"hosts": ["*.example.com"]}, "api.example.com", "host") is not None
    assert constraint_holds({"hosts": ["example.com"]}, "api.example.com", "host") is None
    assert constraint_holds({"hosts": ["a.example"]}, "not a url", "url") is None


def test_argument_values_by_dotted_name() -> None:
    effective = {"opts": {"path": "/x", "n": None}, "url": "https://a.example/"}
    assert argument_value(effective, "opts.path") == "/x"
    assert argument_value(effective, "opts.n") is None
    assert argument_value(effective, "url.x") is None and argument_value(effective, "z") is None
