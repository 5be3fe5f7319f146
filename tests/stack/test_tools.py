"""Pruning old tools images, on a private podman storage (marker `podman`).

Every image here is imported by the test into a storage of its own
(`--root`/`--runroot` in a temporary directory, vfs driver): the machine's
images, other engineers' among them, are never listed, let alone removed.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.stack._tools import TOOLS_LABEL, find_tools_image, prune_tools_images

pytestmark = pytest.mark.podman


@pytest.fixture
def podman(tmp_path: Path) -> Iterator[list[str]]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/get-podman)")
    # podman wants a runroot of at most 50 characters: a short directory of our own.
    run = Path(tempfile.mkdtemp(prefix="bx13run", dir="/tmp"))
    argv = ["podman", "--root", str(tmp_path / "root"), "--runroot", str(run),
            "--storage-driver", "vfs"]
    yield argv
    subprocess.run([*argv, "rm", "--all", "--force"], capture_output=True, check=False)
    subprocess.run([*argv, "rmi", "--all", "--force"], capture_output=True, check=False)
    shutil.rmtree(run, ignore_errors=True)


def _import(podman: list[str], tmp_path: Path, tag: str, *, labelled: bool) -> str:
    """A one-file image (different bytes for each tag, so a different id)."""
    source = tmp_path / f"src-{tag}"
    source.mkdir()
    (source / "marker").write_text(tag)
    tar = tmp_path / f"{tag}.tar"
    with tarfile.open(tar, "w") as archive:
        archive.add(source / "marker", arcname="marker")
    change = ["--change", f"LABEL {TOOLS_LABEL}"] if labelled else []
    done = subprocess.run([*podman, "import", "--quiet", *change, str(tar),
                           f"localhost/boxmaker-tools:{tag}"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    image = done.stdout.strip()
    return image if image.startswith("sha256:") else f"sha256:{image}"


def _ids(podman: list[str]) -> set[str]:
    done = subprocess.run([*podman, "images", "--noheading", "--no-trunc", "--format", "{{.ID}}"],
                          capture_output=True, text=True, check=True)
    return {line if line.startswith("sha256:") else f"sha256:{line}"
            for line in done.stdout.split()}


def test_prune_removes_only_unused_labelled_images(podman: list[str], tmp_path: Path) -> None:
    old = _import(podman, tmp_path, "old", labelled=True)
    in_use = _import(podman, tmp_path, "inuse", labelled=True)
    kept = _import(podman, tmp_path, "kept", labelled=True)
    foreign = _import(podman, tmp_path, "foreign", labelled=False)
    current = _import(podman, tmp_path, "current", labelled=True)
    subprocess.run([*podman, "create", "--name", "i13-user", in_use, "/marker"],
                   capture_output=True, check=True)

    removed = prune_tools_images(current, keep=[kept], podman=podman)

    assert removed == [old]
    assert _ids(podman) == {in_use, kept, foreign, current}
    # nothing more to remove the second time
    assert prune_tools_images(current, keep=[kept], podman=podman) == []


def test_prune_removes_nothing_when_podman_cannot_list(tmp_path: Path) -> None:
    assert prune_tools_images("sha256:" + "0" * 64, podman=[str(tmp_path / "no-podman")]) == []


def test_find_tools_image_names_a_tools_image(podman: list[str], tmp_path: Path) -> None:
    assert find_tools_image(podman) is None
    only = _import(podman, tmp_path, "only", labelled=True)
    assert find_tools_image(podman) == only
