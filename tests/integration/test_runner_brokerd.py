"""The real brokerd binary with `[runner] kind = "podman"` (marker `podman`).

A call allowed by a grant runs in a real container and comes back as a
`result`; a symbolic link escaping the grant is refused before anything runs;
with the image missing brokerd still serves and answers runner_unavailable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.brokerd.runner._podman_argv import instance_id
from tests.fakes.brokerd import Home, call_request, request, start
from tests.fakes.podman import tools_image

pytestmark = pytest.mark.podman


def read_grant(directory: Path) -> str:
    return f"""
[[grant]]
id = "notes-read"
tool = "read_file"
mode = "allow"
paths = ["{directory}"]
"""


def podman_home(image: str, notes: Path, launcher: str | None = "podman") -> Home:
    home = Home(runner="podman", grants={"notes.toml": read_grant(notes)}, fsync=False,
                launcher=launcher)
    text = home.config.read_text().replace(
        'kind = "podman"\n',
        f'kind = "podman"\npodman = "podman"\nimage = "{image}"\noci_runtime = "runc"\n',
    )
    home.config.write_text(text)
    return home


@pytest.fixture
def notes() -> Iterator[Path]:
    root = Path(
        subprocess.check_output(["mktemp", "-d", "/tmp/bx-notes-XXXXXX"], text=True).strip()
    )
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("buy milk\n")
    (root / "secret.txt").write_text("not for the model")
    yield root / "notes"
    shutil.rmtree(root)


def test_the_default_launcher_is_the_oci_one(notes: Path) -> None:
    """`[runner] launcher` unset (issue 23): brokerd's trial on the direct path passes
    and a call runs under runc in the instance's own state, not through podman."""
    home = podman_home(tools_image(), notes, None)
    assert "launcher" not in home.config.read_text()
    proc = start(home, timeout=60)
    oci_root = home.home / "run" / f"oci-{instance_id(home.home)}"
    try:
        frames = request(
            home.broker, call_request("s1", "read_file", {"path": str(notes / "todo.txt")}), 60
        )
        assert frames[0]["result"]["output"]["content"] == "buy milk\n", frames
        assert os.path.ismount(oci_root), proc.log()
        assert "go through podman" not in proc.log()
    finally:
        assert proc.stop() == 0, proc.log()
        home.cleanup()
    assert not oci_root.exists(), "the oci launcher's state goes at stop"


@pytest.mark.parametrize("launcher", ["podman", pytest.param("oci", marks=pytest.mark.oci_wall)])
def test_an_allowed_call_runs_in_a_container(notes: Path, launcher: str) -> None:
    home = podman_home(tools_image(), notes, launcher)
    proc = start(home, timeout=60)
    try:
        frames = request(
            home.broker, call_request("s1", "read_file", {"path": str(notes / "todo.txt")}), 60
        )
        assert len(frames) == 1, frames
        assert "result" in frames[0], frames
        result = frames[0]["result"]
        assert result["status"] == "ok", frames
        assert result["output"]["content"] == "buy milk\n"

        (notes / "escape").symlink_to(notes.parent)
        escaped = request(
            home.broker,
            call_request("s1", "read_file", {"path": str(notes / "escape" / "secret.txt")}, 2),
            60,
        )
        assert escaped == [
            {
                "id": 2,
                "denied": {
                    "code": "unsafe_target",
                    "reason": "symbolic link in path",
                    "grant": "notes-read",
                    "runbook": None,
                },
            }
        ]
    finally:
        assert proc.stop() == 0, proc.log()
        home.cleanup()


@pytest.mark.parametrize("launcher", ["podman", pytest.param("oci", marks=pytest.mark.oci_wall)])
def test_a_missing_image_still_serves_and_answers_runner_unavailable(
    notes: Path, launcher: str
) -> None:
    shutil.which("podman") or pytest.skip("podman is not installed (scripts/get-podman)")
    home = podman_home("sha256:" + "0" * 64, notes, launcher)
    proc = start(home, timeout=60)
    try:
        frames = request(
            home.broker, call_request("s1", "read_file", {"path": str(notes / "todo.txt")}), 60
        )
        assert "runner_unavailable" in str(frames), frames
        assert "docs/runbook.md#runner-unavailable" in proc.log()
    finally:
        assert proc.stop() == 0, proc.log()
        home.cleanup()
