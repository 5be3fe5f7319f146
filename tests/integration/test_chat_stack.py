"""The agent loop end to end with real processes (06-loopd, 07-bxctl).

brokerd (echo runtime), loopd and a scripted fake llama-server run as real
processes over real sockets; bxctl drives them, interactively through a
pseudo-terminal where the owner types.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.brokerd import BXCTL, ECHO_GRANT, Home, start
from tests.fakes.pty import Pty

VENV_BIN = Path(sys.executable).parent
LOOPD = VENV_BIN / "loopd"
REPO = Path(__file__).resolve().parents[2]

ASK_ECHO = """
[[grant]]
id = "echo-ask"
tool = "echo"
mode = "ask"
"""


def tool_round(call_id: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "steps": [
            {"role": "assistant"},
            {"text": "Let me check."},
            {
                "tool_call": {
                    "index": 0,
                    "id": call_id,
                    "name": tool,
                    "arguments": [json.dumps(args)[:5], json.dumps(args)[5:]],
                }
            },
            {"finish": "tool_calls"},
            {"usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
        ]
    }


def text_round(text: str) -> dict[str, Any]:
    return {
        "steps": [
            {"role": "assistant"},
            {"text": text},
            {"finish": "stop"},
            {"usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23}},
        ]
    }


class Stack:
    """brokerd + fake llama-server + loopd, each a real process."""

    def __init__(
        self,
        turns: list[dict[str, Any]],
        *,
        ttl_ms: int = 600_000,
        grants: dict[str, str] | None = None,
    ) -> None:
        self.brokerd_home = Home(runner="echo", ttl_ms=ttl_ms, grants=grants)
        self.root = self.brokerd_home.root
        self.brokerd = start(self.brokerd_home)
        self.llama_sock = self.root / "llama.sock"
        script = self.root / "llama.json"
        script.write_text(
            json.dumps(
                {
                    "props": {"total_slots": 4, "n_ctx": 262144, "supports_tool_calls": True},
                    "turns": turns,
                }
            )
        )
        self.llama = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.fakes.llama_server",
                "--script",
                str(script),
                "--unix",
                str(self.llama_sock),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self.llama.stdout is not None
        line = self.llama.stdout.readline().decode()
        assert line.startswith("listening on"), line
        self.loop_home = self.root / "loop"
        self.loop_home.mkdir()
        self.loop_sock = self.root / "run-loop" / "loop.sock"
        self.loopd_config = self.root / "loopd.toml"
        self.loopd_config.write_text(
            f'home = "{self.loop_home}"\n'
            f'socket = "{self.loop_sock}"\n'
            "[inference]\n"
            f'socket = "{self.llama_sock}"\n'
            "[broker]\n"
            f'socket = "{self.brokerd_home.broker}"\n'
            "timeout_ms = 60000\n"
            "[loop]\n"
            'tools = ["echo", "read_file"]\n'
        )
        self.bxctl_config = self.root / "bxctl.toml"
        self.bxctl_config.write_text(
            f'home = "{self.brokerd_home.home}"\n'
            f'admin_socket = "{self.brokerd_home.admin}"\n'
            f'loop_socket = "{self.loop_sock}"\n'
        )
        self.loopd_log = (self.root / "loopd.log").open("wb")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify_path = self.root / "loopd-notify.sock"
        notify.bind(str(notify_path))
        notify.settimeout(60)
        env = dict(os.environ, NOTIFY_SOCKET=str(notify_path))
        self.loopd = subprocess.Popen(
            [str(LOOPD), "serve", "--config", str(self.loopd_config)],
            stdout=self.loopd_log,
            stderr=self.loopd_log,
            env=env,
        )
        try:
            while notify.recv(4096) != b"READY=1":
                pass
        except TimeoutError:
            raise AssertionError(f"loopd never got ready:\n{self.loopd_log_text()}") from None
        finally:
            notify.close()

    def loopd_log_text(self) -> str:
        return (self.root / "loopd.log").read_text(errors="replace")

    def bxctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BXCTL), "--config", str(self.bxctl_config), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def say_json(self, text: str, conversation: str = "c1") -> tuple[int, list[dict[str, Any]]]:
        result = self.bxctl("chat", "--conversation", conversation, "--say", text, "--json")
        frames = [json.loads(line) for line in result.stdout.splitlines()]
        return result.returncode, frames

    def set_grants(self, text: str) -> None:
        for old in self.brokerd_home.grants.glob("*.toml"):
            old.unlink()
        (self.brokerd_home.grants / "grants.toml").write_text(text)

    def close(self) -> None:
        for process in (self.loopd, self.llama):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.loopd_log.close()
        if self.llama.stdout:
            self.llama.stdout.close()
        self.brokerd.stop()
        self.brokerd_home.cleanup()


@pytest.fixture
def stack_factory() -> Iterator[Any]:
    stacks: list[Stack] = []

    def make(turns: list[dict[str, Any]], **kwargs: Any) -> Stack:
        stack = Stack(turns, **kwargs)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.close()


def kinds(frames: list[dict[str, Any]]) -> list[str]:
    out = []
    for frame in frames:
        if "event" in frame:
            out.append(next(iter(frame["event"])))
        else:
            out.append(next(k for k in frame if k != "id"))
    return out


def verify_audit(stack: Stack) -> dict[str, Any]:
    result = stack.bxctl("audit", "verify", str(stack.brokerd_home.audit), "--json")
    report: dict[str, Any] = json.loads(result.stdout)
    assert result.returncode == 0 and report["ok"], result.stdout
    return report


def test_allowed_echo_turn_events_audit_and_conversation(stack_factory: Any) -> None:
    stack = stack_factory([tool_round("call-1", "echo", {"text": "hi"}), text_round("All done.")])
    code, frames = stack.say_json("please echo hi")
    assert code == 0, stack.loopd_log_text()
    assert kinds(frames) == ["text", "tool_call", "tool_result", "text", "done"]
    call = frames[1]["event"]["tool_call"]
    assert call == {"call_id": "call-1", "tool": "echo", "args": {"text": "hi"}, "raw_args": None}
    assert frames[2]["event"]["tool_result"]["status"] == "ok"
    assert frames[-1]["done"] == {
        "finish": "stop",
        "rounds": 2,
        "usage": {"prompt_tokens": 30, "completion_tokens": 8},
    }
    report = verify_audit(stack)
    assert report["unfinished_calls"] == []
    calls = stack.brokerd_home.events("call")
    assert [c["tool"] for c in calls] == ["echo"]
    assert calls[0]["session"] == "c1"
    lines = (stack.loop_home / "conversations" / "c1.jsonl").read_text().splitlines()
    roles = [json.loads(line)["role"] for line in lines]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_approval_typed_into_an_interactive_chat(stack_factory: Any) -> None:
    stack = stack_factory(
        [
            tool_round("call-a", "echo", {"text": "ask me"}),
            text_round("Approved and done."),
            tool_round("call-r", "echo", {"text": "refuse me"}),
            text_round("Refused, fine."),
        ],
        grants={"ask.toml": ASK_ECHO},
    )
    chat = Pty([str(BXCTL), "--config", str(stack.bxctl_config), "chat", "--conversation", "c2"])
    try:
        chat.expect(b"you> ")
        chat.type("please echo\n")
        screen = chat.expect(b"or Enter to leave it pending: ")
        block = screen.decode().split("approval ")[-1]
        approval_id = block.split(" ", 1)[0]
        assert approval_id.isdigit()
        assert "  tool     echo" in screen.decode()
        assert "text  ask me" in screen.decode()
        chat.type("12\n")  # a wrong id is not an approval (and was read as the answer)
        chat.expect(b"it stays pending")
        result = stack.bxctl("approve", approval_id)
        assert result.returncode == 0, result.stderr
        chat.expect(b"Approved and done.")
        chat.expect(b"you> ")
        chat.type("again please\n")
        chat.expect(b"or Enter to leave it pending: ")
        chat.type("r\n")
        chat.expect(b"denied (refused)")
        chat.expect(b"Refused, fine.")
        chat.expect(b"you> ")
    finally:
        code = chat.close()
    assert code == 0
    verdicts = [a["verdict"] for a in stack.brokerd_home.events("approval")]
    assert verdicts == ["approved", "refused"]
    verify_audit(stack)


def test_typing_the_id_approves(stack_factory: Any) -> None:
    stack = stack_factory(
        [tool_round("call-a", "echo", {"text": "x"}), text_round("Yes.")],
        grants={"ask.toml": ASK_ECHO},
    )
    chat = Pty([str(BXCTL), "--config", str(stack.bxctl_config), "chat"])
    try:
        chat.expect(b"you> ")
        chat.type("go\n")
        screen = chat.expect(b"or Enter to leave it pending: ").decode()
        approval_id = screen.split("type ")[-1].split(" ", 1)[0]
        chat.type(approval_id + "\n")
        chat.expect(f"approved {approval_id}".encode())
        chat.expect(b"Yes.")
        chat.expect(b"you> ")
    finally:
        assert chat.close() == 0
    [approval] = stack.brokerd_home.events("approval")
    assert approval["verdict"] == "approved"


def test_expiring_approval(stack_factory: Any) -> None:
    stack = stack_factory(
        [tool_round("call-e", "echo", {"text": "late"}), text_round("It expired.")],
        ttl_ms=1000,
        grants={"ask.toml": ASK_ECHO},
    )
    code, frames = stack.say_json("echo late")
    assert code == 0
    assert kinds(frames) == ["text", "tool_call", "approval_pending", "tool_denied", "text", "done"]
    assert frames[3]["event"]["tool_denied"]["code"] == "expired"
    [approval] = stack.brokerd_home.events("approval")
    assert approval["verdict"] == "expired"
    verify_audit(stack)


def test_denied_by_policy_and_bad_arguments(stack_factory: Any) -> None:
    stack = stack_factory(
        [
            tool_round("call-d", "read_file", {"path": "/etc/shadow"}),
            {
                "steps": [
                    {"role": "assistant"},
                    {
                        "tool_call": {
                            "index": 0,
                            "id": "call-b",
                            "name": "echo",
                            "arguments": ["not json"],
                        }
                    },
                    {"finish": "tool_calls"},
                    {"usage": True},
                ]
            },
            text_round("I cannot."),
        ],
        grants={"echo.toml": ECHO_GRANT},
    )
    code, frames = stack.say_json("read the shadow file")
    assert code == 0
    denials = [f["event"]["tool_denied"] for f in frames if "tool_denied" in f.get("event", {})]
    assert [d["code"] for d in denials] == ["no_grant", "bad_args"]
    assert frames[-1]["done"]["rounds"] == 3
    calls = stack.brokerd_home.events("call")
    assert [c["tool"] for c in calls] == ["read_file"]  # bad_args never reached brokerd
    verify_audit(stack)


def test_busy_guard_and_recovery_after_a_failed_turn(stack_factory: Any) -> None:
    stack = stack_factory(
        [
            {
                "steps": [
                    {"role": "assistant"},
                    {"text": "thinking"},
                    {"sleep_s": 3},
                    {"text": " slowly"},
                    {"finish": "stop"},
                    {"usage": True},
                ]
            },
            {
                "status": 500,
                "body": {"error": {"code": 500, "message": "boom", "type": "server_error"}},
            },
            text_round("Back again."),
        ]
    )
    first = subprocess.Popen(
        [str(BXCTL), "--config", str(stack.bxctl_config), "chat", "--say", "slow one", "--json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    first_line = first.stdout.readline()  # the first text event: the turn is running
    assert "thinking" in first_line
    code, frames = stack.say_json("second")
    assert code == 1 and frames[-1]["error"]["code"] == "busy"
    assert first.wait(timeout=60) == 0
    first.stdout.close()
    code, frames = stack.say_json("this one fails")
    assert code == 1 and frames[-1]["error"]["code"] == "inference_unavailable"
    code, frames = stack.say_json("and this one works")
    assert code == 0 and frames[-1]["done"]["finish"] == "stop"


def test_hostile_model_output_never_reaches_the_terminal_raw(stack_factory: Any) -> None:
    hostile_tool = "echo\x1b]0;pwned\x07\u202e"
    hostile_text = "hi \x1b[2J\x1b[31mred\u202egnp.exe\u200b\ufeff\U000e0041"
    stack = stack_factory(
        [
            tool_round("c\x1b[1mx", hostile_tool, {"text": "A" * (1024 * 1024)}),
            text_round(hostile_text),
        ],
        grants={"echo.toml": ECHO_GRANT},
    )
    result = stack.bxctl("chat", "--conversation", "c3", "--say", "go")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for raw in ("\x1b", "\x07", "\u202e", "\u200b", "\ufeff", "\U000e0041"):
        assert raw not in out
    assert "\\u{001B}[2J" in out and "\\u{202E}" in out
    assert "denied (unknown_tool)" in out


def test_bxctl_killed_mid_turn_withdraws_the_pending_call(stack_factory: Any) -> None:
    stack = stack_factory([tool_round("call-k", "echo", {"text": "wait"}), text_round("x")],
                          grants={"ask.toml": ASK_ECHO})
    chat = subprocess.Popen(
        [str(BXCTL), "--config", str(stack.bxctl_config), "chat", "--say", "go", "--json"],
        stdout=subprocess.PIPE, text=True,
    )
    assert chat.stdout is not None
    for line in chat.stdout:
        if "approval_pending" in line:
            break
    chat.kill()
    chat.wait(timeout=30)
    chat.stdout.close()
    deadline = time.monotonic() + 30
    while not stack.brokerd_home.events("approval"):
        assert time.monotonic() < deadline, "brokerd never recorded the withdrawn call"
        time.sleep(0.05)  # a real process: polling its log is the only way to see it
    [approval] = stack.brokerd_home.events("approval")
    assert approval["verdict"] == "requester_gone"
    assert "bxctl went away; the turn was cancelled" in stack.loopd_log_text()
    # the guard was released: the next turn runs
    stack.set_grants(ECHO_GRANT)
    code, frames = stack.say_json("again")
    assert code == 0 and frames[-1]["done"]["finish"] == "stop"
    verify_audit(stack)


def test_hostile_arguments_never_break_the_approval_block(stack_factory: Any) -> None:
    hostile = "line1\nline2\x1b[2J\u202eevil\u200b" + "B" * (1024 * 1024)
    stack = stack_factory([tool_round("call-h", "echo", {"text": hostile}),
                           text_round("expired")],
                          ttl_ms=1500, grants={"ask.toml": ASK_ECHO})
    result = stack.bxctl("chat", "--conversation", "c4", "--say", "go")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for raw in ("\x1b", "\u202e", "\u200b"):
        assert raw not in out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("approval "))
    block = lines[start:start + 5]
    assert block[1] == "  tool     echo"
    assert block[2] == "  grant    echo-ask (ask)"
    assert block[3].startswith("  session  c4 · label public · trusted")
    # the whole argument, newlines shown as \n, never truncated: wrapped by bxctl at the
    # terminal's width (80 here), every continuation row behind the gutter (issue 11)
    end = next(i for i, line in enumerate(lines) if "approve it with: bxctl approve" in line)
    assert block[4].startswith("  args     text  line1\\nline2\\u{001B}[2J\\u{202E}evil\\u{200B}B")
    continued = lines[start + 5:end]
    assert continued and all(line.startswith(" " * 11 + "\u2502 ") for line in continued)
    assert all(len(line) <= 80 for line in lines[start:end])
    whole = block[4] + "".join(line[13:] for line in continued)
    assert whole.endswith("B" * 1000) and len(whole) > 1024 * 1024
