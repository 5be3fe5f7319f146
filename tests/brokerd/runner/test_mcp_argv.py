"""An MCP server container's podman argument list (12 "The podman argument list"): golden."""

from __future__ import annotations

import json
from pathlib import Path

from boxmaker.brokerd.runner._mcp_argv import (
    PROXY_ENV,
    SERVER_PATH,
    build_mcp_create_argv,
    build_sidecar_argv,
    mcp_call_container_name,
    mcp_container_prefix,
    mcp_probe_container_name,
    server_environment,
    sidecar_name,
    sidecar_prefix,
)
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._podman_argv import PodmanSettings, instance_id
from boxmaker.proto.mcp import ServerDecl, SourceSet, parse_source_texts

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "runner"
SETTINGS = PodmanSettings(
    image="sha256:" + "2d7f" * 16,
    podman="/usr/bin/podman",
    oci_runtime="runc",
    seccomp="/opt/boxmaker/venv/lib/python3.11/site-packages/boxmaker/seccomp.json",
)
IMAGE = "sha256:" + "5b1c" * 16
SOURCE = f'''
[[mcp_server]]
id = "git"
image = "{IMAGE}"
command = ["/usr/local/bin/mcp-server-git", "--verbose"]
env = {{ PYTHONUNBUFFERED = "1", GIT_CONFIG_NOSYSTEM = "1" }}
label = "private"
memory = "256m"
pids = 64
cpus = 0.5
tmp = "32m"
'''


def decl(text: str = SOURCE) -> ServerDecl:
    state = parse_source_texts({"git.toml": text})
    assert isinstance(state, SourceSet), state
    return state.servers["git"]


def test_names_per_instance_call_and_probe() -> None:
    instance = instance_id(Path("/var/lib/boxmaker"))
    assert mcp_call_container_name(instance, "git", 20411) == (
        f"boxmaker-{instance}-mcp-git-c20411")
    assert mcp_probe_container_name(instance, "git", 3) == f"boxmaker-{instance}-mcp-git-p3"
    assert mcp_call_container_name(instance, "git", 1).startswith(mcp_container_prefix(instance))
    assert mcp_container_prefix("1a2b3c4d") != mcp_container_prefix("1a2b3c4e")


def test_the_golden_create() -> None:
    """Written by hand from 12's list: no network, the declaration's limits and
    environment after boxmaker's own, one read-only path mount, the command as
    entrypoint and arguments (podman resets the image's CMD)."""
    mount = Mount(source="/home/me/notes", destination="/home/me/notes", read_only=True)
    argv = build_mcp_create_argv(
        SETTINGS, decl(), name=mcp_call_container_name(instance_id(Path("/var/lib/boxmaker")),
                                                       "git", 20411),
        uid=1000, gid=1000, rootless=True, mounts=[mount],
        pidfile="/var/lib/boxmaker/run/pids/20411")
    assert argv == json.loads((FIXTURES / "mcp-create.json").read_text())


def test_no_host_environment_and_path_only_when_env_has_none() -> None:
    got = dict(server_environment(decl()))
    assert got == {"HOME": "/tmp", "LANG": "C.UTF-8", "PATH": SERVER_PATH,
                   "PYTHONUNBUFFERED": "1", "GIT_CONFIG_NOSYSTEM": "1"}
    own = decl(SOURCE.replace('PYTHONUNBUFFERED = "1"', 'PATH = "/opt/bin"'))
    assert [v for k, v in server_environment(own) if k == "PATH"] == ["/opt/bin"]


def test_egress_shares_the_sidecar_namespace_and_nothing_else_changes() -> None:
    plain = build_mcp_create_argv(SETTINGS, decl(), name="n", uid=1, gid=1, rootless=False)
    shared = build_mcp_create_argv(SETTINGS, decl(), name="n", uid=1, gid=1, rootless=False,
                                   network_of="boxmaker-x-net-c1")
    assert [a for a in plain if a.startswith("--network")] == ["--network=none"]
    assert [a for a in shared if a.startswith("--network")] == [
        "--network=container:boxmaker-x-net-c1"]
    proxy = [f"{k}={v}" for k, v in PROXY_ENV]
    assert [a for a in shared if a not in plain] == ["--network=container:boxmaker-x-net-c1",
                                                     *proxy]
    assert len(plain) + 2 * len(proxy) == len(shared)
    assert not any(a in plain for a in proxy)
    for forbidden in ("--env-host", "--privileged", "--device", "--init", "--network=host"):
        assert forbidden not in plain


def test_the_golden_sidecar_and_its_name() -> None:
    """Written by hand from 12's "Egress": the tools image's forwarder, no network of
    its own, 64m, 16 pids, a quarter cpu, the per-call egress directory read-only."""
    instance = instance_id(Path("/var/lib/boxmaker"))
    server = mcp_call_container_name(instance, "fetch", 20411)
    assert sidecar_name(server) == f"boxmaker-{instance}-net-c20411"
    assert sidecar_name(mcp_probe_container_name(instance, "fetch", 3)) == (
        f"boxmaker-{instance}-net-p3")
    assert sidecar_name(server).startswith(sidecar_prefix(instance))
    argv = build_sidecar_argv(SETTINGS, name=sidecar_name(server), uid=1000, gid=1000,
                              rootless=True, egress_dir="/var/lib/boxmaker/run/net-1x2y")
    assert argv == json.loads((FIXTURES / "mcp-sidecar.json").read_text())
