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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.podman import checked_image
from tests.fakes.pty import Pty

REPO = Path(__file__).resolve().parents[2]
BOXMAKER = Path(sys.executable).parent / "boxmaker"


@pytest.fixture
def fake_llama(tmp_path: Path) -> Iterator[Callable[[list[dict[str, Any]]], str]]:
    processes: list[subprocess.Popen[str]] = []

    def start(turns: list[dict[str, Any]]) -> str:
        script = tmp_path / "llama.json"
        script.write_text(json.dumps({
            "props": {"total_slots": 2, "n_ctx": 4096, "supports_tool_calls": True},
            "turns": turns,
        }))
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.llama_server", "--script", str(script),
             "--port", "0"], cwd=REPO, stdout=subprocess.PIPE, text=True,
        )
        processes.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on http://"), line
        return line.split("listening on ", 1)[1].strip()

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout:
            process.stdout.close()


def test_up_writes_a_home_starts_everything_chats_and_stops(
    fake_llama: Callable[[list[dict[str, Any]]], str],
) -> None:
    root = Path(tempfile.mkdtemp(prefix="bxup", dir="/tmp"))
    home, user = root / "home", root / "user"
    user.mkdir()
    notes = user / "boxmaker-demo" / "notes"
    url = fake_llama([
        {"steps": [{"role": "assistant"}, {"text": "Hello from the fake model."},
                   {"finish": "stop"}, {"usage": True}]},
        {"steps": [{"role": "assistant"},
                   {"tool_call": {"index": 0, "id": "c1", "name": "list_dir",
                                  "arguments": [json.dumps({"path": str(notes)})]}},
                   {"finish": "tool_calls"}, {"usage": True}]},
        {"steps": [{"role": "assistant"}, {"text": "Listed."}, {"finish": "stop"},
                   {"usage": True}]},
    ])
    env = dict(os.environ, HOME=str(user), COLUMNS="200")  # the banner unwrapped
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("BOXMAKER_HOME", None)
    # With the tools image of this tree built (CI builds it first), up uses it; without
    # it, --no-tools, so that the test does not build an image (minutes).
    tools = checked_image("build-tools-image")[0] is not None
    argv = [str(BOXMAKER), "up", "--home", str(home), "--inference", url, "--no-mcp"]
    up = Pty(argv if tools else [*argv, "--no-tools"], env=env)
    try:
        screen = up.expect(b"you> ", timeout=120).decode(errors="replace")
        assert "inference server: 2 slots, 4096 tokens of context per slot" in screen
        assert "loopd is ready" in screen and "brokerd is ready" in screen
        if not tools:  # the refusing runner, said by up and in the banner
            assert "tools cannot run here" in screen
            assert "Starting with the refusing runner" in screen
        else:  # the podman runner with the tools image, checked by brokerd at start
            assert "tools cannot run here" not in screen
            assert "tools run in podman containers from image sha256:" in screen
            assert "tools: run in throw-away podman containers" in screen
        # the first screen: the model, and the grants in one line
        assert "model: " in screen
        assert ("grants: reads and lists ~/boxmaker-demo/notes; runs commands in "
                "~/boxmaker-demo; asks before fetching from docs.python.org; never reads or "
                "lists ~/.ssh") in screen
        if tools:  # the default commands image: brokerd.toml's [commands], run_command offered
            assert "run_command runs in containers from image sha256:" in screen
        up.type("/help\n")
        up.expect(b"Ctrl-D")
        up.expect(b"you> ")
        up.type("hello\n")
        up.expect(b"Hello from the fake model.")
        up.expect(b"you> ")
        # the demo grant allows list_dir on the demo notes: through brokerd to the runner
        up.type("what is in my notes?\n")
        screen = up.expect(b"Listed.", timeout=120).decode(errors="replace")
        if not tools:
            assert "list_dir denied (runner_unavailable)" in screen
        else:
            assert "✓ list_dir ok" in screen
            # "Listed." leaves the listing out: loopd shows it (issue 27's result notice)
            up.expect(b"boxmaker shows it")
            up.expect(b"hello.md")
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
    roles = [json.loads(line)["role"] for line in conversation]
    if tools:  # the last: loopd's note to the model that boxmaker showed the listing
        assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant",
                         "assistant"]
        assert "boxmaker showed" in json.loads(conversation[-1])["content"]
    else:  # a denial is no result to show
        assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant"]


def test_up_with_the_approval_page(fake_llama: Callable[[list[dict[str, Any]]], str]) -> None:
    import signal
    import socket
    import urllib.request

    root = Path(tempfile.mkdtemp(prefix="bxup", dir="/tmp"))
    home, user = root / "home", root / "user"
    user.mkdir()
    home.mkdir(mode=0o700)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    origin = f"http://localhost:{port}"
    (home / "approvals.toml").write_text(
        f'home = "{home}"\nlisten = "127.0.0.1:{port}"\norigin = "{origin}"\n')
    url = fake_llama([])
    env = dict(os.environ, HOME=str(user))
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("BOXMAKER_HOME", None)
    up = Pty([str(BOXMAKER), "up", "--home", str(home), "--inference", url, "--no-chat", "--no-mcp",
              "--approvals-page"], env=env)
    try:
        screen = up.expect(b"approvals is ready", timeout=120).decode(errors="replace")
        assert f"approval page: {origin}/" in screen
        assert "does not name" in screen  # brokerd.toml has no [approvals] origins yet
        assert "▀" in screen or "▄" in screen  # its QR code
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as page:
            raise AssertionError(f"a foreign Host was served: {page.status}")
    except urllib.error.HTTPError as refused:
        assert refused.code == 421  # 127.0.0.1 is not the configured host
        request = urllib.request.Request(f"http://127.0.0.1:{port}/",
                                         headers={"Host": f"localhost:{port}"})
        with urllib.request.urlopen(request, timeout=30) as page:
            assert page.status == 200 and b"boxmaker approvals" in page.read()
    finally:
        up.process.send_signal(signal.SIGINT)  # --no-chat: Ctrl-C stops the daemons
        code = up.close()
    assert code == 0, up.seen.decode(errors="replace")


def test_up_restarts_a_dead_approval_page_and_the_daemons_go_on(
        fake_llama: Callable[[list[dict[str, Any]]], str]) -> None:
    # Issue 22 item 1: the page's death (one HTTP/2 request did it) stopped every daemon.
    import signal
    import socket
    import urllib.request

    root = Path(tempfile.mkdtemp(prefix="bxup", dir="/tmp"))
    home, user = root / "home", root / "user"
    user.mkdir()
    home.mkdir(mode=0o700)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = home / "approvals.toml"
    config.write_text(f'home = "{home}"\nlisten = "127.0.0.1:{port}"\n'
                      f'origin = "http://localhost:{port}"\n')
    env = dict(os.environ, HOME=str(user))
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("BOXMAKER_HOME", None)
    up = Pty([str(BOXMAKER), "up", "--home", str(home), "--inference", fake_llama([]),
              "--no-chat", "--no-tools", "--approvals-page"], env=env)
    try:
        up.expect(b"approvals is ready", timeout=120)
        pages = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
                 and str(config).encode() in _cmdline(int(pid))
                 and b"boxmaker.approvals" in _cmdline(int(pid))]
        assert len(pages) == 1
        os.kill(pages[0], signal.SIGKILL)  # the page dies, however it came to
        screen = up.expect(b"approvals is ready again", timeout=120).decode(errors="replace")
        assert "approvals died (exit status -9)" in screen
        assert "the others go on" in screen and "stopping" not in screen
        request = urllib.request.Request(f"http://127.0.0.1:{port}/",
                                         headers={"Host": f"localhost:{port}"})
        with urllib.request.urlopen(request, timeout=30) as page:
            assert page.status == 200
        status = subprocess.run([str(BOXMAKER.parent / "bxctl"), "--config",
                                 str(home / "bxctl.toml"), "status"], env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        assert status.returncode == 0, status.stdout + status.stderr  # brokerd still answers
    finally:
        up.process.send_signal(signal.SIGINT)
        code = up.close()
    assert code == 0, up.seen.decode(errors="replace")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
