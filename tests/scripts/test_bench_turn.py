"""scripts/bench/turn: a tiny run prints the three paths and the two added figures,
and leaves no process or directory behind, also when stopped with SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "bench" / "turn"


def started_pids(stderr: str) -> dict[str, int]:
    return {name: int(pid)
            for name, pid in re.findall(r"^turn: started (\S+) \(pid (\d+)\)$", stderr, re.M)}


def working_dir(stderr: str) -> Path:
    found = re.search(r"^turn: working in (\S+)$", stderr, re.M)
    assert found, stderr
    return Path(found.group(1))


def assert_all_gone(stderr: str) -> None:
    pids = started_pids(stderr)
    assert set(pids) == {"server", "loopd-a", "inferproxy", "loopd-b"}, stderr
    for name, pid in pids.items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"{name} (pid {pid}) is still running")
    assert not working_dir(stderr).exists()


def test_tiny_run_prints_the_three_paths_and_the_added_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--events", "20", "--turns", "1", "--warmup", "5"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines():
        row = re.match(r"^(direct|loopd|proxied) \(.*\)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", line)
        if row:
            rows[row.group(1)] = [int(value) for value in row.groups()[1:]]
    assert set(rows) == {"direct", "loopd", "proxied"}, result.stdout
    for name, (events, p50, p90, p99) in rows.items():
        assert events == 15, (name, result.stdout)  # 20 events, the first 5 left out
        assert 0 < p50 <= p90 <= p99, (name, result.stdout)
    assert re.search(r"^loopd adds over direct: p50 [+-]\d+ us per event \(target <= 1000 us:"
                     r" (met|NOT met)\)$", result.stdout, re.M), result.stdout
    assert re.search(r"^inferproxy adds over loopd: p50 [+-]\d+ us per event \(target <= 1000"
                     r" us: (met|NOT met)\)$", result.stdout, re.M), result.stdout
    assert re.search(r"^CPU per event .*: direct client \d+ us, loopd \d+ us,"
                     r" loopd \(proxied\) \d+ us, inferproxy \d+ us$", result.stdout, re.M)
    assert_all_gone(result.stderr)


def test_sigterm_stops_every_process_it_started() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--events", "5000", "--turns", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # the `direct` turn (5 s) runs after this line
            seen.append(line)
            if line.startswith("turn: started loopd-b"):
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = "".join(seen) + err
    assert proc.returncode == 130, stderr
    assert "turn: interrupted" in stderr
    assert out == ""
    assert_all_gone(stderr)
