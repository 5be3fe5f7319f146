"""The starter home `boxmaker up` writes on first run (09-operations).

Four config files, `core.md`, a `grants/` directory with commented examples (a
run_command one among them), and a demo notes directory outside the home (the
home is protected: no grant can reach into it).  Existing files are never
overwritten.  With the tools and commands images, brokerd.toml gets
`[commands]` and loopd offers run_command; with the MCP image, the starter
time server (`_starter_mcp`) and `mcp.time.*` in loopd's tools.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import attrs

from ..proto.tools import CATALOGUE
from . import _starter_mcp
from ._owned import mark_owned


@attrs.frozen(kw_only=True)
class StarterHome:
    home: Path
    demo_notes: Path
    created: list[Path]


def _toml_str(value: str | Path) -> str:
    # TOML basic strings share JSON's escapes for everything we write here.
    return json.dumps(str(value))


def _max_tokens_line(max_tokens: int | None) -> str:
    if max_tokens is None:
        return "# max_tokens = 1024                   # cap each answer (small models can ramble)"
    return f"max_tokens = {max_tokens}                    # cap each answer"


def _temperature_line(temperature: float | None) -> str:
    """The local model's sampling temperature (0: the same words make the same call)."""
    if temperature is None:
        return ""
    return f"\ntemperature = {temperature!r}                 # 0: always the likeliest token"


def _commands_table(tools_image: str | None, commands_image: str | None) -> str:
    """`[commands]` with the default commands image, when podman runs the tools."""
    if tools_image is None or commands_image is None:
        return ""
    return (
        "\n# run_command: one program in a fresh container of this image, no network,\n"
        "# only the granted directories (docs/runner.md).\n"
        "[commands]\n"
        f"image = {_toml_str(commands_image)}\n"
    )


def _runner_table(tools_image: str | None) -> str:
    """podman with the tools image when there is one; else the refusing runner."""
    if tools_image is None:
        return (
            "# No tools image: every allowed call is answered runner_unavailable.\n"
            "# ./scripts/up (without --no-tools) sets up podman and the tools image and\n"
            "# switches this to kind = \"podman\" while this file is unchanged.\n"
            "[runner]\n"
            'kind = "refusing"\n'
        )
    return (
        "[runner]\n"
        'kind = "podman"\n'
        f"image = {_toml_str(tools_image)}\n"
        'oci_runtime = "runc"                  # crun refuses hybrid cgroups on many hosts\n'
        "nofile = 1024\n"
        "nproc = 512\n"
    )


def brokerd_toml(home: Path, tools_image: str | None, commands_image: str | None = None) -> str:
    """The starter brokerd.toml; also what `up` rewrites it to while it is `up`'s own."""
    run = home / "run"
    return f"""# brokerd's configuration (docs: 05-brokerd).  Paths are under home.
# boxmaker up wrote this file and keeps its [runner] in step with the tools
# image while the file is unchanged (home/.up-owned.json holds its sha256);
# once you edit it, it is yours and up never touches it again.
home = {_toml_str(home)}

[sockets]
broker = {_toml_str(run / "broker.sock")}
admin = {_toml_str(run / "admin.sock")}

[approvals]
ttl_ms = 600000

{_runner_table(tools_image)}{_commands_table(tools_image, commands_image)}"""


def _write_new(path: Path, text: str, created: list[Path], mode: int = 0o600) -> bool:
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    created.append(path)
    return True


_GIT_IDENTITY = ("-c", "user.name=boxmaker up", "-c", "user.email=boxmaker-up@localhost",
                 "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main")


def _init_demo_repository(demo: Path, created: list[Path]) -> None:
    """Make the new demo directory a git repository with one commit, so that the starter
    `demo-git-read` grant's `git status` has something to show (it exits 128 outside a
    repository).  Only for a demo directory this call made, never in one the owner
    already had; without git on PATH, or if git fails, the directory stays a plain one."""
    git = shutil.which("git")
    if git is None or (demo / ".git").exists():
        return
    steps = (("init", "-q"), ("add", "--", "notes"),
             ("commit", "-q", "-m", "boxmaker up: the demo notes"))
    for step in steps:
        try:
            done = subprocess.run([git, *_GIT_IDENTITY, *step], cwd=demo, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return
        if done.returncode != 0:
            return
    created.append(demo / ".git")


def write_starter_home(
    home: Path,
    *,
    upstream: str,
    demo_notes: Path | None = None,
    tools_image: str | None = None,
    commands_image: str | None = None,
    max_tokens: int | None = None,
    slots: int = 4,
    n_ctx_per_slot: int = 262144,
    temperature: float | None = None,
    owner_home: Path | None = None,
    mcp_image: str | None = None,
) -> StarterHome:
    """Create what is missing of a starter home; return what was created."""
    created: list[Path] = []
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if owner_home is None:
        owner_home = Path.home()
    if demo_notes is None:
        demo_notes = owner_home / "boxmaker-demo" / "notes"
    run = home / "run"
    offer = list(CATALOGUE.default_offer)
    if tools_image is not None and commands_image is not None:
        offer += [name for name in CATALOGUE.command_tools if name not in offer]
    if mcp_image is not None:
        offer.append(_starter_mcp.LOOP_ENTRY)
        source = _starter_mcp.SOURCE_NAME
        if _write_new(home / source, _starter_mcp.source_toml(mcp_image), created):
            mark_owned(home, source, (home / source).read_bytes())
        _write_new(home / _starter_mcp.GRANTS_NAME, _starter_mcp.grants_toml(), created)
    demo = demo_notes.parent
    demo_is_new = not demo.exists()
    if _write_new(home / "brokerd.toml", brokerd_toml(home, tools_image, commands_image),
                  created):
        mark_owned(home, "brokerd.toml", (home / "brokerd.toml").read_bytes())
    _write_new(
        home / "inferproxy.toml",
        f"""# inferproxy: the only way from loopd to the inference server.
home = {_toml_str(home)}
socket = {_toml_str(run / "infer.sock")}
upstream = {_toml_str(upstream)}
""",
        created,
    )
    _write_new(
        home / "loopd.toml",
        f"""# loopd: the agent loop.
home = {_toml_str(home)}
socket = {_toml_str(run / "loop.sock")}

[inference]
socket = {_toml_str(run / "infer.sock")}
slots = {slots}
n_ctx_per_slot = {n_ctx_per_slot}
{_max_tokens_line(max_tokens)}{_temperature_line(temperature)}

[broker]
socket = {_toml_str(run / "broker.sock")}

[loop]
max_rounds = 8
tools = [{", ".join(_toml_str(name) for name in offer)}]
""",
        created,
    )
    _write_new(
        home / "bxctl.toml",
        f"""# bxctl: the owner's command line.
home = {_toml_str(home)}
admin_socket = {_toml_str(run / "admin.sock")}
loop_socket = {_toml_str(run / "loop.sock")}
""",
        created,
    )
    _write_new(
        home / "core.md",
        f"""You are a careful assistant running on the owner's own machine.
You can use tools to read the owner's notes and fetch documentation pages.
Every tool call is checked against the owner's rules; some need the owner's
approval. If a call is refused, say so and do not try the same call again.
The owner's home directory, ~, is {owner_home}.
The owner's notes are in the directory {demo_notes} (tools take absolute paths).
When a tool result comes back, answer the owner's question from it in plain words.
""",
        created,
    )
    ssh = Path.home() / ".ssh"
    _write_new(
        home / "grants" / "examples.toml",
        f"""# Starter grants.  Test a call with:
#   bxctl grants explain --tool read_file --args '{{"path": "{demo_notes}/hello.md"}}'
# The guide is docs/grants.md.

# Read the demo notes freely (what they return is labelled private).
[[grant]]
id = "demo-notes-read"
tool = "read_file"
mode = "allow"
paths = [{_toml_str(demo_notes)}]
label = "private"
max_label = "private"
note = "the demo notes boxmaker up created"

[[grant]]
id = "demo-notes-list"
tool = "list_dir"
mode = "allow"
paths = [{_toml_str(demo_notes)}]
label = "private"
max_label = "private"

# Fetch Python's documentation, but ask the owner first.
[[grant]]
id = "python-docs"
tool = "http_fetch"
mode = "ask"
hosts = ["docs.python.org"]
max_label = "private"

# Never anything under ~/.ssh, whatever other grants say.
[[grant]]
id = "no-ssh"
tool = "read_file"
mode = "deny"
paths = [{_toml_str(ssh)}]

[[grant]]
id = "no-ssh-list"
tool = "list_dir"
mode = "deny"
paths = [{_toml_str(ssh)}]

# Run git status, git log and git diff in the demo directory (needs [commands] in
# brokerd.toml; anything else run_command is asked for is denied no_grant).  git
# runs what a repository's own config names (core.pager, core.fsmonitor): the
# read-only mount (write = false) and no network bound it (docs/runner.md).
[[grant]]
id = "demo-git-read"
tool = "run_command"
mode = "allow"
paths = [{_toml_str(demo)}]
write = false
commands = [["git", ["status", "log", "diff"]]]
rest = "any"
match = [["git", "status"], ["git", "log", "-n", "5"]]
not_match = [["git", "push"], ["git", "-c", "core.pager=sh", "log"]]
""",
        created,
    )
    if _write_new(
        demo_notes / "hello.md",
        "# Demo notes\n\nboxmaker up made this directory so the agent has something to read.\n"
        "Ask it: what is in my notes?\n",
        created,
        mode=0o644,
    ) and demo_is_new:
        _init_demo_repository(demo, created)
    (home / "logs").mkdir(exist_ok=True, mode=0o700)
    return StarterHome(home=home, demo_notes=demo_notes, created=created)
