"""The verifier's 12 rules: an `mcp_pin` record's `prev` and its pin file (`bad_pin`),
an `mcp_server` record's call; on copies of fixtures/audit/mcp-chain/ in real files."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from boxmaker._audit_files import verify_directory
from boxmaker.proto.audit import ChainVerifier, McpPinRecord, parse_record, pin_file_problem

CHAIN = Path(__file__).resolve().parents[3] / "fixtures" / "audit" / "mcp-chain"
DAY = "2026-12-02.jsonl"
VALUES: list[dict[str, Any]] = [
    json.loads(line) for line in (CHAIN / DAY).read_bytes().splitlines()]
PIN = next(v["mcp_pin"] for v in VALUES if "mcp_pin" in v)
PIN_NAME = f"{PIN['digest']}.json"


def _rechain(values: list[dict[str, Any]]) -> bytes:
    prev, out = "0" * 64, []
    for seq, original in enumerate(values):
        value = {**original, "seq": seq, "prev": prev}
        line = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
        prev = hashlib.sha256(line.encode()).hexdigest()
        out.append(line + "\n")
    return "".join(out).encode("ascii")


def _copy(tmp_path: Path, values: list[dict[str, Any]] | None = None) -> Path:
    directory = tmp_path / "audit"
    shutil.copytree(CHAIN, directory)
    if values is not None:
        (directory / DAY).write_bytes(_rechain(values))
    return directory


def _kinds(directory: Path) -> list[str]:
    return [failure.kind for failure in verify_directory(directory).failures]


def test_the_golden_chain_verifies_with_its_pin_file(tmp_path: Path) -> None:
    report = verify_directory(_copy(tmp_path))
    assert report.ok and report.records == len(VALUES) and report.failures == []


def test_a_missing_pin_file_is_not_a_chain_failure(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    (directory / "pins" / PIN_NAME).unlink()
    assert _kinds(directory) == []


def test_an_edited_pin_file_is_bad_pin(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    path = directory / "pins" / PIN_NAME
    path.write_bytes(path.read_bytes().replace(b"Shows the commit logs", b"Shows the commit logz"))
    assert _kinds(directory) == ["bad_pin"]


def test_a_planted_symbolic_link_is_bad_pin(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    path = directory / "pins" / PIN_NAME
    (tmp_path / "elsewhere.json").write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.json")
    assert _kinds(directory) == ["bad_pin"]


def test_a_record_that_disagrees_with_its_file_is_bad_pin(tmp_path: Path) -> None:
    values = [json.loads(json.dumps(v)) for v in VALUES]
    for value in values:
        if "mcp_pin" in value and value["mcp_pin"]["action"] == "pinned":
            value["mcp_pin"]["tools"] = 3
    assert _kinds(_copy(tmp_path, values)) == ["bad_pin"]
    record = parse_record(_rechain(values).splitlines()[3]).event
    assert type(record) is McpPinRecord
    assert pin_file_problem(record, (CHAIN / "pins" / PIN_NAME).read_bytes()) is not None
    assert pin_file_problem(record, None) is None


def test_a_wrong_prev_is_bad_reference(tmp_path: Path) -> None:
    values = [json.loads(json.dumps(v)) for v in VALUES]
    unpin = [v for v in values if "mcp_pin" in v][-1]
    unpin["mcp_pin"]["prev"] = None
    assert _kinds(_copy(tmp_path, values)) == ["bad_reference"]
    first = next(v for v in values if "mcp_pin" in v)
    first["mcp_pin"]["prev"] = "0" * 64
    unpin["mcp_pin"]["prev"] = PIN["digest"]
    assert _kinds(_copy(tmp_path / "b", values)) == ["bad_reference"]


def test_a_drift_naming_no_earlier_call_is_bad_reference(tmp_path: Path) -> None:
    values = [json.loads(json.dumps(v)) for v in VALUES]
    drift = next(v for v in values if "mcp_server" in v and v["mcp_server"]["call"] is not None)
    drift["mcp_server"]["call"] = 2
    assert _kinds(_copy(tmp_path, values)) == ["bad_reference"]


def test_without_a_pin_reader_only_the_chain_is_checked() -> None:
    verifier = ChainVerifier()
    assert verifier.begin_file(DAY)
    for line in (CHAIN / DAY).read_bytes().splitlines(keepends=True):
        verifier.feed_line(line)
    verifier.end_file()
    assert verifier.finish().ok
