"""loopd, brokerd and bxctl against the real llama-server (marker `llama`).

A conversation continued after a loopd restart is answered from the restored
slot: loopd restores the newest conversation's slot at start, and the first
round of the next turn shows `timings.cache_n > 0` (loopd logs each round's
timings).  A new conversation after another re-uses the system message and tools
already in the slot (issue 27).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.e2e.conftest import LlamaServer
from tests.fakes.brokerd import BXCTL, Home, start

pytestmark = pytest.mark.llama

LOOPD = Path(sys.executable).parent / "loopd"
ROUND = re.compile(r"round done: finish (\S+), prompt_n (\d+), cache_n (\d+)")


class Loopd:
    def __init__(self, root: Path, config: Path) -> None:
        self.log_path = root / "loopd.log"
        notify_path = root / "loopd-notify.sock"
        notify_path.unlink(missing_ok=True)
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(notify_path))
        notify.settimeout(120)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [str(LOOPD), "serve", "--config", str(config)], stdout=log, stderr=log,
                env=dict(os.environ, NOTIFY_SOCKET=str(notify_path)),
            )
        try:
            while notify.recv(4096) != b"READY=1":
                pass
        except TimeoutError:
            self.stop()
            raise AssertionError(f"loopd not ready:\n{self.log()}") from None
        finally:
            notify.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


@attrs.frozen
class Stack:
    brokerd_home: Home
    brokerd: Any
    root: Path
    config: Path
    bxctl_config: Path

    def say(self, text: str, conversation: str = "restart") -> list[dict[str, object]]:
        result = subprocess.run(
            [str(BXCTL), "--config", str(self.bxctl_config), "chat", "--conversation",
             conversation, "--say", text, "--json"], capture_output=True, text=True,
            timeout=300, check=False)
        frames = [json.loads(line) for line in result.stdout.splitlines()]
        assert result.returncode == 0, (result.stdout, result.stderr)
        return frames


def _stack(llama_server: LlamaServer) -> Stack:
    brokerd_home = Home(runner="echo")
    brokerd = start(brokerd_home)
    root = brokerd_home.root
    loop_home = root / "loop"
    loop_home.mkdir()
    (loop_home / "core.md").write_text("Answer in one short sentence. Do not use tools.\n")
    loop_sock = root / "lr" / "loop.sock"
    config = root / "loopd.toml"
    config.write_text(
        f'home = "{loop_home}"\nsocket = "{loop_sock}"\n'
        "[inference]\n"
        f'url = "{llama_server.url}"\n'
        "slots = 2\n"
        f"n_ctx_per_slot = {llama_server.n_ctx_per_slot}\n"
        "max_tokens = 24\ntemperature = 0.0\n"
        "[broker]\n"
        f'socket = "{brokerd_home.broker}"\n'
        "[loop]\n"
        'tools = ["echo"]\n'
    )
    bxctl_config = root / "bxctl.toml"
    bxctl_config.write_text(f'home = "{brokerd_home.home}"\nadmin_socket = '
                            f'"{brokerd_home.admin}"\nloop_socket = "{loop_sock}"\n')
    return Stack(brokerd_home=brokerd_home, brokerd=brokerd, root=root, config=config,
                 bxctl_config=bxctl_config)


def test_restart_restores_the_slot(llama_server: LlamaServer, tmp_path: Path) -> None:
    stack = _stack(llama_server)
    loopd = Loopd(stack.root, stack.config)
    try:
        first = stack.say("Name one colour of the sky.")
        assert "done" in first[-1]
        loopd.stop()
        saved = list(llama_server.slot_dir.glob("boxmaker-restart.bin"))
        assert saved, "loopd did not save the slot after the turn"
        loopd = Loopd(stack.root, stack.config)
        assert "slot 0 restored from boxmaker-restart.bin" in loopd.log()
        second = stack.say("And one colour of grass?")
        assert "done" in second[-1]
    finally:
        loopd.stop()
        stack.brokerd.stop()
    after_restart = loopd.log().rsplit("slot 0 restored from boxmaker-restart.bin", 1)[1]
    rounds = ROUND.findall(after_restart)
    assert rounds, loopd.log()
    _finish, _prompt_n, cache_n = rounds[0]
    assert int(cache_n) > 0, (rounds, loopd.log())
    stack.brokerd_home.cleanup()


def test_a_new_conversation_reuses_the_shared_prefix(llama_server: LlamaServer) -> None:
    # The system message and the tools come first in every request: a new
    # conversation after another evaluates only its own tokens.
    stack = _stack(llama_server)
    loopd = Loopd(stack.root, stack.config)
    try:
        assert "done" in stack.say("Name one colour of the sky.", "first")[-1]
        assert "done" in stack.say("Name one colour of grass.", "second")[-1]
    finally:
        loopd.stop()
        stack.brokerd.stop()
    log = loopd.log()
    assert "conversation second is new: slot 0 kept" in log, log
    rounds = ROUND.findall(log.split("conversation second is new", 1)[1])
    assert rounds, log
    _finish, second_n, second_cached = rounds[0]
    # The system message and the tool's schema (over 100 tokens with the
    # template's header) came from the slot; only the new message was evaluated.
    assert "slot restore for second failed" not in log, log
    assert int(second_cached) > 100 and int(second_n) < 40, log
    stack.brokerd_home.cleanup()
