"""Finding the tools image and the commands image for the real-container tests."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO


def tools_image() -> str:
    """The tools image for the current sources, or skip (fail under BOXMAKER_CI=1)."""
    why = None
    if shutil.which("podman") is None:
        why = "podman is not installed (scripts/get-podman)"
    else:
        done = subprocess.run(
            [str(REPO / "scripts" / "build-tools-image"), "--check"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode == 0:
            return done.stdout.strip()
        why = "no tools image for the current toolkit sources (scripts/build-tools-image)"
    if os.environ.get("BOXMAKER_CI") == "1":
        pytest.fail(why)
    pytest.skip(why)


def commands_image() -> str:
    """The default commands image (scripts/build-commands-image), or skip (fail under
    BOXMAKER_CI=1)."""
    done = subprocess.run([str(REPO / "scripts" / "build-commands-image"), "--check"],
                          capture_output=True, text=True, check=False, timeout=120)
    if done.returncode == 0:
        return done.stdout.strip()
    why = "no default commands image (scripts/build-commands-image)"
    if os.environ.get("BOXMAKER_CI") == "1":
        pytest.fail(why)
    pytest.skip(why)
