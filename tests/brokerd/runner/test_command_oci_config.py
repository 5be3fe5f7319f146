"""A run_command container's config.json on the oci launcher (issue 25), pure.

The golden file fixtures/runner/oci-run_command.json pins the whole
configuration (BOXMAKER_UPDATE_GOLDEN=1 rewrites it); the tests below say
which promise of the command's podman argument list each part keeps, and that
the hook's verdict is what lets runc go on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from boxmaker._seccomp import oci_seccomp, seccomp_profile
from boxmaker.brokerd.runner._command_argv import command_container_name, command_mounts
from boxmaker.brokerd.runner._command_oci_config import build_command_config
from boxmaker.brokerd.runner._hook import hook_entry
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._oci_config import build_config
from boxmaker.brokerd.runner._podman_argv import instance_id, toolkit_command
from tests.brokerd.runner.test_command_argv import COMMANDS, MASK_DIR, SETTINGS

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "runner"
HOME = Path("/var/lib/boxmaker")
NAME = command_container_name(instance_id(HOME), 42)
BUNDLE = f"/run/boxmaker/oci-{instance_id(HOME)}/bundles/{NAME}"
SECCOMP = oci_seccomp(json.loads(seccomp_profile().read_text()), "x86_64")


def config(write: bool = False, argv: tuple[str, ...] = ("git", "status")) -> dict[str, Any]:
    masks = [Mount(source=MASK_DIR, destination="/home/me/src/proj/.boxmaker", read_only=True)]
    mounts = command_mounts([("/home/me/src/proj", "/home/me/src/proj")], write=write,
                            masks=masks)
    return build_command_config(
        SETTINGS, COMMANDS, rootfs=f"{BUNDLE}/rootfs",
        cgroups_path=f"/boxmaker-{instance_id(HOME)}/{NAME}", uid=1000, gid=1000,
        cwd="/home/me/src/proj/sub", mounts=mounts, argv=list(argv), seccomp=SECCOMP,
        state_fifo=f"{BUNDLE}/hook-state", verdict_fifo=f"{BUNDLE}/hook-verdict")


def test_the_golden_configuration() -> None:
    got = config(argv=("git", "-c", "core.pager=cat", "log", "a && b; $(id) *"))
    golden = FIXTURES / "oci-run_command.json"
    if os.environ.get("BOXMAKER_UPDATE_GOLDEN") == "1":
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text())


def test_the_wall_is_the_toolkits_with_the_commands_limits() -> None:
    got = config()
    toolkit = build_config(SETTINGS, rootfs=f"{BUNDLE}/rootfs", cgroups_path="/x", uid=1000,
                           gid=1000, mounts=[], command=toolkit_command("read_file"),
                           seccomp=SECCOMP)
    for key in ("seccomp", "namespaces", "maskedPaths", "readonlyPaths", "sysctl"):
        assert got["linux"][key] == toolkit["linux"][key]
    for key in ("capabilities", "noNewPrivileges", "rlimits", "user", "terminal"):
        assert got["process"][key] == toolkit["process"][key]
    assert got["root"] == {"path": f"{BUNDLE}/rootfs", "readonly": True}
    resources = got["linux"]["resources"]
    assert resources["memory"] == {"limit": 512 << 20, "swap": 1024 << 20}
    assert resources["pids"] == {"limit": 256}
    assert resources["cpu"] == {"quota": 100_000, "period": 100_000}
    tmpfs = {m["destination"]: m["options"] for m in got["mounts"] if m["type"] == "tmpfs"}
    for place in ("/tmp", "/var/tmp", "/run"):
        assert "size=256m" in tmpfs[place]
    assert got["process"]["args"] == ["git", "status"]
    assert got["process"]["cwd"] == "/home/me/src/proj/sub"
    assert got["process"]["env"] == ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp",
                                     "LANG=C.UTF-8", "HOSTNAME=boxmaker"]


def test_the_entries_run_programs_the_masks_never() -> None:
    for write in (False, True):
        entry, mask = [m for m in config(write)["mounts"] if m["type"] == "bind"]
        assert entry["options"] == ["rw" if write else "ro", "bind", "nosuid", "nodev",
                                    "rprivate"]
        assert mask["options"] == ["ro", "bind", "nosuid", "nodev", "noexec", "rprivate"]


def test_the_hook_is_the_one_of_hook_py() -> None:
    hooks = config()["hooks"]
    assert hooks == {"createRuntime": [hook_entry(f"{BUNDLE}/hook-state",
                                                  f"{BUNDLE}/hook-verdict")]}
