"""Finding the tools image, the commands image and the MCP test image for the
real-container tests.

Each `scripts/build-*-image --check` hashes the image's inputs and asks podman
(about half a second on a busy machine); the answer cannot change during a test
run, so it is asked once per process and kept (a missing image is kept too).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO


@functools.cache
def checked_image(script: str) -> tuple[str | None, str]:
    """`scripts/<script> --check`, once per process: (the image or None, why not)."""
    if shutil.which("podman") is None:
        return None, "podman is not installed (scripts/get-podman)"
    done = subprocess.run([str(REPO / "scripts" / script), "--check"], capture_output=True,
                          text=True, check=False, timeout=120, stdin=subprocess.DEVNULL)
    return (done.stdout.strip() if done.returncode == 0 else None), ""


def _image_or_skip(script: str, missing: str) -> str:
    image, why = checked_image(script)
    if image is not None:
        return image
    why = why or missing
    if os.environ.get("BOXMAKER_CI") == "1":
        pytest.fail(why)
    pytest.skip(why)


def tools_image() -> str:
    """The tools image for the current sources, or skip (fail under BOXMAKER_CI=1)."""
    return _image_or_skip("build-tools-image",
                          "no tools image for the current toolkit sources "
                          "(scripts/build-tools-image)")


def commands_image() -> str:
    """The default commands image (scripts/build-commands-image), or skip (fail under
    BOXMAKER_CI=1)."""
    return _image_or_skip("build-commands-image",
                          "no default commands image (scripts/build-commands-image)")


def mcp_image() -> str:
    """The MCP test image (scripts/build-mcp-image), or skip (fail under BOXMAKER_CI=1)."""
    return _image_or_skip("build-mcp-image", "no MCP test image (scripts/build-mcp-image)")
