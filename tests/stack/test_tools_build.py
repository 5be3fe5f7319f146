"""Building the default commands image and the MCP image when missing (`boxmaker up`):
one build-if-missing step for both, run against real scripts in a temporary scripts/
(no podman: each script answers as scripts/build-*-image would)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from boxmaker.stack._tools import _commands_image, _mcp_image

DIGEST = "sha256:" + "ab" * 32
Builder = Callable[[Path, Callable[[str], None]], str | None]


def _script(scripts: Path, name: str, *, check: str, build: str) -> Path:
    """scripts/<name>: `--check` runs `check`, a build runs `build` (shell), and each
    run is noted in <name>.runs."""
    scripts.mkdir(exist_ok=True)
    path = scripts / name
    path.write_text(f"""#!/bin/sh
echo "$@" >> "$0.runs"
if [ "$1" = "--check" ]; then
{check}
fi
{build}
""")
    path.chmod(0o755)
    return path


def _runs(script: Path) -> list[str]:
    runs = Path(f"{script}.runs")
    return runs.read_text().splitlines() if runs.exists() else []


@pytest.mark.parametrize("build", [_mcp_image, _commands_image])
def test_an_image_that_is_there_is_not_built(tmp_path: Path, build: Builder) -> None:
    name = "build-mcp-image" if build is _mcp_image else "build-commands-image"
    script = _script(tmp_path, name, check=f"echo {DIGEST}; exit 0", build="exit 1")
    said: list[str] = []
    assert build(tmp_path, said.append) == DIGEST
    assert said == [] and _runs(script) == ["--check"]


def test_a_missing_mcp_image_is_built_and_said(tmp_path: Path) -> None:
    script = _script(tmp_path, "build-mcp-image", check="exit 1",
                     build=f"echo step one; echo {DIGEST}; exit 0")
    said: list[str] = []
    assert _mcp_image(tmp_path, said.append) == DIGEST
    assert _runs(script) == ["--check", ""]
    assert said[0] == ("building the MCP image for the starter time server (mcp-server-time "
                       "from PyPI on the tools image: a minute or so the first time)")
    assert said[1].startswith(f"MCP image {DIGEST} built in ") and said[1].endswith(" s")
    assert len(said) == 2


def test_a_missing_commands_image_is_built_and_said(tmp_path: Path) -> None:
    _script(tmp_path, "build-commands-image", check=f"echo {DIGEST}; exit 3",
            build=f"echo {DIGEST}")
    said: list[str] = []
    assert _commands_image(tmp_path, said.append) == DIGEST
    assert said[0] == ("building the default commands image for run_command (coreutils grep "
                       "sed git make python3, by mmdebstrap: a few minutes the first time)")
    assert said[1].startswith(f"commands image {DIGEST} built in ")


def test_a_failed_build_says_what_is_left_out(tmp_path: Path) -> None:
    _script(tmp_path, "build-mcp-image", check="exit 1", build="exit 7")
    _script(tmp_path, "build-commands-image", check="exit 1", build="echo not-a-digest")
    said: list[str] = []
    assert _mcp_image(tmp_path, said.append) is None
    assert _commands_image(tmp_path, said.append) is None
    assert said[1] == ("building the MCP image failed (exit 7, see above): the starter time "
                       "server is left out; run scripts/build-mcp-image, then ./scripts/up "
                       "again (or ./scripts/up --no-mcp)")
    assert said[3] == ("building the commands image failed (exit 0, see above): run_command "
                       "stays unconfigured; run scripts/build-commands-image, then "
                       "./scripts/up again")
    assert len(said) == 4


def test_without_the_script_there_is_no_image(tmp_path: Path) -> None:
    said: list[str] = []
    assert _mcp_image(tmp_path, said.append) is None
    assert _commands_image(tmp_path, said.append) is None
    assert said == []
