"""The starter MCP source `boxmaker up` adds (issue 26 item 2): the reference
`mcp-server-time` in the MCP image (scripts/build-mcp-image), by image id.

Two files: `sources/time.toml` (the declaration) and `grants/time.toml`
(allow both time tools: their arguments are time zone names and times, no
path, url or host, so G13 asks for no constraint).  `up` records the
declaration's sha256 in home/.up-owned.json and keeps its image in step with
the MCP image while the file is unchanged; an edited file is the owner's.
The grants file is written once and never touched again.  The server is not
offered until the owner pins it (`bxctl mcp pin time`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import trio

SERVER = "time"
SOURCE_NAME = f"sources/{SERVER}.toml"
GRANTS_NAME = f"grants/{SERVER}.toml"
LOOP_ENTRY = f"mcp.{SERVER}.*"
TOOLS = ("get_current_time", "convert_time")
PIN_COMMAND = f"bxctl mcp pin {SERVER}"


def source_toml(image: str) -> str:
    """The starter declaration of the time server in `image`."""
    return f"""# The starter MCP server: mcp-server-time from PyPI (docs/tool-sources.md).
# boxmaker up wrote this file and keeps its image in step with
# scripts/build-mcp-image while the file is unchanged (home/.up-owned.json
# holds its sha256); once you edit it, it is yours.  Nothing is offered
# until you pin it: {PIN_COMMAND}
[[mcp_server]]
id = "{SERVER}"
image = {json.dumps(image)}
command = ["/usr/bin/python3", "-m", "mcp_server_time", "--local-timezone", "UTC"]
env = {{ PYTHONPATH = "/opt/mcp/time" }}
label = "public"                  # the time of day is nobody's secret
untrusted = false                 # a clock's answers cannot carry instructions of anyone's
"""


def grants_toml() -> str:
    """Allow the time server's two tools (no path, url or host arguments)."""
    blocks = [f"""[[grant]]
id = "{SERVER}-{name.replace('_', '-')}"
tool = "mcp.{SERVER}.{name}"
mode = "allow"
max_label = "private"             # still usable after the demo notes were read
note = "the starter time server boxmaker up added"
""" for name in TOOLS]
    return ("# Starter grants for the time server (sources/time.toml).  Its arguments are\n"
            "# time zone names and times: nothing to constrain (docs/tool-sources.md).\n\n"
            + "\n".join(blocks))


def source_path(home: Path) -> Path:
    return home / SOURCE_NAME


def pin_advice(require_passkey: bool) -> str:
    """What the owner runs to pin the starter server when up did not."""
    if require_passkey:
        return (f"the time server is not pinned: run `{PIN_COMMAND}` to review its tools; "
                "under [approvals] require_passkey it prints a link where your passkey "
                "signs the pin on the approval page")
    return f"the time server is not pinned: run `{PIN_COMMAND}` to review its tools and pin it"


def unpinned_never(status_json: bytes) -> bool:
    """True when `bxctl mcp list --json` shows the time server never pinned (reason
    `none`); an unpin, drift or damaged pin is the owner's to look at, not up's."""
    try:
        doc = json.loads(status_json.decode("utf-8"))
        servers = doc["servers"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return False
    if not isinstance(servers, list):
        return False
    return any(isinstance(view, dict) and view.get("id") == SERVER
               and view.get("state") == "unpinned" and view.get("reason") == "none"
               for view in servers)


async def offer_first_pin(bxctl: Sequence[str], *, interactive: bool, require_passkey: bool,
                          say: Callable[[str], None]) -> None:
    """After brokerd is up: when the starter server was never pinned, run `bxctl mcp pin
    time` (the probe, the whole tool list as it shows it, its question) on the owner's
    terminal; without a terminal only say what to run.  Under require_passkey bxctl's
    yes prints the approval page's link that signs the pin (the server is pinned
    when the passkey signs it there)."""
    listed = await trio.run_process([*bxctl, "mcp", "list", "--json"], capture_stdout=True,
                                    capture_stderr=True, check=False, stdin=b"")
    if listed.returncode != 0 or not unpinned_never(listed.stdout):
        return
    if not interactive:
        say(pin_advice(require_passkey))
        return
    say("the starter time server is not pinned yet: here is what it serves")
    done = await trio.run_process([*bxctl, "mcp", "pin", SERVER], check=False, stdin=None)
    if done.returncode != 0:
        say(f"not pinned: its tools are not offered; `{PIN_COMMAND}` pins it later")
