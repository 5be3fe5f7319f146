"""`up` rewrites only the brokerd.toml it wrote itself (home/.up-owned.json).

Real files in a temporary home; the tools set-up runs stand-in scripts in a
scripts directory of the test's (a `build-tools-image` that prints a digest,
as the real one does), so that the image can "appear" and "be rebuilt".
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from boxmaker.stack._cli import AptConsent, _reconcile, _tools
from boxmaker.stack._home import brokerd_toml, write_starter_home
from boxmaker.stack._owned import (
    OWNED_FILE,
    is_owned,
    mark_owned,
    parse_owned,
    render_owned,
    rewrite_owned,
)

IMAGE_A = "sha256:" + "a" * 64
IMAGE_B = "sha256:" + "b" * 64


def _scripts(tmp_path: Path, image: str | None) -> Path:
    scripts = tmp_path / "scripts"
    scripts.mkdir(exist_ok=True)
    body = f'echo "{image}"' if image else "echo 'no image for these sources' >&2; exit 1"
    for name in ("build-tools-image", "get-podman"):
        path = scripts / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return scripts


def _runner(home: Path) -> dict[str, object]:
    runner = tomllib.loads((home / "brokerd.toml").read_text())["runner"]
    assert isinstance(runner, dict)
    return runner


def test_the_record_is_strict() -> None:
    good = render_owned({"brokerd.toml": "c" * 64})
    assert parse_owned(good) == {"brokerd.toml": "c" * 64}
    for bad in (
        b"", b"[]", b"\xff",
        json.dumps({"version": 2, "files": {}}).encode(),
        json.dumps({"version": 1, "files": {}, "extra": 1}).encode(),
        json.dumps({"version": 1, "files": {"brokerd.toml": "C" * 64}}).encode(),
        json.dumps({"version": 1, "files": {"loopd.toml": "c" * 64}}).encode(),
        json.dumps({"version": 1, "files": {"brokerd.toml": "c" * 63}}).encode(),
        b" " * 5000 + good,
    ):
        assert parse_owned(bad) == {}, bad


def test_an_edited_file_is_never_rewritten(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "brokerd.toml").write_text("# mine\n")
    mark_owned(home, "brokerd.toml", b"# mine\n")
    assert is_owned(home, "brokerd.toml")
    (home / "brokerd.toml").write_text("# mine, edited\n")
    assert not is_owned(home, "brokerd.toml")
    assert not rewrite_owned(home, "brokerd.toml", b"# up's\n")
    assert (home / "brokerd.toml").read_text() == "# mine, edited\n"


def test_without_a_record_nothing_is_owned(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "brokerd.toml").write_text(brokerd_toml(home, None))
    assert not is_owned(home, "brokerd.toml")  # a home from before .up-owned.json
    (home / OWNED_FILE).write_text("not json")
    assert not rewrite_owned(home, "brokerd.toml", brokerd_toml(home, IMAGE_A).encode())


def test_the_runner_follows_the_tools_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    home = tmp_path / "home"
    # first run: no image can be had -> the refusing runner, and up says what to run
    tools = _tools(home, no_tools=False, scripts=_scripts(tmp_path, None))
    assert tools is not None and tools.image is None
    starter = write_starter_home(home, upstream="http://127.0.0.1:1",
                                 demo_notes=tmp_path / "notes", tools_image=tools.image)
    _reconcile(home, tools, created=True)
    assert _runner(home) == {"kind": "refusing"}
    assert is_owned(home, "brokerd.toml")
    assert "run scripts/build-tools-image" in capsys.readouterr().err
    assert home / "brokerd.toml" in starter.created

    # the image appears: the next run switches the runner to podman with it
    tools = _tools(home, no_tools=False, scripts=_scripts(tmp_path, IMAGE_A))
    assert tools is not None and tools.image == IMAGE_A
    _reconcile(home, tools, created=False)
    assert _runner(home)["kind"] == "podman" and _runner(home)["image"] == IMAGE_A
    assert "the runner is now podman with image " + IMAGE_A in capsys.readouterr().err

    # rebuilt with a new digest: followed again
    tools = _tools(home, no_tools=False, scripts=_scripts(tmp_path, IMAGE_B))
    assert tools is not None
    _reconcile(home, tools, created=False)
    assert _runner(home)["image"] == IMAGE_B

    # --no-tools: the refusing runner
    tools = _tools(home, no_tools=True, scripts=_scripts(tmp_path, IMAGE_B))
    assert tools is not None and tools.image is None
    _reconcile(home, tools, created=False)
    assert _runner(home) == {"kind": "refusing"}

    # the owner edits the file: from now on it is theirs, whatever the image does
    edited = (home / "brokerd.toml").read_text() + "# my own note\n"
    (home / "brokerd.toml").write_text(edited)
    assert _tools(home, no_tools=False, scripts=_scripts(tmp_path, IMAGE_A)) is None
    assert "its [runner] is yours" in capsys.readouterr().err
    _reconcile(home, None, created=False)
    assert (home / "brokerd.toml").read_text() == edited


def test_debian_packages_are_asked_about_once(capsys: pytest.CaptureFixture[str]) -> None:
    consent = AptConsent(["cmake", "g++", "podman"])
    assert consent("the compiler") and consent("podman")  # no terminal here: go ahead
    said = capsys.readouterr().err
    assert said.count("Install them with apt-get now") == 1
    assert "cmake, g++, podman" in said and "No terminal to ask: going ahead" in said


def _commands_script(scripts: Path, image: str | None) -> None:
    body = f'echo "{image}"' if image else "echo 'mirror unreachable' >&2; exit 1"
    path = scripts / "build-commands-image"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_the_commands_image_joins_brokerd_toml(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    scripts = _scripts(tmp_path, IMAGE_A)
    _commands_script(scripts, None)  # cannot be built: run_command stays unconfigured
    tools = _tools(home, no_tools=False, scripts=scripts)
    assert tools is not None and tools.image == IMAGE_A and tools.commands_image is None
    assert "run_command stays unconfigured" in capsys.readouterr().err
    write_starter_home(home, upstream="http://127.0.0.1:1", demo_notes=tmp_path / "d" / "n",
                       tools_image=tools.image, commands_image=tools.commands_image)
    _reconcile(home, tools, created=True)
    assert "commands" not in tomllib.loads((home / "brokerd.toml").read_text())
    image_c = "sha256:" + "c" * 64
    _commands_script(scripts, image_c)  # built now: the next up adds [commands]
    tools = _tools(home, no_tools=False, scripts=scripts)
    assert tools is not None and tools.commands_image == image_c
    _reconcile(home, tools, created=False)
    assert tomllib.loads((home / "brokerd.toml").read_text())["commands"] == {"image": image_c}
    assert "run_command runs in containers from image " + image_c in capsys.readouterr().err
