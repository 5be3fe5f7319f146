"""Lost writes: an acknowledged call survives the loss of everything not fsynced.

brokerd's audit directory is a FUSE layer (tests/reliability/lossy_fs.py)
that keeps un-synced writes apart from the durable state.  At a cut point (the
K-th create, write, truncate or fsync) the power goes: the layer stops, the
durable state (half the points: plus a random prefix of the un-synced tail,
as a disk may keep part of its cache) is all that is left, brokerd is killed.
Replayed at many cut points, on one log that grows across them.  After each:
brokerd starts on what the disk kept (closing off a torn tail), the log
verifies, and every call whose answer had left brokerd (a result or a
denial) has its call and decision records, and a result had its result.

Needs root (a FUSE mount), /dev/fuse and pyfuse3 (scripts/get-fuse, which
scripts/ci-prepare runs).  BOXMAKER_LOST_WRITE_POINTS sets the number of cut
points (default 24); the figures go to stdout (`-s`) and the JSON report to
BOXMAKER_LOST_WRITE_REPORT when set.
"""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from boxmaker._audit_files import verify_directory
from tests.fakes.brokerd import BrokerdProcess, Home, call_request, request, start

POINTS = int(os.environ.get("BOXMAKER_LOST_WRITE_POINTS", "24"))
# Startup's first operations one by one, then ever further into the load.
SPREAD = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 18, 22, 27, 33, 40, 50, 60, 75, 90, 110, 140,
          170, 210]
WORKERS = 3


def fuse_problem() -> str | None:
    if os.geteuid() != 0:
        return "FUSE mounts need root here (CI runs as root)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        import pyfuse3  # noqa: F401
    except ImportError:
        return "pyfuse3 is not installed (scripts/get-fuse installs it)"
    if shutil.which("umount") is None:
        return "no umount"
    return None


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(fuse_problem() is not None, reason=str(fuse_problem()))]


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answered: list[tuple[str, str]] = []


def worker(home: Home, tag: str, seen: Seen, stop: threading.Event) -> None:
    """Echo calls (allowed: a result) and read_file calls (no grant: a denial)."""
    number = 0
    while not stop.is_set():
        number += 1
        text = f"{tag}-{number}"
        call = (call_request("s1", "echo", {"text": text}) if number % 3
                else call_request("s2", "read_file", {"path": f"/srv/{text}"}))
        try:
            frames = request(home.broker, call, timeout=30)
        except OSError:
            return
        if not frames:
            return
        kind = next(k for k in frames[-1] if k != "id")
        with seen.lock:
            seen.answered.append((text, kind))


class Layer:
    """The FUSE layer's process."""

    def __init__(self, backing: Path, mountpoint: Path, cut_at: int, torn: int | None) -> None:
        argv = [sys.executable, "-m", "tests.reliability.lossy_fs", str(backing),
                str(mountpoint), "--cut-at", str(cut_at)]
        if torn is not None:
            argv += ["--torn", str(torn)]
        self.mountpoint = mountpoint
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=Path(__file__).resolve().parent.parent.parent)
        assert self.line(30) == "mounted", self.stderr()

    def line(self, timeout: float) -> str | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        return self.proc.stdout.readline().decode().strip()

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        subprocess.run(["umount", "-l", str(self.mountpoint)], check=False,
                       capture_output=True, timeout=60)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def records(directory: Path) -> list[dict[str, Any]]:
    out = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".jsonl"):
            for line in (directory / name).read_bytes().split(b"\n"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    return out


def check_answered(directory: Path, seen: Seen) -> int:
    """Every answered result or denial has its records; the number checked."""
    texts: dict[str, int] = {}
    decisions: set[int] = set()
    results: dict[int, str] = {}
    for record in records(directory):
        if "call" in record and "session" in record["call"]:
            args = record["call"]["args"]
            text = args.get("text") or args.get("path", "").removeprefix("/srv/")
            texts[text] = record["seq"]
        elif "decision" in record:
            decisions.add(record["decision"]["call"])
        elif "result" in record:
            results[record["result"]["call"]] = record["result"]["status"]
    checked = 0
    for text, kind in seen.answered:
        if kind not in ("result", "denied"):
            continue  # an error answer says nothing was recorded
        call_id = texts.get(text)
        assert call_id is not None, f"{text} was answered {kind} but its call is lost"
        assert call_id in decisions, f"{text} was answered {kind} but its decision is lost"
        if kind == "result":
            assert results.get(call_id) == "ok", f"{text} was answered a lost result"
        checked += 1
    return checked


def run_point(home: Home, configs: tuple[Path, Path], backing: Path, mountpoint: Path,
              cut_at: int, torn: int | None, seen: Seen, tag: str) -> dict[str, Any]:
    layer = Layer(backing, mountpoint, cut_at, torn)
    home.config = configs[0]
    proc = BrokerdProcess(home, timeout=1)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    cut: str | None = None
    ready = False
    try:
        for _ in range(120):  # until the cut: brokerd may not even get ready first
            if not ready:
                try:
                    proc.wait_ready()
                    ready = True
                    threads = [threading.Thread(target=worker,
                                                args=(home, f"{tag}w{i}", seen, stop))
                               for i in range(WORKERS)]
                    for thread in threads:
                        thread.start()
                except AssertionError:
                    pass
            cut = layer.line(0 if not ready else 1)
            if cut:
                break
            assert proc.proc.poll() is None, f"brokerd died before the cut: {proc.log()}"
        assert cut is not None and cut.startswith("cut"), (cut, layer.stderr())
    finally:
        # SIGKILL first: brokerd runs no more code once its blocked syscall
        # returns; then the layer goes, which aborts that syscall.
        if proc.proc.poll() is None:
            proc.proc.kill()
        stop.set()
        layer.kill()
        proc.kill()
        for thread in threads:
            thread.join(60)
            assert not thread.is_alive()
    # The power is back: brokerd starts on what the disk kept.
    home.config = configs[1]
    before = verify_directory(backing)
    after_start = start(home)
    assert after_start.stop() == 0, after_start.log()
    report = verify_directory(backing)
    assert report.ok, report
    return {"cut_at": cut_at, "torn": torn is not None, "op": cut.split()[1],
            "ready_before_cut": ready, "torn_tail": before.torn_tail is not None,
            "records": report.records}


def make_home(*, fsync: bool = True) -> tuple[Home, Path, Path, tuple[Path, Path]]:
    home = Home(extra='[paths]\naudit = "MOUNTPOINT"\n', fsync=fsync)
    backing = home.root / "disk"
    mountpoint = home.root / "audit"
    backing.mkdir(mode=0o700)
    mountpoint.mkdir(mode=0o700)
    text = home.config.read_text()
    cut_config = home.root / "brokerd-cut.toml"
    cut_config.write_text(text.replace("MOUNTPOINT", str(mountpoint)))
    after_config = home.root / "brokerd-after.toml"
    after_config.write_text(text.replace("MOUNTPOINT", str(backing)))
    return home, backing, mountpoint, (cut_config, after_config)


def test_acknowledged_calls_survive_power_cuts() -> None:
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    home, backing, mountpoint, configs = make_home()
    seen = Seen()
    points: list[dict[str, Any]] = []
    checked = 0
    try:
        for number in range(POINTS):
            cut_at = SPREAD[number] if number < len(SPREAD) else rng.randint(1, SPREAD[-1])
            torn = rng.randrange(2**32) if number % 2 else None
            points.append(run_point(home, configs, backing, mountpoint, cut_at, torn, seen,
                                    f"p{number}"))
            checked = check_answered(backing, seen)
        figures = {
            "points": len(points),
            "cuts_during_load": sum(p["ready_before_cut"] for p in points),
            "cuts_by_operation": {op: sum(p["op"] == op for p in points)
                                  for op in sorted({p["op"] for p in points})},
            "torn_tails_recovered": sum(p["torn_tail"] for p in points),
            "calls_answered": len(seen.answered),
            "calls_checked": checked,
            "losses": 0,
            "records": points[-1]["records"],
        }
        print("lost writes:", json.dumps(figures))
        if os.environ.get("BOXMAKER_LOST_WRITE_REPORT"):
            Path(os.environ["BOXMAKER_LOST_WRITE_REPORT"]).write_text(
                json.dumps(figures | {"each": points}, indent=1) + "\n")
        assert figures["cuts_during_load"] >= POINTS // 2
        assert checked > POINTS
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, capture_output=True)
        home.cleanup()


def test_the_layer_catches_answers_given_before_their_fsync() -> None:
    """With `fsync = false` brokerd answers before anything is durable: the cut
    loses those calls, and the check says so (the test above can fail)."""
    home, backing, mountpoint, configs = make_home(fsync=False)
    seen = Seen()
    try:
        with pytest.raises(AssertionError, match=r"is lost|lost result"):
            for number in range(3):
                run_point(home, configs, backing, mountpoint, 150, None, seen, f"n{number}")
                check_answered(backing, seen)
        assert seen.answered
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, capture_output=True)
        home.cleanup()
