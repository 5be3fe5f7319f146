"""http_fetch with real containers: egress only through the per-call proxy (marker `podman`).

The resolver is injected: it maps boxmaker-test.internal to 127.0.0.1, so no
/etc/hosts entry is needed.  A loopback address is not global, so the grant
needs private_network=true.  Fetches here are plain http:// (a grant with
http = true): the container trusts only the image's CA bundle, and TLS through
the proxy is tested in tests/toolkit/test_fetch.py with a trustme CA.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker.brokerd.runner._egress import (
    EgressProxy,
    IPAddress,
    ResolveError,
    Seal,
    open_unix_listener,
)
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._oci import OciRuntime, default_oci_root
from boxmaker.brokerd.runner._podman import (
    PodmanRuntime,
)
from boxmaker.brokerd.runner._podman_argv import (
    EGRESS_MOUNT,
    PodmanSettings,
    build_argv,
    container_name,
    container_prefix,
    instance_id,
)
from boxmaker.brokerd.runner._spec import RunSpec, build_run_spec
from tests.fakes.podman import tools_image

pytestmark = pytest.mark.podman

HOST = "boxmaker-test.internal"


@pytest.fixture(scope="module")
def image() -> str:
    return tools_image()


@pytest.fixture(params=["podman", pytest.param("oci", marks=pytest.mark.oci_wall)])
def settings(image: str, request: pytest.FixtureRequest) -> PodmanSettings:
    """The runtime tests run on both launchers (issue 23)."""
    return PodmanSettings(image=image, oci_runtime="runc", timeout_ms=20_000,
                          launcher=request.param)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    yield home
    names = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [n for n in names if n.startswith(container_prefix(instance_id(home)))] == []
    oci_root = default_oci_root(home, instance_id(home))
    if os.path.ismount(oci_root):  # a test that did not aclose() its runtime
        assert list((oci_root / "bundles").iterdir()) == [], "a bundle was left behind"
        subprocess.run(["umount", "--lazy", str(oci_root)], check=True)


@pytest.fixture
def egress_root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="bx-eg-", dir="/tmp"))
    yield path
    root = path / "e"
    # The scratch directory keeps podman's cwd and the mask sources; no
    # per-call egress directory may stay.
    left = [p for p in root.iterdir() if p.name.startswith("egress-")] if root.exists() else []
    assert left == [], "a per-call egress directory was left behind"
    shutil.rmtree(path)


async def resolver(host: str, port: int) -> list[IPAddress]:
    if host == HOST:
        return [ipaddress.ip_address("127.0.0.1")]
    raise ResolveError("no such name")


class Server:
    """A plain HTTP server on loopback that answers by path, or never answers."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.connections = 0
        self.port = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            self.requests.append(data)
            target = data.split(b" ", 2)[1]
            if target == b"/silent":
                await trio.sleep_forever()
            if target == b"/redirect":
                head = b"HTTP/1.1 301 Moved\r\nlocation: https://other.example/\r\n"
                body = b""
            else:
                head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-private: 1\r\n"
                body = b"hello from the host"
            await stream.send_all(
                head + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body
            )


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, srv.handle, 0, host="127.0.0.1"))
        srv.port = listeners[0].socket.getsockname()[1]
        yield srv
        nursery.cancel_scope.cancel()


_ids = iter(range(1, 1 << 30))


def fetch_spec(url: str, private_network: bool) -> RunSpec:
    return build_run_spec(
        call_id=next(_ids),
        session="s",
        tool="http_fetch",
        args={"url": url, "method": "GET"},
        grant="g",
        grant_entry=HOST,
        private_network=private_network,
        label="public",
        untrusted=True,
    )


async def runtime_for(settings: PodmanSettings, home: Path, egress_root: Path) -> PodmanRuntime:
    runtime = (OciRuntime if settings.launcher == "oci" else PodmanRuntime)(
        settings, home, resolver=resolver, scratch_root=egress_root / "e", trial_run=False
    )
    with trio.fail_after(60):
        assert (await runtime.start()).ok
    return runtime


async def test_a_granted_fetch_succeeds(
    settings: PodmanSettings, home: Path, egress_root: Path, server: Server
) -> None:
    runtime = await runtime_for(settings, home, egress_root)
    with trio.fail_after(60):
        outcome = await runtime.run(fetch_spec(f"http://{HOST}:{server.port}/page", True))
    assert outcome.status == "ok", outcome
    assert outcome.output == {
        "status": 200,
        "headers": {"content-type": "text/plain", "content-length": "19"},
        "body": "hello from the host",
        "encoding": "utf-8",
        "bytes": 19,
        "truncated": False,
    }
    assert server.requests[0].startswith(b"GET /page HTTP/1.1\r\n")


async def test_a_private_address_without_private_network_is_unsafe(
    settings: PodmanSettings, home: Path, egress_root: Path, server: Server
) -> None:
    runtime = await runtime_for(settings, home, egress_root)
    began = time.monotonic()
    outcome = await runtime.run(fetch_spec(f"http://{HOST}:{server.port}/page", False))
    assert outcome.status == "unsafe_target"
    assert outcome.output is None
    assert "without private_network = true" in (outcome.message or "")
    assert time.monotonic() - began < 0.5  # nothing was started
    assert server.connections == 0


async def test_a_name_that_does_not_resolve_is_unsafe(
    settings: PodmanSettings, home: Path, egress_root: Path
) -> None:
    runtime = await runtime_for(settings, home, egress_root)
    outcome = await runtime.run(fetch_spec("https://nowhere.example/", True))
    assert outcome.status == "unsafe_target"


async def test_a_redirect_comes_back_and_is_not_followed(
    settings: PodmanSettings, home: Path, egress_root: Path, server: Server
) -> None:
    runtime = await runtime_for(settings, home, egress_root)
    with trio.fail_after(60):
        outcome = await runtime.run(fetch_spec(f"http://{HOST}:{server.port}/redirect", True))
    assert outcome.status == "ok", outcome
    assert outcome.output["status"] == 301
    assert outcome.output["headers"]["location"] == "https://other.example/"
    assert len(server.requests) == 1


async def test_a_tool_past_its_time_is_killed_and_answered_timeout(
    settings: PodmanSettings, home: Path, egress_root: Path, server: Server
) -> None:
    runtime = await runtime_for(attrs.evolve(settings, timeout_ms=3000), home, egress_root)
    began = time.monotonic()
    with trio.fail_after(60):
        outcome = await runtime.run(fetch_spec(f"http://{HOST}:{server.port}/silent", True))
    took = time.monotonic() - began
    assert outcome.status == "timeout"
    assert outcome.output is None
    assert 3.0 <= took < 3.0 + 2.0 + 5.0  # the limit, the grace, and podman's own time


def container_python(
    settings: PodmanSettings, home: Path, code: str, mounts: list[Mount]
) -> list[str]:
    return build_argv(
        settings,
        name=container_name(instance_id(home), "probe"),
        uid=os.getuid(),
        gid=os.getgid(),
        rootless=False,
        mounts=mounts,
        command=["python3", "-c", code],
    )


CONNECT_OTHER = """
from boxmaker.toolkit._fetch import socks_connect
from boxmaker.toolkit._errors import ToolError
for host, port in [("other.example", 80), ("boxmaker-test.internal", PORT + 1)]:
    try:
        socks_connect("/run/boxmaker-egress/socks", host, port)
        print("connected")
    except ToolError as exc:
        print(exc.code)
"""


async def test_the_proxy_refuses_other_hosts_and_ports_from_inside(
    settings: PodmanSettings, home: Path, egress_root: Path, server: Server
) -> None:
    proxy = EgressProxy(
        Seal(host=HOST, port=server.port, addresses=(ipaddress.ip_address("127.0.0.1"),))
    )
    call_dir = egress_root / "call"
    call_dir.mkdir(mode=0o700)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(proxy.serve, await open_unix_listener(call_dir / "socks"))
            argv = container_python(
                settings,
                home,
                CONNECT_OTHER.replace("PORT", str(server.port)),
                [Mount(source=str(call_dir), destination=EGRESS_MOUNT, read_only=True)],
            )
            with trio.fail_after(60):
                done = await trio.run_process(
                    argv, capture_stdout=True, capture_stderr=True, check=False
                )
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(call_dir)
    assert done.stdout.split() == [b"egress_refused", b"egress_refused"], done.stderr
    assert not proxy.used
    assert server.connections == 0


NO_NETWORK = """
import socket
for addr in [("127.0.0.1", PORT), ("1.1.1.1", 53), ("10.0.2.2", 80)]:
    try:
        socket.create_connection(addr, timeout=3).close()
        print("connected")
    except OSError:
        print("refused")
print(sorted(name for _, name in socket.if_nameindex()))
"""


async def test_without_egress_the_container_has_no_network(
    settings: PodmanSettings, home: Path, server: Server
) -> None:
    argv = container_python(settings, home, NO_NETWORK.replace("PORT", str(server.port)), [])
    with trio.fail_after(60):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    lines = done.stdout.decode().split("\n")
    assert lines[:3] == ["refused", "refused", "refused"], done.stderr
    assert lines[3] == "['lo']"
    assert server.connections == 0
