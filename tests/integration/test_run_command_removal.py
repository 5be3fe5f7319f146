"""A run_command container removed after the answer, through the real brokerd and podman
(issue 25; `_removals.py`): gone soon after the answer while brokerd runs, still
removed when brokerd shuts down with the removal pending, and by the start-up sweep
after a kill -9.

brokerd's `[runner] podman` is a small wrapper around the real podman that holds a
``podman rm`` while the file HOLD exists, until the test writes ``go`` (run it) or
``stop`` (drop it) into the FIFO GATE, and logs each removal it ran to RMLOG.  The
hold makes "the removal is still pending" a fact the test controls, not a race.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from boxmaker.brokerd.runner._command_argv import command_container_prefix
from boxmaker.brokerd.runner._podman_argv import instance_id
from tests.fakes.brokerd import BrokerdProcess, Home, call_request, request, start
from tests.fakes.podman import commands_image, tools_image

pytestmark = pytest.mark.podman

WRAPPER = """#!/bin/sh
if [ "$1" = rm ] && [ -e {hold} ]; then
    read -r word < {gate}
    [ "$word" = go ] || exit 1
fi
{podman} "$@"
rc=$?
if [ "$1" = rm ] && [ "$rc" = 0 ]; then echo "$*" >> {rmlog}; fi
exit "$rc"
"""


class Setup:
    def __init__(self, home: Home) -> None:
        self.home = home
        self.hold = home.root / "HOLD"
        self.gate = home.root / "GATE"
        self.rmlog = home.root / "RMLOG"
        self.proj = home.root / "proj"
        self.prefix = command_container_prefix(instance_id(home.home))
        self.number = 0

    def listed(self) -> list[str]:
        names = subprocess.run(
            ["podman", "ps", "--all", "--filter", f"name=^{self.prefix}", "--format",
             "{{.Names}}"], capture_output=True, text=True, check=True, timeout=60).stdout
        return [n for n in names.split() if n.startswith(self.prefix)]

    def call(self) -> None:
        self.number += 1
        frames = request(self.home.broker, call_request(
            "s1", "run_command", {"argv": ["echo", "hi"], "cwd": str(self.proj)},
            self.number), 180)
        assert frames[0]["result"]["status"] == "ok", frames
        assert frames[0]["result"]["output"]["stdout"] == "hi\n", frames

    def answer_the_hold(self, word: str) -> None:
        """Write `word` to the held removal (bounded: a removal that never comes fails)."""
        def write() -> None:
            with open(self.gate, "w") as gate:
                gate.write(word + "\n")

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(60)
        assert not writer.is_alive(), "no removal came to the hold"

    def removed(self) -> str:
        return self.rmlog.read_text() if self.rmlog.exists() else ""


@pytest.fixture
def setup() -> Iterator[Setup]:
    image = tools_image()
    commands = commands_image()
    if os.geteuid() != 0:
        pytest.skip("removal after the answer is the hooked run's (a rootful podman)")
    real = shutil.which("podman")
    assert real is not None
    home = Home(runner="podman", grants={}, fsync=False)
    s = Setup(home)
    s.proj.mkdir()
    (home.root / "bin").mkdir()
    wrapper = home.root / "bin" / "podman"
    wrapper.write_text(WRAPPER.format(hold=s.hold, gate=s.gate, podman=real, rmlog=s.rmlog))
    wrapper.chmod(0o755)
    os.mkfifo(s.gate, 0o600)
    (home.grants / "echo.toml").write_text(
        f'[[grant]]\nid = "echo"\ntool = "run_command"\nmode = "allow"\n'
        f'paths = ["{s.proj}"]\ncommands = [["echo"]]\nrest = "any"\n')
    text = home.config.read_text().replace(
        'kind = "podman"\n',
        f'kind = "podman"\npodman = "{wrapper}"\nimage = "{image}"\noci_runtime = "runc"\n')
    home.config.write_text(text + f'\n[commands]\nimage = "{commands}"\n')
    try:
        yield s
    finally:
        leftovers = s.listed()
        if leftovers:
            subprocess.run(["podman", "rm", "--force", "--time", "0", *leftovers],
                           capture_output=True, check=False, timeout=120)
        home.cleanup()
        assert leftovers == []


def _start(s: Setup) -> BrokerdProcess:
    return start(s.home, timeout=180)


def test_the_container_goes_after_the_answer(setup: Setup) -> None:
    """No hold: brokerd starts the removal once it answered (it keeps running)."""
    proc = _start(setup)
    try:
        setup.call()
        deadline = time.monotonic() + 60
        while setup.listed():
            assert time.monotonic() < deadline, "the container outlived the answer by 60 s"
        assert proc.proc.poll() is None and "--volumes" in setup.removed()
    finally:
        proc.stop()


def test_a_removal_pending_at_shutdown_still_happens(setup: Setup) -> None:
    proc = _start(setup)
    try:
        setup.hold.touch()
        setup.call()
        # answered; the removal is held: the exited container is still podman's
        (name,) = setup.listed()
        proc.proc.send_signal(15)
        setup.answer_the_hold("go")
        assert proc.proc.wait(120) == 0, proc.log()
        # brokerd ended only once its removal had run, anonymous volumes too (as --rm)
        assert name in setup.removed() and "--volumes" in setup.removed()
        assert setup.listed() == []
    finally:
        proc.stop()


def test_after_a_kill_9_the_start_up_sweep_removes_the_container(setup: Setup) -> None:
    proc = _start(setup)
    try:
        setup.hold.touch()
        setup.call()
        (name,) = setup.listed()
        proc.kill()
        setup.answer_the_hold("stop")  # the held removal of the dead brokerd is dropped
        assert setup.listed() == [name] and name not in setup.removed()
    finally:
        proc.kill()
    setup.hold.unlink()
    again = _start(setup)
    try:
        assert setup.listed() == [] and name in setup.removed()
    finally:
        again.stop()
