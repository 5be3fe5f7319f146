"""The createRuntime hook that stands in for podman's ``init`` step (issue 25), pure.

runc runs a ``createRuntime`` hook once every mount of the container is in
place, before the pivot_root and before the program is looked up or run,
with the container's state (its init process id, its bundle) on stdin.  The
hook is the host's ``/bin/sh`` with no environment and only builtins: it
writes that state line to brokerd's state FIFO and waits for brokerd's
verdict on the verdict FIFO (`_hook_gate.Gate`); only ``ok`` lets runc go
on.  A hook that gets no answer is killed by runc after HOOK_TIMEOUT_S and
the container fails (a brokerd gone with -9 never answers).

The same hook reaches runc two ways: in the ``config.json`` brokerd writes
itself (the oci launcher, `hook_entry`), or through podman's ``--hooks-dir``
(`hooks_dir_file`: a hooks.d file matched to the one call by an annotation).
No I/O here.
"""

from __future__ import annotations

from typing import Any

HOOK_SHELL = "/bin/sh"
HOOK_SCRIPT = ('read -r state || :; printf "%s\\n" "$state" > "$1" '
               '&& read -r verdict < "$2" && [ "$verdict" = ok ]')
"""$1: the state FIFO brokerd reads; $2: the verdict FIFO it answers on."""
HOOK_TIMEOUT_S = 30
VERDICT_OK = b"ok\n"
VERDICT_NO = b"no\n"
CALL_ANNOTATION = "org.boxmaker.call"
"""The annotation a podman call's container carries: its hooks.d file matches it."""


def hook_entry(state_fifo: str, verdict_fifo: str) -> dict[str, Any]:
    """The runtime-spec hook (``hooks.createRuntime[]``)."""
    return {
        "path": HOOK_SHELL,
        "args": ["sh", "-c", HOOK_SCRIPT, "sh", state_fifo, verdict_fifo],
        "env": [],
        "timeout": HOOK_TIMEOUT_S,
    }


def hooks_dir_file(name: str, state_fifo: str, verdict_fifo: str) -> dict[str, Any]:
    """podman's hooks.d file (schema 1.0.0) for the container `name` alone."""
    if not name or not all(c.isascii() and (c.isalnum() or c == "-") for c in name):
        raise ValueError("a container name of letters, digits and dashes")  # our bug
    return {
        "version": "1.0.0",
        "hook": hook_entry(state_fifo, verdict_fifo),
        "when": {"annotations": {f"^{CALL_ANNOTATION.replace('.', '[.]')}$": f"^{name}$"}},
        "stages": ["createRuntime"],
    }
