"""`boxmaker up` for real: a starter home, three daemons, a chat on a terminal, a clean stop.

The inference server is the scripted fake llama-server on TCP; everything
else is the real program, as a newcomer would run `./scripts/up`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.pty import Pty

REPO = Path(__file__).resolve().parents[2]
BOXMAKER = Path(sys.executable).parent / "boxmaker"


@pytest.fixture
def fake_llama(tmp_path: Path) -> Iterator[str]:
    script = tmp_path / "llama.json"
    script.write_text(json.dumps({
        "props": {"total_slots": 2, "n_ctx": 4096, "supports_tool_calls": True},
        "turns": [{"steps": [{"role": "assistant"}, {"text": "Hello from the fake model."},
                             {"finish": "stop"}, {"usage": True}]}],
    }))
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.llama_server", "--script", str(script),
         "--port", "0"], cwd=REPO, stdout=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("listening on http://"), line
    yield line.split("listening on ", 1)[1].strip()
    process.terminate()
    process.wait(timeout=30)
    process.stdout.close()


def test_up_writes_a_home_starts_everything_chats_and_stops(fake_llama: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="bxup", dir="/tmp"))
    home, user = root / "home", root / "user"
    user.mkdir()
    env = dict(os.environ, HOME=str(user))
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("BOXMAKER_HOME", None)
    up = Pty([str(BOXMAKER), "up", "--home", str(home), "--inference", fake_llama], env=env)
    try:
        screen = up.expect(b"you> ", timeout=120).decode(errors="replace")
        assert "inference server: 2 slots, 4096 tokens of context per slot" in screen
        assert "loopd is ready" in screen and "brokerd is ready" in screen
        assert "tools cannot run here" in screen  # the refusing runner, said in the banner
        up.type("hello\n")
        up.expect(b"Hello from the fake model.")
        up.expect(b"you> ")
    finally:
        code = up.close()
    assert code == 0, up.seen.decode(errors="replace")
    assert b"stopping" in up.seen
    for name in ("brokerd.toml", "loopd.toml", "inferproxy.toml", "bxctl.toml", "core.md",
                 "grants/examples.toml"):
        assert (home / name).is_file(), name
    assert (user / "boxmaker-demo" / "notes" / "hello.md").is_file()
    for name in ("brokerd", "inferproxy", "loopd"):
        assert (home / "logs" / f"{name}.log").stat().st_size > 0
    # every daemon is gone: their sockets are closed
    for sock in (home / "run").glob("*.sock"):
        probe = subprocess.run([sys.executable, "-c", f"import socket; s=socket.socket("
                                f"socket.AF_UNIX); s.connect({str(sock)!r})"],
                               capture_output=True, check=False)
        assert probe.returncode != 0, f"{sock} still accepts connections"
    conversation = (home / "conversations" / "default.jsonl").read_text().splitlines()
    assert [json.loads(line)["role"] for line in conversation] == ["user", "assistant"]
