"""`bxctl audit verify|head|show` on real files (07-bxctl), with CliRunner."""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from boxmaker.bxctl._cli import cli
from boxmaker.proto.audit._audit import Call, Peer
from tests.fakes.audit_log import LogBuilder, valid_log

# imported after _cli, which registers it (importing it first would be circular)
_audit_cmd = importlib.import_module("boxmaker.bxctl._audit_cmd")


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    # a wide terminal: these tests read whole lines (wrapping: tests/integration)
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "100000", **(env or {})})


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    builder = valid_log(4)
    builder.call(result=False)
    return builder.write(tmp_path / "audit")


def test_verify_ok_text(log_dir: Path) -> None:
    (log_dir / "notes.jsonl").write_bytes(b"x\n")
    result = run("audit", "verify", str(log_dir))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "ignored: notes.jsonl (not a day file)"
    assert lines[1].startswith("unfinished: call ") and lines[1].endswith(" has no result")
    assert lines[-1].startswith("ok: 17 records in 2 files, head 16 ")
    assert lines[-1].endswith("...")
    assert result.stderr == ""


def test_verify_json_prints_only_the_report(log_dir: Path) -> None:
    result = run("audit", "verify", str(log_dir), "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["ok"] is True
    assert list(document) == ["ok", "files", "records", "head", "failures", "accepted_breaks",
                              "recovered", "torn_tail", "unfinished_calls", "ignored_files",
                              "checkpoint", "assertions"]
    assert document["checkpoint"] is None  # no --witness-key (10-checkpoints)
    assert result.stdout.count("\n") == 1


def test_verify_not_ok(log_dir: Path) -> None:
    path = log_dir / "2026-11-01.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"\x1b[31mred\n"
    lines[4] = lines[4].replace(b"4242", b"4243")
    path.write_bytes(b"".join(lines))
    result = run("audit", "verify", str(log_dir))
    assert result.exit_code == 1
    out = result.stdout.splitlines()
    failed = [line for line in out if line.startswith("FAILED: ")]
    assert failed[0].startswith("FAILED: bad_json at 2026-11-01.jsonl line 3: ")
    assert failed[1].startswith("FAILED: hash_mismatch at 2026-11-01.jsonl line 6 (seq 5): "
                                "expected prev ")
    assert out[-1] == ("not ok: 2 failures in 2 regions; "
                       "see docs/runbook.md#audit-chain-broken")
    assert "\x1b" not in result.stdout
    result = run("audit", "verify", str(log_dir), "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert [f["kind"] for f in document["failures"]] == ["bad_json", "hash_mismatch"]
    assert document["failures"][0]["seq"] is None


def test_torn_tail_line(tmp_path: Path) -> None:
    builder = valid_log(2, files=1)
    raw = builder.torn()
    builder.write(tmp_path)
    result = run("audit", "verify", str(tmp_path))
    assert result.exit_code == 0
    assert (f"torn tail: 2026-11-01.jsonl line 10 ({len(raw)} bytes), "
            "brokerd will recover it at start") in result.stdout.splitlines()


def test_expect_head(log_dir: Path) -> None:
    head = run("audit", "head", str(log_dir))
    assert head.exit_code == 0
    saved = head.stdout.strip()
    seq, digest = saved.split(":")
    assert int(seq) == 16 and len(digest) == 64
    assert run("audit", "verify", str(log_dir), "--expect-head", saved).exit_code == 0
    # roll the log back by one record: plain verify is fine, the saved head is not
    path = max(log_dir.iterdir())
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    assert run("audit", "verify", str(log_dir)).exit_code == 0
    result = run("audit", "verify", str(log_dir), "--expect-head", saved)
    assert result.exit_code == 1
    assert any(line.startswith("FAILED: head_mismatch") for line in result.stdout.splitlines())


@pytest.mark.parametrize("bad", ["1", "01:" + "a" * 64, "-1:" + "a" * 64, "1:" + "A" * 64,
                                 "1:" + "a" * 63, "18446744073709551616:" + "a" * 64,
                                 " 1:" + "a" * 64])
def test_bad_expect_head_is_usage(log_dir: Path, bad: str) -> None:
    result = run("audit", "verify", str(log_dir), "--expect-head", bad)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--expect-head" in result.stderr


def test_missing_directory(tmp_path: Path) -> None:
    for command in ("verify", "head", "show"):
        result = run("audit", command, str(tmp_path / "no-such-dir"))
        assert result.exit_code == 1, command
        assert result.stdout == ""
        assert "cannot read the audit log in" in result.stderr


def test_head_refuses_a_broken_or_empty_log(tmp_path: Path) -> None:
    result = run("audit", "head", str(tmp_path))
    assert result.exit_code == 1
    assert "no record yet" in result.stderr
    assert result.stdout == ""
    builder = valid_log(2, files=1)
    builder.garbage()
    builder.write(tmp_path)
    result = run("audit", "head", str(tmp_path))
    assert result.exit_code == 1
    assert "does not verify (1 failure)" in result.stderr
    assert "docs/runbook.md#audit-chain-broken" in result.stderr


def test_default_directory_comes_from_the_config(tmp_path: Path, log_dir: Path) -> None:
    config = tmp_path / "bxctl.toml"
    config.write_text(f'home = "{tmp_path}"\naudit = "audit"\n')
    result = run("--config", str(config), "audit", "verify")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1].startswith("ok: 17 records")
    result = run("audit", "head", env={"BOXMAKER_HOME": str(tmp_path)})
    assert result.exit_code == 0
    assert result.stdout.startswith("16:")


def test_show_text_is_escaped(tmp_path: Path) -> None:
    builder = LogBuilder("2026-11-29.jsonl")
    builder.start()
    evil = builder.add(Call(session="s-1", tool="\x1b[2J\u202eevil\ntool",
                            args={"x": "\x1b]0;title\x07"}, peer=Peer(uid=1, pid=2)))
    builder.garbage(b"\x1b[31m")
    builder.write(tmp_path)
    result = run("audit", "show", str(tmp_path))
    assert result.exit_code == 0
    out = result.stdout.splitlines()
    assert len(out) == 3
    assert out[1].startswith(f"2026-11-29T07:00:00.000002Z  {evil}  call")
    assert "\\u{001B}[2J\\u{202E}evil\\ntool" in out[1]
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert out[2] == "2026-11-29.jsonl line 3: not a record"


def test_show_filters(tmp_path: Path) -> None:
    builder = LogBuilder("2026-11-28.jsonl")
    builder.start()
    first = builder.call(session="alpha")
    builder.new_file("2026-11-29.jsonl")
    second = builder.call(session="beta")
    builder.call(session="alpha", allowed=False)
    builder.write(tmp_path)

    def seqs(*args: str) -> list[int]:
        result = run("audit", "show", str(tmp_path), *args)
        assert result.exit_code == 0, result.output
        return [int(line.split("  ")[1]) for line in result.stdout.splitlines()]

    assert seqs() == list(range(builder.seq + 1))
    assert seqs("--call", str(first)) == [first, first + 1, first + 2]
    assert seqs("--call", str(second)) == [second, second + 1, second + 2]
    assert seqs("--session", "beta") == [second, second + 1, second + 2]
    assert seqs("--session", "alpha") == [1, 2, 3, 7, 8]
    assert seqs("--since", "2026-11-29") == list(range(second, builder.seq + 1))
    assert seqs("--since", "2026-11-29T00:00:00Z") == list(range(second, builder.seq + 1))
    assert seqs("--since", "2026-11-30") == []
    result = run("audit", "show", str(tmp_path), "--call", str(second), "--json")
    stored = (tmp_path / "2026-11-29.jsonl").read_bytes().decode().splitlines()
    assert result.stdout.splitlines() == stored[:3]
    for bad in (["--call", "01"], ["--call", "-1"], ["--session", "Bad"],
                ["--since", "yesterday"]):
        result = run("audit", "show", str(tmp_path), *bad)
        assert result.exit_code == 2, bad
        assert result.stdout == ""


def test_show_json_leaves_out_lines_that_are_not_records(tmp_path: Path) -> None:
    builder = valid_log(1, files=1)
    builder.garbage()
    builder.write(tmp_path)
    result = run("audit", "show", str(tmp_path), "--json")
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == builder.seq + 1
    for line in result.stdout.splitlines():
        json.loads(line)
    assert "left out 1 line that is not a record" in result.stderr


def test_progress_bar_only_on_a_terminal_for_a_big_log(log_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_audit_cmd, "PROGRESS_MIN_BYTES", 1)
    result = run("audit", "verify", str(log_dir), "--json")
    assert result.stderr == ""  # not a terminal under CliRunner
    monkeypatch.setattr(_audit_cmd, "_stderr_is_terminal", lambda: True)
    result = run("audit", "verify", str(log_dir), "--json")
    assert result.exit_code == 0
    assert "verifying" in result.stderr  # the bar (its label, as the stream is no tty)
    assert json.loads(result.stdout)["ok"] is True  # stdout stays one JSON document
    monkeypatch.setattr(_audit_cmd, "PROGRESS_MIN_BYTES", 10**12)
    assert run("audit", "verify", str(log_dir), "--json").stderr == ""  # a small log: no bar


def test_show_says_when_arguments_were_omitted(tmp_path: Path) -> None:
    from boxmaker.proto.audit._audit import BoundedCall, OmittedArgs

    builder = LogBuilder("2026-11-29.jsonl")
    builder.start()
    builder.add(BoundedCall(session="s-1", tool="write_file", args={}, peer=Peer(uid=1, pid=2),
                            omitted=OmittedArgs(bytes=20_971_520, sha256="ab" * 32)))
    builder.add(BoundedCall(session="s-1", tool="echo", args={"text": "hi"},
                            peer=Peer(uid=1, pid=2), omitted=None))
    builder.write(tmp_path)
    result = run("audit", "show", str(tmp_path))
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[1].endswith(f"arguments omitted: 20971520 bytes, sha256 {'ab' * 32}")
    assert out[2].endswith('{"text":"hi"}')
    assert run("audit", "verify", str(tmp_path)).exit_code == 0


def test_verify_ok_line_names_the_accepted_breaks(tmp_path: Path) -> None:
    # issue 22 item 14: the summary said a plain "ok: N records ..." for a log
    # with an accepted break; an owner who reads only that line must see it
    builder = valid_log(2, files=1)
    builder.garbage()
    first = (builder.current, len(builder.files[builder.current]), "bad_json")
    builder.accept_break(first, 1)
    where = f"{builder.current}:{len(builder.files[builder.current])}"
    builder.call()
    builder.garbage(b"\x1b[31m also bad")
    second = (builder.current, len(builder.files[builder.current]), "bad_json")
    builder.accept_break(second, 1)
    where2 = f"{builder.current}:{len(builder.files[builder.current])}"
    builder.call()
    result = run("audit", "verify", str(builder.write(tmp_path / "audit")))
    assert result.exit_code == 0, result.output
    last = result.stdout.splitlines()[-1]
    assert last.startswith(f"ok, with 2 accepted breaks at {where}, {where2}: "), last
    assert " records in 1 file, head " in last
    one = valid_log(2, files=1)
    one.garbage()
    one.accept_break((one.current, len(one.files[one.current]), "bad_json"), 1)
    at = f"{one.current}:{len(one.files[one.current])}"
    result = run("audit", "verify", str(one.write(tmp_path / "one")))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith(f"ok, with 1 accepted break at {at}: ")


def test_show_renders_the_tool_source_records_escaped(tmp_path: Path) -> None:
    """12's records: a server's tool names and reasons are untrusted text."""
    chain = Path(__file__).resolve().parents[2] / "fixtures" / "audit" / "mcp-chain"
    shutil.copytree(chain, tmp_path / "audit")
    day = tmp_path / "audit" / "2026-12-02.jsonl"
    values = [json.loads(line) for line in day.read_bytes().splitlines()]
    drift = next(v for v in values if "mcp_server" in v and v["mcp_server"]["drift"])
    drift["mcp_server"]["drift"]["added"] = ["\x1b[2J\u202epush"]
    drift["mcp_server"]["reason"] = "evil\nline"
    prev, lines = "0" * 64, []
    for seq, original in enumerate(values):
        line = json.dumps({**original, "seq": seq, "prev": prev}, separators=(",", ":"))
        prev = hashlib.sha256(line.encode()).hexdigest()
        lines.append(line + "\n")
    day.write_text("".join(lines))
    result = run("audit", "show", str(tmp_path / "audit"))
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert len(out) == len(values)
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    text = "\n".join(out)
    assert "probe git (probe 77)" in text
    assert "pinned git " in text and "(2 tools, 2025-11-25) by uid 1000" in text
    assert "drifted git (call 7), added \\u{001B}[2J\\u{202E}push, changed git_log: evil\\nline" \
        in text
    assert "ok, private, untrusted, 2210 bytes, mcp git/git_log exit 0, egress " \
        "example.org:443, ?:443 refused not_allowed" in text
    assert "container boxmaker-1a2b3c4d-cmd-11 exit 0" in text
    assert "unpinned git by uid 1000: moving to a new image" in text
    shown = run("audit", "show", "--call", "7", str(tmp_path / "audit")).stdout.splitlines()
    assert [line.split()[2] for line in shown] == ["call", "decision", "mcp_server", "result"]


def test_a_probed_record_shows_its_connections() -> None:
    """`mcp_server probed` (issue 26): how many connections the probe opened, refused."""
    payload = {"server": "fake", "call": None, "probe_id": 9, "container": "c",
               "event": "probed", "protocol": None, "list_digest": None, "reason": None,
               "drift": None, "egress_truncated": False,
               "egress": [{"refused": None}, {"refused": "not_allowed"}]}
    assert _audit_cmd._mcp_text("mcp_server", payload) == (
        "probed fake (probe 9), 2 connections (1 refused)")
    payload |= {"event": "probe", "egress": None, "egress_truncated": None}
    assert _audit_cmd._mcp_text("mcp_server", payload) == "probe fake (probe 9)"
