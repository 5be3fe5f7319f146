"""boxmaker's seccomp profile (boxmaker/_seccomp.py, boxmaker/seccomp.json): podman's
default with no way to a new namespace; the real-podman proof is in
tests/integration/test_filesystem_wall_round3.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boxmaker._seccomp import NAMESPACE_FLAGS, seccomp_profile

NAMESPACE_SYSCALLS = {"clone", "clone3", "unshare", "setns"}


def rules() -> list[dict[str, object]]:
    profile = json.loads(seccomp_profile().read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    syscalls = profile["syscalls"]
    assert isinstance(syscalls, list)
    return syscalls


def test_the_profile_is_package_data_at_an_absolute_path() -> None:
    path = seccomp_profile()
    assert path.is_absolute() and path.is_file() and path.name == "seccomp.json"


def test_namespace_flags_are_every_clone_new_flag() -> None:
    flags = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
             0x40000000, 0x00000080]
    assert sum(flags) == NAMESPACE_FLAGS


def test_no_rule_lets_a_namespace_syscall_through_unconditionally() -> None:
    for rule in rules():
        names = set(rule["names"])  # type: ignore[call-overload]
        touched = names & NAMESPACE_SYSCALLS
        if not touched:
            continue
        assert len(names) == 1, rule  # a rule of its own, whatever the capabilities
        if rule["action"] == "SCMP_ACT_ALLOW":
            assert touched <= {"clone", "unshare"}, rule
            (arg,) = rule["args"]  # type: ignore[misc]
            assert arg["op"] == "SCMP_CMP_MASKED_EQ"
            assert arg["value"] == NAMESPACE_FLAGS and arg["valueTwo"] == 0
            assert not rule["includes"].get("caps")  # type: ignore[attr-defined]
        else:
            assert rule["action"] == "SCMP_ACT_ERRNO", rule


def test_everything_else_is_podmans_default() -> None:
    default = Path("/usr/share/containers/seccomp.json")
    if not default.is_file():
        pytest.skip("podman's default profile is not installed")
    theirs = json.loads(default.read_text())
    ours = json.loads(seccomp_profile().read_text())
    assert {k: v for k, v in theirs.items() if k != "syscalls"} == {
        k: v for k, v in ours.items() if k != "syscalls"}

    def strip(syscalls: list[dict[str, object]]) -> list[dict[str, object]]:
        out = []
        for rule in syscalls:
            names = [n for n in rule["names"] if n not in NAMESPACE_SYSCALLS]  # type: ignore[attr-defined]
            if names:
                out.append({**rule, "names": names})
        return out

    assert strip(theirs["syscalls"]) == strip(ours["syscalls"])
