"""The tools part of `boxmaker up`: podman, runc, the tools image (08-runner, issue 13) and
the default commands image (run_command, issue 25).

`up` runs the same idempotent scripts as CI (`scripts/get-podman`,
`scripts/build-tools-image`): it installs podman, runc and mmdebstrap from
Debian when one is missing (asking first when stdin is a terminal), builds the
tools image for this source tree when it does not exist, and answers the
image's digest, or None with the exact command the owner can run instead.

After a rebuild, older tools images are removed: only images labelled
`boxmaker.tools=1` (the label scripts/build-tools-image puts on at import), not
the current one, not one that `keep` names (the image an owner-edited
brokerd.toml still uses), and not one that any container uses.  `podman rmi`
without `--force` refuses an image in use in any case.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

TOOLS_LABEL = "boxmaker.tools=1"
NEEDED_COMMANDS = ("podman", "runc", "mmdebstrap")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_ID = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


@attrs.frozen(kw_only=True)
class ToolsSetup:
    image: str | None
    """sha256:<id> of the tools image, or None: tools cannot run."""
    advice: str | None = None
    """When image is None: why, and exactly what to run."""
    rebuilt: bool = False
    commands_image: str | None = None
    """sha256:<id> of the default commands image (run_command), or None: not built."""
    mcp_image: str | None = None
    """sha256:<id> of the reference MCP servers' image (the starter `time` source), or None."""


def scripts_dir() -> Path | None:
    """scripts/ of the source tree this package runs from, if any."""
    candidate = Path(__file__).resolve().parents[2] / "scripts"
    return candidate if (candidate / "build-tools-image").is_file() else None


def missing_commands(which: Callable[[str], str | None] = shutil.which) -> list[str]:
    return [name for name in NEEDED_COMMANDS if which(name) is None]


def _elapsed(started: float) -> str:
    return f"{time.monotonic() - started:.0f} s"


def set_up_tools(*, confirm: Callable[[str], bool], say: Callable[[str], None],
                 scripts: Path | None = None, mcp: bool = False) -> ToolsSetup:
    """Install what is missing, build the images if needed; their digests or advice.

    With a tools image, the default commands image (`scripts/build-commands-image`:
    coreutils, grep, sed, git, make, python3) is built too; a failure there costs
    run_command only (`commands_image` None, said why)."""
    scripts = scripts or scripts_dir()
    setup = _set_up_tools_image(confirm=confirm, say=say, scripts=scripts)
    if setup.image is None or scripts is None:
        return setup
    setup = attrs.evolve(setup, commands_image=_commands_image(scripts, say))
    if mcp:
        setup = attrs.evolve(setup, mcp_image=_mcp_image(scripts, say))
    return setup


def _mcp_image(scripts: Path, say: Callable[[str], None]) -> str | None:
    """The reference MCP servers' image (`scripts/build-mcp-image`: mcp-server-time and
    the others from PyPI on the tools image), built when missing; None when it cannot be
    (the starter `time` source is then left out)."""
    return _built_image(
        scripts / "build-mcp-image", "MCP image",
        "the starter time server is left out; run scripts/build-mcp-image, then "
        "./scripts/up again (or ./scripts/up --no-mcp)",
        building="the MCP image for the starter time server (mcp-server-time from PyPI on "
        "the tools image: a minute or so the first time)", say=say)


def _commands_image(scripts: Path, say: Callable[[str], None]) -> str | None:
    """The default commands image's digest, built when missing; None when it cannot be."""
    return _built_image(
        scripts / "build-commands-image", "commands image",
        "run_command stays unconfigured; run scripts/build-commands-image, then "
        "./scripts/up again",
        building="the default commands image for run_command (coreutils grep sed git make "
        "python3, by mmdebstrap: a few minutes the first time)", say=say)


def _built_image(script: Path, what: str, failure_text: str, *, building: str,
                 say: Callable[[str], None]) -> str | None:
    """The digest of the image `script` builds (`script --check` first), built when
    missing; None when there is no script or the build fails (said, with `failure_text`:
    what is left out and what to run).  `what` names the image in what is said
    ("MCP image"); `building` says what is being built and how long it takes."""
    if not script.is_file():
        return None
    check = subprocess.run([str(script), "--check"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, check=False)
    image = check.stdout.strip()
    if check.returncode == 0 and _DIGEST.fullmatch(image):
        return image
    started = time.monotonic()
    say(f"building {building}")
    built = subprocess.run([str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           text=True, check=False)
    lines = (built.stdout or "").split()
    image = lines[-1] if lines else ""
    if built.returncode != 0 or not _DIGEST.fullmatch(image):
        say(f"building the {what} failed (exit {built.returncode}, see above): {failure_text}")
        return None
    say(f"{what} {image} built in {_elapsed(started)}")
    return image


def _set_up_tools_image(*, confirm: Callable[[str], bool], say: Callable[[str], None],
                        scripts: Path | None) -> ToolsSetup:
    """podman and the tools image: its digest or advice."""
    if scripts is None:
        return ToolsSetup(image=find_tools_image(), advice=(
            "this installation has no scripts/build-tools-image: build the tools image from "
            "a boxmaker source tree"))
    missing = missing_commands()
    if missing:
        question = (f"Tools run in podman containers; {', '.join(missing)} "
                    f"{'is' if len(missing) == 1 else 'are'} missing. Install "
                    "podman, runc and mmdebstrap from Debian with apt-get now (needs root; "
                    "about a minute)?")
        if not confirm(question):
            return ToolsSetup(image=None, advice=(
                "tools were not set up: run `sudo scripts/get-podman`, then ./scripts/up "
                "again (or ./scripts/up --no-tools to go without)"))
        started = time.monotonic()
        say(f"installing {', '.join(missing)} with apt-get (about a minute)")
        done = subprocess.run([str(scripts / "get-podman")], stdin=subprocess.DEVNULL,
                              stdout=sys.stderr, check=False)
        if done.returncode != 0 or missing_commands():
            return ToolsSetup(image=None, advice=(
                f"installing podman failed (exit {done.returncode}, see above): run "
                "`sudo scripts/get-podman` (it needs root and Debian's package mirror), then "
                "./scripts/up again"))
        say(f"installed podman, runc and mmdebstrap in {_elapsed(started)}")
    build = scripts / "build-tools-image"
    check = subprocess.run([str(build), "--check"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, check=False)
    image = check.stdout.strip()
    if check.returncode == 0 and _DIGEST.fullmatch(image):
        return ToolsSetup(image=image)
    started = time.monotonic()
    say("building the tools image for this source tree (Debian bookworm with python3, "
        "by mmdebstrap: about 3 minutes the first time, mostly downloading Debian packages; "
        "well under a minute after that)")
    built = subprocess.run([str(build)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           text=True, check=False)
    lines = (built.stdout or "").split()
    image = lines[-1] if lines else ""
    if built.returncode != 0 or not _DIGEST.fullmatch(image):
        return ToolsSetup(image=None, advice=(
            f"building the tools image failed (exit {built.returncode}, see above; it needs "
            "Debian's package mirror): run scripts/build-tools-image, then ./scripts/up again"))
    say(f"tools image {image} built in {_elapsed(started)}")
    return ToolsSetup(image=image, rebuilt=True)


def _podman(podman: Sequence[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*podman, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, check=False)


def _ids(text: str) -> set[str]:
    ids = set()
    for line in text.split():
        match = _ID.fullmatch(line.strip())
        if match:
            ids.add(match.group(1))
    return ids


def find_tools_image(podman: Sequence[str] = ("podman",)) -> str | None:
    """The newest tools image that scripts/build-tools-image made, as sha256:ID."""
    try:
        done = _podman(podman, "images", "--noheading", "--no-trunc", "--format", "{{.ID}}",
                       "--filter", "reference=localhost/boxmaker-tools")
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or not lines:
        return None
    match = _ID.fullmatch(lines[0])
    return f"sha256:{match.group(1)}" if match else None


def prune_tools_images(current: str, *, keep: Sequence[str] = (),
                       podman: Sequence[str] = ("podman",)) -> list[str]:
    """Remove labelled tools images other than `current` and `keep` that no container uses.

    Returns the ids removed.  Lists that cannot be read mean nothing is removed.
    """
    try:
        labelled = _podman(podman, "images", "--noheading", "--no-trunc", "--format", "{{.ID}}",
                           "--filter", f"label={TOOLS_LABEL}")
        used = _podman(podman, "ps", "--all", "--noheading", "--no-trunc", "--format",
                       "{{.ImageID}}")
    except (OSError, subprocess.TimeoutExpired):
        return []
    if labelled.returncode != 0 or used.returncode != 0:
        return []
    spared = _ids(used.stdout) | _ids(" ".join([current, *keep]))
    removed = []
    for image_id in sorted(_ids(labelled.stdout) - spared):
        # Checked again one by one: the label filter is the list's, the label here is
        # the image's own.
        try:
            label = _podman(podman, "image", "inspect", "--format",
                            '{{index .Labels "boxmaker.tools"}}', image_id)
            if label.returncode != 0 or label.stdout.strip() != "1":
                continue
            if _podman(podman, "rmi", image_id).returncode == 0:
                removed.append(f"sha256:{image_id}")
        except (OSError, subprocess.TimeoutExpired):
            continue
    return removed
