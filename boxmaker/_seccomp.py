"""boxmaker's seccomp profile (issue 22 item 8): ONE OCI JSON file for every container.

``boxmaker/seccomp.json`` is podman's default profile (containers/common
``seccomp.json``) with one change: no new namespace.  ``unshare`` and
``clone`` are allowed only without a ``CLONE_NEW*`` flag (`NAMESPACE_FLAGS`),
``clone3`` (whose flags sit in memory a filter cannot read) answers ENOSYS so
that the C library falls back to ``clone``, and ``setns`` answers EPERM.  A
throw-away tool never needs a user namespace, and one gives it the kernel's
namespaced-capability surface.

`seccomp_profile` is the one way to name the file: the podman runner's
argument list passes ``--security-opt seccomp=<it>``, and so must any other
container path (commands, MCP servers, a faster runner).
"""

from __future__ import annotations

from pathlib import Path

PROFILE_NAME = "seccomp.json"
NAMESPACE_FLAGS = 0x7E020080
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET and NEWTIME."""


def seccomp_profile() -> Path:
    """The absolute path of boxmaker's seccomp profile (package data)."""
    return Path(__file__).resolve().parent / PROFILE_NAME
