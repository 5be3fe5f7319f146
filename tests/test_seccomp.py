"""boxmaker's seccomp profile (boxmaker/_seccomp.py, boxmaker/seccomp.json): podman's
default with no way to a new namespace; the real-podman proof is in
tests/integration/test_filesystem_wall_round3.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


# -- the OCI runtime-spec form (the oci launcher, issue 23) --------------------------


def oci(machine: str = "x86_64") -> dict[str, object]:
    from boxmaker._seccomp import oci_seccomp

    return oci_seccomp(json.loads(seccomp_profile().read_text()), machine)


def test_the_oci_form_is_what_podman_itself_writes() -> None:
    # fixtures/runner/seccomp-oci-amd64.json: linux.seccomp of the config.json
    # podman 4.3 wrote for the runner's argument list (rootful, --cap-drop=all).
    from tests.conftest import FIXTURES

    want = json.loads((FIXTURES / "runner" / "seccomp-oci-amd64.json").read_text())
    assert oci() == want


def test_the_oci_form_keeps_the_namespace_rules_and_no_capability_rule() -> None:
    got = oci()
    assert got["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    assert got["defaultAction"] == "SCMP_ACT_ERRNO"
    by_name: dict[str, list[dict[str, object]]] = {}
    for rule in got["syscalls"]:  # type: ignore[attr-defined]
        for name in rule["names"]:
            by_name.setdefault(name, []).append(rule)
    assert by_name["setns"] == [{"names": ["setns"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]
    assert by_name["clone3"][0]["errnoRet"] == 38
    masked = {"index": 0, "value": NAMESPACE_FLAGS, "op": "SCMP_CMP_MASKED_EQ"}
    assert [r["args"] for r in by_name["unshare"]] == [[masked]]
    assert [r["args"] for r in by_name["clone"]] == [[masked]]  # not the s390 form
    # A capability holder's allowances are gone; the refusals for the rest stay.
    for name in ("bpf", "chroot", "open_by_handle_at", "delete_module", "acct", "iopl"):
        assert [r["action"] for r in by_name[name]] == ["SCMP_ACT_ERRNO"], name
    assert "s390_pci_mmio_read" not in by_name and "sync_file_range2" not in by_name


def test_the_oci_form_of_another_architecture() -> None:
    got = oci("aarch64")
    assert got["architectures"] == ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]
    names = {n for r in got["syscalls"] for n in r["names"]}  # type: ignore[attr-defined]
    assert "sync_file_range2" in names and "arch_prctl" not in names


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.update(extra=1), "unknown members"),
        (lambda p: p["syscalls"][0].update(minKernel="5.0"), "unknown members"),
        (lambda p: p["syscalls"][0]["includes"].update(os="linux"), "unknown members"),
        (lambda p: p["syscalls"][0].update(names="read"), "not a list of strings"),
        (lambda p: p["syscalls"][2]["args"][0].update(value="0"), "not an integer"),
        (lambda p: p.update(archMap=[]), "archMap has no"),
        (lambda p: p.update(syscalls=[{}] * 2000), "at most"),
    ],
)
def test_the_oci_form_refuses_a_profile_it_cannot_read(change: Any, message: str) -> None:
    from boxmaker._seccomp import SeccompError, oci_seccomp

    profile = json.loads(seccomp_profile().read_text())
    change(profile)
    with pytest.raises(SeccompError, match=message):
        oci_seccomp(profile, "x86_64")


def test_an_unknown_machine_is_refused() -> None:
    from boxmaker._seccomp import SeccompError, native_arch

    with pytest.raises(SeccompError, match="riscv64"):
        native_arch("riscv64")
