"""Witnessed checkpoints end to end (10-checkpoints): a real brokerd and a real
witness on loopback, calls made, then (a) the last records cut off, (b) the
whole log rewritten consistently with a new chain, (b2) an edited record
covered by a `break`, (c) a second home with the same key and origin
diverging: each detected by `bxctl audit verify --witness-key`."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
import pytest

from boxmaker._keyfile import create_key_file
from boxmaker.proto.audit._audit import GENESIS_PREV, Call, encode_record, line_hash, parse_record
from boxmaker.proto.tlog._checkpoint import parse_signed_checkpoint
from boxmaker.proto.tlog._note import TYPE_ED25519
from tests.fakes.brokerd import BXCTL, Home, admin, echo, env_for, start
from tests.fakes.witness_process import WitnessProcess

ORIGIN = "boxmaker/e2e-host/fork-test"


@attrs.define
class Setup:
    witness: WitnessProcess
    witness_key: str
    log_key: str
    homes: list[Home]
    key_file: Path

    def home(self, copy_of: Home | None = None) -> Home:
        extra = ("[checkpoints]\n"
                 f'origin = "{ORIGIN}"\ninterval_ms = 100\n'
                 f'witnesses = [{{url = "{self.witness.url}", key = "{self.witness_key}"}}]\n')
        home = Home(extra=extra)
        self.homes.append(home)
        if copy_of is None:  # as brokerd's first start would, but known to the witness first
            shutil.copy2(self.key_file, home.home / "checkpoint.key")
        else:
            for name in ("checkpoint.key", "checkpoint.pub"):
                shutil.copy2(copy_of.home / name, home.home / name)
            shutil.copytree(copy_of.audit, home.audit)
            shutil.copytree(copy_of.state, home.state, dirs_exist_ok=True)
        return home


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    witness = WitnessProcess(tmp_path / "witness", {})
    witness_key = witness.key()
    key_file = tmp_path / "checkpoint.key"
    signer = create_key_file(key_file, ORIGIN, TYPE_ED25519)
    holder = Setup(witness=witness, witness_key=witness_key, log_key=signer.verifier.text(),
                   homes=[], key_file=key_file)
    first = holder.home()
    log_key = subprocess.run([str(BXCTL), "audit", "key"], env=env_for(first),
                             capture_output=True, text=True, check=False, timeout=60)
    # no checkpoint.pub before brokerd's first start: bxctl says so
    assert log_key.returncode == 1
    witness.config.write_text(witness.config.read_text()
                              + f'[[log]]\norigin = "{ORIGIN}"\nkey = "{holder.log_key}"\n')
    witness.start()
    yield holder
    witness.kill()
    for home in holder.homes:
        home.cleanup()


def run_calls(home: Home, count: int, text: str = "hello") -> None:
    proc = start(home)
    try:
        for i in range(count):
            frames = echo(home.broker, f"{text} {i}", rid=i + 1)
            assert frames[0]["result"]["status"] == "ok"
        status = admin(home.admin, "status", {})["status"]
        assert status["checkpoints"]["witnesses"][0]["url"] == home.config.read_text().split(
            'url = "')[1].split('"')[0]
    finally:
        assert proc.stop() == 0


def verify(setup: Setup, home: Home, *, witness: bool = True) -> tuple[int, dict[str, Any]]:
    args = [str(BXCTL), "audit", "verify", str(home.audit), "--json",
            "--witness-key", setup.witness_key]
    if witness:
        args += ["--witness", setup.witness.url]
    done = subprocess.run(args, env=env_for(home), capture_output=True, text=True,
                          check=False, timeout=120)
    return done.returncode, json.loads(done.stdout)


def lines_of(home: Home) -> tuple[Path, list[bytes]]:
    (day,) = sorted(home.audit.glob("*.jsonl"))
    return day, day.read_bytes().splitlines()


def witnessed_size(setup: Setup) -> int:
    status, body = setup.witness.get("/latest/" + quote(ORIGIN, safe=""))
    assert status == 200
    return parse_signed_checkpoint(body).checkpoint.size


def test_key_status_and_ok(setup: Setup) -> None:
    home = setup.home()
    proc = start(home)
    try:
        for i in range(5):
            echo(home.broker, f"hi {i}", rid=i + 1)
        key = subprocess.run([str(BXCTL), "audit", "key"], env=env_for(home),
                             capture_output=True, text=True, check=True, timeout=60)
        assert key.stdout.strip() == setup.log_key
        status = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "status",
                                 "--json"], env=env_for(home), capture_output=True, text=True,
                                check=True, timeout=60)
        checkpoints = json.loads(status.stdout)["checkpoints"]
        assert set(checkpoints) == {"size", "signed_at", "witnesses"}
        (witness,) = checkpoints["witnesses"]
        assert witness["name"] == "witness.test/w1" and witness["url"] == setup.witness.url
        assert set(witness) == {"url", "name", "size", "cosigned_at", "reason"}
    finally:
        assert proc.stop() == 0
    _, lines = lines_of(home)
    assert witnessed_size(setup) == len(lines)  # the stop's checkpoint reached the witness
    proc = start(home)
    try:
        shown = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "status"],
                               env=env_for(home), capture_output=True, text=True,
                               timeout=60, check=True).stdout
        import re

        assert re.search(r"witness  witness\.test/w1 \(http://127\.0\.0\.1:\d+\) · "
                         r"cosigned size \d+ · \d+s ago\n", shown), shown
    finally:
        assert proc.stop() == 0
    _, lines = lines_of(home)
    code, report = verify(setup, home)
    assert code == 0, report
    assert report["checkpoint"]["verdict"] == "ok"
    assert report["checkpoint"]["size"] == len(lines)
    assert set(report["checkpoint"]) == {"size", "root", "witness", "verdict"}
    code, report = verify(setup, home, witness=False)
    assert (code, report["checkpoint"]["verdict"]) == (0, "ok")
    assert (home.audit / "checkpoints" / "signed.checkpoint").exists()
    assert oct((home.home / "checkpoint.key").stat().st_mode & 0o777) == "0o600"


def test_truncation_detected(setup: Setup) -> None:
    home = setup.home()
    run_calls(home, 6)
    day, lines = lines_of(home)
    day.write_bytes(b"".join(line + b"\n" for line in lines[:-4]))
    plain = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                           env=env_for(home), capture_output=True, check=False, timeout=60)
    assert plain.returncode == 0  # the chain alone cannot tell
    code, report = verify(setup, home)
    assert code == 1
    assert report["checkpoint"]["verdict"] == "truncated"
    assert report["ok"] is False


def rechain(lines: list[bytes], edit: Any) -> list[bytes]:
    """Rewrite the log with boxmaker's own encoder: edit records, new chain."""
    out, prev = [], GENESIS_PREV
    for line in lines:
        record = edit(parse_record(line))
        record = attrs.evolve(record, prev=prev)
        encoded = encode_record(record)
        out.append(encoded)
        prev = line_hash(encoded)
    return out


def test_consistent_rewrite_detected(setup: Setup) -> None:
    home = setup.home()
    run_calls(home, 6)
    day, lines = lines_of(home)

    def edit(record: Any) -> Any:
        event = record.event
        if isinstance(event, Call) and event.args.get("text") == "hello 2":
            return attrs.evolve(record, event=attrs.evolve(event, args={"text": "bye"}))
        return record

    rewritten = rechain(lines, edit)
    assert rewritten != lines
    day.write_bytes(b"".join(line + b"\n" for line in rewritten))
    plain = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                           env=env_for(home), capture_output=True, check=False, timeout=60)
    assert plain.returncode == 0  # a new, valid chain
    for use_witness in (True, False):
        code, report = verify(setup, home, witness=use_witness)
        assert (code, report["checkpoint"]["verdict"]) == (1, "rewritten"), report


def test_edit_covered_by_a_break_is_rewritten(setup: Setup) -> None:
    home = setup.home()
    run_calls(home, 6)
    day, lines = lines_of(home)
    edited = [line.replace(b'"hello 1"', b'"hacked"') for line in lines]
    assert edited != lines
    day.write_bytes(b"".join(line + b"\n" for line in edited))
    proc = start(home, args=("--accept-break",))
    assert proc.stop() == 0
    plain = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                           env=env_for(home), capture_output=True, text=True, check=False,
                           timeout=60)
    assert plain.returncode == 0 and "accepted: hash_mismatch" in plain.stdout
    code, report = verify(setup, home)
    assert (code, report["checkpoint"]["verdict"]) == (1, "rewritten"), report
    assert witnessed_size(setup) == len(lines)  # the witness refused the edited log


def test_fork_by_a_second_home_detected(setup: Setup) -> None:
    first = setup.home()
    run_calls(first, 3)
    second = setup.home(copy_of=first)
    # the same number of calls: both histories reach the same size, with other roots
    run_calls(first, 3, text="first")
    run_calls(second, 3, text="second")
    _, first_lines = lines_of(first)
    _, second_lines = lines_of(second)
    assert len(first_lines) == len(second_lines) and first_lines != second_lines
    assert witnessed_size(setup) == len(first_lines)
    code, report = verify(setup, first)
    assert (code, report["checkpoint"]["verdict"]) == (0, "ok"), report
    code, report = verify(setup, second)
    assert (code, report["checkpoint"]["verdict"]) == (1, "fork"), report
    # the second home grows on: its log no longer matches what the witness cosigned
    run_calls(second, 2, text="more")
    code, report = verify(setup, second, witness=True)
    assert code == 1 and report["checkpoint"]["verdict"] in ("fork", "rewritten"), report


def test_an_unreachable_or_silent_witness_never_fails_a_call(tmp_path: Path) -> None:
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections into the backlog, never answers
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    from tests.fakes.witness_process import WitnessProcess as _W

    key = _W(tmp_path / "w", {}).key()
    other_key = _W(tmp_path / "w2", {}, name="witness.test/w2").key()
    extra = ("[checkpoints]\ninterval_ms = 100\nwitnesses = ["
             f'{{url = "http://127.0.0.1:{silent.getsockname()[1]}", key = "{key}"}}, '
             f'{{url = "http://127.0.0.1:{closed_port}", key = "{other_key}"}}]\n')
    home = Home(extra=extra)
    try:
        proc = start(home)
        try:
            for i in range(20):
                assert echo(home.broker, f"x {i}", rid=i + 1)[0]["result"]["status"] == "ok"
            status = admin(home.admin, "status", {})["status"]["checkpoints"]
            assert status["size"] is not None and status["signed_at"] is not None
            for witness in status["witnesses"]:
                assert witness["size"] is None and witness["cosigned_at"] is None
                assert witness["reason"]
            text = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "status"],
                                  env=env_for(home), capture_output=True, text=True,
                                  timeout=60, check=True).stdout
            assert "checkpoint size " in text
            assert text.count("nothing cosigned yet") == 2
        finally:
            assert proc.stop() == 0
        text = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "status"],
                              env=env_for(home), capture_output=True, text=True, timeout=60,
                              check=False)
        assert text.returncode == 3  # brokerd stopped: bxctl says it cannot reach it
    finally:
        silent.close()
        home.cleanup()
