"""The createRuntime hook's two forms (runtime-spec and podman's hooks.d), pure, and the
hook itself run as runc runs it: the state handed over, ``ok`` alone lets it go on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from boxmaker.brokerd.runner._hook import (
    CALL_ANNOTATION,
    HOOK_SCRIPT,
    HOOK_SHELL,
    hook_entry,
    hooks_dir_file,
)


def test_the_hooks_d_file_matches_the_one_call() -> None:
    got = hooks_dir_file("boxmaker-7515ea5e-cmd-42", "/s/state", "/s/verdict")
    assert got == {
        "version": "1.0.0",
        "hook": hook_entry("/s/state", "/s/verdict"),
        "when": {"annotations": {"^org[.]boxmaker[.]call$": "^boxmaker-7515ea5e-cmd-42$"}},
        "stages": ["createRuntime"],
    }
    assert CALL_ANNOTATION == "org.boxmaker.call"
    assert hook_entry("/a", "/b") == {"path": "/bin/sh", "env": [], "timeout": 30,
                                      "args": ["sh", "-c", HOOK_SCRIPT, "sh", "/a", "/b"]}
    for bad in ("", "a.b", "x$", "a b", "é"):
        with pytest.raises(ValueError):
            hooks_dir_file(bad, "/a", "/b")


def run_hook(tmp_path: Path, verdict: bytes) -> tuple[int, bytes]:
    """As runc runs it: the state on stdin, no environment; brokerd's FIFOs held open."""
    state, answer = tmp_path / "state", tmp_path / "verdict"
    os.mkfifo(state)
    os.mkfifo(answer)
    flags = os.O_RDWR | os.O_NONBLOCK
    state_fd, answer_fd = os.open(state, flags), os.open(answer, flags)
    try:
        os.write(answer_fd, verdict)
        done = subprocess.run([HOOK_SHELL, "-c", HOOK_SCRIPT, "sh", str(state), str(answer)],
                              input=b'{"ociVersion":"1.0.2","id":"x","pid":4242}', env={},
                              capture_output=True, timeout=30, check=False)
        return done.returncode, os.read(state_fd, 4096)
    finally:
        os.close(state_fd)
        os.close(answer_fd)


@pytest.mark.parametrize(("verdict", "passes"), [(b"ok\n", True), (b"no\n", False),
                                                 (b"okay\n", False), (b"\n", False)])
def test_the_hook_hands_over_the_state_and_goes_on_only_on_ok(
        tmp_path: Path, verdict: bytes, passes: bool) -> None:
    """(A brokerd gone never answers: runc kills the hook after its timeout.)"""
    code, line = run_hook(tmp_path, verdict)
    assert line == b'{"ociVersion":"1.0.2","id":"x","pid":4242}\n'
    assert (code == 0) is passes
