"""`boxmaker up` with no inference server named: the embedded local model (marker `llama`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from boxmaker.stack._local import LocalModel

pytestmark = pytest.mark.llama

BIN = Path(sys.executable).parent


def test_up_starts_the_local_model_and_a_turn_runs() -> None:
    if not LocalModel.in_cache().ready:
        if os.environ.get("BOXMAKER_CI") == "1":
            pytest.fail("BOXMAKER_CI=1 and the local model is not built")
        pytest.skip("the local model is not built: run scripts/get-llama-server")
    root = Path(tempfile.mkdtemp(prefix="bxlocal", dir="/tmp"))
    home, user = root / "home", root / "user"
    user.mkdir()
    env = dict(os.environ, HOME=str(user),
               BOXMAKER_CACHE=str(LocalModel.in_cache().server.parents[2]))
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("BOXMAKER_HOME", None)
    up = subprocess.Popen([str(BIN / "boxmaker"), "up", "--home", str(home), "--no-chat"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert up.stderr is not None
        seen = []
        deadline = time.monotonic() + 300
        for line in up.stderr:  # a real program starting a real model: read what it says
            seen.append(line)
            if "all running" in line:
                break
            assert time.monotonic() < deadline, "".join(seen)
        else:
            raise AssertionError("boxmaker up ended early:\n" + "".join(seen))
        text = "".join(seen)
        assert f"the local model {LocalModel.in_cache().spec.title}" in text
        assert "llama-server is ready" in text
        loopd_toml = (home / "loopd.toml").read_text()
        assert "slots = 2" in loopd_toml and "n_ctx_per_slot = 4096" in loopd_toml
        assert "max_tokens = 512" in loopd_toml
        assert "temperature = 0.0" in loopd_toml  # the local model's, from _models.py
        assert f"The owner's home directory, ~, is {user}." in (home / "core.md").read_text()
        said = subprocess.run([str(BIN / "bxctl"), "--config", str(home / "bxctl.toml"), "chat",
                               "--say", "Say hello.", "--json"], capture_output=True, text=True,
                              timeout=300, check=False, env=env)
        assert said.returncode == 0, (said.stdout, said.stderr)
        last = json.loads(said.stdout.splitlines()[-1])
        assert "done" in last
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=120) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        for pipe in (up.stdout, up.stderr):
            if pipe:
                pipe.close()
    port = int((home / "local-model.port").read_text())
    probe = subprocess.run([sys.executable, "-c", "import socket; socket.create_connection("
                            f"('127.0.0.1', {port}), timeout=2)"], capture_output=True,
                           check=False)
    assert probe.returncode != 0, "llama-server still listens after the stop"
