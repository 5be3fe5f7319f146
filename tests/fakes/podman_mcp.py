"""A stand-in `podman` for brokerd's MCP calls where the test is about brokerd, not
the wall (the wall's tests use the real podman: tests/integration/test_mcp_*).

Run as ``python podman_mcp.py STATE_DIR ARGS...`` (`podman_program` writes the
`[runner] podman` wrapper that adds STATE_DIR).  It answers what brokerd's start
asks (`info`, `image exists`, the trial `run`, `ps`, `rm`) and the three steps
of an MCP container: `create` keeps the argument list under STATE_DIR/NAME,
`init` and `inspect` name brokerd's own process (the inode check then walks
brokerd's root: no mounts), and `start --attach --interactive NAME` runs the
declaration's command (`--entrypoint` and what follows the image) as a plain
process with the `--env` values only.  Each command line is appended to
STATE_DIR/calls.  Standard library only.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

INFO = {"host": {"security": {"rootless": True}, "cgroupVersion": "v2",
                 "cgroupControllers": ["cpu", "memory", "pids"]}}


def podman_program(directory: Path) -> Path:
    """A `podman` executable in `directory` that runs this fake with its state there."""
    state = directory / "podman-state"
    state.mkdir(exist_ok=True)
    program = directory / "podman"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I "{Path(__file__).resolve()}" '
                       f'"{state}" "$@"\n')
    program.chmod(0o755)
    return program


def _start(state: Path, name: str) -> int:
    argv = json.loads((state / name).read_text())
    at = argv.index("--entrypoint")
    command = [argv[at + 1], *argv[at + 3:]]
    env = {value.split("=", 1)[0]: value.split("=", 1)[1]
           for flag, value in itertools.pairwise(argv) if flag == "--env"}
    os.execve(command[0], command, env)
    return 127  # pragma: no cover - execve does not return


def main(state: Path, args: list[str]) -> int:
    with open(state / "calls", "a") as calls:
        calls.write(json.dumps(args) + "\n")
    if args[:1] == ["--runtime"]:
        args = args[2:]
    verb = args[0] if args else ""
    if verb == "info":
        print(json.dumps(INFO))
    elif verb == "create":
        name = args[args.index("--name") + 1]
        (state / name).write_text(json.dumps(args))
    elif verb == "inspect":
        print(os.getppid())
    elif verb == "init":
        name = args[1]
        if "--pidfile" in (argv := json.loads((state / name).read_text())):
            Path(argv[argv.index("--pidfile") + 1]).write_text(f"{os.getppid()}\n")
    elif verb == "start":
        return _start(state, args[-1])
    elif verb == "rm":
        for name in args[1:]:
            if not name.startswith("-") and (state / name).is_file():
                (state / name).unlink()
    return 0  # image exists, run (the trial), ps (nothing left over)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
