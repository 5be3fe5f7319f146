"""The line scripts/test ends with when real-peer tests were skipped (issue 27)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SETUP_COMMAND, peer_of, skip_line


def test_the_line_counts_each_peer_and_names_the_one_command() -> None:
    line = skip_line(["podman is not installed (scripts/get-podman)",
                      "the local model is not built: run scripts/get-llama-server",
                      "podman is not installed (scripts/get-podman)",
                      "needs root and setpriv(1)"])
    assert line == ("skipped: 3 real-peer tests (llama-server 1, podman 2); "
                    f"{SETUP_COMMAND} sets them up, then run ./scripts/test again")


def test_no_line_when_only_other_skips() -> None:
    assert skip_line(["needs root and setpriv(1)", "no C.UTF-8 locale"]) is None
    assert peer_of("bind mounts need root") is None
    assert peer_of("Chromium or chromedriver is missing") == "Chromium"


def test_a_real_pytest_run_writes_the_line(tmp_path: Path) -> None:
    module = tmp_path / "test_peer.py"
    module.write_text("import pytest\n\n"
                      "def test_a():\n    pytest.skip('podman is not installed')\n\n"
                      "def test_b():\n    pytest.skip('needs root')\n", encoding="utf-8")
    out = tmp_path / "line"
    conftest = Path(__file__).resolve().parent / "conftest.py"
    (tmp_path / "conftest.py").write_text(conftest.read_text(encoding="utf-8"),
                                          encoding="utf-8")
    env = dict(os.environ, BOXMAKER_SKIP_LINE=str(out))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(module)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_text(encoding="utf-8") == (
        f"skipped: 1 real-peer test (podman 1); {SETUP_COMMAND} sets them up, "
        "then run ./scripts/test again\n")
