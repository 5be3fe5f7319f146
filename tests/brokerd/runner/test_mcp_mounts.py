"""The mounts of an MCP server's call container (12 "Mounts"), on the host and on podman.

The hand-written fixture server runs in the tools image through the MCP
runtime and the podman launcher (its own directory mounted read-only besides
the call's mounts).  Its ``look`` tool reports what it finds at its `path`
argument and at other paths, and what a write does.  Each call's mounts come
from the runtime's host walk (`plan_mcp_mounts`): a granted directory
read-only with a `deny` subtree and brokerd's home masked inside it, a file
outside the mounts absent, a `write_path` file and a new file written on the
host; brokerd's home through a path argument (by its name, through a link,
by a hard link) refused before any container; a directory swapped for a
symbolic link between the walk and `podman init` is `unsafe_target` and the
server never starts.  Each test checks that no container is left.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._host_walk import HostWalker, UnsafeTarget
from boxmaker.brokerd.runner._mcp_launch import Launch, McpLauncher, PodmanMcpLauncher
from boxmaker.brokerd.runner._mcp_mounts import plan_mcp_mounts
from boxmaker.brokerd.runner._mcp_runtime import McpRuntime, McpServerState
from boxmaker.brokerd.runner._mounts import MaskSources, Mount
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._spec import RunOutcome, build_run_spec
from boxmaker.brokerd.runner._three_steps import MountIdentity
from boxmaker.proto.mcp import (
    Pin,
    ServerDecl,
    tool_verdicts,
)
from tests.brokerd.runner._mcp_fixtures import (
    FAKE,
    fake_command,
    fake_pin,
    server_decl,
    server_toml,
)
from tests.fakes.podman import tools_image

INSTANCE = "wa11c0de"


def wall_decl(image: str, kind: str = "path", behaviours: tuple[str, ...] = ("files",),
              extra: str = "") -> ServerDecl:
    return server_decl(server_toml(image, fake_command(*behaviours), extra=extra,
                                   tools={"look": {"path": kind}}))


@attrs.frozen
class Home:
    """A brokerd home (protected), a granted project beside it, the mask sources."""

    root: Path
    walker: HostWalker
    masks: MaskSources

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def proj(self) -> Path:
        return self.root / "proj"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    (tmp_path / "home").mkdir(mode=0o700)
    (tmp_path / "home" / "brokerd.toml").write_text("secret of brokerd\n")
    (tmp_path / "proj" / "denied").mkdir(parents=True)
    (tmp_path / "proj" / "denied" / "x.txt").write_text("denied text\n")
    (tmp_path / "proj" / "notes.txt").write_text("my notes\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    (tmp_path / "masks" / "dir").mkdir(parents=True)
    (tmp_path / "masks" / "file").write_text("")
    walker = HostWalker(os.geteuid(), resolve_roots(
        [Candidate(path=str(tmp_path / "home"), required=True, own=True, index=True)]))
    masks = MaskSources(directory=str(tmp_path / "masks" / "dir"),
                        file=str(tmp_path / "masks" / "file"))
    yield Home(root=tmp_path, walker=walker, masks=masks)


def _grammar(server: ServerDecl, pin: Pin) -> Any:
    grammar = tool_verdicts(server, pin)["look"].grammar
    assert grammar is not None
    return grammar


# -- the host side, without podman ------------------------------------------------------


def test_a_path_argument_is_the_narrowest_mount_with_its_masks(home: Home) -> None:
    server = wall_decl("sha256:" + "ab" * 32)
    grammar = _grammar(server, fake_pin(server, ["files"]))
    proj = str(home.proj)
    mounts, identities = plan_mcp_mounts(
        home.walker, grammar, {"path": proj, "also": [], "write": ""},
        entries={"path": (str(home.root), proj)}, deny_paths=(f"{proj}/denied",),
        masks=home.masks)
    st = os.stat(proj)
    assert mounts == (Mount(source=proj, destination=proj, read_only=True),
                      Mount(source=home.masks.directory, destination=f"{proj}/denied",
                            read_only=True))
    assert identities == (MountIdentity(destination=proj, dev=st.st_dev, ino=st.st_ino),)


def test_a_write_path_file_is_mounted_read_write_and_a_new_one_its_parent(home: Home) -> None:
    server = wall_decl("sha256:" + "ab" * 32, kind="write_path")
    grammar = _grammar(server, fake_pin(server, ["files"]))
    proj = str(home.proj)
    mounts, _ = plan_mcp_mounts(home.walker, grammar, {"path": f"{proj}/notes.txt"},
                                entries={"path": (proj,)}, deny_paths=(), masks=home.masks)
    assert mounts == (Mount(source=f"{proj}/notes.txt", destination=f"{proj}/notes.txt",
                            read_only=False),)
    mounts, identities = plan_mcp_mounts(home.walker, grammar, {"path": f"{proj}/new.txt"},
                                         entries={"path": (proj,)}, deny_paths=(),
                                         masks=home.masks)
    assert [(m.destination, m.read_only) for m in mounts] == [(proj, False)]
    assert [i.destination for i in identities] == [proj]


@pytest.mark.parametrize("spelling", ["home", "link", "hard", "dotdot"])
def test_brokerds_home_is_refused_whatever_the_spelling(home: Home, spelling: str) -> None:
    server = wall_decl("sha256:" + "ab" * 32)
    grammar = _grammar(server, fake_pin(server, ["files"]))
    (home.proj / "link").symlink_to(home.home)
    os.link(home.home / "brokerd.toml", home.proj / "hard")
    root = str(home.root)
    value = {"home": f"{root}/home/brokerd.toml", "link": f"{root}/proj/link/brokerd.toml",
             "hard": f"{root}/proj/hard", "dotdot": f"{root}/proj/../home/brokerd.toml"}[spelling]
    with pytest.raises(UnsafeTarget) as caught:
        plan_mcp_mounts(home.walker, grammar, {"path": value}, entries={"path": (root,)},
                        deny_paths=(), masks=home.masks)
    assert ("protected" in str(caught.value)) or ("symbolic link" in str(caught.value))


# -- on a real podman ---------------------------------------------------------------------


def _names() -> list[str]:
    return subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True).stdout.split()


class WithFake:
    """The podman launcher, the fixture server's directory mounted besides the call's;
    `before` runs between the runtime's host walk and `podman create`."""

    def __init__(self, inner: PodmanMcpLauncher) -> None:
        self.inner = inner
        self.before: list[Any] = []
        self.launches: list[Launch] = []

    @asynccontextmanager
    async def launch(self, launch: Launch) -> AsyncIterator[trio.Process]:
        for hook in self.before:
            hook()
        where = FAKE.parent
        st = os.stat(where)
        launch = Launch(decl=launch.decl, name=launch.name,
                        mounts=[*launch.mounts, Mount(source=str(where), destination=str(where),
                                                      read_only=True)],
                        identities=[*launch.identities, MountIdentity(
                            destination=str(where), dev=st.st_dev, ino=st.st_ino)],
                        network_of=launch.network_of)
        self.launches.append(launch)
        async with self.inner.launch(launch) as process:
            yield process

    def sidecar(self, name: str, egress_dir: str, *, ready_timeout_s: float
                ) -> AbstractAsyncContextManager[None]:
        return self.inner.sidecar(name, egress_dir, ready_timeout_s=ready_timeout_s)


def _podman_launcher(image: str) -> PodmanMcpLauncher:
    rootless = subprocess.run(["podman", "info", "--format", "{{.Host.Security.Rootless}}"],
                              capture_output=True, text=True, check=True).stdout.strip()
    return PodmanMcpLauncher(PodmanSettings(image=image, podman="podman"), uid=os.getuid(),
                             gid=os.getgid(), rootless=rootless == "true")


async def call_look(home: Home, server: ServerDecl, args: dict[str, Any], *,
                    entries: tuple[str, ...], deny: tuple[str, ...] = (),
                    launcher: McpLauncher | None = None, call_id: int = 1) -> RunOutcome:
    image = server.image
    runtime = McpRuntime(launcher or WithFake(_podman_launcher(image)),
                         {"fake": McpServerState(decl=server, pin=fake_pin(server, ["files"]))},
                         instance=INSTANCE, version="0.test", walker=home.walker,
                         masks=lambda: home.masks)
    spec = build_run_spec(call_id=call_id, session="default", tool="mcp.fake.look",
                          args={"also": [], "write": "", **args}, grant="g", grant_entry=None,
                          private_network=False, label="private", untrusted=True,
                          deny_paths=deny, mcp_paths=(("path", entries),))
    try:
        with trio.fail_after(240):
            return await runtime.run(spec)
    finally:
        assert [n for n in _names() if n.startswith(f"boxmaker-{INSTANCE}-")] == []


def _found(outcome: RunOutcome) -> dict[str, Any]:
    assert outcome.status == "ok", outcome
    assert outcome.output is not None
    found: dict[str, Any] = json.loads(outcome.output["content"][0]["text"])
    return found


@pytest.mark.podman
async def test_inside_a_read_only_mount_only_the_granted_tree_less_its_masks(
        home: Home) -> None:
    server = wall_decl(tools_image())
    proj = str(home.proj)
    outcome = await call_look(home, server, {
        "path": proj,
        "also": [f"{proj}/notes.txt", f"{proj}/denied/x.txt", str(home.root / "outside.txt"),
                 str(home.home / "brokerd.toml")],
        "write": f"{proj}/notes.txt"}, entries=(proj,), deny=(f"{proj}/denied",))
    found = _found(outcome)
    assert found["path"] == ["denied", "notes.txt"]
    assert found["also"] == ["my notes\n", "error: ENOENT", "error: ENOENT", "error: ENOENT"]
    assert found["write"] == "error: EROFS"
    assert (home.proj / "notes.txt").read_text() == "my notes\n"


@pytest.mark.podman
async def test_a_write_path_writes_the_file_and_a_new_file_beside_it(home: Home) -> None:
    server = wall_decl(tools_image(), kind="write_path")
    proj = str(home.proj)
    found = _found(await call_look(home, server, {"path": f"{proj}/notes.txt",
                                                  "write": f"{proj}/notes.txt"},
                                   entries=(proj,)))
    assert found["write"] == "written"
    assert (home.proj / "notes.txt").read_text() == "my notes\nwritten by the server\n"
    found = _found(await call_look(home, server, {"path": f"{proj}/new.txt",
                                                  "write": f"{proj}/new.txt"},
                                   entries=(proj,), call_id=2))
    assert found["path"] == "error: ENOENT" and found["write"] == "written"
    assert (home.proj / "new.txt").read_text() == "written by the server\n"


@pytest.mark.podman
async def test_brokerds_home_through_a_path_argument_starts_nothing(home: Home) -> None:
    server = wall_decl(tools_image())
    (home.proj / "link").symlink_to(home.home)
    launcher = WithFake(_podman_launcher(server.image))
    for call_id, value in enumerate([str(home.home / "brokerd.toml"),
                                     str(home.proj / "link" / "brokerd.toml")], start=1):
        outcome = await call_look(home, server, {"path": value}, entries=(str(home.root),),
                                  launcher=launcher, call_id=call_id)
        assert outcome.status == "unsafe_target", outcome
        assert outcome.source is not None and outcome.source["request_sha256"] is None
    assert launcher.launches == []


@pytest.mark.podman
async def test_a_link_swapped_in_between_the_walk_and_the_mount_is_unsafe_target(
        home: Home) -> None:
    server = wall_decl(tools_image())
    proj = home.proj

    def swap() -> None:
        # The walked directory becomes a symbolic link to brokerd's home:
        # what podman would mount if nothing checked it after `init`.
        proj.rename(home.root / "proj-old")
        proj.symlink_to(home.home)

    launcher = WithFake(_podman_launcher(server.image))
    launcher.before.append(swap)
    outcome = await call_look(home, server, {"path": str(proj)}, entries=(str(proj),),
                              launcher=launcher)
    assert outcome.status == "unsafe_target", outcome
    assert "not what was checked" in (outcome.message or "")
    assert outcome.source is not None and outcome.source["request_sha256"] is None
    assert outcome.source["exit"] is None
