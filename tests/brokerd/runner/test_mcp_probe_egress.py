"""A probe gets its declared egress (issue 26; 12 "What a pin covers", "Egress"), on a
real podman.

The fixture server, given ``list_via``, CONNECTs through ``HTTPS_PROXY`` at
every `tools/list` and writes what each target answered into echo's
description, so the probe's own list shows what it reached.  A server with
`hosts` is probed beside a ``-net-p<probe id>`` sidecar, the same sealed path
a call's egress takes: its granted host works (a TCP server of the test on the
host's loopback, reached by a name only the test's resolver knows, with
`private_network`), another name is refused without being resolved, every
connection is kept for the `mcp_server probed` record, and an era probe's two
containers share the one sidecar.  A server without `hosts` is probed with
``--network=none``: no sidecar, nothing reached, nothing resolved.  Each test
has an instance of its own, so parallel runs do not collide.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.runner._mcp_argv import mcp_probe_container_name
from boxmaker.brokerd.runner._mcp_call import McpProbe
from boxmaker.brokerd.runner._mcp_runtime import McpRuntime
from boxmaker.proto.mcp import ServerDecl, SourceSet, parse_source_texts
from tests.brokerd.runner.test_mcp_egress import ALLOWED, Resolver, pong_server
from tests.brokerd.runner.test_mcp_io import FAKE
from tests.brokerd.runner.test_mcp_mounts import WithFake, _names, _podman_launcher
from tests.fakes.podman import tools_image


def probe_decl(image: str, via: list[str], *, extra: str = "", behaviours: tuple[str, ...] = (),
               protocol: str = "2026-07-28") -> ServerDecl:
    script = {"behaviours": list(behaviours), "list_via": via}
    command = ["/usr/bin/python3", "-I", str(FAKE), json.dumps(script)]
    state = parse_source_texts({"fake.toml": f'''
[[mcp_server]]
id = "fake"
image = "{image}"
command = {json.dumps(command)}
label = "private"
protocol = "{protocol}"
start_timeout_ms = 120000
{extra}'''})
    assert isinstance(state, SourceSet), state
    return state.servers["fake"]


async def probe(server: ServerDecl, resolver: Resolver, tmp_path: Path
                ) -> tuple[McpProbe, WithFake, str, str]:
    instance = secrets.token_hex(4)
    launcher = WithFake(_podman_launcher(server.image))
    runtime = McpRuntime(launcher, {}, instance=instance, version="0.test",
                         call_dir=lambda prefix: Path(tempfile.mkdtemp(prefix=prefix,
                                                                       dir=tmp_path)),
                         resolver=resolver)
    probe_id = secrets.randbits(64)
    name = mcp_probe_container_name(instance, "fake", probe_id)
    try:
        with trio.fail_after(300):
            found = await runtime.probe(server, name)
    finally:
        assert [n for n in _names() if n.startswith(f"boxmaker-{instance}-")] == []
    assert list(tmp_path.iterdir()) == []  # the per-probe egress directory went too
    return found, launcher, name, f"boxmaker-{instance}-net-p{probe_id}"


def reached(found: McpProbe) -> str:
    assert found.listed is not None, found.problem
    echo = next(tool for tool in found.listed.tools if tool["name"] == "echo")
    text: str = echo["description"]
    return text.split(" Reached: ", 1)[1]


@pytest.mark.podman
async def test_a_probe_reaches_its_granted_host_and_not_another(tmp_path: Path) -> None:
    resolver = Resolver()
    async with pong_server() as port:
        server = probe_decl(tools_image(), [f"{ALLOWED}:{port}", f"other.example:{port}"],
                            extra=f'hosts = ["{ALLOWED}:{port}"]\nprivate_network = true\n',
                            behaviours=("legacy",), protocol="auto")
        found, launcher, name, sidecar = await probe(server, resolver, tmp_path)
    assert reached(found) == ("HTTP/1.1 200 Connection established | PONG ; "
                              "HTTP/1.1 403 Forbidden | ")
    assert found.listed is not None and found.listed.protocol == "2025-11-25"
    # The era probe's two containers (discover, then initialize) shared the one sidecar.
    assert [(launch.name, launch.network_of) for launch in launcher.launches] == [
        (name, sidecar), (name, sidecar)]
    assert resolver.asked == [ALLOWED]  # the refused name was never resolved
    assert found.egress is not None and not found.egress_truncated
    assert [(e["host"], e["port"], e["address"], e["refused"]) for e in found.egress] == [
        (ALLOWED, port, "127.0.0.1", None), ("other.example", port, None, "not_allowed")]
    assert (found.egress[0]["bytes_out"], found.egress[0]["bytes_in"]) == (5, 5)


@pytest.mark.podman
async def test_a_probe_of_a_server_without_hosts_reaches_nothing(tmp_path: Path) -> None:
    resolver = Resolver()
    async with pong_server() as port:
        server = probe_decl(tools_image(), [f"{ALLOWED}:{port}", f"127.0.0.1:{port}"])
        found, launcher, name, _ = await probe(server, resolver, tmp_path)
    assert reached(found) == "error: ECONNREFUSED ; error: ECONNREFUSED"
    assert [(launch.name, launch.network_of) for launch in launcher.launches] == [(name, None)]
    assert found.egress is None  # no sidecar: nothing to record
    assert resolver.asked == []
