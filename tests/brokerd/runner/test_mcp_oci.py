"""An MCP server on the oci launcher (issue 26): runc on a bundle, marker `podman`.

The hand-written fixture server inside the tools image, its directory mounted
read-only and checked by inode in runc's createRuntime hook: a probe and a
call (ok, exit 0), a directory swapped between the walk and the mount
(`unsafe_target`, nothing run), a server with egress refused in words that
say why; runc's state and the bundles empty afterwards.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.runner._mcp_call import probe_mcp_server, run_mcp_call
from boxmaker.brokerd.runner._mcp_launch import Launch
from boxmaker.brokerd.runner._mcp_oci import EGRESS_REFUSED, OciMcpLauncher
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._oci import OciRuntime
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._three_steps import MountIdentity
from boxmaker.proto.mcp import make_pin, pin_source, pin_tools
from tests.brokerd.runner._mcp_fixtures import FAKE
from tests.brokerd.runner.test_mcp_launch import _fake_mount, decl
from tests.fakes.podman import tools_image
from tests.fakes.podman_mcp import podman_program


@pytest.mark.podman
async def test_a_server_on_runc_is_checked_by_inode_and_leaves_nothing(tmp_path: Path) -> None:
    image = tools_image()
    (tmp_path / "oci").mkdir()
    oci = OciRuntime(PodmanSettings(image=image, oci_runtime="runc", launcher="oci"),
                     tmp_path / "oci", trial_run=False)
    with trio.fail_after(240):
        assert (await oci.start()).ok
    if not oci.direct:
        await oci.aclose()
        pytest.skip("the oci launcher needs a rootful podman")
    mount, identity = _fake_mount()

    class Mounted(OciMcpLauncher):
        """The probe's containers get the fixture's directory too."""

        def launch(self, launch: Launch) -> AbstractAsyncContextManager[trio.Process]:
            if not launch.mounts and launch.network_of is None:
                launch = Launch(decl=launch.decl, name=launch.name, mounts=[mount],
                                identities=[identity])
            return super().launch(launch)

    launcher = Mounted(oci, uid=os.getuid(), gid=os.getgid())
    names = iter(f"boxmaker-test{os.getpid()}-mcp-fake-p{n}" for n in range(1, 3))
    server = decl(image, ["/usr/bin/python3", "-I", str(FAKE), json.dumps({"behaviours": []})])
    prefix = f"boxmaker-test{os.getpid()}-mcp-fake"
    try:
        with trio.fail_after(240):
            probe = await probe_mcp_server(launcher, server, lambda: next(names),
                                           version="0.test")
            assert probe.listed is not None, probe.problem
            pin = make_pin(server="fake", protocol=probe.listed.protocol,  # type: ignore[arg-type]
                           source=pin_source(server), tools=pin_tools(probe.listed.tools, ()),
                           server_info=probe.listed.server_info,
                           instructions=probe.listed.instructions,
                           pinned_at="2026-12-02T10:00:00.000000Z", by=0)
            run = await run_mcp_call(
                launcher, Launch(decl=server, name=f"{prefix}-c1", mounts=[mount],
                                 identities=[identity]),
                pin=pin, call_id=1, mcp_name="add", arguments={"a": 2, "b": 40},
                version="0.test")
            assert run.status == "ok", run
            assert run.output is not None
            assert run.output["content"] == [{"type": "text", "text": "42"}]
            assert run.exit == 0 and run.list_digest == pin.digest

            walked = tmp_path / "walked"
            walked.mkdir()
            st = os.stat(walked)
            walked.rename(tmp_path / "old")
            walked.mkdir()  # another directory at the walked path: what runc mounts
            swapped = await run_mcp_call(
                launcher, Launch(decl=server, name=f"{prefix}-c2", mounts=[
                    mount, Mount(source=str(walked), destination=str(walked), read_only=True)],
                    identities=[identity, MountIdentity(destination=str(walked),
                                                        dev=st.st_dev, ino=st.st_ino)]),
                pin=pin, call_id=2, mcp_name="add", arguments={"a": 1, "b": 1},
                version="0.test")
            assert swapped.status == "unsafe_target", swapped
            assert "not what was checked" in (swapped.message or "")
            assert swapped.request_sha256 is None

            egress = await run_mcp_call(
                launcher, Launch(decl=server, name=f"{prefix}-c3", network_of="elsewhere"),
                pin=pin, call_id=3, mcp_name="add", arguments={"a": 1, "b": 1},
                version="0.test")
            assert egress.status == "source_unavailable", egress
            assert EGRESS_REFUSED in (egress.message or "")
            with pytest.raises(Exception, match="does not run on the oci launcher"):
                async with launcher.sidecar("boxmaker-x-net-c3", str(tmp_path),
                                            ready_timeout_s=5):
                    pass
            listed = await oci._runtime_command("list", "--quiet")
            assert listed.split() == [] and list(oci.bundles.iterdir()) == []
    finally:
        with trio.CancelScope(shield=True):
            await launcher.aclose()
            await oci.aclose()


@pytest.mark.parametrize("launcher", [None, "oci"])
async def test_a_server_with_egress_keeps_podman_unless_oci_was_written(
    tmp_path: Path, launcher: str | None
) -> None:
    """The default (`[runner] launcher` unset) hands a server with egress to podman's
    three steps on the sidecar's network, as before the default changed; ``launcher =
    "oci"`` written refuses it.  The direct path is taken as set up; podman is the
    stand-in (tests/fakes/podman_mcp.py), which records each command line."""
    program = podman_program(tmp_path)
    oci = OciRuntime(PodmanSettings(image="sha256:" + "5b1c" * 16, podman=str(program),
                                    launcher=launcher),  # type: ignore[arg-type]
                     tmp_path / "home", trial_run=False)
    oci.direct = True
    assert oci.explicit == (launcher == "oci")
    mcp = OciMcpLauncher(oci, uid=os.getuid(), gid=os.getgid())
    server = decl("sha256:" + "5b1c" * 16,
                  ["/usr/bin/python3", "-I", str(FAKE), json.dumps({"behaviours": []})])
    names = iter(f"boxmaker-test{os.getpid()}-mcp-fake-p{n}" for n in range(1, 3))
    with trio.fail_after(60):
        probe = await probe_mcp_server(mcp, server, lambda: next(names), version="0.test",
                                       network_of="boxmaker-x-net-p1")
    record = tmp_path / "podman-state" / "calls"
    calls = record.read_text() if record.exists() else ""
    if launcher == "oci":
        assert EGRESS_REFUSED in (probe.problem or ""), probe
        assert '"create"' not in calls
        with pytest.raises(Exception, match="does not run on the oci launcher"):
            async with mcp.sidecar("boxmaker-x-net-p1", str(tmp_path), ready_timeout_s=5):
                pass
    else:
        assert probe.listed is not None, probe.problem
        assert '"--network=container:boxmaker-x-net-p1"' in calls
