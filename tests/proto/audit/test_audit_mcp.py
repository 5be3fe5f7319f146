"""The tool-source records of 12 (`sources`, `mcp_pin`, `mcp_server`, the decision's
`effective_args` and `pin`, the result's `source`) against fixtures/audit/mcp-chain/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boxmaker.proto.audit import (
    CommandSource,
    DecisionRecord,
    McpPinRecord,
    McpServerRecord,
    McpSource,
    ResultRecord,
    SourcesChanged,
    encode_record,
    parse_record,
)
from boxmaker.proto.audit._audit import RecordSchemaError, _parse_strict
from boxmaker.proto.audit._audit_scan import check_record_line, facts_of

CHAIN = Path(__file__).resolve().parents[3] / "fixtures" / "audit" / "mcp-chain"
LINES = (CHAIN / "2026-12-02.jsonl").read_bytes().splitlines()


def _value(index: int) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(LINES[index])
    return value


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _index(key: str, n: int = 0) -> int:
    found = [i for i, line in enumerate(LINES) if list(json.loads(line))[3] == key]
    return found[n]


@pytest.mark.parametrize("index", range(len(LINES)))
def test_each_golden_line_is_its_one_written_form(index: int) -> None:
    line = LINES[index]
    record = parse_record(line)
    assert encode_record(record) == line
    assert _parse_strict(line) == record
    assert check_record_line(line) == facts_of(record)


def test_the_new_events_have_their_classes() -> None:
    events = [parse_record(line).event for line in LINES]
    kinds = {type(event) for event in events}
    assert {SourcesChanged, McpPinRecord, McpServerRecord} <= kinds
    sources = [e.source for e in events if isinstance(e, ResultRecord)]
    assert {type(s) for s in sources} == {McpSource, CommandSource}
    drifted = [e for e in events if isinstance(e, McpServerRecord) and e.event == "drifted"]
    assert drifted[0].drift is not None and drifted[0].drift.added == ["git_push_force"]


def test_a_decision_and_result_without_the_new_fields_are_written_as_before() -> None:
    decision = _value(_index("decision", 2))
    assert "effective_args" not in decision["decision"] and "pin" not in decision["decision"]
    bare = {**_value(_index("result", 0))}
    del bare["result"]["source"]
    record = parse_record(_line(bare))
    assert type(record.event) is ResultRecord and record.event.source is None
    assert encode_record(record) == _line(bare)
    assert list(json.loads(encode_record(record))["result"]) == [
        "call", "status", "label", "untrusted", "state", "output"]
    plain = parse_record(LINES[_index("decision", 2)]).event
    assert type(plain) is DecisionRecord and plain.effective_args is None and plain.pin is None


@pytest.mark.parametrize(("key", "n", "field"), [
    ("decision", 0, "effective_args"), ("decision", 0, "pin"), ("result", 0, "source")])
def test_a_new_field_written_as_null_is_refused(key: str, n: int, field: str) -> None:
    value = _value(_index(key, n))
    value[key][field] = None
    line = _line(value)
    with pytest.raises(RecordSchemaError):
        parse_record(line)
    with pytest.raises(RecordSchemaError):
        check_record_line(line)


# (event key, which of them, path inside the payload, bad value, the refused field)
_BAD: list[tuple[str, int, tuple[str | int, ...], Any, str]] = [
    ("sources", 0, ("digest",), "nothex", "digest"),
    ("sources", 0, ("extra",), 1, ""),
    ("mcp_pin", 0, ("server",), "Git", "server"),
    ("mcp_pin", 0, ("action",), "repinned", "action"),
    ("mcp_pin", 0, ("digest",), None, "digest"),
    ("mcp_pin", 0, ("digest",), "AB" * 32, "digest"),
    ("mcp_pin", 0, ("prev",), "x", "prev"),
    ("mcp_pin", 0, ("protocol",), "2024-11-05", "protocol"),
    ("mcp_pin", 0, ("tools",), 1025, "tools"),
    ("mcp_pin", 0, ("source", "image"), "latest", "source.image"),
    ("mcp_pin", 0, ("source", "env_sha256"), "0", "source.env_sha256"),
    ("mcp_pin", 0, ("source", "pin_ignore"), ["icons", "_meta"], "source.pin_ignore"),
    ("mcp_pin", 0, ("source", "extra"), 1, "source"),
    ("mcp_pin", 0, ("reason",), "x" * 1025, "reason"),
    ("mcp_pin", 0, ("passkey",), {"credential_id": "!", "sign_count": 1,
                                  "assertion_sha256": "0" * 64}, "passkey.credential_id"),
    ("mcp_pin", 1, ("digest",), "0" * 64, "digest"),
    ("mcp_pin", 1, ("passkey",), {"credential_id": "AA", "sign_count": 1,
                                  "assertion_sha256": "0" * 64}, "passkey"),
    ("mcp_server", 0, ("event",), "exploded", "event"),
    ("mcp_server", 0, ("probe_id",), None, "probe_id"),
    ("mcp_server", 0, ("container",), "../x", "container"),
    ("mcp_server", 0, ("drift",), {"pinned": "0" * 64, "added": [], "removed": [],
                                   "changed": []}, "drift"),
    ("mcp_server", 1, ("call",), None, "call"),
    ("mcp_server", 1, ("drift",), None, "drift"),
    ("mcp_server", 1, ("drift", "added"), ["b", "a"], "drift.added"),
    ("mcp_server", 1, ("drift", "added"), [f"t{i:02d}" for i in range(33)], "drift.added"),
    ("mcp_server", 1, ("drift", "changed"), ["x" * 129], "drift.changed"),
    ("mcp_server", 1, ("drift", "pinned"), "z", "drift.pinned"),
    ("mcp_server", 1, ("list_digest",), "z", "list_digest"),
    ("mcp_server", 1, ("reason",), "x" * 1025, "reason"),
    ("mcp_server", 2, ("call",), 4, "call"),
    ("decision", 0, ("pin",), "z", "pin"),
    ("decision", 0, ("effective_args",), {"b": 1, "a": 2}, "effective_args"),
    ("result", 0, ("source", "kind"), "http", "source.kind"),
    ("result", 0, ("source", "server"), "Git!", "source.server"),
    ("result", 0, ("source", "mcp_name"), "", "source.mcp_name"),
    ("result", 0, ("source", "request_sha256"), "z", "source.request_sha256"),
    ("result", 0, ("source", "protocol"), "1.0", "source.protocol"),
    ("result", 0, ("source", "exit"), 256, "source.exit"),
    ("result", 0, ("source", "egress_truncated"), True, "source.egress_truncated"),
    ("result", 0, ("source", "egress", 0, "port"), 0, "source.egress[0].port"),
    ("result", 0, ("source", "egress", 0, "address"), "host.example", "source.egress[0].address"),
    ("result", 0, ("source", "egress", 0, "refused"), "limit", "source.egress[0].refused"),
    ("result", 0, ("source", "egress", 0, "refused"), "because", "source.egress[0].refused"),
    ("result", 0, ("source", "egress", 0, "extra"), 1, "source.egress[0]"),
    ("result", 0, ("source", "extra"), 1, "source"),
    ("result", 1, ("output",), {"sha256": "0" * 64, "bytes": 1}, "output"),
    ("result", 2, ("source", "container"), "", "source.container"),
    ("result", 2, ("source", "server"), "git", "source"),
]


@pytest.mark.parametrize(("key", "n", "path", "bad", "where"), _BAD)
def test_each_field_rule_refuses_its_line(key: str, n: int, path: tuple[str | int, ...],
                                          bad: Any, where: str) -> None:
    value = _value(_index(key, n))
    target: Any = value[key]
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = bad
    line = _line(value)
    with pytest.raises(RecordSchemaError) as caught:
        parse_record(line)
    want = f"$.{key}.{where}" if where else f"$.{key}"
    assert (caught.value.path or "").startswith(want), caught.value
    with pytest.raises(RecordSchemaError):
        check_record_line(line)


def test_an_egress_list_of_64_may_be_truncated_and_65_is_refused() -> None:
    value = _value(_index("result", 0))
    source = value["result"]["source"]
    source["egress"] = [source["egress"][0]] * 64
    source["egress_truncated"] = True
    parse_record(_line(value))
    source["egress"].append(source["egress"][0])
    with pytest.raises(RecordSchemaError):
        parse_record(_line(value))


def _probed() -> dict[str, Any]:
    """The golden probe's record turned into the end of a probe with egress (issue 26)."""
    value = _value(_index("mcp_server", 0))
    value["mcp_server"] |= {
        "event": "probed", "protocol": "2025-11-25", "reason": None,
        "egress": [{"host": "api.example.org", "port": 443, "address": "93.184.215.14",
                    "bytes_out": 517, "bytes_in": 4096, "refused": None},
                   {"host": "leak.example", "port": 443, "address": None, "bytes_out": 0,
                    "bytes_in": 0, "refused": "not_allowed"}],
        "egress_truncated": False}
    return value


def test_a_probed_record_carries_the_probes_connections() -> None:
    line = _line(_probed())
    record = parse_record(line)
    assert isinstance(record.event, McpServerRecord) and record.event.event == "probed"
    assert record.event.egress is not None and record.event.egress[1].refused == "not_allowed"
    assert encode_record(record) == line
    # The other events are written without the two fields, as before.
    probe = parse_record(LINES[_index("mcp_server", 0)])
    assert b'"egress"' not in encode_record(probe)


@pytest.mark.parametrize(("change", "where"), [
    ({"egress": None}, "egress"),
    ({"egress_truncated": None}, "egress_truncated"),
    ({"call": 4, "probe_id": None}, "probe_id"),
    ({"egress_truncated": True}, "egress_truncated"),
    ({"egress": [{"host": None, "port": 0, "address": None, "bytes_out": 0, "bytes_in": 0,
                  "refused": "limit"}]}, "egress[0].port"),
    ({"egress": [{"host": "x.example", "port": 443, "address": None, "bytes_out": 3,
                  "bytes_in": 0, "refused": "limit"}]}, "egress[0].refused"),
])
def test_a_probed_record_breaking_a_rule_is_refused(change: dict[str, Any], where: str
                                                    ) -> None:
    value = _probed()
    value["mcp_server"] |= change
    payload = {k: v for k, v in value["mcp_server"].items() if v is not None or k not in
               ("egress", "egress_truncated")}
    value["mcp_server"] = payload
    with pytest.raises(RecordSchemaError) as caught:
        parse_record(_line(value))
    assert (caught.value.path or "").startswith(f"$.mcp_server.{where}"), caught.value


def test_only_a_probed_record_has_egress() -> None:
    value = _value(_index("mcp_server", 0))
    value["mcp_server"] |= {"egress": [], "egress_truncated": False}
    with pytest.raises(RecordSchemaError) as caught:
        parse_record(_line(value))
    assert (caught.value.path or "").startswith("$.mcp_server.egress"), caught.value
