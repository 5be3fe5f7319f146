"""Where an MCP server runs: the test launcher, and the podman launcher on real podman.

The podman tests run the hand-written fixture server (standard library only)
inside the tools image, its directory mounted read-only by the narrowest
mount and checked by inode after `podman init`: a probe and a call through
the three steps, the container gone afterwards; a directory swapped between
the walk and the mount, which is `unsafe_target` with nothing run; a server
without egress that sees only `lo`, no route, no resolver and cannot reach a
listener on the host's loopback; the sweep of leftovers; and the reference
`mcp-server-time` (scripts/build-mcp-image) in both eras with its lines hashed.
Few containers (CI time); the two reference tests take about 25 s each at
load 15.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.runner._mcp_call import probe_mcp_server, run_mcp_call
from boxmaker.brokerd.runner._mcp_launch import Launch, PodmanMcpLauncher, SubprocessMcpLauncher
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._three_steps import MountIdentity
from boxmaker.proto.mcp import (
    ServerDecl,
    make_pin,
    pin_source,
    pin_tools,
)
from tests.brokerd.runner._mcp_fixtures import FAKE, server_decl, server_toml
from tests.brokerd.runner.test_mcp_io import RecordingReceive, RecordingSend
from tests.fakes.mcp_stdio_server import tools as fake_tools
from tests.fakes.podman import mcp_image, tools_image

ENV_DUMP = ("import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)) + '\\n')")


def decl(image: str, command: list[str], protocol: str = "auto") -> ServerDecl:
    return server_decl(server_toml(image, command, env={"FAKE_MODE": "1"}, protocol=protocol,
                                   start_timeout_ms=60000))


async def test_the_test_launcher_gives_the_container_environment_only() -> None:
    os.environ["BOXMAKER_SECRET_OF_THE_HOST"] = "x"
    try:
        launcher = SubprocessMcpLauncher(lambda _d: [sys.executable, "-I", "-c", ENV_DUMP])
        server = decl("sha256:" + "ab" * 32, ["/usr/bin/fake"])
        async with launcher.launch(Launch(decl=server, name="n")) as process:
            assert process.stdout is not None
            with trio.fail_after(60):
                data = b""
                while not data.endswith(b"\n"):
                    chunk = await process.stdout.receive_some(65536)
                    assert chunk
                    data += chunk
    finally:
        del os.environ["BOXMAKER_SECRET_OF_THE_HOST"]
    env = json.loads(data)
    env.pop("LC_CTYPE", None)  # the interpreter's own
    assert env == {"HOME": "/tmp", "LANG": "C.UTF-8", "FAKE_MODE": "1",
                   "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    assert launcher.launched == ["n"]


def _exists(name: str) -> bool:
    done = subprocess.run(["podman", "container", "exists", name], check=False)
    return done.returncode == 0


def _podman_launcher(image: str) -> PodmanMcpLauncher:
    settings = PodmanSettings(image=image, podman="podman")
    rootless = subprocess.run(["podman", "info", "--format", "{{.Host.Security.Rootless}}"],
                              capture_output=True, text=True, check=True).stdout.strip()
    return PodmanMcpLauncher(settings, uid=os.getuid(), gid=os.getgid(),
                             rootless=rootless == "true")


def _fake_mount() -> tuple[Mount, MountIdentity]:
    where = FAKE.parent
    st = os.stat(where)
    return (Mount(source=str(where), destination=str(where), read_only=True),
            MountIdentity(destination=str(where), dev=st.st_dev, ino=st.st_ino))


@pytest.mark.podman
async def test_a_probe_and_a_call_in_podman_leave_nothing() -> None:
    image = tools_image()
    launcher = _podman_launcher(image)
    command = ["/usr/bin/python3", "-I", str(FAKE), json.dumps({"behaviours": []})]
    server = decl(image, command)
    mount, identity = _fake_mount()
    names = iter(f"boxmaker-test{os.getpid()}-mcp-fake-p{n}" for n in range(1, 3))

    class Mounted(PodmanMcpLauncher):
        def create_argv(self, launch: Launch) -> list[str]:
            return super().create_argv(Launch(decl=launch.decl, name=launch.name,
                                              mounts=[mount], identities=[identity]))

    mounted = Mounted(launcher.settings, uid=launcher.uid, gid=launcher.gid,
                      rootless=launcher.rootless)
    with trio.fail_after(240):
        probe = await probe_mcp_server(mounted, server, lambda: next(names), version="0.test")
    assert probe.listed is not None, probe.problem
    pin = make_pin(server="fake", protocol=probe.listed.protocol,  # type: ignore[arg-type]
                   source=pin_source(server), tools=pin_tools(probe.listed.tools, ()),
                   server_info=probe.listed.server_info, instructions=probe.listed.instructions,
                   pinned_at="2026-12-02T10:00:00.000000Z", by=0)
    name = f"boxmaker-test{os.getpid()}-mcp-fake-c1"
    launch = Launch(decl=server, name=name, mounts=[mount], identities=[identity])
    with trio.fail_after(240):
        run = await run_mcp_call(launcher, launch, pin=pin, call_id=1, mcp_name="add",
                                 arguments={"a": 2, "b": 40}, version="0.test")
    assert run.status == "ok", run
    assert run.output is not None and run.output["content"] == [{"type": "text", "text": "42"}]
    assert run.exit == 0 and run.list_digest == pin.digest
    for container in (*probe.containers, name):
        assert not _exists(container)


@pytest.mark.podman
async def test_a_directory_swapped_before_init_is_unsafe_target(tmp_path: Path) -> None:
    image = tools_image()
    launcher = _podman_launcher(image)
    walked = tmp_path / "walked"
    walked.mkdir()
    st = os.stat(walked)
    walked.rename(tmp_path / "old")
    walked.mkdir()  # another directory at the walked path: what podman mounts
    server = decl(image, ["/usr/bin/python3", "-c", "print('ran')"], protocol="2026-07-28")
    name = f"boxmaker-test{os.getpid()}-mcp-fake-c2"
    launch = Launch(decl=server, name=name,
                    mounts=[Mount(source=str(walked), destination=str(walked), read_only=True)],
                    identities=[MountIdentity(destination=str(walked), dev=st.st_dev,
                                              ino=st.st_ino)])
    pin = make_pin(server="fake", protocol="2026-07-28", source=pin_source(server), tools=(),
                   server_info=None, instructions=None,
                   pinned_at="2026-12-02T10:00:00.000000Z", by=0)
    with trio.fail_after(240):
        run = await run_mcp_call(launcher, launch, pin=pin, call_id=2, mcp_name="echo",
                                 arguments={}, version="0.test")
    assert run.status == "unsafe_target", run
    assert "not what was checked" in (run.message or "")
    assert run.request_sha256 is None and run.exit is None
    assert not _exists(name)


class Recording:
    """Wraps a launcher: the process's stdin and stdout recorded byte for byte."""

    def __init__(self, inner: PodmanMcpLauncher) -> None:
        self.inner = inner
        self.sent: list[RecordingSend] = []
        self.read: list[RecordingReceive] = []

    @asynccontextmanager
    async def launch(self, launch: Launch) -> AsyncIterator[trio.Process]:
        async with self.inner.launch(launch) as process:
            assert process.stdin is not None and process.stdout is not None
            process.stdin = RecordingSend(process.stdin)  # type: ignore[misc]
            process.stdout = RecordingReceive(process.stdout)  # type: ignore[misc]
            self.sent.append(process.stdin)
            self.read.append(process.stdout)
            yield process


@pytest.mark.podman
@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_the_reference_server_in_podman_and_its_hashes(protocol: str) -> None:
    image = mcp_image()
    server = server_decl(server_toml(
        image, ["/usr/bin/python3", "-m", "mcp_server_time", "--local-timezone", "UTC"],
        server="time", env={"PYTHONPATH": "/opt/mcp/time"}, label="public", untrusted=False,
        protocol=protocol), server="time")
    launcher = Recording(_podman_launcher(tools_image()))
    names = iter(f"boxmaker-test{os.getpid()}-mcp-time-p{n}" for n in range(1, 3))
    with trio.fail_after(300):
        probe = await probe_mcp_server(launcher, server, lambda: next(names), version="0.test")
    assert probe.listed is not None, probe.problem
    assert [t["name"] for t in probe.listed.tools] == ["get_current_time", "convert_time"]
    pin = make_pin(server="time", protocol=probe.listed.protocol,  # type: ignore[arg-type]
                   source=pin_source(server), tools=pin_tools(probe.listed.tools, ()),
                   server_info=probe.listed.server_info, instructions=probe.listed.instructions,
                   pinned_at="2026-12-02T10:00:00.000000Z", by=0)
    name = f"boxmaker-test{os.getpid()}-mcp-time-c9"
    with trio.fail_after(300):
        run = await run_mcp_call(launcher, Launch(decl=server, name=name), pin=pin, call_id=9,
                                 mcp_name="get_current_time", arguments={"timezone": "UTC"},
                                 version="0.test")
    assert run.status == "ok", run
    assert run.output is not None and "UTC" in run.output["content"][0]["text"]
    assert run.exit in (0, None)  # None: still running 2 s after its stdin closed (removed)
    assert run.protocol == pin.protocol and run.list_digest == pin.digest
    call = next(line for line in launcher.sent[-1].lines() if b'"tools/call"' in line)
    answer = next(line for line in launcher.read[-1].lines() if b'"bx-call-9"' in line)
    assert run.request_sha256 == hashlib.sha256(call).hexdigest()
    assert run.response_sha256 == hashlib.sha256(answer).hexdigest()
    for container in (*probe.containers, name):
        assert not _exists(container)


@pytest.mark.podman
async def test_leftover_server_containers_of_this_instance_are_swept() -> None:
    image = tools_image()
    launcher = _podman_launcher(image)
    instance = f"t{os.getpid():07x}"[-8:]
    mine = f"boxmaker-{instance}-mcp-fake-c7"
    sidecar = f"boxmaker-{instance}-net-c7"
    other = f"boxmaker-{instance}-call-7"
    for name in (mine, sidecar, other):
        subprocess.run(["podman", "create", "--pull=never", "--name", name, "--network=none",
                        image, "true"], check=True, capture_output=True)
    try:
        with trio.fail_after(120):
            assert await launcher.remove_leftovers(instance) == [mine, sidecar]
        assert not _exists(mine) and not _exists(sidecar) and _exists(other)
    finally:
        subprocess.run(["podman", "rm", "--force", "--ignore", mine, sidecar, other],
                       check=False, capture_output=True)


@pytest.mark.podman
async def test_a_server_without_egress_reaches_no_network() -> None:
    """Only `lo`, no route, no resolver, and a listener on the host's loopback
    (which the test watches) is not reached."""
    import socket

    image = tools_image()
    launcher = _podman_launcher(image)
    command = ["/usr/bin/python3", "-I", str(FAKE), json.dumps({"behaviours": ["network"]})]
    server = decl(image, command, protocol="2026-07-28")
    mount, identity = _fake_mount()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    name = f"boxmaker-test{os.getpid()}-mcp-fake-c3"
    launch = Launch(decl=server, name=name, mounts=[mount], identities=[identity])
    tools = fake_tools(set())
    pin = make_pin(server="fake", protocol="2026-07-28", source=pin_source(server),
                   tools=pin_tools(tools, ()), server_info=None, instructions=None,
                   pinned_at="2026-12-02T10:00:00.000000Z", by=0)
    try:
        with trio.fail_after(240):
            run = await run_mcp_call(launcher, launch, pin=pin, call_id=3, mcp_name="echo",
                                     arguments={"text": f"127.0.0.1:{port}"},
                                     version="0.test")
        assert run.status == "ok", run
        assert run.output is not None
        view = json.loads(run.output["content"][0]["text"])
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert view["interfaces"] == ["lo"]
    assert view["routes"] == []
    assert view["resolve"].startswith("error")
    assert view["connect"].startswith("error")
