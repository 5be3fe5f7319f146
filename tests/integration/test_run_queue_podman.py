"""32 concurrent calls against `[runner] max_concurrent = 4` (issue 11 item 3):
the real brokerd binary, real sockets, real podman containers (marker `podman`).

While the calls run, `podman ps` is polled for this brokerd's call containers:
never more than 4 are alive.  4 run, 16 wait in the queue (the default
4 x max_concurrent), and the 12 that find it full are answered
`runner_unavailable` ("too many calls at once") and recorded so.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from boxmaker.brokerd.runner._podman_argv import container_prefix, instance_id
from tests.fakes.brokerd import call_request, request, start
from tests.fakes.podman import tools_image
from tests.integration.test_runner_brokerd import podman_home

pytestmark = pytest.mark.podman

CALLS = 32


@pytest.fixture
def notes() -> Iterator[Path]:
    root = Path(
        subprocess.check_output(["mktemp", "-d", "/tmp/bx-i11q-XXXXXX"], text=True).strip()
    )
    (root / "todo.txt").write_text("buy milk\n")
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=False)


def live_calls(prefix: str) -> int:
    done = subprocess.run(
        ["podman", "ps", "--filter", f"name=^{prefix}", "--format", "{{.Names}}"],
        capture_output=True, text=True, timeout=60, check=False)
    return len([n for n in done.stdout.split() if n.startswith(prefix)])


def test_32_calls_never_run_more_than_4_containers(notes: Path) -> None:
    home = podman_home(tools_image(), notes)
    text = home.config.read_text().replace(
        'oci_runtime = "runc"\n',
        'oci_runtime = "runc"\nmax_concurrent = 4\ntimeout_ms = 300000\n'
        "queue_timeout_ms = 600000\n")
    home.config.write_text(text)
    prefix = container_prefix(instance_id(home.home))
    proc = start(home, timeout=60)
    answers: dict[int, list[dict[str, Any]]] = {}
    seen: list[int] = []
    stop = threading.Event()
    try:
        def call(rid: int) -> None:
            answers[rid] = request(home.broker, call_request(
                f"s{rid}", "read_file", {"path": str(notes / "todo.txt")}, rid), 600)

        def watch() -> None:
            # A poll each half second: podman ps takes podman's locks, and a tight
            # loop of it slows the very containers it counts.
            while not stop.is_set():
                seen.append(live_calls(prefix))
                stop.wait(0.5)

        watcher = threading.Thread(target=watch)
        watcher.start()
        threads = [threading.Thread(target=call, args=(rid,)) for rid in range(1, CALLS + 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        stop.set()
        watcher.join(120)
        outcomes = sorted(
            frames[0]["result"]["status"] if "result" in frames[0]
            else frames[0].get("error", {}).get("code", str(frames))
            for frames in answers.values())
        assert outcomes == ["ok"] * 20 + ["runner_unavailable"] * 12, (outcomes, proc.log())
        busy = [f[0]["error"]["message"] for f in answers.values() if "error" in f[0]]
        assert all("too many calls at once" in m for m in busy), busy
        statuses = sorted(r["status"] for r in home.events("result"))
        assert statuses == ["ok"] * 20 + ["runner_unavailable"] * 12
        assert seen and max(seen) <= 4, seen
        print(f"live call containers seen by {len(seen)} polls: max {max(seen)}")
    finally:
        stop.set()
        assert proc.stop() == 0, proc.log()
        home.cleanup()
