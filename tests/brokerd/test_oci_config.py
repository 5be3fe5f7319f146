"""The oci launcher's config.json (issue 23 goal 1), pure: golden files and the wall's parts.

The golden files under fixtures/runner/oci-*.json pin the whole configuration
(BOXMAKER_UPDATE_GOLDEN=1 rewrites them); the tests below say which promise
of podman's argument list each part keeps.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import pytest

from boxmaker._seccomp import oci_seccomp, seccomp_profile
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._oci_config import (
    MASKED_PATHS,
    READONLY_PATHS,
    build_config,
    memory_bytes,
)
from boxmaker.brokerd.runner._podman_argv import container_name, instance_id, toolkit_command
from tests.brokerd.test_podman import GOLDEN_CASES, HOME, SETTINGS
from tests.conftest import FIXTURES

ROOTFS = "/run/user/1000/boxmaker/oci-7515ea5e/bundles/boxmaker-7515ea5e-call-42/rootfs"
SECCOMP = oci_seccomp(json.loads(seccomp_profile().read_text()), "x86_64")


def config(tool: str, mounts: list[Mount], **kw: Any) -> dict[str, Any]:
    name = container_name(instance_id(HOME), 42)
    return build_config(kw.pop("settings", SETTINGS), rootfs=ROOTFS,
                        cgroups_path=f"/boxmaker-7515ea5e/{name}", uid=1000, gid=1000,
                        mounts=mounts, command=toolkit_command(tool), seccomp=SECCOMP, **kw)


@pytest.mark.parametrize("case", sorted(c for c in GOLDEN_CASES if not GOLDEN_CASES[c][2]))
def test_configurations_match_the_golden_files(case: str) -> None:
    tool, mounts, _rootless = GOLDEN_CASES[case]
    got = config(tool, mounts)
    golden = FIXTURES / "runner" / f"oci-{case}.json"
    if os.environ.get("BOXMAKER_UPDATE_GOLDEN") == "1":
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text())


def test_the_process_holds_nothing() -> None:
    process = config("read_file", [])["process"]
    assert process["noNewPrivileges"] is True
    assert process["capabilities"] == {kind: [] for kind in (
        "bounding", "effective", "inheritable", "permitted", "ambient")}
    assert process["user"] == {"uid": 1000, "gid": 1000, "umask": 0o022}
    assert process["rlimits"] == [
        {"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024},
        {"type": "RLIMIT_NPROC", "hard": 512, "soft": 512},
    ]
    assert process["env"][:3] == ["PATH=/usr/bin:/bin", "PYTHONSAFEPATH=1", "PYTHONNOUSERSITE=1"]
    assert process["terminal"] is False


def test_new_namespaces_but_never_a_user_namespace() -> None:
    kinds = [n["type"] for n in config("read_file", [])["linux"]["namespaces"]]
    assert kinds == ["pid", "network", "ipc", "uts", "mount", "cgroup"]
    assert all("path" not in n for n in config("read_file", [])["linux"]["namespaces"])


def test_the_root_is_read_only_and_the_writable_places_are_sized() -> None:
    got = config("read_file", [])
    assert got["root"] == {"path": ROOTFS, "readonly": True}
    tmpfs = {m["destination"]: m["options"] for m in got["mounts"] if m["type"] == "tmpfs"}
    for place in ("/tmp", "/var/tmp", "/run"):
        assert "size=16m" in tmpfs[place] and {"nosuid", "nodev"} <= set(tmpfs[place])
    sys_mounts = {m["destination"]: m["options"] for m in got["mounts"]}
    assert "ro" in sys_mounts["/sys"] and "ro" in sys_mounts["/sys/fs/cgroup"]


def test_call_mounts_are_bind_not_recursive_nosuid_nodev_noexec() -> None:
    mounts = [Mount(source="/a", destination="/a", read_only=True),
              Mount(source="/b", destination="/b", read_only=False)]
    binds = [m for m in config("write_file", mounts)["mounts"] if m["type"] == "bind"]
    assert [m["source"] for m in binds] == ["/a", "/b"]
    for m, ro in zip(binds, (True, False), strict=True):
        assert "rbind" not in m["options"] and "bind" in m["options"]
        assert {"nosuid", "nodev", "noexec", "ro" if ro else "rw"} <= set(m["options"])


def test_limits_are_podmans() -> None:
    settings = attrs.evolve(SETTINGS, memory="64m", pids=16, cpus=0.5)
    resources = config("read_file", [], settings=settings)["linux"]["resources"]
    assert resources["memory"] == {"limit": 64 << 20, "swap": 128 << 20}
    assert resources["pids"] == {"limit": 16}
    assert resources["cpu"] == {"quota": 50_000, "period": 100_000}
    assert resources["devices"] == [{"allow": False, "access": "rwm"}]


def test_podmans_masked_and_read_only_paths() -> None:
    linux = config("read_file", [])["linux"]
    assert linux["maskedPaths"] == list(MASKED_PATHS)
    assert linux["readonlyPaths"] == list(READONLY_PATHS)
    # What podman 4.3 itself writes into config.json for the runner's argument list.
    assert {"/proc/kcore", "/proc/keys", "/sys/firmware"} <= set(MASKED_PATHS)
    assert "/proc/sys" in READONLY_PATHS and "/proc/sysrq-trigger" in READONLY_PATHS


def test_the_one_seccomp_profile_goes_in() -> None:
    assert config("read_file", [])["linux"]["seccomp"] is SECCOMP


@pytest.mark.parametrize(("text", "size"), [("256m", 256 << 20), ("1g", 1 << 30),
                                            ("4096", 4096), ("8k", 8192)])
def test_memory_sizes(text: str, size: int) -> None:
    assert memory_bytes(text) == size


@pytest.mark.parametrize("text", ["", "0m", "1t", "-1m", "1.5g", "256M"])
def test_memory_sizes_that_are_not(text: str) -> None:
    with pytest.raises(ValueError, match=r"runner\.memory"):
        memory_bytes(text)
