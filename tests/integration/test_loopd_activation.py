"""loopd under real systemd socket activation (`systemd-socket-activate`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ACTIVATE = shutil.which("systemd-socket-activate")


@pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate is not installed")
def test_loopd_takes_its_socket_from_systemd() -> None:
    root = Path(tempfile.mkdtemp(prefix="bxact", dir="/tmp"))
    script = root / "llama.json"
    script.write_text(json.dumps({
        "props": {"total_slots": 4, "n_ctx": 262144, "supports_tool_calls": True},
        "turns": [{"steps": [{"role": "assistant"}, {"text": "activated"}, {"finish": "stop"},
                             {"usage": True}]}],
    }))
    llama_sock = root / "llama.sock"
    llama = subprocess.Popen([sys.executable, "-m", "tests.fakes.llama_server", "--script",
                              str(script), "--unix", str(llama_sock)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True)
    assert llama.stdout is not None
    assert llama.stdout.readline().startswith("listening on")
    loop_sock = root / "loop.sock"
    config = root / "loopd.toml"
    # the socket path in the config is deliberately elsewhere: the activated one must be used
    config.write_text(f'home = "{root / "home"}"\nsocket = "{root / "unused" / "loop.sock"}"\n'
                      f'[inference]\nsocket = "{llama_sock}"\n[broker]\n'
                      f'socket = "{root / "broker.sock"}"\n[loop]\ntools = ["echo"]\n')
    bxctl_config = root / "bxctl.toml"
    bxctl_config.write_text(f'home = "{root}"\nloop_socket = "{loop_sock}"\n')
    log = (root / "loopd.log").open("wb")
    activator = subprocess.Popen(
        [str(ACTIVATE), "-l", str(loop_sock), "--fdname=loop", str(BIN / "loopd"), "serve",
         "--config", str(config)], stdout=log, stderr=log,
    )
    try:
        # the activator listens at once; loopd starts when the first connection comes
        for _ in range(200):
            if loop_sock.exists():
                break
            time.sleep(0.05)  # a real process binding its socket: nothing else to wait on
        result = subprocess.run([str(BIN / "bxctl"), "--config", str(bxctl_config), "chat",
                                 "--say", "hi", "--json"], capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 0, (result.stdout, result.stderr,
                                        (root / "loopd.log").read_text())
        frames = [json.loads(line) for line in result.stdout.splitlines()]
        assert frames[0]["event"] == {"text": {"delta": "activated"}}
        assert not (root / "unused" / "loop.sock").exists()
    finally:
        activator.terminate()
        activator.wait(timeout=30)
        log.close()
        llama.terminate()
        llama.wait(timeout=30)
        llama.stdout.close()
        shutil.rmtree(root, ignore_errors=True)
